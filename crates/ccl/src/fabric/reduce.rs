//! Reduce-scatter on the fabric (`reduce_scatter_minimal_async`; `shared/fabric.md` §7).
//!
//! Slice j is reduced on its way to its owner, rank j, from both sides at once: on a line each
//! side runs from the line's end to the owner, on a ring each side covers half the ring (since
//! PR #41522 each full slice travels half the ring). Along a side the first rank sends its own
//! pages of slice j; every next rank adds its own pages to the partial that arrived (the sum
//! runs on the worker's own Tensix, `tile_reduce_cycles` per tile) and sends the result on;
//! the owner adds both sides' partials to its own pages and writes its output slice.
//!
//! Per chip and link (routing plane) a core runs one kernel per direction, each with its own
//! router connection, and the owner's kernel; a plane carries every `planes`-th packet of each
//! slice, so the planes are independent reduce-scatters over disjoint pages; partials land, by scatter writes, in an intermediate buffer of twice the input
//! in the receiving chip's DRAM (one half per direction), and an increment every
//! `chunks_per_sync` packets (flushed behind the writes) on the receiving chip's sync core
//! tells it how far they have come. A rank takes the slices of a direction in the order their
//! chains reach it, so every side is a pipeline.

use std::rc::Rc;

use meshsim_engine::{Cond, TaskResult, Time};
use meshsim_hw::Kernel;
use meshsim_topology::ChipIdx;
use meshsim_topology::soc::CoreCoord;

use super::build::{Inject, Lowering, entry_barrier, issue_reads, line_for, noc_of, page_addr};
use super::schedule::{RS_WINDOW, RsLane, Schedule, Side, Work, barrier_reach, plane_packets};
use super::worker::CONNECTION_L1_BYTES;
use super::{Fabric, Header, NocCmd, Route};
use crate::op::{CclError, Reduction};
use crate::phase::Phase;
use crate::tensor::{Placement, STAGING, TensorSpec};
use crate::transport::Gate;

/// What a reduce-scatter direction kernel needs.
pub(crate) struct RsCtx {
    pub fabric: Rc<Fabric>,
    /// Where the phase's kernels inject, and the phase.
    pub ports: Rc<super::mux::Ports>,
    pub phase: usize,
    /// Which of the link's workers it is (its mux client, when there are several).
    pub worker: usize,
    /// How far its entry-barrier increment reaches.
    pub barrier: u32,
    /// The router it injects into (none if no slice needs it), and its slices (the schedule's).
    pub router: Option<usize>,
    pub side: Side,
    pub n: u64,
    pub dim: usize,
    pub slice: TensorSpec,
    pub input: Placement,
    /// This direction's half of the intermediate buffer (the same address on every chip).
    pub partial: Placement,
    pub red: Reduction,
    /// Pages per packet, packets per sync.
    pub ppp: u64,
    pub per_sync: u64,
    /// The routing plane this kernel's packets take, of how many.
    pub plane: (usize, usize),
    /// This direction's semaphore: on the op's core, the same on every chip — the next rank's
    /// is incremented as partials reach it, this rank's counts those from upstream.
    pub sync: (CoreCoord, u64),
    /// Worker L1 for the connection and two packet-sized operand buffers.
    pub base: u64,
    pub max: u64,
    pub gate: Gate,
}

/// One packet a direction kernel sends: its slice, its place on the side, its pages, the
/// partial packets that must have arrived first, and whether a sync increment follows it.
struct Item {
    slice: usize,
    pos: usize,
    lo: u64,
    pages: u64,
    need: u64,
    sync_after: Option<u32>,
}

/// A reduce-scatter direction kernel: its packets in waves of reads, reductions and sends.
pub(crate) async fn side(k: Kernel, c: Rc<RsCtx>) -> TaskResult {
    let start = c.gate.enter(&k).await;
    let conn = match c.router {
        Some(r) => Some(c.ports.open(&k, c.fabric.clone(), (c.phase, r, c.worker), c.base).await?),
        None => None,
    };
    entry_barrier(&k, conn.as_ref(), c.barrier, c.n as usize).await?;
    let page = c.slice.page_bytes();
    let reduce = k.cycles(k.params().tile_reduce_cycles);
    let whole = |j: usize, q: u64| c.slice.page_in_whole(c.dim, c.n, j as u64, q);
    let mut items = Vec::new();
    for (si, &(j, pos)) in c.side.slices.iter().enumerate() {
        let mut got = c.side.received_before[si];
        for group in plane_packets(c.slice.pages(), c.ppp, c.plane).chunks(c.per_sync as usize) {
            if pos > 0 {
                got += group.len() as u64;
            }
            for (i, &(lo, pages)) in group.iter().enumerate() {
                let last = i + 1 == group.len();
                let sync_after = last.then_some(group.len() as u32);
                items.push(Item {
                    slice: j,
                    pos,
                    lo,
                    pages,
                    need: if pos > 0 { got } else { 0 },
                    sync_after,
                });
            }
        }
    }
    // Waves: issue the reads of up to RS_WINDOW packets whose partials are already here (in
    // order, stopping at the first that is not), wait for them, reduce and send them all. A
    // packet waits for its own partials only once everything before it has gone out, so no
    // side ever waits on a rank that waits on it.
    let at = |i: usize| c.base + CONNECTION_L1_BYTES + (i % RS_WINDOW) as u64 * 2 * c.max;
    let (sem_at, sem) = c.sync;
    let mut next = 0;
    while next < items.len() {
        if (k.read_u32(c.sync.1)? as u64) < items[next].need {
            k.wait_until(c.sync.1, Cond::Ge(items[next].need as u32)).await?;
        }
        // The buffers are reused: the last wave's packets must have left them.
        k.noc_async_writes_flushed().await;
        let first = next;
        while next < items.len()
            && next - first < RS_WINDOW
            && k.read_u32(c.sync.1)? as u64 >= items[next].need
        {
            let x = &items[next];
            let pages: Vec<u64> = (x.lo..x.lo + x.pages).map(|q| whole(x.slice, q)).collect();
            issue_reads(&k, &c.input, pages.iter().copied(), at(next), page).await?;
            if x.pos > 0 {
                issue_reads(&k, &c.partial, pages, at(next) + c.max, page).await?;
            }
            next += 1;
        }
        k.noc_async_read_barrier().await?;
        let conn = conn.as_ref().expect("a rank on a side sends");
        for (i, x) in items.iter().enumerate().take(next).skip(first) {
            let buf = at(i);
            if x.pos > 0 {
                if k.is_functional() {
                    let bytes = x.pages * page;
                    let mut a = k.read_bytes(buf, bytes)?;
                    c.red.reduce_words(&mut a, &k.read_bytes(buf + c.max, bytes)?);
                    k.write_bytes(buf, &a)?;
                }
                k.delay(Time(reduce.0 * x.pages)).await;
            }
            let out: Vec<u64> =
                (x.lo..x.lo + x.pages).map(|q| page_addr(&k, &c.partial, whole(x.slice, q))).collect();
            let cmd = NocCmd::pages(&out, page);
            conn.send(&k, Header { cmd, payload: x.pages * page, route: Route::unicast(1), src_ch: 0 }, buf)
                .await?;
            if let Some(inc) = x.sync_after {
                let cmd =
                    NocCmd::AtomicInc { sem: k.get_noc_addr(sem_at.x, sem_at.y, sem), inc, flush: true };
                conn.send(&k, Header { cmd, payload: 0, route: Route::unicast(1), src_ch: 0 }, 0).await?;
            }
        }
    }
    if let Some(conn) = &conn {
        conn.close(&k).await?;
    }
    c.gate.leave(&k, start);
    Ok(())
}

/// What the owner's kernel needs: its slice, both sides' partials and how many packets each
/// side delivers in all.
pub(crate) struct OwnerCtx {
    pub rank: usize,
    pub n: u64,
    pub dim: usize,
    pub slice: TensorSpec,
    pub input: Placement,
    pub output: Placement,
    /// (partial buffer, semaphore, packets of earlier slices its side delivers first) per side
    /// that has ranks.
    pub sides: Vec<(Placement, u64, u64)>,
    /// Packets of the slice each side delivers, and how many each of its increments counts.
    pub slice_packets: u64,
    pub per_sync: u64,
    pub red: Reduction,
    pub ppp: u64,
    /// The routing plane whose packets this owner reduces, of how many.
    pub plane: (usize, usize),
    pub base: u64,
    pub max: u64,
    pub gate: Gate,
}

/// The owner: adds both sides' partials to its own pages as they arrive, a sync group at a
/// time (each side's increment after every `per_sync` packets says the group has landed), and
/// writes its slice. Its reads run a packet ahead of its sums, as tt-metal's reader kernel
/// fills the compute kernel's circular buffers while the compute adds: two buffers, packet
/// i + 1's pages on their way (once its group has landed) while packet i is reduced.
pub(crate) async fn owner(k: Kernel, c: Rc<OwnerCtx>) -> TaskResult {
    let start = c.gate.enter(&k).await;
    let page = c.slice.page_bytes();
    let reduce = k.cycles(k.params().tile_reduce_cycles);
    let whole = |q: u64| c.slice.page_in_whole(c.dim, c.n, c.rank as u64, q);
    let packets = plane_packets(c.slice.pages(), c.ppp, c.plane);
    let operands = 1 + c.sides.len() as u64;
    let acc = |i: usize| c.base + (i % 2) as u64 * operands * c.max;
    // A side whose increments have not yet counted packet i's sync group: its semaphore and
    // the count it needs.
    let short = |i: usize| -> Result<Option<(u64, u32)>, meshsim_engine::TaskError> {
        let group = ((i as u64 / c.per_sync + 1) * c.per_sync).min(c.slice_packets);
        for &(_, sem, before) in &c.sides {
            if (k.read_u32(sem)? as u64) < before + group {
                return Ok(Some((sem, (before + group) as u32)));
            }
        }
        Ok(None)
    };
    let issue = |i: usize| {
        let (k, c) = (k.clone(), c.clone());
        let (lo, pages) = packets[i];
        let at = acc(i);
        async move {
            issue_reads(&k, &c.input, (lo..lo + pages).map(whole), at, page).await?;
            for (s, (partial, _, _)) in c.sides.iter().enumerate() {
                let to = at + (s as u64 + 1) * c.max;
                issue_reads(&k, partial, (lo..lo + pages).map(whole), to, page).await?;
            }
            Ok::<(), meshsim_engine::TaskError>(())
        }
    };
    let mut issued = 0;
    for (i, &(lo, pages)) in packets.iter().enumerate() {
        if issued == i {
            while let Some((sem, want)) = short(i)? {
                k.wait_until(sem, Cond::Ge(want)).await?;
            }
            k.noc_async_writes_flushed().await;
            issue(i).await?;
            issued += 1;
        }
        k.noc_async_read_barrier().await?;
        // The next packet's reads go out now if its partials are here: its buffer is packet
        // i - 1's, whose writes must have left.
        if i + 1 < packets.len() && short(i + 1)?.is_none() {
            k.noc_async_writes_flushed().await;
            issue(i + 1).await?;
            issued += 1;
        }
        let at = acc(i);
        if k.is_functional() {
            let bytes = pages * page;
            let mut a = k.read_bytes(at, bytes)?;
            for s in 0..c.sides.len() {
                c.red.reduce_words(&mut a, &k.read_bytes(at + (s as u64 + 1) * c.max, bytes)?);
            }
            k.write_bytes(at, &a)?;
        }
        k.delay(Time(reduce.0 * pages * c.sides.len() as u64)).await;
        for (x, q) in (lo..lo + pages).enumerate() {
            k.noc_async_write(at + x as u64 * page, page_addr(&k, &c.output, q), page).await?;
        }
    }
    k.noc_async_write_barrier().await?;
    c.gate.leave(&k, start);
    Ok(())
}

/// What a lane's owner kernels share.
struct Owners<'a> {
    tensors: crate::phase::Tensors,
    red: &'a Reduction,
    ppp: u64,
    base: u64,
    max: u64,
    gate: &'a Gate,
    name: String,
    /// Each direction's partial buffer and semaphore.
    partial: [Placement; 2],
    sems: [u64; 2],
}

/// Every rank's owner kernel of `lane` on `core`: it waits for each side's partial of its
/// slice — through it, the side has delivered the packets the schedule says and then the
/// slice's — and reduces them with its own pages into its output.
fn install_owners(
    cx: &mut Lowering,
    chips: &[ChipIdx],
    core: meshsim_hw::CoreRef,
    lane: &RsLane,
    o: &Owners,
) {
    let t = o.tensors;
    for (k, &chip) in chips.iter().enumerate() {
        let sides = lane.owners[k].iter().map(|&(d, before)| (o.partial[d], o.sems[d], before)).collect();
        let ctx = Rc::new(OwnerCtx {
            rank: k,
            n: t.n,
            dim: t.dim,
            slice: t.slice,
            input: t.input,
            output: t.output,
            sides,
            slice_packets: lane.packets.len() as u64,
            per_sync: lane.per_sync,
            red: o.red.clone(),
            ppp: o.ppp,
            plane: lane.on,
            base: o.base,
            max: o.max,
            gate: o.gate.clone(),
        });
        cx.program(chip).create_kernel(core, &o.name, 0, vec![], move |kn| owner(kn, ctx));
    }
}

/// What a lane's direction kernels share beyond the phase.
struct Sides {
    pi: usize,
    line: usize,
    core: meshsim_hw::CoreRef,
    /// The first kernel's buffer, and the stride between the two directions'.
    base: u64,
    stride: u64,
    name: String,
    suffix: String,
}

/// Every rank's two direction kernels of `lane`: each takes its slices on its side as the
/// schedule orders them and injects into the router toward its next rank. Returns the routers,
/// with the worker.
fn install_sides(
    cx: &mut Lowering,
    p: &Phase,
    (sched, lane): (&Schedule, &RsLane),
    o: &Sides,
    (partial, sems, gate): (&[Placement; 2], &[u64; 2], &Gate),
) -> Vec<Inject> {
    let (s, fabric) = (cx.s, cx.fabric);
    let req = &s.ops[p.op];
    let (t, n) = (p.tensors, sched.ranks());
    let red = req.reduction().expect("a reduction");
    let mut routers = Vec::new();
    for (k, mine) in lane.sides.iter().enumerate() {
        for (d, forward) in [true, false].into_iter().enumerate() {
            let work = mine[d].clone();
            let next = if forward { (k + 1) % n } else { (k + n - 1) % n };
            let router = (!work.slices.is_empty()).then(|| {
                fabric
                    .router_facing(o.line, lane.plane, req.comm.chips()[k], req.comm.chips()[next])
                    .expect("a router toward each neighbour")
            });
            routers.extend(router.map(|r| (r, lane.worker)));
            let ctx = Rc::new(RsCtx {
                ports: cx.ports.clone(),
                phase: o.pi,
                worker: lane.worker,
                barrier: barrier_reach(n, k, forward, sched.ring()),
                fabric: fabric.clone(),
                router,
                side: work,
                n: t.n,
                dim: t.dim,
                slice: t.slice,
                input: t.input,
                partial: partial[d],
                red: red.clone(),
                ppp: sched.ppp,
                per_sync: lane.per_sync,
                plane: lane.on,
                sync: (noc_of(s.cluster, o.core), sems[d]),
                base: o.base + d as u64 * o.stride,
                max: sched.payload,
                gate: gate.clone(),
            });
            let name = format!("{} {}{}", o.name, if forward { "forward" } else { "backward" }, o.suffix);
            cx.program(req.comm.chips()[k]).create_kernel(o.core, &name, d, vec![], move |kn| side(kn, ctx));
        }
    }
    routers
}

/// Lowers reduce-scatter phase `pi` (see [`super::reduce`]) as `sched` says; returns the
/// routers it injects into.
pub(super) fn lower(
    cx: &mut Lowering,
    pi: usize,
    p: &Phase,
    sched: &Schedule,
) -> Result<Vec<Inject>, CclError> {
    let (s, fabric) = (cx.s, cx.fabric);
    let req = &s.ops[p.op];
    let t = p.tensors;
    let red = req.reduction().expect("a reduction");
    let n = req.comm.size();
    let Work::ReduceScatter { lanes } = &sched.work else { unreachable!("a reduce-scatter schedule") };
    let (page, max, planes, workers) = (sched.page, sched.payload, sched.planes, sched.workers);
    let line = line_for(fabric, req).0;
    // Twice the input, one whole tensor per direction, above everything else; the lanes
    // reduce disjoint pages of it.
    let whole = t.slice.pages() * t.n;
    let partial = [cx.scratch(page, whole), cx.scratch(page, whole)];
    let sems = [STAGING, STAGING + 16];
    // Two direction kernels and the owner per rank and lane.
    let gate = s.gate(pi, 3 * n * planes * workers);
    let prefix = s.kernel_prefix(p.op);
    let stride = CONNECTION_L1_BYTES + 2 * RS_WINDOW as u64 * max;
    let mut routers = Vec::new();
    for lane in lanes {
        let core = cx.take_core(req.comm.chips())?;
        let (plane, w) = (lane.plane, lane.worker);
        let suffix = [(planes > 1, format!(" plane{plane}")), (workers > 1, format!(" worker{w}"))]
            .into_iter()
            .filter_map(|(named, part)| named.then_some(part))
            .collect::<String>();
        let sides = Sides {
            pi,
            line,
            core,
            base: STAGING + 0x100,
            stride,
            name: format!("{prefix}rs"),
            suffix: suffix.clone(),
        };
        routers.extend(install_sides(cx, p, (sched, lane), &sides, (&partial, &sems, &gate)));
        let owners = Owners {
            tensors: t,
            red: &red,
            ppp: sched.ppp,
            base: STAGING + 0x100 + 2 * stride,
            max,
            gate: &gate,
            name: format!("{prefix}rs owner{suffix}"),
            partial,
            sems,
        };
        install_owners(cx, req.comm.chips(), core, lane, &owners);
    }
    Ok(routers)
}
