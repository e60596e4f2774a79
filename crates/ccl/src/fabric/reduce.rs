//! Reduce-scatter on the fabric (`reduce_scatter_minimal_async`; `shared/fabric.md` §7, §11.3).
//!
//! The schedule ([`super::schedule::RsLane`]) says what every worker does, step by step: slice
//! j is reduced on its way to its owner, rank j, from both sides at once, each rank on a side
//! adding its own pages to the partial that arrived and sending the sum on; on an even ring the
//! sides start at the antipode and share its chunks by parity, and the owner's final add is
//! split by parity between its two workers (pipelined per chunk on a line).
//!
//! Per chip, lane (plane × worker index) and direction a worker is three kernels on one core,
//! as tt-metal builds it: a reader that reads each packet's operands (its own input pages, and
//! the partials that landed) into a circular buffer, a compute kernel that adds them
//! (`tile_reduce_cycles` per page and add) into a second one, and a writer that sends each sum
//! through its router connection into the next rank's partial buffer (a ring's backward side
//! into the owner's output) or writes the final sums into the rank's output. The circular
//! buffers hold [`RS_CB_CHUNKS`] chunks each, so reads, adds and sends overlap. Partials land
//! by scatter writes in an intermediate buffer of twice the input in each chip's DRAM (one half
//! per direction), and an increment every `per_sync` packets (flushed behind the writes) on
//! the receiving chip's worker core tells its reader how far they have come. Only the writer
//! waits for the entry barrier: the reader's DRAM reads and the sums start at once.

use std::rc::Rc;

use meshsim_engine::{Cond, TaskResult, Time};
use meshsim_hw::Kernel;
use meshsim_topology::soc::CoreCoord;

use super::build::{Inject, Lowering, entry_barrier, line_for, noc_of, page_addr};
use super::schedule::{RS_CB_CHUNKS, RsBuf, RsItem, RsLane, Schedule, Work, barrier_reach};
use super::worker::CONNECTION_L1_BYTES;
use super::{Fabric, Header, NocCmd, Route};
use crate::op::{CclError, Reduction};
use crate::phase::Phase;
use crate::tensor::{Placement, STAGING, TensorSpec};
use crate::transport::Gate;

/// What a reduce-scatter worker's three kernels share: its items, buffers and semaphores.
pub(crate) struct RsCtx {
    pub fabric: Rc<Fabric>,
    /// Where the phase's kernels inject, and the phase.
    pub ports: Rc<super::mux::Ports>,
    pub phase: usize,
    /// Which of the link's workers it is (its mux client, when there are several).
    pub worker: usize,
    /// How far its writer's entry-barrier increment reaches, of how many ranks.
    pub barrier: u32,
    pub ranks: usize,
    /// The router its writer injects into (none if it sends nothing), its direction (0
    /// forward).
    pub router: Option<usize>,
    pub dir: usize,
    /// Its packets, in order, and the lane's packets they index.
    pub items: Vec<RsItem>,
    pub packets: Vec<(u64, u64)>,
    pub per_chunk: u64,
    pub n: u64,
    pub dim: usize,
    pub slice: TensorSpec,
    pub input: Placement,
    /// Each direction's half of the intermediate buffer (the same address on every chip).
    pub partial: [Placement; 2],
    pub output: Placement,
    pub red: Reduction,
    /// The worker core and its semaphores: forward and backward arrivals, the handoff.
    pub core: CoreCoord,
    pub sems: [u64; 3],
    /// Worker L1 for the connection, the circular buffers' counters and slots.
    pub base: u64,
    pub max: u64,
    pub gate: Gate,
}

impl RsCtx {
    /// Packets each circular buffer holds.
    fn depth(&self) -> u64 {
        RS_CB_CHUNKS * self.per_chunk
    }

    /// The counters of packets read, added and sent (their slots freed).
    fn counters(&self) -> [u64; 3] {
        let at = self.base + CONNECTION_L1_BYTES;
        [at, at + 16, at + 32]
    }

    /// Item `i`'s slot: room for three operands, the sum in the first.
    fn slot(&self, i: usize) -> u64 {
        let slots = 2 * self.depth();
        self.base + CONNECTION_L1_BYTES + 64 + (i as u64 % slots) * 3 * self.max
    }

    /// Bytes L1 a worker takes from its base, for packets of at most `max` bytes.
    fn l1_bytes(per_chunk: u64, max: u64) -> u64 {
        CONNECTION_L1_BYTES + 64 + 2 * RS_CB_CHUNKS * per_chunk * 3 * max
    }

    /// Consecutive items of one chunk: what the reader reads and the writer sends at once.
    fn groups(&self) -> Vec<std::ops::Range<usize>> {
        let chunk = |x: &RsItem| (x.slice, x.packet as u64 / self.per_chunk);
        let mut out: Vec<std::ops::Range<usize>> = Vec::new();
        for (i, x) in self.items.iter().enumerate() {
            match out.last_mut() {
                Some(g) if chunk(&self.items[g.start]) == chunk(x) => g.end = i + 1,
                _ => out.push(i..i + 1),
            }
        }
        out
    }

    /// Where page `q` of slice `j` is in `buf` (the same on every chip).
    fn addr(&self, k: &Kernel, buf: RsBuf, j: usize, q: u64) -> u64 {
        let whole = || self.slice.page_in_whole(self.dim, self.n, j as u64, q);
        match buf {
            RsBuf::Input => page_addr(k, &self.input, whole()),
            RsBuf::Partial(d) => page_addr(k, &self.partial[d], whole()),
            RsBuf::Output => page_addr(k, &self.output, q),
        }
    }
}

/// Waits until the local counter at `addr` reaches `want` (at once if it has).
async fn reach(k: &Kernel, addr: u64, want: u64) -> TaskResult {
    if want > 0 && (k.read_u32(addr)? as u64) < want {
        k.wait_until(addr, Cond::Ge(want as u32)).await?;
    }
    Ok(())
}

/// The reader: chunk by chunk, once its slots are free and the partials it adds have landed,
/// reads every operand's pages into the slots and hands them to the compute kernel.
pub(crate) async fn reader(k: Kernel, c: Rc<RsCtx>) -> TaskResult {
    let start = c.gate.enter(&k).await;
    let page = c.slice.page_bytes();
    let [read, added, sent] = c.counters();
    let depth = c.depth();
    for g in c.groups() {
        let end = g.end as u64;
        reach(&k, added, end.saturating_sub(depth)).await?;
        reach(&k, sent, end.saturating_sub(2 * depth)).await?;
        for s in 0..3 {
            reach(&k, c.sems[s], c.items[g.clone()].iter().map(|x| x.need[s]).max().unwrap_or(0)).await?;
        }
        for i in g.clone() {
            let x = &c.items[i];
            let (lo, pages) = c.packets[x.packet];
            for (o, buf) in x.part.reads.into_iter().flatten().enumerate() {
                for q in lo..lo + pages {
                    let to = c.slot(i) + o as u64 * c.max + (q - lo) * page;
                    k.noc_async_read(c.addr(&k, buf, x.slice, q), to, page).await?;
                }
            }
        }
        k.noc_async_read_barrier().await?;
        k.add_u32(read, g.len() as u32)?;
    }
    c.gate.leave(&k, start);
    Ok(())
}

/// The compute kernel: adds each packet's operands into its first, `tile_reduce_cycles` per
/// page and add, once the writer has room for it.
pub(crate) async fn compute(k: Kernel, c: Rc<RsCtx>) -> TaskResult {
    let start = c.gate.enter(&k).await;
    let page = c.slice.page_bytes();
    let reduce = k.cycles(k.params().tile_reduce_cycles);
    let [read, added, sent] = c.counters();
    for (i, x) in c.items.iter().enumerate() {
        reach(&k, read, i as u64 + 1).await?;
        reach(&k, sent, (i as u64 + 1).saturating_sub(c.depth())).await?;
        let adds = x.part.adds();
        if adds > 0 {
            let pages = c.packets[x.packet].1;
            if k.is_functional() {
                let (at, bytes) = (c.slot(i), pages * page);
                let mut a = k.read_bytes(at, bytes)?;
                for o in 1..=adds {
                    c.red.reduce_words(&mut a, &k.read_bytes(at + o * c.max, bytes)?);
                }
                k.write_bytes(at, &a)?;
            }
            k.delay(Time(reduce.0 * pages * adds)).await;
        }
        k.add_u32(added, 1)?;
    }
    c.gate.leave(&k, start);
    Ok(())
}

/// The writer: past the entry barrier, sends each sum into the next rank's buffer (with an
/// increment of its semaphore after every sync group) or writes it into the rank's output
/// (handing each chunk to the backward worker where the schedule says), and frees the slots
/// a chunk at a time once its writes have left.
pub(crate) async fn writer(k: Kernel, c: Rc<RsCtx>) -> TaskResult {
    let start = c.gate.enter(&k).await;
    let conn = match c.router {
        Some(r) => Some(c.ports.open(&k, c.fabric.clone(), (c.phase, r, c.worker), c.base).await?),
        None => None,
    };
    entry_barrier(&k, conn.as_ref(), c.barrier, c.ranks).await?;
    let page = c.slice.page_bytes();
    let [_, added, sent] = c.counters();
    for g in c.groups() {
        for i in g.clone() {
            reach(&k, added, i as u64 + 1).await?;
            let x = &c.items[i];
            let (lo, pages) = c.packets[x.packet];
            let at = c.slot(i);
            let Some(buf) = x.part.send else {
                for q in lo..lo + pages {
                    k.noc_async_write(at + (q - lo) * page, c.addr(&k, RsBuf::Output, x.slice, q), page)
                        .await?;
                }
                if x.signal {
                    k.noc_async_write_barrier().await?;
                    k.add_u32(c.sems[2], 1)?;
                }
                continue;
            };
            let conn = conn.as_ref().expect("a worker that sends has a router");
            let out: Vec<u64> = (lo..lo + pages).map(|q| c.addr(&k, buf, x.slice, q)).collect();
            let cmd = NocCmd::pages(&out, page);
            conn.send(&k, Header { cmd, payload: pages * page, route: Route::unicast(1), src_ch: 0 }, at)
                .await?;
            if let Some(inc) = x.sync_after {
                let sem = k.get_noc_addr(c.core.x, c.core.y, c.sems[c.dir]);
                let cmd = NocCmd::AtomicInc { sem, inc, flush: true };
                conn.send(&k, Header { cmd, payload: 0, route: Route::unicast(1), src_ch: 0 }, 0).await?;
            }
        }
        k.noc_async_writes_flushed().await;
        k.add_u32(sent, g.len() as u32)?;
    }
    k.noc_async_write_barrier().await?;
    if let Some(conn) = &conn {
        conn.close(&k).await?;
    }
    c.gate.leave(&k, start);
    Ok(())
}

/// What every worker of a lane shares beyond the phase.
struct LaneCx<'a> {
    pi: usize,
    line: usize,
    core: meshsim_hw::CoreRef,
    name: String,
    suffix: String,
    partial: [Placement; 2],
    gate: &'a Gate,
}

/// Every rank's two workers of `lane` (three kernels each, on the lane's core); returns the
/// routers their writers inject into, with the worker.
fn install_workers(cx: &mut Lowering, p: &Phase, sched: &Schedule, lane: &RsLane, o: &LaneCx) -> Vec<Inject> {
    let (s, fabric) = (cx.s, cx.fabric);
    let req = &s.ops[p.op];
    let (t, n, ring) = (p.tensors, sched.ranks(), sched.ring());
    let red = req.reduction().expect("a reduction");
    let chips = req.comm.chips();
    let stride = RsCtx::l1_bytes(lane.per_chunk, sched.payload);
    let mut routers = Vec::new();
    for k in 0..n {
        for (d, forward) in [true, false].into_iter().enumerate() {
            let items = lane.items(n, ring, k, d);
            let next = if forward { (k + 1) % n } else { (k + n - 1) % n };
            // A worker on a side connects to its router even when the lane has no packets,
            // for the entry barrier.
            let sends =
                lane.steps[k][d].iter().flat_map(|s| s.parts.iter().flatten()).any(|p| p.send.is_some());
            let router = sends.then(|| {
                fabric
                    .router_facing(o.line, lane.plane, chips[k], chips[next])
                    .expect("a router toward each neighbour")
            });
            routers.extend(router.map(|r| (r, lane.worker)));
            let ctx = Rc::new(RsCtx {
                fabric: fabric.clone(),
                ports: cx.ports.clone(),
                phase: o.pi,
                worker: lane.worker,
                barrier: barrier_reach(n, k, forward, ring),
                ranks: n,
                router,
                dir: d,
                items,
                packets: lane.packets.clone(),
                per_chunk: lane.per_chunk,
                n: t.n,
                dim: t.dim,
                slice: t.slice,
                input: t.input,
                partial: o.partial,
                output: t.output,
                red: red.clone(),
                core: noc_of(s.cluster, o.core),
                sems: RS_SEMS,
                base: STAGING + 0x100 + d as u64 * stride,
                max: sched.payload,
                gate: o.gate.clone(),
            });
            let way = if forward { "forward" } else { "backward" };
            let program = cx.program(chips[k]);
            let c = ctx.clone();
            program.create_kernel(
                o.core,
                &format!("{} {way} reader{}", o.name, o.suffix),
                d,
                vec![],
                move |kn| reader(kn, c),
            );
            let c = ctx.clone();
            program.create_kernel(
                o.core,
                &format!("{} {way} compute{}", o.name, o.suffix),
                d,
                vec![],
                move |kn| compute(kn, c),
            );
            program.create_kernel(
                o.core,
                &format!("{} {way} writer{}", o.name, o.suffix),
                d,
                vec![],
                move |kn| writer(kn, ctx),
            );
        }
    }
    routers
}

/// A reduce-scatter core's semaphores: forward and backward arrivals, and the line's handoff
/// (the entry barrier's is [`super::build::BARRIER_SEM`]).
const RS_SEMS: [u64; 3] = [STAGING, STAGING + 16, STAGING + 32];

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
    let n = req.comm.size();
    let Work::ReduceScatter { lanes } = &sched.work else { unreachable!("a reduce-scatter schedule") };
    let (page, planes, workers) = (sched.page, sched.planes, sched.workers);
    let line = line_for(fabric, req).0;
    // Twice the input, one whole tensor per direction, above everything else; the lanes
    // reduce disjoint pages of it.
    let whole = t.slice.pages() * t.n;
    let partial = [cx.scratch(page, whole), cx.scratch(page, whole)];
    // Three kernels per worker, two workers per rank and lane.
    let gate = s.gate(pi, 6 * n * planes * workers);
    let prefix = s.kernel_prefix(p.op);
    let mut routers = Vec::new();
    for lane in lanes {
        let core = cx.take_core(req.comm.chips())?;
        let (plane, w) = (lane.plane, lane.worker);
        let suffix = [(planes > 1, format!(" plane{plane}")), (workers > 1, format!(" worker{w}"))]
            .into_iter()
            .filter_map(|(named, part)| named.then_some(part))
            .collect::<String>();
        let o = LaneCx { pi, line, core, name: format!("{prefix}rs"), suffix, partial, gate: &gate };
        routers.extend(install_workers(cx, p, sched, lane, &o));
    }
    Ok(routers)
}
