//! Clusters described by a name rather than a file: `ring:N`, `line:N`, `mesh:RxC` and
//! `torus:RxC`, with `:links=K` (links per neighbouring pair, default
//! [`DEFAULT_LINKS`]) and `:arch=wormhole_b0|blackhole` (default Wormhole). Each is written
//! out as the tt-umd cluster descriptor a system wired that way would have, and read back
//! through the same parser as any file, so a generated cluster is exactly a descriptor
//! ([`descriptor`] gives its text; `meshsim topo --format yaml` prints it).
//!
//! Wiring rules (docs/model.md, "Generated clusters"): chip id = row × columns + column, and
//! each chip's coordinates are `[column, row, 0, 0]`, so the mesh is read from them as for any
//! descriptor. A chip's usable Ethernet channels are split into four groups of
//! `usable / 4` — east, south, west, north — and link `k` of a neighbouring pair joins channel
//! `k` of one chip's east (south) group to channel `k` of the other's west (north) group. Every
//! chip has PCIe, as on a Galaxy, so no link is reserved for dispatch. Blackhole chips carry
//! the P150's Ethernet harvesting (channels 5 and 8 of 14 off, 12 usable, 3 per direction) and
//! its board type, so their links run at the P150's rate; Wormhole chips use all 16 channels
//! (4 per direction) on Galaxy boards.

use std::fmt::Write;

use crate::{Arch, Cluster, TopologyError};

/// The kinds of generated cluster, as their names begin.
pub const KINDS: [&str; 4] = ["ring", "line", "mesh", "torus"];

/// Links per neighbouring pair when the name does not say (as on a T3000 and a Blackhole
/// Galaxy).
pub const DEFAULT_LINKS: usize = 2;

/// The most chips a generated cluster may have.
pub const MAX_CHIPS: usize = 8192;

/// The Ethernet harvesting of a generated Blackhole chip: a P150's (channels 5 and 8 off).
const BLACKHOLE_ETH_HARVEST: u32 = 288;

/// Whether `spec` names a generated cluster (`ring:`, `line:`, `mesh:` or `torus:`).
pub fn is_generated(spec: &str) -> bool {
    spec.split_once(':').is_some_and(|(kind, _)| KINDS.contains(&kind))
}

/// A parsed name: its grid (rows, columns), whether each axis wraps, links per pair, arch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Spec {
    rows: usize,
    cols: usize,
    wrap_rows: bool,
    wrap_cols: bool,
    links: usize,
    arch: Arch,
}

/// A whole number of at least 1 (`what` names it in the error).
fn count(what: &str, s: &str) -> Result<usize, String> {
    s.parse::<usize>()
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| format!("{what} must be a whole number of at least 1, got '{s}'"))
}

/// The rows and columns of a `kind` (ring, line, mesh, torus) of dimensions `dims`: `N`, or
/// `ROWSxCOLUMNS`, checked against what the kind needs and [`MAX_CHIPS`].
fn shape(kind: &str, dims: &str) -> Result<(usize, usize), String> {
    let (rows, cols) = match kind {
        "ring" | "line" => (1, count("the number of chips", dims)?),
        _ => {
            let Some((r, c)) = dims.split_once('x') else {
                return Err(format!("expected ROWSxCOLUMNS (such as {kind}:4x8), got '{dims}'"));
            };
            (count("rows", r)?, count("columns", c)?)
        }
    };
    if kind == "torus" && (rows < 3 || cols < 3) {
        return Err(format!(
            "a torus needs at least 3 chips along each axis (its wrap links would double a neighbour's), got {rows}x{cols}"
        ));
    }
    if kind == "ring" && cols < 3 {
        return Err(format!("a ring needs at least 3 chips, got {cols} (line:{cols} is the same wiring)"));
    }
    if rows * cols > MAX_CHIPS {
        return Err(format!("{} chips: at most {MAX_CHIPS}", rows * cols));
    }
    Ok((rows, cols))
}

impl Spec {
    fn parse(spec: &str) -> Result<Spec, TopologyError> {
        let bad = |(entry, message): (String, String)| TopologyError::invalid(spec, &entry, message);
        let mut parts = spec.split(':');
        let kind = parts.next().unwrap_or_default();
        let dims = parts.next().unwrap_or_default();
        let (rows, cols) = shape(kind, dims).map_err(|m| bad(("shape".into(), m)))?;
        let mut out = Spec {
            rows,
            cols,
            wrap_rows: kind == "torus",
            wrap_cols: kind == "ring" || kind == "torus",
            links: DEFAULT_LINKS,
            arch: Arch::WormholeB0,
        };
        for opt in parts {
            out.set(opt).map_err(bad)?;
        }
        let most = out.group();
        if out.links > most {
            return Err(bad((
                "links".into(),
                format!(
                    "{}: a {} chip has {most} usable Ethernet channels per direction",
                    out.links, out.arch
                ),
            )));
        }
        Ok(out)
    }

    /// Sets one `key=value` option; an error names the entry and says what is wrong.
    fn set(&mut self, opt: &str) -> Result<(), (String, String)> {
        let Some((key, value)) = opt.split_once('=') else {
            return Err((opt.into(), "expected key=value: links=K or arch=wormhole_b0|blackhole".into()));
        };
        match key {
            "links" => self.links = count("links", value).map_err(|m| ("shape".to_owned(), m))?,
            "arch" => {
                self.arch = match value {
                    "wormhole_b0" => Arch::WormholeB0,
                    "blackhole" => Arch::Blackhole,
                    _ => {
                        return Err(("arch".into(), format!("'{value}': expected wormhole_b0 or blackhole")));
                    }
                }
            }
            _ => {
                return Err((
                    key.into(),
                    "unknown option: expected links=K or arch=wormhole_b0|blackhole".into(),
                ));
            }
        }
        Ok(())
    }

    /// Usable Ethernet channels per direction of a chip.
    fn group(&self) -> usize {
        let soc = self.arch.soc().expect("generated clusters are of modelled architectures");
        let harvested = match self.arch {
            Arch::Blackhole => BLACKHOLE_ETH_HARVEST.count_ones() as usize,
            _ => 0,
        };
        (soc.eth_cores.len() - harvested) / 4
    }
}

/// The tt-umd descriptor text of generated cluster `spec`.
pub fn descriptor(spec: &str) -> Result<String, TopologyError> {
    let s = Spec::parse(spec)?;
    let g = s.group();
    let id = |r: usize, c: usize| r * s.cols + c;
    let chips = (0..s.rows).flat_map(|r| (0..s.cols).map(move |c| (r, c)));
    let mut out = String::new();
    let w = &mut out;
    // Writing into a String cannot fail.
    let _ = writeln!(w, "# meshsim cluster description generated from '{spec}': {} chips,", s.rows * s.cols);
    let _ = writeln!(w, "# {} link(s) per neighbouring pair; chip id = row * {} + column.", s.links, s.cols);
    let _ = writeln!(w, "# tt-umd cluster descriptor format; wiring rules in meshsim's docs/model.md.");
    let _ = writeln!(w, "\narch:");
    for (r, c) in chips.clone() {
        let _ = writeln!(w, "  {}: {}", id(r, c), s.arch);
    }
    let _ = writeln!(w, "\nchips:");
    for (r, c) in chips.clone() {
        let _ = writeln!(w, "  {}: [{c}, {r}, 0, 0]", id(r, c));
    }
    // East, then south: channel k of the group meets channel k of the peer's opposite one.
    let mut links = String::new();
    for (r, c) in chips.clone() {
        let east = (c + 1 < s.cols || (s.wrap_cols && s.cols > 1)).then(|| id(r, (c + 1) % s.cols));
        let south = (r + 1 < s.rows || (s.wrap_rows && s.rows > 1)).then(|| id((r + 1) % s.rows, c));
        for (peer, mine, theirs) in [(east, 0, 2 * g), (south, g, 3 * g)] {
            let Some(peer) = peer else { continue };
            for k in 0..s.links {
                let (me, a, b) = (id(r, c), mine + k, theirs + k);
                let _ = writeln!(links, "  - [{{chip: {me}, chan: {a}}}, {{chip: {peer}, chan: {b}}}]");
            }
        }
    }
    // One chip: an empty list, as a P150's descriptor has.
    let _ = writeln!(w, "\nethernet_connections:{}", if links.is_empty() { " []" } else { "" });
    w.push_str(&links);
    let _ = writeln!(w, "\nchips_with_mmio:");
    for (r, c) in chips.clone() {
        let _ = writeln!(w, "  - {}: {}", id(r, c), id(r, c));
    }
    if s.arch == Arch::Blackhole {
        let _ = writeln!(w, "\nharvesting:");
        for (r, c) in chips.clone() {
            let _ = writeln!(
                w,
                "  {}: {{noc_translation: true, eth_harvesting_mask: {BLACKHOLE_ETH_HARVEST}}}",
                id(r, c)
            );
        }
    }
    let board = match s.arch {
        Arch::Blackhole => "p150",
        _ => "GALAXY",
    };
    let _ = writeln!(w, "\nchip_to_boardtype:");
    for (r, c) in chips {
        let _ = writeln!(w, "  {}: {board}", id(r, c));
    }
    Ok(out)
}

/// The cluster generated cluster `spec` names.
pub fn cluster(spec: &str) -> Result<Cluster, TopologyError> {
    Cluster::from_bytes(spec, descriptor(spec)?.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Shape;

    fn pairs(c: &Cluster) -> std::collections::BTreeMap<(u32, u32), usize> {
        let mut m = std::collections::BTreeMap::new();
        for l in c.links() {
            let (a, b) = (l.a.chip.0.min(l.b.chip.0), l.a.chip.0.max(l.b.chip.0));
            *m.entry((a, b)).or_default() += 1;
        }
        m
    }

    #[test]
    fn a_torus_has_four_neighbours_per_chip_and_k_links_to_each() {
        let c = cluster("torus:4x8:links=3").unwrap();
        assert_eq!(c.chips().len(), 32);
        assert_eq!(c.links().len(), 32 * 2 * 3);
        let p = pairs(&c);
        assert_eq!(p.len(), 64);
        assert!(p.values().all(|&n| n == 3));
        assert!(p.contains_key(&(0, 7)) && p.contains_key(&(0, 24)), "rows and columns wrap");
        assert!(matches!(c.shape(), Shape::Torus(g) if (g.rows, g.cols) == (4, 8)), "{:?}", c.shape());
        // Connectivity alone cannot tell a 4x4 torus from a 4-cube; its coordinates do.
        let c = cluster("torus:4x4").unwrap();
        assert!(matches!(c.shape(), Shape::Torus(g) if (g.rows, g.cols) == (4, 4)), "{:?}", c.shape());
    }

    #[test]
    fn a_mesh_leaves_its_edges_open_and_a_ring_closes() {
        let m = cluster("mesh:2x3").unwrap();
        assert_eq!(pairs(&m).len(), 7);
        assert_eq!(m.links().len(), 7 * DEFAULT_LINKS);
        let r = cluster("ring:5:links=1").unwrap();
        assert_eq!(pairs(&r).len(), 5);
        assert!(pairs(&r).contains_key(&(0, 4)));
        let l = cluster("line:5:links=1").unwrap();
        assert_eq!(pairs(&l).len(), 4);
        assert_eq!(cluster("line:1").unwrap().links().len(), 0);
    }

    #[test]
    fn blackhole_chips_use_their_twelve_usable_channels() {
        let c = cluster("torus:3x3:arch=blackhole:links=3").unwrap();
        assert!(c.chips().iter().all(|ch| ch.arch == Arch::Blackhole));
        assert_eq!(c.links().len(), 9 * 2 * 3);
        let err = cluster("torus:3x3:arch=blackhole:links=4").unwrap_err().to_string();
        assert!(err.contains("3 usable Ethernet channels per direction"), "{err}");
        assert!(cluster("torus:3x3:links=4").is_ok(), "Wormhole has 4 per direction");
    }

    #[test]
    fn bad_names_get_one_line_naming_what_is_wrong() {
        for (spec, says) in [
            ("torus:2x4", "at least 3 chips along each axis"),
            ("ring:2", "at least 3 chips"),
            ("mesh:4", "expected ROWSxCOLUMNS"),
            ("mesh:0x4", "rows must be"),
            ("line:8:links=0", "links must be"),
            ("line:8:arch=grayskull", "expected wormhole_b0 or blackhole"),
            ("line:8:speed=9", "unknown option"),
            ("line:8:links", "expected key=value"),
            ("torus:128x128", "at most 8192"),
        ] {
            let e = cluster(spec).unwrap_err().to_string();
            assert!(e.starts_with(spec) && e.contains(says) && !e.contains('\n'), "{spec}: {e}");
        }
    }

    #[test]
    fn is_generated_only_for_the_four_kinds() {
        assert!(is_generated("torus:8x16") && is_generated("line:2"));
        assert!(!is_generated("t3000") && !is_generated("./ring.yaml") && !is_generated("c:/x.yaml"));
    }
}
