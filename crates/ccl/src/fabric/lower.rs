//! A session's ops on the fabric stack: one persistent fabric over the lines of every op's
//! communicator, and each op's worker kernels injecting packets into it.
//!
//! All-gather follows tt-metal's 2026 multicast factory (`ccl/all_gather @01c8afed`): per chip
//! and link one core whose reader kernel covers the forward direction and whose writer covers
//! the backward one. Each reads its slice's pages and sends them in packets of up to 4 pages
//! (scatter writes straight into the output pages of every chip on the way) along a 1D
//! multicast route to the line's end — on a ring half-way round each way, an even ring
//! alternating the two half ranges packet by packet — and the routers forward them. A
//! multicast increment after the last packet (flushed behind the writes) tells every chip on
//! the route; a chip's op ends when its semaphore has counted every source.

use std::collections::BTreeMap;
use std::rc::Rc;

use meshsim_engine::{Cond, SignalId, Time};
use meshsim_hw::{CoreRef, Kernel, Machine, Params, Program, Wake};
use meshsim_topology::soc::CoreCoord;
use meshsim_topology::{ChipIdx, Cluster, LinkId};

use super::mux::{Mux, Ports};
use super::worker::{CONNECTION_L1_BYTES, Connection, Target};
use super::{DEFAULT_MAX_PAYLOAD, Fabric, FabricConfig, FabricKind, Header, Line, NocCmd, Route};
use crate::op::{Bidir, CclError, Collective, Topology};
use crate::phase::{Phase, PhaseKind, Tensors};
use crate::request::OpRequest;
use crate::select::Algorithm;
use crate::tensor::STAGING;
use crate::tensor::{Memory, Placement};
use crate::transport::{Gate, LowerCx, Lowered, PhaseRun, Transport};

/// Pages a fabric packet carries at most (`min(4, payload / page)`, tt-metal's CCL ops).
pub const MAX_PAGES_PER_PACKET: u64 = 4;
/// Worker cores a chip hands out (the 8 x 10 Tensix grid).
const WORKER_CORES: usize = 80;

/// The TT-Fabric stack: persistent routers on every link of the session's lines, and each
/// op's worker kernels injecting packets into them.
#[derive(Clone, Copy, Debug, Default)]
pub struct FabricTransport;

impl Transport for FabricTransport {
    fn name(&self) -> &'static str {
        "fabric"
    }

    fn algorithms(&self, collective: Collective) -> &'static [Algorithm] {
        use Algorithm::*;
        match collective {
            Collective::AllGather => &[Auto, Multicast, Relay],
            Collective::ReduceScatter(_) => &[Auto, Ring, Direct],
            Collective::AllReduce(_) => &[Auto, Ring],
            Collective::Reduce { .. } => &[Auto, Direct, Ring],
            Collective::Broadcast { .. } => &[Auto, Multicast],
            Collective::Gather { .. }
            | Collective::Scatter { .. }
            | Collective::SendRecv
            | Collective::AllToAll => &[Auto, Direct],
        }
    }

    fn accepts(&self, req: &OpRequest, _params: &Params) -> Result<(), CclError> {
        if req.knobs.workers.is_some() && req.collective.redop().is_none() {
            return Err(CclError::Invalid(format!(
                "op '{}': workers applies to reduce-scatter and all-reduce on the fabric stack, not {}",
                req.name,
                req.collective.name()
            )));
        }
        Ok(())
    }

    fn default_links(&self, cluster: &Cluster, ops: &[OpRequest]) -> Result<Vec<usize>, CclError> {
        default_links(cluster, ops)
    }

    fn lower(&self, s: &LowerCx, m: &mut Machine) -> Result<Lowered, CclError> {
        let fabric = build_fabric(s)?;
        let chips = s.cluster.chips().len();
        let mut programs: Vec<Program> = (0..chips).map(|c| Program::new(ChipIdx(c as u32))).collect();
        fabric.install(&mut programs);
        let ports = Rc::new(Ports::default());
        let mut next_core = vec![0usize; chips];
        // The reductions' intermediate buffers go above every tensor in DRAM.
        let mut scratch_base = dram_end(s.phases);
        let mut injects: Vec<Vec<Inject>> = Vec::with_capacity(s.phases.len());
        // Workers per link and direction of every op (reduce-scatter's W; 1 otherwise).
        let mut workers = vec![1usize; s.ops.len()];
        let mut runs = Vec::with_capacity(s.phases.len());
        for (pi, p) in s.phases.iter().enumerate() {
            let cx = Lowering { s, fabric: &fabric, ports: &ports };
            let one = |routers: Vec<usize>| routers.into_iter().map(|r| (r, 0)).collect::<Vec<Inject>>();
            let algo = choose(s, &fabric, p)?;
            let (ppp, routers) = match algo {
                Algo::DirectReduction => {
                    let (got, routers) =
                        direct_reduction(&cx, &mut programs, &mut next_core, pi, p, &mut scratch_base)?;
                    (got, one(routers))
                }
                Algo::ReduceScatter => {
                    let (got, routers, w) =
                        reduce_scatter(&cx, &mut programs, &mut next_core, pi, p, &mut scratch_base)?;
                    workers[p.op] = w;
                    (got, routers)
                }
                Algo::PointToPoint(pairs) => {
                    let (got, routers) = point_to_point(&cx, &mut programs, &mut next_core, pi, p, pairs)?;
                    (got, one(routers))
                }
                Algo::Multicast => all_gather(&cx, &mut programs, &mut next_core, pi, p)?,
                Algo::Relay => {
                    let (got, routers, w) = all_gather_relay(&cx, &mut programs, &mut next_core, pi, p)?;
                    workers[p.op] = workers[p.op].max(w);
                    (got, routers)
                }
            };
            runs.push(PhaseRun {
                pages_per_packet: ppp,
                algorithm: algo.name(line_for(&fabric, &s.ops[p.op]).1),
            });
            injects.push(routers);
        }
        let muxes =
            install_muxes(s, m, &fabric, &ports, s.phases, &injects, s.done, &mut programs, &mut next_core)?;
        // The host closes the fabric once every op has ended and every mux has let go.
        let close: Vec<SignalId> = s.done.iter().chain(&muxes).copied().collect();
        fabric.install_close(&mut programs, |c| take_core(s, &mut next_core, &[c]), close.into())?;
        // A router ends once the host closes it and its channels are idle, without waiting for
        // the credits (completions, and first-level acks on rings) its peer returns for its
        // last packets: those may land after it ended.
        let lay = fabric.layout;
        let late_credits =
            super::words::COMPLETED.iter().chain(&super::words::ACKED).map(|&w| lay.word(w)).collect();
        let report = Box::new(move || fabric.router_use());
        Ok(Lowered { programs, phases: runs, workers, report, late_credits })
    }
}

/// The fabric's algorithm for a phase — tt-metal's factory for it — chosen once from the
/// phase's kind, the op's knobs and its line, before anything is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Algo {
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
    fn name(self, ring: bool) -> &'static str {
        match self {
            Algo::DirectReduction | Algo::PointToPoint(_) => "direct",
            Algo::ReduceScatter if ring => "ring",
            Algo::ReduceScatter => "line",
            Algo::Multicast => "multicast",
            Algo::Relay => "relay",
        }
    }
}

/// How the fabric carries phase `p`.
fn choose(s: &LowerCx, fabric: &Fabric, p: &Phase) -> Result<Algo, CclError> {
    let req = &s.ops[p.op];
    let root = req.collective.root().unwrap_or(0);
    Ok(match p.kind {
        PhaseKind::ReduceScatter if direct_path(s, p) => Algo::DirectReduction,
        PhaseKind::ReduceScatter => Algo::ReduceScatter,
        PhaseKind::Reduce => Algo::DirectReduction,
        PhaseKind::AllToAll => Algo::PointToPoint(Pairs::AllToAll),
        // A reduce's second phase gathers the reduced slices to its root.
        PhaseKind::Gather => Algo::PointToPoint(Pairs::ToRoot(root)),
        PhaseKind::Scatter => Algo::PointToPoint(Pairs::FromRoot(root)),
        PhaseKind::SendRecv => Algo::PointToPoint(Pairs::Send),
        // A broadcast is the multicast with the root the only source of its one chunk.
        PhaseKind::Broadcast => Algo::Multicast,
        PhaseKind::AllGather => {
            let closed = line_for(fabric, req).1;
            // Wormhole rings switch to the unicast (relay) factory from 64 pages per device (20
            // for pages of 4 KiB or more), on every plane.
            let page = p.tensors.slice.page_bytes();
            let relay_from = if page >= 4096 { RELAY_PAGES.1 } else { RELAY_PAGES.0 };
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

/// A kernel's injection point: the router, and which of its phase's workers on it.
type Inject = (usize, usize);

/// Puts a Tensix mux in front of every router that kernels which may run at once inject into
/// (a sender channel takes one worker) — a reduce-scatter's workers on one link, or ops that
/// overlap: each group of such kernels becomes the clients of a mux. Kernels ordered by
/// `after` (and an op's own phases) take the channel in turn, directly or through their own
/// group's mux, each once the one before has let go of it (its phase ended, or its mux).
#[allow(clippy::too_many_arguments)]
fn install_muxes(
    s: &LowerCx,
    m: &mut Machine,
    fabric: &Rc<Fabric>,
    ports: &Ports,
    phases: &[Phase],
    injects: &[Vec<Inject>],
    done: &[SignalId],
    programs: &mut [Program],
    next_core: &mut [usize],
) -> Result<Vec<SignalId>, CclError> {
    let after = crate::phase::after_matrix(phases);
    let mut ends = Vec::new();
    // Two kernels of one phase run at once; phases of one op, or ordered by `after`, do not.
    let overlap = |(p, a): (usize, usize), (q, b): (usize, usize)| {
        if p == q { a != b } else { !(after[p][q] || after[q][p] || phases[p].op == phases[q].op) }
    };
    let mut clients: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
    for (p, routers) in injects.iter().enumerate() {
        for &(r, sub) in routers {
            clients.entry(r).or_default().push((p, sub));
        }
    }
    for (r, list) in clients {
        // Clients that may run at once form a group (connected by overlap); groups take the
        // channel in turn, each once the one before has let go of it.
        let mut group: Vec<usize> = (0..list.len()).collect();
        for a in 0..list.len() {
            for b in 0..a {
                if overlap(list[a], list[b]) {
                    let (ga, gb) = (group[a], group[b]);
                    group.iter_mut().filter(|g| **g == ga).for_each(|g| *g = gb);
                }
            }
        }
        let mut groups: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
        for (i, &x) in list.iter().enumerate() {
            groups.entry(group[i]).or_default().push(x);
        }
        let mut groups: Vec<Vec<(usize, usize)>> = groups.into_values().collect();
        groups.sort_by_key(|g| g.iter().map(|x| x.0).min());
        let mut before: Vec<SignalId> = Vec::new();
        for members in groups {
            if let [(p, sub)] = members[..] {
                ports.set((p, r, sub), Target::Router(r), before.clone());
                before = vec![done[p]];
                continue;
            }
            let chip = fabric.routers[r].at.chip;
            let core = take_core(s, next_core, &[chip])?;
            let mux = Rc::new(Mux::new(fabric, r, noc_of(core), STAGING, members.len()));
            if STAGING + mux.l1_bytes() > crate::tensor::L1_TENSOR_BASE {
                return Err(CclError::Invalid(format!(
                    "{} ops inject into the fabric router on chip {} eth{} at once: their mux needs {} B of L1",
                    members.len(),
                    s.cluster.chip(chip).id,
                    fabric.routers[r].at.chan,
                    mux.l1_bytes()
                )));
            }
            for (c, &(p, sub)) in members.iter().enumerate() {
                ports.set((p, r, sub), Target::Mux(mux.clone(), c), Vec::new());
            }
            let name = format!("fabric mux eth{}", fabric.routers[r].at.chan);
            let (f, end) =
                (fabric.clone(), m.new_event(&format!("chip {} {name} done", s.cluster.chip(chip).id)));
            ends.push(end);
            let wait = std::mem::replace(&mut before, vec![end]);
            programs[chip.0 as usize].create_kernel(core, &name, 0, vec![], move |k| async move {
                for e in wait {
                    k.wait_event(e).await;
                }
                super::mux::run(&k, f, mux).await?;
                k.raise_event(end);
                Ok(())
            });
        }
    }
    Ok(ends)
}

/// An op's page size and the fabric's packet payload, refused if a page does not fit.
fn page_and_payload(fabric: &Fabric, req: &OpRequest, t: &Tensors) -> Result<(u64, u64), CclError> {
    let (page, max) = (t.slice.page_bytes(), fabric.config.max_payload_bytes);
    if page > max {
        return Err(CclError::Invalid(format!(
            "op '{}': pages of {page} B do not fit the fabric's {max} B packets",
            req.name
        )));
    }
    Ok((page, max))
}

/// The fabric line an op rides on, and whether it runs as a ring on it (a ring communicator
/// covering a closed line).
fn line_for(fabric: &Fabric, req: &OpRequest) -> (usize, bool) {
    let (line, closed) = fabric.line_of(req.comm.chips()).expect("the fabric carries every communicator");
    (line, closed && req.comm.topology() == Topology::Ring)
}

/// What every phase's lowering shares.
struct Lowering<'a, 'c> {
    s: &'a LowerCx<'c>,
    fabric: &'a Rc<Fabric>,
    /// Where each phase's kernels inject (a router, or a mux in front of it).
    ports: &'a Rc<Ports>,
}

/// The first DRAM byte (per bank) above every phase's tensors.
fn dram_end(phases: &[Phase]) -> u64 {
    let mut end = 0;
    for p in phases {
        let t = p.tensors;
        for (place, pages) in [(t.input, t.slice.pages() * t.n), (t.output, t.slice.pages() * t.n)] {
            if place.memory == Memory::Dram {
                end = end.max(place.base + place.bank_bytes(pages));
            }
        }
    }
    end.div_ceil(4096) * 4096
}

/// Lowers an all-to-all, gather, scatter or send/receive phase `pi` (`shared/fabric.md` §7,
/// `all_to_all @ad82055e`): per rank one core on link 0 whose two kernels cover the two
/// directions (a line's sides; on a ring the shorter way), each sending its destinations'
/// chunks from the farthest in, as unicast packets of up to 2 pages straight into the
/// destination's output, each chunk followed by a flushed increment of the destination's
/// semaphore. All-to-all sends chunk j to every rank j; a gather has the root as the only
/// destination, a scatter as the only source, a send/receive rank 0 to rank 1. A rank that
/// keeps a chunk (all-to-all's ranks, a gather's or scatter's root) copies it locally. A
/// rank's op ends when its semaphore has counted every chunk meant for it.
fn point_to_point(
    cx: &Lowering,
    programs: &mut [Program],
    next_core: &mut [usize],
    pi: usize,
    p: &Phase,
    pairs: Pairs,
) -> Result<(u64, Vec<usize>), CclError> {
    let (s, fabric) = (cx.s, cx.fabric);
    let req = &s.ops[p.op];
    let t = p.tensors;
    let n = req.comm.size();
    let (page, max) = page_and_payload(fabric, req, &t)?;
    let ppp = (max / page).clamp(1, 2);
    let core = take_core(s, next_core, req.comm.chips())?;
    let gate = s.gate(pi, 3 * n);
    let name = pairs.name();
    let own_copy = req.collective != Collective::SendRecv;
    let sends = Sends {
        core,
        land: t.output,
        signal: vec![noc_of(core)],
        per_source: false,
        ppp,
        max,
        name,
        pairs,
        own_copy,
    };
    let routers = chunk_senders(cx, programs, pi, p, &sends, &gate);
    let prefix = s.kernel_prefix(p.op);
    for (k, &chip) in req.comm.chips().iter().enumerate() {
        let expect = (0..n).filter(|&j| pairs.dests(j, n).contains(&k)).count();
        sync_kernel(
            &mut programs[chip.0 as usize],
            core,
            &format!("{prefix}{name} sync"),
            &gate,
            vec![(STAGING, expect as u32)],
        );
    }
    Ok((ppp, routers))
}

/// How a phase's chunk senders send (all-to-all's, and the direct reduce-scatter's).
struct Sends {
    /// The core, the same on every chip.
    core: CoreRef,
    /// Where chunks land on their destination, at the source's chunk.
    land: Placement,
    /// The cores each chunk's increment goes to, and whether each source has its own
    /// semaphore there (`STAGING + 16 * source`) or all share `STAGING`.
    signal: Vec<CoreCoord>,
    per_source: bool,
    ppp: u64,
    max: u64,
    /// The kernels' name.
    name: &'static str,
    /// Who sends what to whom.
    pairs: Pairs,
    /// Whether a rank that keeps a chunk (every all-to-all rank, a gather's or scatter's root)
    /// copies it from its input to its output.
    own_copy: bool,
}

/// Who sends which chunk to whom, and where it lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pairs {
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
    fn name(self) -> &'static str {
        match self {
            Pairs::AllToAll => "a2a",
            Pairs::ToRoot(_) => "gather",
            Pairs::FromRoot(_) => "scatter",
            Pairs::Send => "send-recv",
        }
    }

    /// Whether rank `k` keeps a chunk of its own.
    fn keeps(self, k: usize) -> bool {
        match self {
            Pairs::AllToAll => true,
            Pairs::ToRoot(r) | Pairs::FromRoot(r) => k == r,
            Pairs::Send => false,
        }
    }

    /// Rank `k`'s destinations among `n` ranks.
    fn dests(self, k: usize, n: usize) -> Vec<usize> {
        match self {
            Pairs::AllToAll => (0..n).filter(|&j| j != k).collect(),
            Pairs::ToRoot(r) if k != r => vec![r],
            Pairs::FromRoot(r) if k == r => (0..n).filter(|&j| j != k).collect(),
            Pairs::Send if k == 0 => vec![1],
            _ => Vec::new(),
        }
    }
}

/// Installs, per rank, the two direction kernels that send chunk j of its input to every rank j
/// (`shared/fabric.md` §7, all-to-all): one core on link 0, each kernel covering one direction
/// (a line's side; on a ring the shorter way, the antipode forward), destinations farthest
/// first; an all-to-all's forward kernel also copies the rank's own chunk. Returns the routers
/// they inject into.
fn chunk_senders(
    cx: &Lowering,
    programs: &mut [Program],
    pi: usize,
    p: &Phase,
    x: &Sends,
    gate: &Gate,
) -> Vec<usize> {
    let (s, fabric) = (cx.s, cx.fabric);
    let req = &s.ops[p.op];
    let t = p.tensors;
    let n = req.comm.size();
    let (line, closed) = line_for(fabric, req);
    // (forward, hops) from rank k to rank j: along a line, or the shorter way round a ring.
    let way = |k: usize, j: usize| -> (bool, u32) {
        if closed {
            let f = (j + n - k) % n;
            if f <= n - f { (true, f as u32) } else { (false, (n - f) as u32) }
        } else if j > k {
            (true, (j - k) as u32)
        } else {
            (false, (k - j) as u32)
        }
    };
    let prefix = s.kernel_prefix(p.op);
    let mut routers = Vec::new();
    for (k, &chip) in req.comm.chips().iter().enumerate() {
        for (d, forward) in [true, false].into_iter().enumerate() {
            // This direction's destinations, farthest first: (rank, hops).
            let mut dests: Vec<(usize, u32)> = x
                .pairs
                .dests(k, n)
                .into_iter()
                .filter(|&j| way(k, j).0 == forward)
                .map(|j| (j, way(k, j).1))
                .collect();
            dests.sort_by_key(|&(_, hops)| std::cmp::Reverse(hops));
            let next = if forward { (k + 1) % n } else { (k + n - 1) % n };
            // Every rank takes part in the entry barrier, whether it sends or not.
            let barrier = barrier_reach(n, k, forward, closed);
            let router = (barrier > 0).then(|| {
                fabric
                    .router_facing(line, 0, chip, req.comm.chips()[next])
                    .expect("a router toward each neighbour")
            });
            routers.extend(router);
            let ctx = Rc::new(A2aCtx {
                ports: cx.ports.clone(),
                phase: pi,
                fabric: fabric.clone(),
                router,
                dests,
                own: forward && x.own_copy && x.pairs.keeps(k),
                barrier,
                pairs: x.pairs,
                rank: k,
                n_ranks: n,
                t,
                land: x.land,
                signal: x.signal.clone(),
                per_source: x.per_source,
                ppp: x.ppp,
                base: STAGING + 0x100 + d as u64 * (CONNECTION_L1_BYTES + A2A_WINDOW as u64 * x.max),
                max: x.max,
                gate: gate.clone(),
            });
            let name = format!("{prefix}{} {}", x.name, if forward { "forward" } else { "backward" });
            programs[chip.0 as usize].create_kernel(x.core, &name, d, vec![], move |kn| send_chunks(kn, ctx));
        }
    }
    routers
}

/// Largest input per rank (bytes) a ring reduce-scatter takes the one-shot direct path for
/// (`reduce_scatter.cpp @039c252a`).
pub const DIRECT_MAX_BYTES: u64 = 512 << 10;
/// Reducer cores per rank of the direct path, each adding the contributions to every
/// `DIRECT_REDUCERS`-th packet of the rank's slice (meshsim's choice: tt-metal's core count for
/// this path is not known).
pub const DIRECT_REDUCERS: usize = 4;

/// Whether reduce-scatter phase `p` takes the one-shot direct path, as tt-metal's host does: a
/// reduce-scatter (not an all-reduce's) on a ring, at most [`DIRECT_MAX_BYTES`] of input per
/// rank, and no knob set (links, workers, packet size).
fn direct_path(s: &LowerCx, p: &Phase) -> bool {
    let req = &s.ops[p.op];
    let t = p.tensors;
    let k = &req.knobs;
    let given = &s.given[p.op];
    matches!(req.collective, crate::op::Collective::ReduceScatter(_))
        && k.algorithm == Some(Algorithm::Direct)
        && req.comm.topology() == Topology::Ring
        && req.comm.size() > 2
        && t.slice.bytes() * t.n <= DIRECT_MAX_BYTES
        && given.workers.is_none()
        && given.packet_bytes.is_none()
        && given.links.is_none()
}

/// Lowers a direct reduction, phase `pi` (`shared/fabric.md` §7): a reduce-scatter's one-shot
/// path, where every rank unicasts slice j of its input straight to rank j, or a reduce's,
/// where every other rank unicasts its whole input to the root. All-to-all's senders carry the
/// chunks (one core on link 0 whose two kernels take the shorter way, farthest destination
/// first) into the owner's receive buffer, each followed by an increment of that source's
/// semaphore on each of the owner's reducer cores. The reducers add every contribution to the
/// owner's own pages as it completes, each on its share, and write the output.
fn direct_reduction(
    cx: &Lowering,
    programs: &mut [Program],
    next_core: &mut [usize],
    pi: usize,
    p: &Phase,
    scratch_base: &mut u64,
) -> Result<(u64, Vec<usize>), CclError> {
    let (s, fabric) = (cx.s, cx.fabric);
    let req = &s.ops[p.op];
    let t = p.tensors;
    let red = req.reduction().expect("a reduction");
    let n = req.comm.size();
    let root = req.collective.root();
    // The ranks that own a result: every rank of a reduce-scatter, a reduce's root.
    let owners: Vec<usize> = root.map_or((0..n).collect(), |r| vec![r]);
    let owner_chips: Vec<ChipIdx> = owners.iter().map(|&k| req.comm.chip(k)).collect();
    let (page, max) = page_and_payload(fabric, req, &t)?;
    let ppp = (max / page).clamp(1, 2);
    // Every owner's receive buffer: one chunk per source rank.
    let recv = Placement { base: *scratch_base, ..Placement::first(Memory::Dram, page) };
    *scratch_base = recv.after(t.slice.pages() * n as u64).base;
    let sender = take_core(s, next_core, req.comm.chips())?;
    let packets = super::reduce::packets(t.slice.pages(), ppp).len();
    let reducers: Vec<CoreRef> = (0..DIRECT_REDUCERS.min(packets))
        .map(|_| take_core(s, next_core, &owner_chips))
        .collect::<Result<_, _>>()?;
    // One flushed increment per chunk crosses the fabric, to the first reducer's core, as
    // all-to-all's chunks end with one; a fan-out kernel there passes it on to the others.
    let cores: Vec<CoreCoord> = reducers.iter().map(|&c| noc_of(c)).collect();
    let signal = cores[..1].to_vec();
    let fan_outs = usize::from(cores.len() > 1) * owners.len();
    let gate = s.gate(pi, 2 * n + reducers.len() * owners.len() + fan_outs);
    let prefix = s.kernel_prefix(p.op);
    // The senders' name, and the reducers'.
    let (pairs, name, reducer) = match root {
        Some(r) => (Pairs::ToRoot(r), "reduce direct", "reduce direct"),
        None => (Pairs::AllToAll, "rs direct", "rs direct reduce"),
    };
    let sends =
        Sends { core: sender, land: recv, signal, per_source: true, ppp, max, name, pairs, own_copy: false };
    let routers = chunk_senders(cx, programs, pi, p, &sends, &gate);
    for (&k, &chip) in owners.iter().zip(&owner_chips) {
        if fan_outs > 0 {
            let ctx = Rc::new(FanOut { rank: k, ranks: n, others: cores[1..].to_vec(), gate: gate.clone() });
            programs[chip.0 as usize].create_kernel(
                reducers[0],
                &format!("{prefix}{reducer} fan-out"),
                0,
                vec![],
                move |kn| direct_fan_out(kn, ctx),
            );
        }
        for (r, &core) in reducers.iter().enumerate() {
            let ctx = Rc::new(DirectReducer {
                rank: k,
                ranks: n,
                to_root: root.is_some(),
                t,
                recv,
                red: red.clone(),
                ppp,
                share: (r, reducers.len()),
                base: STAGING + 0x1000,
                gate: gate.clone(),
            });
            let kernel = format!("{prefix}{reducer} {r}");
            programs[chip.0 as usize]
                .create_kernel(core, &kernel, 0, vec![], move |kn| direct_reduce(kn, ctx));
        }
    }
    Ok((ppp, routers))
}

/// The semaphore, on a direct reduction's reducer cores, that counts source rank `j`'s chunk.
fn source_sem(j: usize) -> u64 {
    STAGING + 16 * j as u64
}

/// Takes from `pending` the first source rank (in `pending`'s order) whose chunk semaphore is
/// set, waiting for one if none is yet.
async fn next_landed(k: &Kernel, pending: &mut Vec<usize>) -> Result<usize, meshsim_hw::HwError> {
    loop {
        if let Some(i) = pending.iter().position(|&j| k.read_u32(source_sem(j)).is_ok_and(|v| v > 0)) {
            return Ok(pending.remove(i));
        }
        let waits: Vec<Wake> = pending.iter().map(|&j| Wake::Word(source_sem(j), Cond::Ge(1))).collect();
        k.wait_for_any(&waits).await?;
    }
}

/// What a direct reduction's fan-out kernel needs: the owner's rank, how many ranks send, and
/// the cores of its other reducers.
struct FanOut {
    rank: usize,
    ranks: usize,
    others: Vec<CoreCoord>,
    gate: Gate,
}

/// Passes each source's chunk increment, which lands on the first reducer's core, on to the
/// owner's other reducers (NoC increments of the same semaphore on each), in arrival order.
/// The fabric's increment was flushed behind the chunk's writes, so the chunk has landed.
async fn direct_fan_out(k: Kernel, c: Rc<FanOut>) -> meshsim_engine::TaskResult {
    let start = c.gate.enter(&k).await;
    let mut pending: Vec<usize> = (0..c.ranks).filter(|&j| j != c.rank).collect();
    while !pending.is_empty() {
        let j = next_landed(&k, &mut pending).await?;
        for at in &c.others {
            k.noc_semaphore_inc(k.get_noc_addr(at.x, at.y, source_sem(j)), 1).await?;
        }
    }
    k.noc_async_atomic_barrier().await;
    c.gate.leave(&k, start);
    Ok(())
}

/// What a direct reduce-scatter's reducer needs. Per source rank a semaphore at
/// `STAGING + 16 * source` on its core counts that source's chunk.
struct DirectReducer {
    rank: usize,
    ranks: usize,
    /// A reduce to this rank (the whole tensor; the receive buffer has a slot of it per
    /// source), rather than a reduce-scatter's slice (the receive buffer laid out as the input).
    to_root: bool,
    /// The phase's tensors: slice, chunk count and dim, input and output.
    t: Tensors,
    recv: Placement,
    red: crate::op::Reduction,
    ppp: u64,
    /// Which of the rank's reducers it is, of how many: it takes every such packet.
    share: (usize, usize),
    /// L1 for the running sum and one contribution.
    base: u64,
    gate: Gate,
}

/// A direct reduce-scatter reducer: its share of the rank's own slice, then each source's
/// contribution added as soon as that source's chunk has landed, then the output.
async fn direct_reduce(k: Kernel, c: Rc<DirectReducer>) -> meshsim_engine::TaskResult {
    let start = c.gate.enter(&k).await;
    let page = c.t.slice.page_bytes();
    let reduce = k.cycles(k.params().tile_reduce_cycles);
    let mine: Vec<u64> = super::reduce::plane_packets(c.t.slice.pages(), c.ppp, c.share)
        .into_iter()
        .flat_map(|(lo, pages)| lo..lo + pages)
        .collect();
    let bytes = mine.len() as u64 * page;
    let (acc, tmp) = (c.base, c.base + bytes);
    let whole = |j: usize, q: u64| {
        if c.to_root {
            j as u64 * c.t.slice.pages() + q
        } else {
            c.t.slice.page_in_whole(c.t.dim, c.t.n, j as u64, q)
        }
    };
    let own = |q: u64| if c.to_root { q } else { whole(c.rank, q) };
    issue_reads(&k, &c.t.input, mine.iter().map(|&q| own(q)), acc, page).await?;
    k.noc_async_read_barrier().await?;
    let mut pending: Vec<usize> = (0..c.ranks).filter(|&j| j != c.rank).collect();
    while !pending.is_empty() {
        let j = next_landed(&k, &mut pending).await?;
        issue_reads(&k, &c.recv, mine.iter().map(|&q| whole(j, q)), tmp, page).await?;
        k.noc_async_read_barrier().await?;
        if k.is_functional() {
            let mut a = k.read_bytes(acc, bytes)?;
            c.red.reduce_words(&mut a, &k.read_bytes(tmp, bytes)?);
            k.write_bytes(acc, &a)?;
        }
        k.delay(Time(reduce.0 * mine.len() as u64)).await;
    }
    for (x, &q) in mine.iter().enumerate() {
        k.noc_async_write(acc + x as u64 * page, page_addr(&k, &c.t.output, q), page).await?;
    }
    k.noc_async_write_barrier().await?;
    c.gate.leave(&k, start);
    Ok(())
}

/// Packets an all-to-all kernel reads at once.
const A2A_WINDOW: usize = 8;

/// What an all-to-all direction kernel needs.
struct A2aCtx {
    /// Where the phase's kernels inject, and the phase.
    ports: Rc<Ports>,
    phase: usize,
    fabric: Rc<Fabric>,
    router: Option<usize>,
    /// Destinations, farthest first: (rank, hops).
    dests: Vec<(usize, u32)>,
    /// Also copies the rank's own chunk.
    own: bool,
    /// Which chunk goes where.
    pairs: Pairs,
    /// How far its entry-barrier increment reaches.
    barrier: u32,
    rank: usize,
    /// Ranks of the op.
    n_ranks: usize,
    /// The phase's tensors: slice, chunk count and dim, input and output.
    t: Tensors,
    /// Where a destination's chunk lands (the output; a direct reduce-scatter's receive
    /// buffer), at the sender's rank's chunk.
    land: Placement,
    /// The cores whose semaphore each destination's chunk increments, and whether each source
    /// has its own semaphore there (`STAGING + 16 * rank`) or all share `STAGING`.
    signal: Vec<CoreCoord>,
    per_source: bool,
    ppp: u64,
    base: u64,
    max: u64,
    gate: Gate,
}

/// An all-to-all direction kernel: each destination's chunk in waves of reads and sends, then
/// its increment.
async fn send_chunks(k: Kernel, c: Rc<A2aCtx>) -> meshsim_engine::TaskResult {
    let start = c.gate.enter(&k).await;
    let page = c.t.slice.page_bytes();
    let whole = |chunk: usize, q: u64| c.t.slice.page_in_whole(c.t.dim, c.t.n, chunk as u64, q);
    // Page q of the chunk for destination j in the input, and where it lands there.
    let read = |j: usize, q: u64| match c.pairs {
        Pairs::AllToAll | Pairs::FromRoot(_) => whole(j, q),
        Pairs::ToRoot(_) | Pairs::Send => q,
    };
    let land = |q: u64| match c.pairs {
        // A direct reduce's receive buffer: a slot of the whole tensor per source.
        Pairs::ToRoot(_) if c.per_source => c.rank as u64 * c.t.slice.pages() + q,
        Pairs::AllToAll | Pairs::ToRoot(_) => whole(c.rank, q),
        Pairs::FromRoot(_) | Pairs::Send => q,
    };
    let buf = |i: usize| c.base + CONNECTION_L1_BYTES + (i % A2A_WINDOW) as u64 * c.max;
    let conn = match c.router {
        Some(r) => Some(c.ports.open(&k, c.fabric.clone(), (c.phase, r, 0), c.base).await?),
        None => None,
    };
    entry_barrier(&k, conn.as_ref(), c.barrier, c.n_ranks).await?;
    if let Some(conn) = &conn {
        let packets = super::reduce::packets(c.t.slice.pages(), c.ppp);
        let sem = if c.per_source { source_sem(c.rank) } else { STAGING };
        for &(j, hops) in &c.dests {
            let route = Route::unicast(hops);
            for wave in packets.chunks(A2A_WINDOW) {
                k.noc_async_writes_flushed().await;
                for (i, &(lo, pages)) in wave.iter().enumerate() {
                    issue_reads(&k, &c.t.input, (lo..lo + pages).map(|q| read(j, q)), buf(i), page).await?;
                }
                k.noc_async_read_barrier().await?;
                for (i, &(lo, pages)) in wave.iter().enumerate() {
                    let out: Vec<u64> = (lo..lo + pages).map(|q| page_addr(&k, &c.land, land(q))).collect();
                    let cmd = NocCmd::pages(&out, page);
                    conn.send(&k, Header { cmd, payload: pages * page, route, src_ch: 0 }, buf(i)).await?;
                }
            }
            for at in &c.signal {
                let inc = NocCmd::AtomicInc { sem: k.get_noc_addr(at.x, at.y, sem), inc: 1, flush: true };
                conn.send(&k, Header { cmd: inc, payload: 0, route, src_ch: 0 }, 0).await?;
            }
        }
        conn.close(&k).await?;
    }
    if c.own {
        // The rank's own chunk stays: from its place in the input to its place in the output.
        for q in 0..c.t.slice.pages() {
            k.noc_async_read(page_addr(&k, &c.t.input, read(c.rank, q)), buf(0), page).await?;
            k.noc_async_read_barrier().await?;
            k.noc_async_write(buf(0), page_addr(&k, &c.t.output, land(q)), page).await?;
            k.noc_async_writes_flushed().await;
        }
    }
    k.noc_async_write_barrier().await?;
    c.gate.leave(&k, start);
    Ok(())
}

/// Lowers reduce-scatter phase `pi` (see [`super::reduce`]); returns its pages per packet.
fn reduce_scatter(
    cx: &Lowering,
    programs: &mut [Program],
    next_core: &mut [usize],
    pi: usize,
    p: &Phase,
    scratch_base: &mut u64,
) -> Result<(u64, Vec<Inject>, usize), CclError> {
    use super::reduce::{self, OwnerCtx, RsCtx, Side};
    let (s, fabric) = (cx.s, cx.fabric);
    let req = &s.ops[p.op];
    let t = p.tensors;
    let red = req.reduction().expect("a reduction");
    let n = req.comm.size();
    let (page, max) = page_and_payload(fabric, req, &t)?;
    // tt-metal's reduce-scatter puts at most 2 pages in a packet on a ring; 4 otherwise.
    let (line, closed) = line_for(fabric, req);
    let cap = if closed { 2 } else { MAX_PAGES_PER_PACKET };
    let ppp = (max / page).clamp(1, cap);
    let planes = req.knobs.links();
    // Workers per link and direction, behind a mux on each router: tt-metal's thresholds on
    // the bytes each link carries of a rank's input.
    let workers =
        req.knobs.workers.unwrap_or_else(|| reduce::workers(t.slice.bytes() * t.n / planes as u64, closed));
    // Twice the input, one whole tensor per direction, above everything else; the planes and
    // their workers reduce disjoint pages of it.
    let whole = t.slice.pages() * t.n;
    let first = Placement { base: *scratch_base, ..Placement::first(Memory::Dram, page) };
    let second = first.after(whole);
    *scratch_base = second.after(whole).base;
    let partial = [first, second];
    let sems = [STAGING, STAGING + 16];
    // Every rank's slices per direction, in the order it takes them (by position on the side).
    let order: Vec<[Vec<(usize, usize)>; 2]> = (0..n)
        .map(|k| {
            [true, false].map(|forward| {
                let mut v: Vec<(usize, usize)> = (0..n)
                    .filter_map(|j| reduce::position(n, k, j, forward, closed).map(|pos| (j, pos)))
                    .collect();
                v.sort_by_key(|&(_, pos)| pos);
                v
            })
        })
        .collect();
    let upstream = |k: usize, forward: bool| if forward { (k + n - 1) % n } else { (k + 1) % n };
    // Two direction kernels and the owner per rank, plane and worker.
    let gate = s.gate(pi, 3 * n * planes * workers);
    let prefix = s.kernel_prefix(p.op);
    let stride = CONNECTION_L1_BYTES + 2 * reduce::WINDOW as u64 * max;
    let mut routers = Vec::new();
    for (plane, w) in (0..planes).flat_map(|plane| (0..workers).map(move |w| (plane, w))) {
        let on = (plane * workers + w, planes * workers);
        let slice_packets = reduce::plane_packets(t.slice.pages(), ppp, on).len() as u64;
        let per_sync = if closed { reduce::CHUNKS_PER_SYNC.0 } else { reduce::CHUNKS_PER_SYNC.1 }
            .min((slice_packets / 2).max(1));
        let core = take_core(s, next_core, req.comm.chips())?;
        // Packets of partials rank k has received from direction d before slice j's: its
        // upstream sends them in its own order.
        let before = |k: usize, d: usize, j: usize| -> u64 {
            let u = upstream(k, d == 0);
            let i = order[u][d].iter().position(|&(x, _)| x == j).expect("the upstream carries the slice");
            i as u64 * slice_packets
        };
        let mut suffix = if planes > 1 { format!(" plane{plane}") } else { String::new() };
        if workers > 1 {
            suffix += &format!(" worker{w}");
        }
        for (k, mine) in order.iter().enumerate() {
            for (d, forward) in [true, false].into_iter().enumerate() {
                let slices = mine[d].clone();
                let received_before =
                    slices.iter().map(|&(j, pos)| if pos > 0 { before(k, d, j) } else { 0 }).collect();
                let next = if forward { (k + 1) % n } else { (k + n - 1) % n };
                let router = (!slices.is_empty()).then(|| {
                    fabric
                        .router_facing(line, plane, req.comm.chips()[k], req.comm.chips()[next])
                        .expect("a router toward each neighbour")
                });
                routers.extend(router.map(|r| (r, w)));
                let chip = req.comm.chips()[k];
                let ctx = Rc::new(RsCtx {
                    ports: cx.ports.clone(),
                    phase: pi,
                    worker: w,
                    barrier: barrier_reach(n, k, forward, closed),
                    fabric: fabric.clone(),
                    side: Side { router, slices, received_before },
                    n: t.n,
                    dim: t.dim,
                    slice: t.slice,
                    input: t.input,
                    partial: partial[d],
                    red: red.clone(),
                    ppp,
                    per_sync,
                    plane: on,
                    sync: (noc_of(core), sems[d]),
                    base: STAGING + 0x100 + d as u64 * stride,
                    max,
                    gate: gate.clone(),
                });
                let name = format!("{prefix}rs {}{suffix}", if forward { "forward" } else { "backward" });
                programs[chip.0 as usize]
                    .create_kernel(core, &name, d, vec![], move |kn| reduce::side(kn, ctx));
            }
        }
        for (k, &chip) in req.comm.chips().iter().enumerate() {
            let (f, b) = reduce::sides(n, k, closed);
            // Each side's partial of this rank's slice: through it, the side has delivered.
            let sides: Vec<(Placement, u64, u64)> = [(f, 0), (b, 1)]
                .into_iter()
                .filter(|&(len, _)| len > 0)
                .map(|(_, d)| (partial[d], sems[d], before(k, d, k) + slice_packets))
                .collect();
            let ctx = Rc::new(OwnerCtx {
                rank: k,
                n: t.n,
                dim: t.dim,
                slice: t.slice,
                input: t.input,
                output: t.output,
                sides,
                red: red.clone(),
                ppp,
                plane: on,
                base: STAGING + 0x100 + 2 * stride,
                max,
                gate: gate.clone(),
            });
            programs[chip.0 as usize].create_kernel(
                core,
                &format!("{prefix}rs owner{suffix}"),
                0,
                vec![],
                move |kn| reduce::owner(kn, ctx),
            );
        }
    }
    Ok((ppp, routers, workers))
}

/// One fabric for the session: its lines ([`fabric_lines`]), ring flow control if any line is
/// closed, as many routing planes as the op asking for the most links.
fn build_fabric(s: &LowerCx) -> Result<Rc<Fabric>, CclError> {
    let lines = fabric_lines(s.cluster, s.ops)?;
    let kind = if lines.iter().any(|l| l.closed) { FabricKind::Ring } else { FabricKind::Linear };
    let planes = s.ops.iter().map(|o| o.knobs.links()).max().unwrap_or(1);
    let mut asked: Vec<u64> = s.ops.iter().filter_map(|o| o.knobs.packet_bytes).collect();
    asked.dedup();
    if asked.len() > 1 {
        return Err(CclError::Invalid(format!(
            "the fabric's packet size is global to a session: its ops ask for {} B and {} B",
            asked[0], asked[1]
        )));
    }
    let payload = asked.first().copied().unwrap_or(DEFAULT_MAX_PAYLOAD);
    let config = FabricConfig { kind, max_payload_bytes: payload, planes };
    let eth = meshsim_topology::soc::wormhole_b0().eth_cores.clone();
    Fabric::new(s.cluster, s.params, eth, config, lines).map_err(|e| CclError::Invalid(e.to_string()))
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
fn default_links(cluster: &Cluster, ops: &[OpRequest]) -> Result<Vec<usize>, CclError> {
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

/// The next worker core free on every one of `chips`: an op's ranks all use the same core, so
/// one NoC address (a multicast increment's, say) names it on every chip.
fn take_core(s: &LowerCx, next_core: &mut [usize], chips: &[ChipIdx]) -> Result<CoreRef, CclError> {
    let k = chips.iter().map(|c| next_core[c.0 as usize]).max().unwrap_or(0);
    if k >= WORKER_CORES {
        let ids: Vec<u64> = chips.iter().map(|&c| s.cluster.chip(c).id).collect();
        return Err(CclError::Invalid(format!(
            "chips {ids:?} have no worker core left in common: the ops need more than {WORKER_CORES}"
        )));
    }
    for c in chips {
        next_core[c.0 as usize] = k + 1;
    }
    Ok(CoreRef::Worker(CoreCoord { x: (k % 8) as u32, y: (k / 8) as u32 }))
}

/// NoC coordinates of a worker core (the same on every chip).
fn noc_of(core: CoreRef) -> CoreCoord {
    let soc = meshsim_topology::soc::wormhole_b0();
    match core {
        CoreRef::Worker(l) => soc.workers[(l.y * 8 + l.x) as usize],
        CoreRef::Eth(ch) => soc.eth_cores[ch as usize],
    }
}

/// What one direction kernel of an all-gather sends.
struct Direction {
    /// The router toward the direction, `None` when no chip lies that way.
    router: Option<usize>,
    /// The multicast range of each packet, by packet index (alternating on even rings).
    ranges: Vec<u32>,
    /// Packets of this kernel: (first page, pages).
    packets: Vec<(u64, u64)>,
    /// Also copies the slice into this chip's own output.
    local_copy: bool,
    /// How far its entry-barrier increment reaches.
    barrier: u32,
}

/// Lowers all-gather (or broadcast) phase `pi` by the multicast factory; returns its pages per
/// packet and the routers it injects into.
fn all_gather(
    cx: &Lowering,
    programs: &mut [Program],
    next_core: &mut [usize],
    pi: usize,
    p: &Phase,
) -> Result<(u64, Vec<Inject>), CclError> {
    let (s, fabric) = (cx.s, cx.fabric);
    let req = &s.ops[p.op];
    let t = p.tensors;
    let n = req.comm.size();
    let (page, max) = page_and_payload(fabric, req, &t)?;
    let ppp = (max / page).clamp(1, MAX_PAGES_PER_PACKET);
    let planes = req.knobs.links();
    let (line, closed) = line_for(fabric, req);
    // A broadcast is this multicast with the root the only source of its one chunk.
    let root = req.collective.root();
    // A semaphore counting sources on the op's sync core, the same on every chip: the final
    // increments are multicast to one address.
    let sync_core = take_core(s, next_core, req.comm.chips())?;
    let sync_at = noc_of(sync_core);
    let sync_sem = STAGING;
    // Every (rank, plane, direction) and the chips its final increment reaches.
    let mut expected = vec![0u32; n];
    let mut plans: Vec<(usize, usize, [Direction; 2])> = Vec::new();
    let slice_packets = super::reduce::packets(t.slice.pages(), ppp);
    for k in 0..n {
        for plane in 0..planes {
            let mine: Vec<(u64, u64)> = slice_packets
                .iter()
                .copied()
                .enumerate()
                .filter(|(j, _)| j % planes == plane && root.is_none_or(|r| r == k))
                .map(|x| x.1)
                .collect();
            let dirs = [true, false].map(|forward| {
                // A broadcast round a ring: the whole tensor half-way each way (`full`), every
                // other packet all the way each way (`split`), or all of it one way (`none`).
                let mine: Vec<(u64, u64)> = match (root.is_some() && closed, p.bidir) {
                    (true, Bidir::Split) => mine
                        .iter()
                        .copied()
                        .enumerate()
                        .filter(|(j, _)| (j % 2 == 0) == forward)
                        .map(|x| x.1)
                        .collect(),
                    (true, Bidir::None) if !forward => Vec::new(),
                    _ => mine.clone(),
                };
                let ranges: Vec<u32> = (0..mine.len())
                    .map(|j| match (root.is_some() && closed, p.bidir) {
                        (true, Bidir::Split | Bidir::None) => (n - 1) as u32,
                        _ => range(n, k, forward, closed, j),
                    })
                    .collect();
                let reach = ranges.iter().copied().max().unwrap_or(0);
                let barrier = barrier_reach(n, k, forward, closed);
                let router = (barrier > 0).then(|| {
                    let chip = req.comm.chips()[k];
                    let next = if forward {
                        req.comm.chips()[(k + 1) % n]
                    } else {
                        req.comm.chips()[(k + n - 1) % n]
                    };
                    fabric.router_facing(line, plane, chip, next).expect("a router toward each neighbour")
                });
                for h in 1..=reach as usize {
                    let j = if forward { (k + h) % n } else { (k + n - h) % n };
                    expected[j] += 1;
                }
                // Each direction of a split broadcast copies its own packets at the root; an
                // all-gather without its own slice, or in place, copies nothing.
                let skip_own = req.exclude_myself || req.in_place;
                let local_copy =
                    (forward && !skip_own) || (root.is_some() && closed && p.bidir == Bidir::Split);
                Direction { router, ranges, packets: mine, local_copy, barrier }
            });
            plans.push((k, plane, dirs));
        }
    }
    let routers: Vec<usize> =
        plans.iter().flat_map(|(_, _, dirs)| dirs.iter().filter_map(|d| d.router)).collect();
    // Two direction kernels per rank and plane, and a sync kernel per rank.
    let gate = s.gate(pi, 2 * n * planes + n);
    for (k, &chip) in req.comm.chips().iter().enumerate() {
        sync_kernel(
            &mut programs[chip.0 as usize],
            sync_core,
            "ag sync",
            &gate,
            vec![(sync_sem, expected[k])],
        );
    }
    let prefix = s.kernel_prefix(p.op);
    // A core per plane, the same on every chip: the entry barrier's increments name it.
    let cores: Vec<CoreRef> =
        (0..planes).map(|_| take_core(s, next_core, req.comm.chips())).collect::<Result<_, _>>()?;
    for (k, plane, dirs) in plans {
        let chip = req.comm.chips()[k];
        let core = cores[plane];
        for (d, dir) in dirs.into_iter().enumerate() {
            let name = format!("{prefix}ag {} plane{plane}", if d == 0 { "forward" } else { "backward" });
            let ctx = Rc::new(SendCtx {
                ports: cx.ports.clone(),
                phase: pi,
                fabric: fabric.clone(),
                dir,
                t_in: t.input,
                t_out: t.output,
                slice: (if root.is_some() { 0 } else { k as u64 }, t.slice, t.dim, t.n),
                in_place: t.in_place,
                ranks: n,
                base: STAGING + 0x100 + d as u64 * (CONNECTION_L1_BYTES + 2 * BATCH as u64 * max),
                max,
                sync: (sync_at, sync_sem),
                gate: gate.clone(),
            });
            programs[chip.0 as usize].create_kernel(core, &name, d, vec![], move |kn| send_slice(kn, ctx));
        }
    }
    Ok((ppp, routers.into_iter().map(|r| (r, 0)).collect()))
}

/// Pages per device from which a Wormhole ring all-gather takes the unicast factory: (pages
/// under 4 KiB, pages of 4 KiB or more) — `shared/fabric.md` §7.
pub const RELAY_PAGES: (u64, u64) = (64, 20);

/// Lowers a ring all-gather by the unicast (relay) factory ([`super::relay`]): per rank one
/// core, the same on every chip, with a relay kernel per direction and a sync kernel that
/// waits for every stripe from both neighbours.
fn all_gather_relay(
    cx: &Lowering,
    programs: &mut [Program],
    next_core: &mut [usize],
    pi: usize,
    p: &Phase,
) -> Result<(u64, Vec<Inject>, usize), CclError> {
    use super::relay::{self, RelayCtx};
    let (s, fabric) = (cx.s, cx.fabric);
    let req = &s.ops[p.op];
    let t = p.tensors;
    let n = req.comm.size();
    let (page, _) = page_and_payload(fabric, req, &t)?;
    let ppp = (fabric.config.max_payload_bytes / page).clamp(1, MAX_PAGES_PER_PACKET);
    let line = line_for(fabric, req).0;
    let max = fabric.config.max_payload_bytes;
    let planes = req.knobs.links();
    let per_plane = super::reduce::packets(t.slice.pages(), ppp).len() as u64 / planes as u64;
    let workers = relay::workers(t.slice.bytes() / planes as u64, per_plane);
    let sems = [STAGING, STAGING + 16];
    let gate = s.gate(pi, 3 * n * planes * workers);
    let prefix = s.kernel_prefix(p.op);
    let mut routers = Vec::new();
    // Each (plane, worker) relays every (planes x workers)-th packet of each slice: independent
    // relays over disjoint pages, each with its own core and semaphores; a plane's workers
    // share its routers through a mux.
    for (plane, w) in (0..planes).flat_map(|plane| (0..workers).map(move |w| (plane, w))) {
        let on = (plane * workers + w, planes * workers);
        let packets = super::reduce::plane_packets(t.slice.pages(), ppp, on);
        let total = packets.len();
        let core = take_core(s, next_core, req.comm.chips())?;
        let at = noc_of(core);
        for (k, &chip) in req.comm.chips().iter().enumerate() {
            for (d, forward) in [true, false].into_iter().enumerate() {
                let next = if forward { (k + 1) % n } else { (k + n - 1) % n };
                let router = fabric
                    .router_facing(line, plane, chip, req.comm.chips()[next])
                    .expect("a router toward each neighbour");
                routers.push((router, w));
                let ctx = Rc::new(RelayCtx {
                    ports: cx.ports.clone(),
                    phase: pi,
                    fabric: fabric.clone(),
                    router,
                    worker: w,
                    forward,
                    rank: k,
                    n,
                    slice: t.slice,
                    dim: t.dim,
                    input: t.input,
                    output: t.output,
                    own: (!(req.exclude_myself || req.in_place), t.in_place),
                    packets: packets.clone(),
                    sem: (at, sems[d]),
                    base: STAGING + 0x100 + d as u64 * (CONNECTION_L1_BYTES + relay::WINDOW as u64 * max),
                    max,
                    barrier: barrier_reach(n, k, forward, true),
                    gate: gate.clone(),
                });
                let name = format!("{prefix}ag relay {}", if forward { "forward" } else { "backward" });
                programs[chip.0 as usize]
                    .create_kernel(core, &name, d, vec![], move |kn| relay::relay(kn, ctx));
            }
            let want = [relay::received(n, true, total), relay::received(n, false, total)];
            let waits = sems.into_iter().zip(want.map(|w| w as u32)).collect();
            sync_kernel(&mut programs[chip.0 as usize], core, &format!("{prefix}ag sync"), &gate, waits);
        }
    }
    Ok((ppp, routers, workers))
}

/// The multicast range of packet `j` from rank `k` of `n` going `forward`: to the line's end,
/// or half-way round a ring (an even ring alternates the two halves packet by packet).
fn range(n: usize, k: usize, forward: bool, closed: bool, j: usize) -> u32 {
    if !closed {
        return if forward { (n - 1 - k) as u32 } else { k as u32 };
    }
    let half = (n - 1) / 2;
    if n % 2 == 1 {
        return half as u32;
    }
    // n even: one side takes n/2, the other n/2 - 1, swapping every packet.
    let long = (j % 2 == 0) == forward;
    if long { (n / 2) as u32 } else { (n / 2 - 1) as u32 }
}

/// What a direction kernel needs.
struct SendCtx {
    /// Where the phase's kernels inject, and the phase.
    ports: Rc<Ports>,
    phase: usize,
    fabric: Rc<Fabric>,
    dir: Direction,
    t_in: Placement,
    t_out: Placement,
    /// (rank, slice spec, dim, ranks): where slice pages sit in the gathered output.
    slice: (u64, crate::tensor::TensorSpec, usize, u64),
    /// Ranks of the op (the entry barrier waits for all others).
    ranks: usize,
    /// The slice sits in the output already (an in-place all-gather): read it there.
    in_place: bool,
    /// Worker L1: connection words, then two packet buffers.
    base: u64,
    max: u64,
    sync: (CoreCoord, u64),
    gate: Gate,
}

/// Packets a direction kernel reads per batch; it holds two batches.
const BATCH: usize = 4;

/// Address of packet `i` of batch `b` in a direction kernel's buffer.
fn buffer(c: &SendCtx, b: usize, i: usize) -> u64 {
    c.base + CONNECTION_L1_BYTES + ((b % 2) * BATCH + i) as u64 * c.max
}

/// NoC address of page `q` of `place` (the same on every chip).
pub(crate) fn page_addr(k: &Kernel, place: &Placement, q: u64) -> u64 {
    let (bank, addr) = place.page(q);
    let at = match place.memory {
        Memory::Dram => k.dram_endpoint(bank as usize),
        Memory::L1 => k.worker_noc_coord(bank as usize),
    };
    k.get_noc_addr(at.x, at.y, addr)
}

/// A direction kernel: reads its packets' pages, multicasts them, copies them locally if asked,
/// then the final increment and close.
async fn send_slice(k: Kernel, c: Rc<SendCtx>) -> meshsim_engine::TaskResult {
    let start = c.gate.enter(&k).await;
    let conn = match c.dir.router {
        Some(r) => Some(c.ports.open(&k, c.fabric.clone(), (c.phase, r, 0), c.base).await?),
        None => None,
    };
    entry_barrier(&k, conn.as_ref(), c.dir.barrier, c.ranks).await?;
    let (rank, slice, dim, n) = c.slice;
    let page = slice.page_bytes();
    let active = conn.is_some() || c.dir.local_copy;
    // Reads run a batch ahead of sends: batch b + 1's pages are on their way while batch b
    // goes out (two halves of the packet buffer, BATCH packets each).
    let batches: Vec<&[(u64, u64)]> = c.dir.packets.chunks(BATCH).collect();
    let issue = |b: usize| {
        let k = k.clone();
        let c = c.clone();
        let batch: Vec<(u64, u64)> = batches.get(b).map(|x| x.to_vec()).unwrap_or_default();
        async move {
            let (rank, slice, dim, n) = c.slice;
            for (i, &(lo, pages)) in batch.iter().enumerate() {
                if c.in_place {
                    let at = (lo..lo + pages).map(|q| slice.page_in_whole(dim, n, rank, q));
                    issue_reads(&k, &c.t_out, at, buffer(&c, b, i), page).await?;
                } else {
                    issue_reads(&k, &c.t_in, lo..lo + pages, buffer(&c, b, i), page).await?;
                }
            }
            Ok::<(), meshsim_engine::TaskError>(())
        }
    };
    if active {
        issue(0).await?;
    }
    for (b, batch) in batches.iter().enumerate() {
        if !active {
            break;
        }
        k.noc_async_read_barrier().await?;
        if b + 1 < batches.len() {
            // The half batch b + 1 reuses held batch b - 1: its writes must have left.
            k.noc_async_writes_flushed().await;
            issue(b + 1).await?;
        }
        for (i, &(lo, pages)) in batch.iter().enumerate() {
            let j = b * BATCH + i;
            let buf = buffer(&c, b, i);
            let out: Vec<u64> = (lo..lo + pages)
                .map(|q| page_addr(&k, &c.t_out, slice.page_in_whole(dim, n, rank, q)))
                .collect();
            if c.dir.local_copy {
                for (x, &dst) in out.iter().enumerate() {
                    k.noc_async_write(buf + x as u64 * page, dst, page).await?;
                }
            }
            if let Some(conn) = &conn {
                let cmd = NocCmd::pages(&out, page);
                let route = Route::multicast(1, c.dir.ranges[j]);
                conn.send(&k, Header { cmd, payload: pages * page, route, src_ch: 0 }, buf).await?;
            }
        }
    }
    if let Some(conn) = &conn {
        // The final increment goes where the data went (none if this plane carried nothing).
        if let Some(reach) = c.dir.ranges.iter().copied().max().filter(|&r| r > 0) {
            let (at, sem) = c.sync;
            let inc = NocCmd::AtomicInc { sem: k.get_noc_addr(at.x, at.y, sem), inc: 1, flush: true };
            conn.send(&k, Header { cmd: inc, payload: 0, route: Route::multicast(1, reach), src_ch: 0 }, 0)
                .await?;
        }
        conn.close(&k).await?;
    }
    k.noc_async_write_barrier().await?;
    c.gate.leave(&k, start);
    Ok(())
}

/// The entry-barrier semaphore on an op instance's core (the same core and address on every
/// chip of the op).
pub(super) const BARRIER_SEM: u64 = STAGING + 64;

/// How far rank `k`'s entry-barrier increment reaches going `forward`: to the line's end, or
/// on a ring n / 2 chips forward and the rest backward — every other rank once.
pub(super) fn barrier_reach(n: usize, k: usize, forward: bool, closed: bool) -> u32 {
    if !closed {
        return if forward { (n - 1 - k) as u32 } else { k as u32 };
    }
    (if forward { n / 2 } else { n - 1 - n / 2 }) as u32
}

/// tt-metal's entry barrier (`shared/fabric.md` §7): a zero-payload multicast increment of the
/// barrier semaphore of every rank this direction reaches, then a wait until all `ranks - 1`
/// others have arrived. Both direction kernels of a rank send their half and wait.
pub(crate) async fn entry_barrier(
    k: &Kernel,
    conn: Option<&Connection>,
    reach: u32,
    ranks: usize,
) -> Result<(), meshsim_hw::HwError> {
    if let Some(conn) = conn.filter(|_| reach > 0) {
        let me = k.my_core();
        let cmd = NocCmd::AtomicInc { sem: k.get_noc_addr(me.x, me.y, BARRIER_SEM), inc: 1, flush: false };
        conn.send(k, Header { cmd, payload: 0, route: Route::multicast(1, reach), src_ch: 0 }, 0).await?;
    }
    k.wait_until(BARRIER_SEM, Cond::Ge(ranks as u32 - 1)).await?;
    k.mark(ENTRY_BARRIER);
    Ok(())
}

/// The mark a fabric op's direction kernel leaves once its entry barrier has passed.
pub const ENTRY_BARRIER: &str = "entry barrier passed";

/// Issues NoC reads of `pages` of `place` into consecutive L1 pages at `at` (no barrier).
pub(crate) async fn issue_reads(
    k: &Kernel,
    place: &Placement,
    pages: impl IntoIterator<Item = u64>,
    at: u64,
    page: u64,
) -> meshsim_engine::TaskResult {
    for (i, q) in pages.into_iter().enumerate() {
        k.noc_async_read(page_addr(k, place, q), at + i as u64 * page, page).await?;
    }
    Ok(())
}

/// A rank's sync kernel on `core`: once the phase's gate lets it in, it waits until each
/// semaphore of `waits` reaches its count, which says every packet meant for the rank landed,
/// and then leaves the gate (the rank's end of the op).
fn sync_kernel(program: &mut Program, core: CoreRef, name: &str, gate: &Gate, waits: Vec<(u64, u32)>) {
    let g = gate.clone();
    program.create_kernel(core, name, 0, vec![], move |kn| async move {
        let start = g.enter(&kn).await;
        for (sem, want) in waits {
            kn.wait_until(sem, Cond::Ge(want)).await?;
        }
        g.leave(&kn, start);
        Ok(())
    });
}
