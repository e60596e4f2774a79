//! All-gather on the fabric. The multicast factory follows tt-metal's 2026 all-gather
//! (`ccl/all_gather @01c8afed`): per chip and link one core whose reader kernel covers the
//! forward direction and whose writer covers the backward one. Each reads its slice's pages
//! and sends them in packets of up to 4 pages (scatter writes straight into the output pages of
//! every chip on the way) along a 1D multicast route to the line's end — on a ring half-way
//! round each way, an even ring alternating the two half ranges packet by packet — and the
//! routers forward them. A multicast increment after the last packet (flushed behind the
//! writes) tells every chip on the route; a chip's op ends when its semaphore has counted every
//! source. A broadcast is the same with one source. Large ring all-gathers take the unicast
//! (relay) factory instead ([`super::relay`]).

use std::rc::Rc;

use meshsim_hw::{CoreRef, Kernel};
use meshsim_topology::soc::CoreCoord;

use super::algo::Algo;
use super::build::{
    Inject, Lowering, entry_barrier, issue_reads, line_for, noc_of, page_addr, page_and_payload, sync_kernel,
};
use super::mux::Ports;
use super::schedule::{
    Packing, RELAY_WINDOW, barrier_reach, packets, plane_packets, relay_stripes, relay_workers,
};
use super::worker::CONNECTION_L1_BYTES;
use super::{Fabric, Header, NocCmd, Route};
use crate::op::{CclError, Topology};
use crate::phase::Phase;
use crate::plan::Dir;
use crate::plan::routed::{Part, Routed, Transfer};
use crate::tensor::{Placement, STAGING};
use crate::transport::Gate;

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
pub(super) fn all_gather(cx: &mut Lowering, pi: usize, p: &Phase) -> Result<(u64, Vec<Inject>), CclError> {
    let (s, fabric) = (cx.s, cx.fabric);
    let req = &s.ops[p.op];
    let t = p.tensors;
    let n = req.comm.size();
    let (page, max) = page_and_payload(fabric, req, &t)?;
    let ppp = Packing::Gather.pages(max, page);
    let planes = req.knobs.links();
    let (line, closed) = line_for(fabric, req);
    // A broadcast is this multicast with the root the only source of its one chunk.
    let root = req.collective.root();
    // A semaphore counting sources on the op's sync core, the same on every chip: the final
    // increments are multicast to one address.
    let sync_core = cx.take_core(req.comm.chips())?;
    let sync_at = noc_of(s.cluster, sync_core);
    let sync_sem = STAGING;
    // Who multicasts what how far: the broadcast's or the all-gather's routed plan.
    let topology = if closed { Topology::Ring } else { Topology::Line };
    let plan = Algo::Multicast.plan(req, p, topology);
    // Every (rank, plane, direction) and the chips its final increment reaches.
    let mut expected = vec![0u32; n];
    let mut plans: Vec<(usize, usize, [Direction; 2])> = Vec::new();
    let slice_packets = packets(t.slice.pages(), ppp);
    for k in 0..n {
        for plane in 0..planes {
            let mine: Vec<(u64, u64)> = slice_packets
                .iter()
                .copied()
                .enumerate()
                .filter(|(j, _)| j % planes == plane && root.is_none_or(|r| r == k))
                .map(|x| x.1)
                .collect();
            let at = Kernels { plan: &plan, fabric, req, line, plane };
            let dirs = [true, false].map(|forward| at.direction(k, forward, &mine, &mut expected));
            plans.push((k, plane, dirs));
        }
    }
    let routers: Vec<usize> =
        plans.iter().flat_map(|(_, _, dirs)| dirs.iter().filter_map(|d| d.router)).collect();
    // Two direction kernels per rank and plane, and a sync kernel per rank.
    let gate = s.gate(pi, 2 * n * planes + n);
    for (k, &chip) in req.comm.chips().iter().enumerate() {
        sync_kernel(cx.program(chip), sync_core, "ag sync", &gate, vec![(sync_sem, expected[k])]);
    }
    let prefix = s.kernel_prefix(p.op);
    // A core per plane, the same on every chip: the entry barrier's increments name it.
    let cores: Vec<CoreRef> =
        (0..planes).map(|_| cx.take_core(req.comm.chips())).collect::<Result<_, _>>()?;
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
                base: STAGING + 0x100 + d as u64 * (CONNECTION_L1_BYTES + 2 * max),
                max,
                sync: (sync_at, sync_sem),
                gate: gate.clone(),
            });
            cx.program(chip).create_kernel(core, &name, d, vec![], move |kn| send_slice(kn, ctx));
        }
    }
    Ok((ppp, routers.into_iter().map(|r| (r, 0)).collect()))
}

/// Lowers a ring all-gather by the unicast (relay) factory ([`super::relay`]): per rank one
/// core, the same on every chip, with a relay kernel per direction and a sync kernel that
/// waits for every stripe from both neighbours.
pub(super) fn all_gather_relay(
    cx: &mut Lowering,
    pi: usize,
    p: &Phase,
) -> Result<(u64, Vec<Inject>, usize), CclError> {
    use super::relay::{self, RelayCtx};
    let (s, fabric) = (cx.s, cx.fabric);
    let req = &s.ops[p.op];
    let t = p.tensors;
    let n = req.comm.size();
    let (page, _) = page_and_payload(fabric, req, &t)?;
    let ppp = Packing::Gather.pages(fabric.config.max_payload_bytes, page);
    let line = line_for(fabric, req).0;
    let max = fabric.config.max_payload_bytes;
    let planes = req.knobs.links();
    let per_plane = packets(t.slice.pages(), ppp).len() as u64 / planes as u64;
    let workers = relay_workers(t.slice.bytes() / planes as u64, per_plane);
    let sems = [STAGING, STAGING + 16];
    let gate = s.gate(pi, 3 * n * planes * workers);
    let prefix = s.kernel_prefix(p.op);
    let mut routers = Vec::new();
    let plan = Algo::Relay.plan(req, p, Topology::Ring);
    // Each (plane, worker) relays every (planes x workers)-th packet of each slice: independent
    // relays over disjoint pages, each with its own core and semaphores; a plane's workers
    // share its routers through a mux.
    for (plane, w) in (0..planes).flat_map(|plane| (0..workers).map(move |w| (plane, w))) {
        let on = (plane * workers + w, planes * workers);
        let packets = plane_packets(t.slice.pages(), ppp, on);
        let total = packets.len();
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
                    own: (!(req.exclude_myself || req.in_place), t.in_place),
                    packets: packets.clone(),
                    stripes: relay_stripes(
                        &plan,
                        k,
                        if forward { Dir::Forward } else { Dir::Backward },
                        total,
                    ),
                    sem: (at, sems[d]),
                    base: STAGING + 0x100 + d as u64 * (CONNECTION_L1_BYTES + 2 * RELAY_WINDOW as u64 * max),
                    max,
                    barrier: barrier_reach(n, k, forward, true),
                    gate: gate.clone(),
                });
                let name = format!("{prefix}ag relay {}", if forward { "forward" } else { "backward" });
                cx.program(chip).create_kernel(core, &name, d, vec![], move |kn| relay::relay(kn, ctx));
            }
            // What the upstream neighbour each way relays on to this rank, in all.
            let received =
                |dir, up| relay_stripes(&plan, up, dir, total).iter().map(|s| s.2 as u64).sum::<u64>();
            let want = [received(Dir::Forward, (k + n - 1) % n), received(Dir::Backward, (k + 1) % n)];
            let waits = sems.into_iter().zip(want.map(|w| w as u32)).collect();
            sync_kernel(cx.program(chip), core, &format!("{prefix}ag sync"), &gate, waits);
        }
    }
    Ok((ppp, routers, workers))
}

/// What a multicast phase's direction kernels are built from: its routed plan, the fabric,
/// the op and its line, and the routing plane.
struct Kernels<'a> {
    plan: &'a Routed,
    fabric: &'a Fabric,
    req: &'a crate::request::OpRequest,
    line: usize,
    plane: usize,
}

impl Kernels<'_> {
    /// Rank `k`'s direction kernel going `forward`, sending its packets `mine` of this plane
    /// as its transfers that way say; counts in `expected` the final increment each rank will
    /// get from it.
    fn direction(&self, k: usize, forward: bool, mine: &[(u64, u64)], expected: &mut [u32]) -> Direction {
        let (plan, n) = (self.plan, self.plan.n);
        let dir = if forward { Dir::Forward } else { Dir::Backward };
        // The rank's own copy rides with each direction that carries only part of its packets
        // (a split broadcast's root), else with the kernel the plan names.
        let sends: Vec<&Transfer> = plan.sends(k, dir).collect();
        let partial = matches!(sends[..], [t] if t.part != Part::All);
        let local_copy = plan.keeps(k) && (partial || plan.copies_going(k, dir));
        let (packets, ranges) = walk(&sends, mine, local_copy);
        let reach = ranges.iter().copied().max().unwrap_or(0);
        let barrier = barrier_reach(n, k, forward, plan.topology == Topology::Ring);
        let router = (barrier > 0).then(|| {
            let chips = self.req.comm.chips();
            let next = if forward { chips[(k + 1) % n] } else { chips[(k + n - 1) % n] };
            self.fabric
                .router_facing(self.line, self.plane, chips[k], next)
                .expect("a router toward each neighbour")
        });
        // The final increment reaches every rank the farthest packet does.
        if let Some(far) = sends.iter().find(|t| t.hops as u32 == reach) {
            for j in far.route(n, plan.topology) {
                expected[j] += 1;
            }
        }
        Direction { router, ranges, packets, local_copy, barrier }
    }
}

/// A direction kernel's packets and each one's multicast reach, from the rank's transfers that
/// way in its plan: one transfer carries its part of the rank's packets `mine` (every other
/// one, for a split broadcast); two alternating ones share them packet by packet (an even
/// ring's long and short halves). A kernel without transfers sends nothing: it keeps every
/// packet, unreached, only to copy them into its own output.
fn walk(sends: &[&Transfer], mine: &[(u64, u64)], local_copy: bool) -> (Vec<(u64, u64)>, Vec<u32>) {
    let packets: Vec<(u64, u64)> = match sends {
        [] if local_copy => mine.to_vec(),
        [] => Vec::new(),
        [t] => match t.part {
            Part::Alternate(x) => {
                mine.iter().copied().enumerate().filter(|(j, _)| j % 2 == x as usize).map(|p| p.1).collect()
            }
            Part::All | Part::Half(_) => mine.to_vec(),
        },
        _ => mine.to_vec(),
    };
    let ranges = (0..packets.len())
        .map(|j| match sends {
            [] => 0,
            [t] => t.hops as u32,
            many => many
                .iter()
                .find(|t| t.part == Part::All || t.part == Part::Alternate((j % 2) as u8))
                .map_or(0, |t| t.hops as u32),
        })
        .collect();
    (packets, ranges)
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
    entry_barrier(&k, conn.as_ref(), c.dir.barrier, c.ranks).await?;
    let (rank, slice, dim, n) = c.slice;
    let page = slice.page_bytes();
    let active = conn.is_some() || c.dir.local_copy;
    let packets = if active { &c.dir.packets[..] } else { &[] };
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
        if c.dir.local_copy {
            for (x, &dst) in out.iter().enumerate() {
                k.noc_async_write(buf + x as u64 * page, dst, page).await?;
            }
        }
        // A kernel that only copies (its direction carries nothing) keeps its range 0.
        if let Some(conn) = conn.as_ref().filter(|_| c.dir.ranges[j] > 0) {
            let cmd = NocCmd::pages(&out, page);
            let route = Route::multicast(1, c.dir.ranges[j]);
            conn.send(&k, Header { cmd, payload: pages * page, route, src_ch: 0 }, buf).await?;
        }
        k.noc_async_writes_flushed().await;
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
