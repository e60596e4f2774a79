//! All-gather on the fabric. The multicast factory follows tt-metal's 2026 all-gather
//! (`ccl/all_gather @01c8afed`): per chip and link one core whose reader kernel covers the
//! forward direction and whose writer covers the backward one. Each reads its slice's pages
//! and sends them in packets of up to 4 pages (scatter writes straight into the output pages of
//! every chip on the way) along a 1D multicast route to the line's end — on a ring half-way
//! round each way, an even ring alternating the two half ranges packet by packet — and the
//! routers forward them. A multicast increment after the last packet (flushed behind the
//! writes) tells the plane's core on every chip of the route; the forward kernel (tt-metal's
//! reader) waits until that semaphore has counted every source on its plane, then closes its
//! connection (the completion barrier, `shared/fabric.md` §11.2). A broadcast is the same with
//! one source. Large ring all-gathers take the unicast
//! (relay) factory instead ([`super::relay`]).

use std::rc::Rc;

use meshsim_engine::Cond;
use meshsim_hw::{CoreRef, Kernel};
use meshsim_topology::soc::CoreCoord;

use super::build::{Inject, Lowering, entry_barrier, issue_reads, line_for, noc_of, page_addr, sync_kernel};
use super::mux::Ports;
use super::schedule::{Multicaster, RELAY_WINDOW, Schedule, Work, barrier_reach};
use super::worker::CONNECTION_L1_BYTES;
use super::{Fabric, Header, NocCmd, Route};
use crate::op::CclError;
use crate::phase::Phase;
use crate::plan::Dir;
use crate::tensor::{Placement, STAGING};
use crate::transport::Gate;

/// What one direction kernel of an all-gather sends: its schedule, and the router toward the
/// direction (`None` when no chip lies that way).
struct Direction {
    router: Option<usize>,
    work: Multicaster,
}

/// Lowers all-gather (or broadcast) phase `pi` by the multicast factory, as `sched` says;
/// returns the routers it injects into.
pub(super) fn all_gather(
    cx: &mut Lowering,
    pi: usize,
    p: &Phase,
    sched: &Schedule,
) -> Result<Vec<Inject>, CclError> {
    let (s, fabric) = (cx.s, cx.fabric);
    let req = &s.ops[p.op];
    let t = p.tensors;
    let n = req.comm.size();
    let Work::Multicast { kernels, finals, root } = &sched.work else { unreachable!("a multicast schedule") };
    let (planes, max) = (sched.planes, sched.payload);
    let line = line_for(fabric, req).0;
    // A broadcast is this multicast with the root the only source of its one chunk.
    let root = *root;
    let chips = req.comm.chips();
    let dirs: Vec<Direction> = kernels
        .iter()
        .map(|w| {
            let router = (w.barrier > 0).then(|| {
                let k = w.rank;
                let next = if w.dir == Dir::Forward { chips[(k + 1) % n] } else { chips[(k + n - 1) % n] };
                fabric.router_facing(line, w.plane, chips[k], next).expect("a router toward each neighbour")
            });
            Direction { router, work: w.clone() }
        })
        .collect();
    let routers: Vec<usize> = dirs.iter().filter_map(|d| d.router).collect();
    // Two direction kernels per rank and plane.
    let gate = s.gate(pi, 2 * n * planes);
    let prefix = s.kernel_prefix(p.op);
    // A core per plane, the same on every chip: the entry barrier's increments name it.
    let cores: Vec<CoreRef> =
        (0..planes).map(|_| cx.take_core(req.comm.chips())).collect::<Result<_, _>>()?;
    for dir in dirs {
        let (k, plane) = (dir.work.rank, dir.work.plane);
        let chip = chips[k];
        let core = cores[plane];
        let d = usize::from(dir.work.dir == Dir::Backward);
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
            barrier: sched.entry_barrier,
            base: STAGING + 0x100 + d as u64 * (CONNECTION_L1_BYTES + 2 * max),
            max,
            completion: (noc_of(s.cluster, core), (d == 0).then_some(finals[plane][k])),
            gate: gate.clone(),
        });
        cx.program(chip).create_kernel(core, &name, d, vec![], move |kn| send_slice(kn, ctx));
    }
    Ok(routers.into_iter().map(|r| (r, 0)).collect())
}

/// Lowers a ring all-gather by the unicast (relay) factory ([`super::relay`]) as `sched`
/// says: per lane (plane and worker) one core, the same on every chip, with a relay kernel per
/// direction and a sync kernel that waits for every stripe from both neighbours.
pub(super) fn all_gather_relay(
    cx: &mut Lowering,
    pi: usize,
    p: &Phase,
    sched: &Schedule,
) -> Result<Vec<Inject>, CclError> {
    use super::relay::{self, RelayCtx};
    let (s, fabric) = (cx.s, cx.fabric);
    let req = &s.ops[p.op];
    let t = p.tensors;
    let n = req.comm.size();
    let Work::Relay { lanes, own } = &sched.work else { unreachable!("a relay schedule") };
    let line = line_for(fabric, req).0;
    let max = sched.payload;
    let sems = [STAGING, STAGING + 16];
    let gate = s.gate(pi, 3 * n * sched.planes * sched.workers);
    let prefix = s.kernel_prefix(p.op);
    let mut routers = Vec::new();
    // Each lane relays its packets of each slice: independent relays over disjoint pages, each
    // with its own core and semaphores; a plane's workers share its routers through a mux.
    for lane in lanes {
        let (plane, w) = (lane.plane, lane.worker);
        let core = cx.take_core(req.comm.chips())?;
        let at = noc_of(s.cluster, core);
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
                    n,
                    slice: t.slice,
                    dim: t.dim,
                    input: t.input,
                    output: t.output,
                    own: (*own, t.in_place),
                    packets: lane.packets.clone(),
                    stripes: lane.stripes[k][d].clone(),
                    sem: (at, sems[d]),
                    base: STAGING + 0x100 + d as u64 * (CONNECTION_L1_BYTES + 2 * RELAY_WINDOW as u64 * max),
                    max,
                    barrier: barrier_reach(n, k, forward, true),
                    gate: gate.clone(),
                });
                let name = format!("{prefix}ag relay {}", if forward { "forward" } else { "backward" });
                cx.program(chip).create_kernel(core, &name, d, vec![], move |kn| relay::relay(kn, ctx));
            }
            let waits = sems.into_iter().zip(lane.received[k].map(|w| w as u32)).collect();
            sync_kernel(cx.program(chip), core, &format!("{prefix}ag sync"), &gate, waits);
        }
    }
    Ok(routers)
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
    /// Ranks of the op (the entry barrier waits for all others), and whether the barrier runs.
    ranks: usize,
    barrier: bool,
    /// The slice sits in the output already (an in-place all-gather): read it there.
    in_place: bool,
    /// Worker L1: connection words, then two packet buffers.
    base: u64,
    max: u64,
    /// The plane's core (the same on every chip), whose [`COMPLETION_SEM`] the final
    /// increments count; and for the forward kernel (tt-metal's reader) how many it waits
    /// for before it closes its connection.
    completion: (CoreCoord, Option<u32>),
    gate: Gate,
}

/// The completion semaphore on a plane's core (the same core and address on every chip): the
/// final increments of the sources whose kernel on that plane reaches the chip.
const COMPLETION_SEM: u64 = STAGING;

/// Address of packet `j`'s buffer: two alternate.
fn buffer(c: &SendCtx, j: usize) -> u64 {
    c.base + CONNECTION_L1_BYTES + (j % 2) as u64 * c.max
}

/// A direction kernel: per packet, reads its pages, waits for them, copies them into its own
/// output if asked, sends them and waits for its writes to leave before the next — as
/// tt-metal's all-gather kernels, each a single RISC that both reads and sends for its
/// direction, run a packet through their circular buffer. Two packet buffers alternate.
async fn send_slice(k: Kernel, c: Rc<SendCtx>) -> meshsim_engine::TaskResult {
    let start = c.gate.enter(&k).await;
    let conn = match c.dir.router {
        Some(r) => Some(c.ports.open(&k, c.fabric.clone(), (c.phase, r, 0), c.base).await?),
        None => None,
    };
    if c.barrier {
        entry_barrier(&k, conn.as_ref(), c.dir.work.barrier, c.ranks).await?;
    }
    let (rank, slice, dim, n) = c.slice;
    let page = slice.page_bytes();
    let active = conn.is_some() || c.dir.work.local_copy;
    let packets = if active { &c.dir.work.packets[..] } else { &[] };
    for (j, &(lo, pages)) in packets.iter().enumerate() {
        let buf = buffer(&c, j);
        if c.in_place {
            let at = (lo..lo + pages).map(|q| slice.page_in_whole(dim, n, rank, q));
            issue_reads(&k, &c.t_out, at, buf, page).await?;
        } else {
            issue_reads(&k, &c.t_in, lo..lo + pages, buf, page).await?;
        }
        k.noc_async_read_barrier().await?;
        let out: Vec<u64> =
            (lo..lo + pages).map(|q| page_addr(&k, &c.t_out, slice.page_in_whole(dim, n, rank, q))).collect();
        if c.dir.work.local_copy {
            for (x, &dst) in out.iter().enumerate() {
                k.noc_async_write(buf + x as u64 * page, dst, page).await?;
            }
        }
        // A kernel that only copies (its direction carries nothing) keeps its range 0.
        if let Some(conn) = conn.as_ref().filter(|_| c.dir.work.ranges[j] > 0) {
            let cmd = NocCmd::pages(&out, page);
            let route = Route::multicast(1, c.dir.work.ranges[j]);
            conn.send(&k, Header { cmd, payload: pages * page, route, src_ch: 0 }, buf).await?;
        }
        k.noc_async_writes_flushed().await;
    }
    let (at, wait) = c.completion;
    if let Some(conn) = &conn {
        // The final increment goes where the data went (none if this plane carried nothing),
        // behind the data on the same route.
        if let Some(reach) = c.dir.work.ranges.iter().copied().max().filter(|&r| r > 0) {
            let inc =
                NocCmd::AtomicInc { sem: k.get_noc_addr(at.x, at.y, COMPLETION_SEM), inc: 1, flush: true };
            conn.send(&k, Header { cmd: inc, payload: 0, route: Route::multicast(1, reach), src_ch: 0 }, 0)
                .await?;
        }
    }
    // The completion barrier (`shared/fabric.md` §11.2): the reader waits for every source's
    // final increment on its plane, then closes its connection; the writer closes at once.
    if let Some(want) = wait {
        k.wait_until(COMPLETION_SEM, Cond::Ge(want)).await?;
    }
    if let Some(conn) = &conn {
        conn.close(&k).await?;
    }
    k.noc_async_write_barrier().await?;
    c.gate.leave(&k, start);
    Ok(())
}
