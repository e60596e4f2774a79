//! The session's fabric lines (one per distinct communicator, a shorter one riding on a line
//! already there), its packet payload, and each op's default links: what the packet lowering
//! and the flow model both build on.

use std::collections::BTreeMap;

use meshsim_topology::{ChipIdx, Cluster, LinkId};

use super::Line;
use crate::op::{CclError, Collective, Topology};
use crate::request::OpRequest;
use crate::transport::LowerCx;

/// The session's router payload: the one its ops ask for, or the parameters' default; ops that
/// ask for two are refused (the packet size is global to a fabric).
pub(crate) fn session_payload(s: &LowerCx) -> Result<u64, CclError> {
    let mut asked: Vec<u64> = s.ops.iter().filter_map(|o| o.knobs.packet_bytes).collect();
    asked.dedup();
    if asked.len() > 1 {
        return Err(CclError::Invalid(format!(
            "the fabric's packet size is global to a session: its ops ask for {} B and {} B",
            asked[0], asked[1]
        )));
    }
    Ok(asked.first().copied().unwrap_or(s.params.fabric_default_payload_bytes))
}

/// Whether `req` runs as a ring on the session's fabric `lines`: a ring communicator whose
/// chips a closed line carries, all of them.
pub(crate) fn runs_closed(lines: &[Line], req: &OpRequest) -> bool {
    let chips = req.comm.chips();
    req.comm.topology() == Topology::Ring
        && lines.iter().any(|l| l.closed && l.chips.len() == chips.len() && l.carries(chips))
}

/// The fabric's lines for the session's ops: a line per distinct communicator (rank order;
/// closed on a ring of more than two chips), a shorter one riding on a line already there.
/// Two lines may not share a link: an Ethernet core runs one router per plane.
pub(crate) fn fabric_lines(cluster: &Cluster, ops: &[OpRequest]) -> Result<Vec<Line>, CclError> {
    // Longest communicators first: a shorter one that lies along a line already there rides
    // on it (as an op on part of a mesh row uses the row's fabric line).
    let mut wanted: Vec<Line> = ops
        .iter()
        .map(|req| {
            let chips = req.comm.chips().to_vec();
            let closed = req.comm.topology() == Topology::Ring && chips.len() > 2;
            Line { chips, closed }
        })
        .collect();
    wanted.sort_by_key(|l| std::cmp::Reverse((l.chips.len(), l.closed)));
    let mut lines: Vec<Line> = Vec::new();
    for line in wanted {
        let covered = lines.iter().any(|l| l.carries(&line.chips) && (l.closed || !line.closed));
        if !covered {
            lines.push(line);
        }
    }
    let mut owner: BTreeMap<LinkId, usize> = BTreeMap::new();
    for (li, line) in lines.iter().enumerate() {
        let n = line.chips.len();
        let pairs = if line.closed { n } else { n - 1 };
        for i in 0..pairs {
            for l in cluster.usable_links_between(line.chips[i], line.chips[(i + 1) % n]) {
                if let Some(&other) = owner.get(&l)
                    && other != li
                {
                    let id = |c: ChipIdx| cluster.chip(c).id;
                    return Err(CclError::Invalid(format!(
                        "the fabric stack runs one line per link: ops on chips {:?} and {:?} share the link between chips {} and {}",
                        lines[other].chips.iter().map(|&c| id(c)).collect::<Vec<_>>(),
                        line.chips.iter().map(|&c| id(c)).collect::<Vec<_>>(),
                        id(line.chips[i]),
                        id(line.chips[(i + 1) % n])
                    )));
                }
                owner.insert(l, li);
            }
        }
    }
    Ok(lines)
}

/// Each op's links when it gives none (tt-metal's default): the routing planes of the fabric
/// line it rides on — the fewest usable links over the line's hops, "over the axis" — and 1 for
/// all-to-all, which runs on link 0.
pub(crate) fn default_links(cluster: &Cluster, ops: &[OpRequest]) -> Result<Vec<usize>, CclError> {
    let lines = fabric_lines(cluster, ops)?;
    Ok(ops
        .iter()
        .map(|req| {
            if on_link_zero(req.collective) {
                return 1;
            }
            let closed = req.comm.topology() == Topology::Ring && req.comm.size() > 2;
            lines
                .iter()
                .find(|l| l.carries(req.comm.chips()) && (l.closed || !closed))
                .map_or(1, |l| line_planes(cluster, l))
        })
        .collect())
}

/// Whether `collective` runs on link 0 only: those whose ranks send point to point by unicast
/// (all-to-all, gather, scatter, send/receive, reduce), as tt-metal's all-to-all does.
pub(crate) fn on_link_zero(collective: Collective) -> bool {
    matches!(
        collective,
        Collective::AllToAll
            | Collective::Gather { .. }
            | Collective::Scatter { .. }
            | Collective::SendRecv
            | Collective::Reduce { .. }
    )
}

/// The routing planes every hop of `line` can carry: its fewest usable links.
pub(crate) fn line_planes(cluster: &meshsim_topology::Cluster, line: &Line) -> usize {
    let n = line.chips.len();
    let pairs = if line.closed { n } else { n - 1 };
    (0..pairs)
        .map(|i| cluster.usable_links_between(line.chips[i], line.chips[(i + 1) % n]).len())
        .min()
        .unwrap_or(1)
}
