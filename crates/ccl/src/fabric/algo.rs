//! Which of tt-metal's factories carries a phase on the fabric ([`Algo`], chosen once from
//! the phase's collective, the op's knobs and its line), the routed plan each walks
//! ([`Algo::plan`]: the one place a plan is chosen, for the lowerings and the flow model alike),
//! and the check that every packet's route fits a 1D header.

use super::MAX_HOPS_1D;
use super::lines::default_links;
use super::schedule::numbers::barrier_reach;
use crate::op::{Algorithm, CclError, Collective, Topology};
use crate::phase::Phase;
use crate::plan::routed::{self, Routed};
use crate::request::OpRequest;
use crate::transport::LowerCx;

/// The fabric's algorithm for a phase — tt-metal's factory for it — chosen once from the
/// phase's collective, the op's knobs and its line, before anything is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Algo {
    /// The one-shot direct reduce-scatter, or a reduce straight to its root: every rank's
    /// chunks unicast into the owner's receive buffer, reducer cores adding them as they land.
    DirectReduction,
    /// Reduce-scatter along the line or ring, each slice reduced on its way to its owner.
    ReduceScatter,
    /// Point-to-point chunk senders (all-to-all, gather, scatter, send/receive).
    PointToPoint(Pairs),
    /// The multicast all-gather factory (a broadcast too).
    Multicast,
    /// The unicast (relay) all-gather factory, on rings.
    Relay,
}

impl Algo {
    /// Its name in results; a reduce-scatter's says whether it ran on a ring or a line.
    pub(crate) fn name(self, ring: bool) -> &'static str {
        match self {
            Algo::DirectReduction | Algo::PointToPoint(_) => "direct",
            Algo::ReduceScatter if ring => "ring",
            Algo::ReduceScatter => "line",
            Algo::Multicast => "multicast",
            Algo::Relay => "relay",
        }
    }

    /// The routed plan phase `p` of `req` walks under this algorithm along `topology`: the one
    /// place each algorithm's plan is chosen, for its lowering, the flow model and the route
    /// check alike.
    pub(crate) fn plan(self, req: &OpRequest, p: &Phase, topology: Topology) -> Routed {
        let n = req.comm.size();
        let own = !(req.exclude_myself || req.in_place);
        match self {
            Algo::Multicast => match req.collective.root() {
                Some(r) => routed::multicast_broadcast(n, topology, p.bidir, r),
                None => routed::multicast_all_gather(n, topology, own),
            },
            Algo::Relay => routed::relay_all_gather(n, own),
            Algo::ReduceScatter => routed::reduce_scatter_sides(n, topology),
            Algo::PointToPoint(pairs) => pairs.plan(n, topology),
            Algo::DirectReduction => match req.collective {
                Collective::Reduce { root, .. } => routed::direct_reduce(n, topology, root),
                _ => routed::direct_reduce_scatter(n, topology),
            },
        }
    }
}

/// Refuses phase `p` under `algo` if a packet of it would travel more hops than a 1D header
/// routes ([`MAX_HOPS_1D`]): its plan's longest route, or its entry barrier's (rank 0's forward
/// increment reaches farthest: a line's end, half-way round a ring).
fn check_routes(req: &OpRequest, p: &Phase, algo: Algo, closed: bool) -> Result<(), CclError> {
    let n = req.comm.size();
    let topology = if closed { Topology::Ring } else { Topology::Line };
    let barrier = barrier_reach(n, 0, true, closed) as usize;
    let longest = algo.plan(req, p, topology).longest_route().max(barrier);
    if longest <= MAX_HOPS_1D as usize {
        return Ok(());
    }
    let way_out = if closed {
        "run it on fewer chips (--chips, --chip-ids, --axis)"
    } else {
        "run it on fewer chips (--chips, --chip-ids, --axis) or as a ring (--topology ring, on chips that close one), whose routes go half-way round"
    };
    Err(CclError::Invalid(format!(
        "op '{}': its {} routes span {longest} hops on its {n}-chip {topology}, beyond the {MAX_HOPS_1D} a 1D fabric packet header carries: {way_out}",
        req.name,
        algo.name(closed),
    )))
}

/// How the fabric carries phase `p`, whose op runs as a ring on its fabric line if `closed`.
pub(crate) fn choose(s: &LowerCx, closed: bool, p: &Phase) -> Result<Algo, CclError> {
    let req = &s.ops[p.op];
    let algo = choose_algo(s, closed, p)?;
    check_routes(req, p, algo, closed)?;
    Ok(algo)
}

fn choose_algo(s: &LowerCx, closed: bool, p: &Phase) -> Result<Algo, CclError> {
    let req = &s.ops[p.op];
    Ok(match p.collective {
        Collective::ReduceScatter(_) if direct_path(s, p) => Algo::DirectReduction,
        Collective::ReduceScatter(_) => Algo::ReduceScatter,
        Collective::Reduce { .. } => Algo::DirectReduction,
        Collective::AllToAll => Algo::PointToPoint(Pairs::AllToAll),
        // A gather, or a reduce's second phase gathering the reduced slices to its root.
        Collective::Gather { root } => Algo::PointToPoint(Pairs::ToRoot(root)),
        Collective::Scatter { root } => Algo::PointToPoint(Pairs::FromRoot(root)),
        Collective::SendRecv => Algo::PointToPoint(Pairs::Send),
        // A broadcast is the multicast with the root the only source of its one chunk.
        Collective::Broadcast { .. } => Algo::Multicast,
        Collective::AllReduce(_) => unreachable!("an all-reduce is planned as two phases"),
        Collective::AllGather => {
            // Rings switch to the unicast (relay) factory from a number of pages per device
            // (the architecture's: on Wormhole 64, 20 for pages of 4 KiB or more), on every plane.
            let page = p.tensors.slice.page_bytes();
            let relay_from =
                if page >= 4096 { s.params.fabric_relay_pages_4k } else { s.params.fabric_relay_pages };
            let relay = match req.knobs.algorithm {
                Some(Algorithm::Relay) if !closed => {
                    return Err(CclError::Invalid(format!(
                        "op '{}': the relay all-gather runs on rings of more than 2 chips",
                        req.name
                    )));
                }
                Some(Algorithm::Relay) => true,
                Some(_) => false,
                None => closed && p.tensors.slice.pages() >= relay_from,
            };
            if relay { Algo::Relay } else { Algo::Multicast }
        }
    })
}

/// Who sends which chunk to whom, and where it lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pairs {
    /// Rank k sends chunk j of its input to rank j, landing at chunk k; rank k keeps chunk k
    /// (all-to-all; a direct reduce-scatter, whose receive buffer has a chunk per source).
    AllToAll,
    /// Every other rank sends its whole input to `root`, landing at its own chunk there
    /// (gather; into the receive buffer, a direct reduce).
    ToRoot(usize),
    /// `root` sends chunk j of its input to each other rank j, landing as its whole output
    /// (scatter).
    FromRoot(usize),
    /// Rank 0 sends its input to rank 1's output (send/receive).
    Send,
}

impl Pairs {
    /// Its kernels' name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Pairs::AllToAll => "a2a",
            Pairs::ToRoot(_) => "gather",
            Pairs::FromRoot(_) => "scatter",
            Pairs::Send => "send-recv",
        }
    }

    /// The routed plan of who sends which chunk where on `n` ranks along `topology`.
    pub(crate) fn plan(self, n: usize, topology: Topology) -> Routed {
        match self {
            Pairs::AllToAll => routed::all_to_all(n, topology),
            Pairs::ToRoot(r) => routed::direct_gather(n, topology, r),
            Pairs::FromRoot(r) => routed::direct_scatter(n, topology, r),
            Pairs::Send => routed::direct_send_recv(),
        }
    }
}

/// Largest input per rank (bytes) a ring reduce-scatter takes the one-shot direct path for
/// (`reduce_scatter.cpp @039c252a`).
pub const DIRECT_MAX_BYTES: u64 = 512 << 10;

/// Whether reduce-scatter phase `p` takes the one-shot direct path, as tt-metal's host does: a
/// reduce-scatter (not an all-reduce's) on a ring, at most [`DIRECT_MAX_BYTES`] of input per
/// rank, no worker count given and no link count other than the default. The router packet
/// size does not count: it is the fabric's, set when the fabric starts, not an argument of the
/// op (tt-metal's CCL sweep ran with 6144 B packets and 1 link, the T3000 ring's default, and
/// its ring reduce-scatter took this path up to 512 KiB per device:
/// `shared/calibration/ccl_sweep_wh_loudbox.csv`).
fn direct_path(s: &LowerCx, p: &Phase) -> bool {
    let req = &s.ops[p.op];
    let t = p.tensors;
    let k = &req.knobs;
    let given = &s.given[p.op];
    let default_links = || default_links(s.cluster, s.ops).ok().map(|l| l[p.op]);
    matches!(req.collective, crate::op::Collective::ReduceScatter(_))
        && k.algorithm == Some(Algorithm::Direct)
        && req.comm.topology() == Topology::Ring
        && req.comm.size() > 2
        && t.slice.bytes() * t.n <= DIRECT_MAX_BYTES
        && given.workers.is_none()
        && given.links.is_none_or(|l| Some(l) == default_links())
}
