//! The fabric stack as a [`Transport`]: one persistent fabric over the lines of every op's
//! communicator, a typed algorithm chosen per phase ([`Algo`]), each phase's worker kernels
//! injecting packets into the routers (through a mux where several may at once), and the
//! host's close once every op has ended.
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

use meshsim_engine::SignalId;
use meshsim_hw::{Machine, Params};
use meshsim_topology::Cluster;

use super::algo::Algo;
use super::build::{Inject, Lowering, line_for, noc_of};
use super::direct::{direct_reduction, point_to_point};
use super::gather::{all_gather, all_gather_relay};
use super::lines::{default_links, fabric_lines, runs_closed, session_payload};
use super::mux::{MUX_SLOTS_PER_CLIENT, Mux, Ports};
use super::schedule::Schedule;
use super::worker::Target;
use super::{Fabric, FabricConfig, FabricKind};
use crate::op::{Algorithm, CclError, Collective, Given};
use crate::phase::Phase;
use crate::request::OpRequest;
use crate::schedule_view::ScheduleView;
use crate::tensor::{Memory, STAGING};
use crate::transport::{LowerCx, Lowered, PhaseRun, Transport};

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

    /// The EDM's knobs: workers but on a reduction (the fabric's reduce-scatter workers), a
    /// bidirectional mode but on a broadcast, pages per packet, buffers per channel.
    fn refuses(&self, collective: Collective, given: &Given) -> Option<String> {
        [
            (given.workers && collective.redop().is_none(), "workers"),
            (given.bidir && !matches!(collective, Collective::Broadcast { .. }), "bidir"),
            (given.pages_per_packet, "pages_per_packet"),
            (given.buffers, "buffers"),
        ]
        .into_iter()
        .find(|k| k.0)
        .map(|(_, k)| {
            format!("{k} applies to the edm stack, not the fabric (add --stack edm, or stack: edm)")
        })
    }

    fn accepts(&self, _req: &OpRequest, _params: &Params) -> Result<(), CclError> {
        Ok(())
    }

    fn default_links(&self, cluster: &Cluster, ops: &[OpRequest]) -> Result<Vec<usize>, CclError> {
        default_links(cluster, ops)
    }

    fn schedule(&self, cx: &LowerCx) -> Result<Option<Vec<ScheduleView>>, CclError> {
        let lines = fabric_lines(cx.cluster, cx.ops)?;
        let payload = session_payload(cx)?;
        let view = |p: &Phase| {
            let req = &cx.ops[p.op];
            let x = Schedule::new(cx, p, runs_closed(&lines, req), payload)?;
            Ok(x.view(&req.name, p.collective.tag()))
        };
        cx.phases.iter().map(view).collect::<Result<_, _>>().map(Some)
    }

    fn lower(&self, s: &LowerCx, m: &mut Machine) -> Result<Lowered, CclError> {
        let fabric = build_fabric(s)?;
        let ports = Rc::new(Ports::default());
        // The reductions' intermediate buffers go above every tensor in DRAM.
        let mut cx = Lowering::new(s, &fabric, &ports, dram_end(s.phases));
        let mut injects: Vec<Vec<Inject>> = Vec::with_capacity(s.phases.len());
        // Workers per link and direction of every op (reduce-scatter's W; 1 otherwise).
        let mut workers = vec![1usize; s.ops.len()];
        let mut runs = Vec::with_capacity(s.phases.len());
        // Per phase, the slots of each client channel of a mux in front of its workers.
        let mut mux_slots = Vec::with_capacity(s.phases.len());
        for (pi, p) in s.phases.iter().enumerate() {
            let one = |routers: Vec<usize>| routers.into_iter().map(|r| (r, 0)).collect::<Vec<Inject>>();
            let closed = line_for(&fabric, &s.ops[p.op]).1;
            let sched = Schedule::new(s, p, closed, fabric.config.max_payload_bytes)?;
            let routers = match sched.algo {
                Algo::DirectReduction => one(direct_reduction(&mut cx, pi, p, &sched)?),
                Algo::ReduceScatter => super::reduce::lower(&mut cx, pi, p, &sched)?,
                Algo::PointToPoint(pairs) => one(point_to_point(&mut cx, pi, p, pairs, &sched)?),
                Algo::Multicast => all_gather(&mut cx, pi, p, &sched)?,
                Algo::Relay => all_gather_relay(&mut cx, pi, p, &sched)?,
            };
            // Workers per link and direction of every op (reduce-scatter's W; 1 otherwise).
            workers[p.op] = workers[p.op].max(sched.workers);
            runs.push(PhaseRun {
                pages_per_packet: sched.ppp,
                packet_bytes: sched.payload,
                algorithm: sched.algo.name(closed),
            });
            injects.push(routers);
            mux_slots.push(sched.mux_slots);
        }
        let muxes = install_muxes(&mut cx, m, &injects, &mux_slots)?;
        // The host closes the fabric once every op has ended and every mux has let go.
        let close: Vec<SignalId> = s.done.iter().chain(&muxes).copied().collect();
        let mut programs = std::mem::take(&mut cx.programs);
        fabric.install_close(&mut programs, |c| cx.take_core(&[c]), close.into())?;
        // The host terminates the routers at once (tt-metal's IMMEDIATELY_TERMINATE), each
        // after it has sent and processed every packet, as on hardware: the credits its peer
        // returns for its last packets (completions; first-level acks on rings) may land after
        // it ended, and no one waits for them.
        let lay = fabric.layout;
        let late_credits =
            super::words::COMPLETED.iter().chain(&super::words::ACKED).map(|&w| lay.word(w)).collect();
        let report = Box::new(move || fabric.router_use());
        Ok(Lowered { programs, phases: runs, workers, report, links: None, late_credits })
    }
}

/// Puts a Tensix mux in front of every router that kernels which may run at once inject into
/// (a sender channel takes one worker) — a reduce-scatter's workers on one link, or ops that
/// overlap: each group of such kernels becomes the clients of a mux. Kernels ordered by
/// `after` (and an op's own phases) take the channel in turn, directly or through their own
/// group's mux, each once the one before has let go of it (its phase ended, or its mux). A mux
/// of one phase's workers has that phase's `mux_slots` per client; one shared by ops,
/// [`MUX_SLOTS_PER_CLIENT`].
fn install_muxes(
    cx: &mut Lowering,
    m: &mut Machine,
    injects: &[Vec<Inject>],
    mux_slots: &[u64],
) -> Result<Vec<SignalId>, CclError> {
    let (s, fabric, ports) = (cx.s, cx.fabric, cx.ports);
    let (phases, done) = (s.phases, s.done);
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
            let core = cx.take_core(&[chip])?;
            let slots = group_mux_slots(&members, mux_slots);
            let mux = Rc::new(Mux::new(fabric, r, noc_of(s.cluster, core), STAGING, (members.len(), slots)));
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
            cx.program(chip).create_kernel(core, &name, 0, vec![], move |k| async move {
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

/// Slots per client of the mux in front of `members` (phase, worker): their phase's
/// (`mux_slots`) when they are one phase's workers, [`MUX_SLOTS_PER_CLIENT`] when ops share it.
fn group_mux_slots(members: &[(usize, usize)], mux_slots: &[u64]) -> u64 {
    match members[0].0 {
        p if members.iter().all(|x| x.0 == p) => mux_slots[p],
        _ => MUX_SLOTS_PER_CLIENT,
    }
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

/// One fabric for the session: its lines ([`fabric_lines`]), ring flow control if any line is
/// closed, as many routing planes as the op asking for the most links.
fn build_fabric(s: &LowerCx) -> Result<Rc<Fabric>, CclError> {
    let lines = fabric_lines(s.cluster, s.ops)?;
    let kind = if lines.iter().any(|l| l.closed) { FabricKind::Ring } else { FabricKind::Linear };
    let planes = s.ops.iter().map(|o| o.knobs.links()).max().unwrap_or(1);
    let payload = session_payload(s)?;
    let config = FabricConfig { kind, max_payload_bytes: payload, planes };
    let eth = s.cluster.soc().eth_cores.clone();
    Fabric::new(s.cluster, s.params, eth, config, lines).map_err(|e| CclError::Invalid(e.to_string()))
}
