//! `meshsim topo`: a cluster's summary, JSON and Graphviz forms.

use std::fmt::Write as _;

use meshsim_topology::Cluster;

use crate::ids;

pub(crate) fn topo_json(c: &Cluster) -> serde_json::Value {
    let pairs: Vec<_> = c
        .links_per_pair()
        .into_iter()
        .map(|(a, b, links)| serde_json::json!({"a": c.chip(a).id, "b": c.chip(b).id, "links": links.len()}))
        .collect();
    let ring = c.ring().map(|r| ids(c, &r.chips));
    let axes: Vec<_> = c
        .axes()
        .iter()
        .map(|p| serde_json::json!({"chips": ids(c, &p.chips), "ring": p.hops.len() == p.chips.len()}))
        .collect();
    let perimeter = c.perimeter().map(|r| ids(c, &r.chips));
    let board_rings: Vec<_> = c.board_rings().iter().map(|r| ids(c, &r.chips)).collect();
    serde_json::json!({
        "cluster": c.origin(),
        "arch": c.arch().to_string(),
        "link_gbps": link_gbps(c),
        "chips": c.chips().len(),
        "links": c.links().len(),
        "remote_links": c.remote_links().len(),
        "mmio_chips": ids(c, &c.mmio_chips()),
        "links_per_pair": pairs,
        "reserved_links": c.reserved_links().len(),
        "shape": c.shape().to_string(),
        "diameter": c.diameter(),
        "ring": ring,
        "axes": axes,
        "perimeter": perimeter,
        "board_rings": board_rings,
    })
}

/// The line rate of the cluster's links, Gb/s per direction: its architecture's built-in
/// parameters as they apply on it (a Blackhole Galaxy's 200).
fn link_gbps(c: &Cluster) -> u64 {
    meshsim_hw::Params::of(c.arch()).map_or(0, |p| p.on(c).eth_link_gbps)
}

pub(crate) fn topo_text(c: &Cluster) -> String {
    let mut s = String::new();
    let chip_list = |v: Vec<u64>| v.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
    let _ = writeln!(s, "cluster   {}", c.origin());
    let _ = writeln!(s, "arch      {}, links at {} Gb/s per direction", c.arch(), link_gbps(c));
    let _ = writeln!(s, "chips     {}", c.chips().len());
    let _ = writeln!(
        s,
        "links     {} ({} reserved for dispatch, {} to remote hosts)",
        c.links().len(),
        c.reserved_links().len(),
        c.remote_links().len()
    );
    let _ = writeln!(s, "pcie      {}", chip_list(ids(c, &c.mmio_chips())));
    let _ = writeln!(s, "shape     {}", c.shape());
    let _ = writeln!(s, "diameter  {}", c.diameter().map_or("disconnected".into(), |d| d.to_string()));
    match c.ring() {
        Some(r) => {
            // A 2-chip ring is both directions of one link: collectives run on it, but the
            // ring ping (a receiver and a sender per hop) needs a link per hop.
            let note = if r.chips.len() == 2 && r.hops[0].links.len() < 2 {
                "   (both directions of one link: collectives only, not `bench ring`)"
            } else {
                ""
            };
            let _ = writeln!(s, "ring      {}{note}", chip_list(ids(c, &r.chips)));
        }
        None => {
            let _ = writeln!(s, "ring      none found");
        }
    }
    let axes = c.axes();
    if !axes.is_empty() {
        let _ = writeln!(s, "\naxes (rows, then columns; ring: its ends are linked):");
        for p in &axes {
            let kind = if p.hops.len() == p.chips.len() { "ring" } else { "line" };
            let _ = writeln!(s, "  {kind} {:<3} {}", p.chips.len(), chip_list(ids(c, &p.chips)));
        }
    }
    if let Some(p) = c.perimeter().filter(|p| p.chips.len() < c.chips().len()) {
        let _ = writeln!(s, "perimeter ring {}: {}", p.chips.len(), chip_list(ids(c, &p.chips)));
    }
    for (i, p) in c.board_rings().iter().enumerate() {
        let _ = writeln!(s, "board {i} ring {}: {}", p.chips.len(), chip_list(ids(c, &p.chips)));
    }
    let _ = writeln!(s, "\nlinks per pair (usable = not reserved):");
    for (a, b, links) in c.links_per_pair() {
        let usable = links.iter().filter(|&&l| !c.link(l).reserved).count();
        let chans: Vec<String> = links
            .iter()
            .map(|&l| {
                let (near, far) = c.link(l).ends_from(a).expect("pair link");
                let mark = if c.link(l).reserved { "*" } else { "" };
                format!("{}:{}{mark}", near.chan, far.chan)
            })
            .collect();
        let _ = writeln!(
            s,
            "  {:>4} - {:<4} {} links, {} usable   chan {}",
            c.chip(a).id,
            c.chip(b).id,
            links.len(),
            usable,
            chans.join(" ")
        );
    }
    if !c.reserved_links().is_empty() {
        let _ = writeln!(s, "  (* reserved)");
    }
    s
}

pub(crate) fn topo_dot(c: &Cluster) -> String {
    let mut s = String::from("graph cluster {\n  node [shape=box];\n");
    for chip in c.chips() {
        let pcie = if chip.pcie.is_some() { ", style=bold" } else { "" };
        let _ = writeln!(s, "  chip{} [label=\"{}\"{pcie}];", chip.id, chip.id);
    }
    for (a, b, links) in c.links_per_pair() {
        let _ = writeln!(s, "  chip{} -- chip{} [label=\"{}\"];", c.chip(a).id, c.chip(b).id, links.len());
    }
    s.push_str("}\n");
    s
}
