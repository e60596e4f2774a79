//! Point-to-point collectives on the fabric (`shared/fabric.md` §7, `all_to_all @ad82055e`):
//! per rank one core on link 0 whose two kernels cover the two directions, sending each
//! destination's chunk as unicast packets straight into its place, then a flushed increment —
//! all-to-all, gather, scatter and send/receive — and the direct reductions built on the same
//! senders: the one-shot reduce-scatter and the reduce to a root, whose owners' reducer cores
//! add every contribution as it lands.

use std::rc::Rc;

use meshsim_engine::{Cond, Time};
use meshsim_hw::{CoreRef, Kernel, Wake};
use meshsim_topology::ChipIdx;
use meshsim_topology::soc::CoreCoord;

use super::algo::Pairs;
use super::build::{Lowering, entry_barrier, issue_reads, line_for, noc_of, page_addr, sync_kernel};
use super::mux::Ports;
use super::schedule::{A2A_WINDOW, Schedule, Work, packets, plane_packets};
use super::worker::CONNECTION_L1_BYTES;
use super::{Fabric, Header, NocCmd, Route};
use crate::op::CclError;
use crate::phase::{Phase, Tensors};
use crate::plan::routed::{Place, Transfer};
use crate::plan::{Copy, Dir, Loc};
use crate::tensor::{Placement, STAGING, STAGING_END};
use crate::transport::Gate;

/// Lowers an all-to-all, gather, scatter or send/receive phase `pi` (`shared/fabric.md` §7,
/// `all_to_all @ad82055e`): per rank one core on link 0 whose two kernels cover the two
/// directions (a line's sides; on a ring the shorter way), each sending its destinations'
/// chunks from the farthest in, as unicast packets of up to 2 pages straight into the
/// destination's output, each chunk followed by a flushed increment of the destination's
/// semaphore. All-to-all sends chunk j to every rank j; a gather has the root as the only
/// destination, a scatter as the only source, a send/receive rank 0 to rank 1. A rank that
/// keeps a chunk (all-to-all's ranks, a gather's or scatter's root) copies it locally. A
/// rank's op ends when its semaphore has counted every chunk meant for it.
pub(super) fn point_to_point(
    cx: &mut Lowering,
    pi: usize,
    p: &Phase,
    pairs: Pairs,
    sched: &Schedule,
) -> Result<Vec<usize>, CclError> {
    let s = cx.s;
    let req = &s.ops[p.op];
    let t = p.tensors;
    let n = req.comm.size();
    let Work::PointToPoint { arriving, .. } = &sched.work else { unreachable!("a point-to-point schedule") };
    let core = cx.take_core(req.comm.chips())?;
    let gate = s.gate(pi, 3 * n);
    let name = pairs.name();
    let sends =
        Sends { core, land: t.output, signal: vec![noc_of(s.cluster, core)], per_source: false, name };
    let routers = chunk_senders(cx, pi, p, sched, &sends, &gate);
    let prefix = s.kernel_prefix(p.op);
    for (k, &chip) in req.comm.chips().iter().enumerate() {
        let expect = arriving[k];
        sync_kernel(
            cx.program(chip),
            core,
            &format!("{prefix}{name} sync"),
            &gate,
            vec![(STAGING, expect as u32)],
        );
    }
    Ok(routers)
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
    /// The kernels' name.
    name: &'static str,
}

/// Installs the schedule's chunk senders (`shared/fabric.md` §7, all-to-all): per rank two
/// direction kernels on one core on link 0, each covering one direction (a line's side; on a
/// ring the shorter way, the antipode forward), destinations farthest first; the kernel the
/// plan names ([`Routed::copies_going`]) also copies an all-to-all rank's own chunk. Returns
/// the routers they inject into.
///
/// [`Routed::copies_going`]: crate::plan::routed::Routed::copies_going
fn chunk_senders(
    cx: &mut Lowering,
    pi: usize,
    p: &Phase,
    sched: &Schedule,
    x: &Sends,
    gate: &Gate,
) -> Vec<usize> {
    let (s, fabric) = (cx.s, cx.fabric);
    let req = &s.ops[p.op];
    let t = p.tensors;
    let n = req.comm.size();
    let Work::PointToPoint { senders, .. } = &sched.work else { unreachable!("a point-to-point schedule") };
    let line = line_for(fabric, req).0;
    let prefix = s.kernel_prefix(p.op);
    let mut routers = Vec::new();
    for w in senders {
        let (k, chip) = (w.rank, req.comm.chips()[w.rank]);
        let forward = w.dir == Dir::Forward;
        let d = usize::from(!forward);
        let next = if forward { (k + 1) % n } else { (k + n - 1) % n };
        // Every rank takes part in the entry barrier, whether it sends or not.
        let router = (w.barrier > 0).then(|| {
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
            dests: w.sends.clone(),
            own: w.own,
            barrier: w.barrier,
            rank: k,
            n_ranks: n,
            t,
            land: x.land,
            signal: x.signal.clone(),
            per_source: x.per_source,
            ppp: sched.ppp,
            base: STAGING + 0x100 + d as u64 * (CONNECTION_L1_BYTES + A2A_WINDOW as u64 * sched.payload),
            max: sched.payload,
            gate: gate.clone(),
        });
        let name = format!("{prefix}{} {}", x.name, if forward { "forward" } else { "backward" });
        cx.program(chip).create_kernel(x.core, &name, d, vec![], move |kn| send_chunks(kn, ctx));
    }
    routers
}

/// Lowers a direct reduction, phase `pi` (`shared/fabric.md` §7): a reduce-scatter's one-shot
/// path, where every rank unicasts slice j of its input straight to rank j, or a reduce's,
/// where every other rank unicasts its whole input to the root. All-to-all's senders carry the
/// chunks (one core on link 0 whose two kernels take the shorter way, farthest destination
/// first) into the owner's receive buffer, each followed by an increment of that source's
/// semaphore on each of the owner's reducer cores. The reducers add every contribution to the
/// owner's own pages as it completes, each on its share, and write the output.
pub(super) fn direct_reduction(
    cx: &mut Lowering,
    pi: usize,
    p: &Phase,
    sched: &Schedule,
) -> Result<Vec<usize>, CclError> {
    let s = cx.s;
    let req = &s.ops[p.op];
    let t = p.tensors;
    let red = req.reduction().expect("a reduction");
    let n = req.comm.size();
    let root = req.collective.root();
    // The ranks that own a result: every rank of a reduce-scatter, a reduce's root.
    let owners: Vec<usize> = root.map_or((0..n).collect(), |r| vec![r]);
    let owner_chips: Vec<ChipIdx> = owners.iter().map(|&k| req.comm.chip(k)).collect();
    let Work::PointToPoint { reducers, .. } = &sched.work else { unreachable!("a point-to-point schedule") };
    let (page, ppp) = (sched.page, sched.ppp);
    // Every owner's receive buffer: one chunk per source rank.
    let recv = cx.scratch(page, t.slice.pages() * n as u64);
    let sender = cx.take_core(req.comm.chips())?;
    let reducers: Vec<CoreRef> =
        (0..*reducers).map(|_| cx.take_core(&owner_chips)).collect::<Result<_, _>>()?;
    // One flushed increment per chunk crosses the fabric, to the first reducer's core, as
    // all-to-all's chunks end with one; a fan-out kernel there passes it on to the others.
    let cores: Vec<CoreCoord> = reducers.iter().map(|&c| noc_of(s.cluster, c)).collect();
    let signal = cores[..1].to_vec();
    let fan_outs = usize::from(cores.len() > 1) * owners.len();
    let gate = s.gate(pi, 2 * n + reducers.len() * owners.len() + fan_outs);
    let prefix = s.kernel_prefix(p.op);
    // The senders' name, and the reducers'.
    let (name, reducer) =
        if root.is_some() { ("reduce direct", "reduce direct") } else { ("rs direct", "rs direct reduce") };
    let sends = Sends { core: sender, land: recv, signal, per_source: true, name };
    let routers = chunk_senders(cx, pi, p, sched, &sends, &gate);
    let block_pages = ((STAGING_END - REDUCER_BASE) / (2 * page)).max(1) as usize;
    for (&k, &chip) in owners.iter().zip(&owner_chips) {
        if fan_outs > 0 {
            let ctx = Rc::new(FanOut { rank: k, ranks: n, others: cores[1..].to_vec(), gate: gate.clone() });
            cx.program(chip).create_kernel(
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
                base: REDUCER_BASE,
                block_pages,
                gate: gate.clone(),
            });
            let kernel = format!("{prefix}{reducer} {r}");
            cx.program(chip).create_kernel(core, &kernel, 0, vec![], move |kn| direct_reduce(kn, ctx));
        }
    }
    Ok(routers)
}

/// Where a direct reduction's reducer keeps its running sum and one contribution, above its
/// per-source semaphores.
const REDUCER_BASE: u64 = STAGING + 0x1000;

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
    /// Pages of its share it sums at once: as many as a running sum and one contribution
    /// of them fit between `base` and the end of the staging area.
    block_pages: usize,
    gate: Gate,
}

/// A direct reduce-scatter reducer: its share of the rank's own slice, then each source's
/// contribution added as soon as that source's chunk has landed, then the output. A share
/// larger than the reducer's staging (a running sum and one contribution) goes through it in
/// blocks, as a reduction kernel streams tiles through its circular buffers: the first block
/// takes the sources as they land, the later ones in the same order, each block's sums
/// flushed out before the next is read over them.
async fn direct_reduce(k: Kernel, c: Rc<DirectReducer>) -> meshsim_engine::TaskResult {
    let start = c.gate.enter(&k).await;
    let page = c.t.slice.page_bytes();
    let reduce = k.cycles(k.params().tile_reduce_cycles);
    let mine: Vec<u64> = plane_packets(c.t.slice.pages(), c.ppp, c.share)
        .into_iter()
        .flat_map(|(lo, pages)| lo..lo + pages)
        .collect();
    let whole = |j: usize, q: u64| {
        if c.to_root {
            j as u64 * c.t.slice.pages() + q
        } else {
            c.t.slice.page_in_whole(c.t.dim, c.t.n, j as u64, q)
        }
    };
    let own = |q: u64| if c.to_root { q } else { whole(c.rank, q) };
    let mut pending: Vec<usize> = (0..c.ranks).filter(|&j| j != c.rank).collect();
    let mut landed: Vec<usize> = Vec::with_capacity(pending.len());
    let blocks: Vec<&[u64]> = mine.chunks(c.block_pages).collect();
    for (b, block) in blocks.iter().enumerate() {
        let bytes = block.len() as u64 * page;
        let (acc, tmp) = (c.base, c.base + bytes);
        issue_reads(&k, &c.t.input, block.iter().map(|&q| own(q)), acc, page).await?;
        k.noc_async_read_barrier().await?;
        for i in 0..c.ranks - 1 {
            let j = match landed.get(i) {
                Some(&j) => j,
                None => {
                    let j = next_landed(&k, &mut pending).await?;
                    landed.push(j);
                    j
                }
            };
            issue_reads(&k, &c.recv, block.iter().map(|&q| whole(j, q)), tmp, page).await?;
            k.noc_async_read_barrier().await?;
            if k.is_functional() {
                let mut a = k.read_bytes(acc, bytes)?;
                c.red.reduce_words(&mut a, &k.read_bytes(tmp, bytes)?);
                k.write_bytes(acc, &a)?;
            }
            k.delay(Time(reduce.0 * block.len() as u64)).await;
        }
        for (x, &q) in block.iter().enumerate() {
            k.noc_async_write(acc + x as u64 * page, page_addr(&k, &c.t.output, q), page).await?;
        }
        if b + 1 < blocks.len() {
            k.noc_async_writes_flushed().await;
        }
    }
    k.noc_async_write_barrier().await?;
    c.gate.leave(&k, start);
    Ok(())
}

/// What an all-to-all direction kernel needs.
struct A2aCtx {
    /// Where the phase's kernels inject, and the phase.
    ports: Rc<Ports>,
    phase: usize,
    fabric: Rc<Fabric>,
    router: Option<usize>,
    /// Its transfers, in order (farthest destination first).
    dests: Vec<Transfer>,
    /// The rank's own chunk it copies, if it does.
    own: Option<Copy>,
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
    // Page q of a chunk where the plan reads or lands it: a whole tensor's chunk, a slice's
    // own pages, or a receive buffer's slot by source.
    let at = |place: Place, q: u64| match place.loc {
        Loc::InputWhole | Loc::OutputWhole | Loc::Scratch => whole(place.slot, q),
        Loc::InputSlice | Loc::OutputSlice => q,
        Loc::Receive => place.slot as u64 * c.t.slice.pages() + q,
        Loc::Relay => unreachable!("point-to-point chunks are not relayed"),
    };
    let buf = |i: usize| c.base + CONNECTION_L1_BYTES + (i % A2A_WINDOW) as u64 * c.max;
    let conn = match c.router {
        Some(r) => Some(c.ports.open(&k, c.fabric.clone(), (c.phase, r, 0), c.base).await?),
        None => None,
    };
    entry_barrier(&k, conn.as_ref(), c.barrier, c.n_ranks).await?;
    if let Some(conn) = &conn {
        let packets = packets(c.t.slice.pages(), c.ppp);
        let sem = if c.per_source { source_sem(c.rank) } else { STAGING };
        for tr in &c.dests {
            let route = Route::unicast(tr.hops as u32);
            for wave in packets.chunks(A2A_WINDOW) {
                k.noc_async_writes_flushed().await;
                for (i, &(lo, pages)) in wave.iter().enumerate() {
                    issue_reads(&k, &c.t.input, (lo..lo + pages).map(|q| at(tr.src, q)), buf(i), page)
                        .await?;
                }
                k.noc_async_read_barrier().await?;
                for (i, &(lo, pages)) in wave.iter().enumerate() {
                    let out: Vec<u64> =
                        (lo..lo + pages).map(|q| page_addr(&k, &c.land, at(tr.to, q))).collect();
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
    if let Some(own) = c.own {
        // The rank's own chunk stays: from its place in the input to its place in the output,
        // in the sends' waves of packet-sized reads and writes.
        let (from, to) = (Place { loc: own.from, slot: own.slice }, Place { loc: own.to, slot: own.slice });
        for wave in packets(c.t.slice.pages(), c.ppp).chunks(A2A_WINDOW) {
            k.noc_async_writes_flushed().await;
            for (i, &(lo, pages)) in wave.iter().enumerate() {
                issue_reads(&k, &c.t.input, (lo..lo + pages).map(|q| at(from, q)), buf(i), page).await?;
            }
            k.noc_async_read_barrier().await?;
            for (i, &(lo, pages)) in wave.iter().enumerate() {
                for (y, q) in (lo..lo + pages).enumerate() {
                    let dst = page_addr(&k, &c.t.output, at(to, q));
                    k.noc_async_write(buf(i) + y as u64 * page, dst, page).await?;
                }
            }
        }
    }
    k.noc_async_write_barrier().await?;
    c.gate.leave(&k, start);
    Ok(())
}
