//! The EDM stack as a [`Transport`]: every op's plan lowered onto one ERISC Data Mover per link
//! (channels of every op on it) with a lane — a sender worker, a receiver worker and an EDM
//! channel — per phase, flow, hop and link x worker, each lane's four kernels walking the
//! plan's steps ([`super::lane`]).
//!
//! Lanes of phases that run one after another share a channel slot as its successive tenants
//! (channels return to the link when an op ends); more than 8 slots on a link is an error
//! naming the link and the ops. Worker cores are handed out in turn.

use std::collections::BTreeMap;
use std::rc::Rc;

use meshsim_hw::{CoreRef, Machine, Params, Program};
use meshsim_topology::soc::CoreCoord;
use meshsim_topology::{ChipIdx, Cluster, LinkId};

use super::lane::{
    CB_PACKETS, Cb, LaneCtx, RELAY_PACKETS, Walk, receiver_reader, receiver_writer, sender_reader,
    sender_writer, sequence,
};
use super::{ChannelInterface, EdmConfig, EdmLink, MAX_CHANNELS, Termination, WorkerSlot};
use crate::build::{read_pages, write_pages};
use crate::op::Algorithm;
use crate::op::{CclError, Collective, DEFAULT_WORKERS, Given, OpError, Topology};
use crate::phase::{Phase, after_matrix};
use crate::plan;
use crate::request::OpRequest;
use crate::tensor::{STAGING, STAGING_END, TensorSpec};
use crate::transport::{Gate, LowerCx, Lowered, PhaseRun, Transport};

/// The legacy ERISC Data Mover stack.
#[derive(Clone, Copy, Debug, Default)]
pub struct EdmTransport;

impl Transport for EdmTransport {
    fn name(&self) -> &'static str {
        "edm"
    }

    /// The EDM runs every collective but all-to-all by the plan for its communicator's
    /// topology: it has no algorithm to choose.
    fn algorithms(&self, _collective: Collective) -> &'static [Algorithm] {
        &[Algorithm::Auto]
    }

    /// The fabric's knob: its packet size.
    fn refuses(&self, _collective: Collective, given: &Given) -> Option<String> {
        if given.persistent_buffers {
            return Some(
                "persistent_buffers applies to the fabric stack (the edm's ops run no init barrier)"
                    .to_owned(),
            );
        }
        given
            .packet_size
            .then(|| "packet_size applies to the fabric stack (the edm's is pages_per_packet)".to_owned())
    }

    fn accepts(&self, req: &OpRequest, params: &Params) -> Result<(), CclError> {
        let edm_most = MAX_CHANNELS / 2;
        if req.knobs.workers.is_some_and(|w| w > edm_most) {
            return Err(CclError::Invalid(format!(
                "op '{}': workers per link must be 1..{edm_most} on the edm stack",
                req.name
            )));
        }
        if req.collective == Collective::AllToAll {
            return Err(CclError::Invalid(format!(
                "op '{}': all-to-all runs on the fabric stack only",
                req.name
            )));
        }
        let slice =
            req.tensor.split(req.dim, req.collective.chunks(req.comm.size())).map_err(|e| OpError(e.0))?;
        staging_fits(params, req, &slice)?;
        Ok(())
    }

    /// One link per hop, as tt-metal's EDM ops.
    fn default_links(&self, _cluster: &Cluster, ops: &[OpRequest]) -> Result<Vec<usize>, CclError> {
        Ok(vec![1; ops.len()])
    }

    fn lower(&self, cx: &LowerCx, m: &mut Machine) -> Result<Lowered, CclError> {
        let chips = cx.cluster.chips().len();
        let mut b = Builder {
            cluster: cx.cluster,
            programs: (0..chips).map(|c| Program::new(ChipIdx(c as u32))).collect(),
            next_core: vec![0; chips],
            edms: BTreeMap::new(),
            slots: BTreeMap::new(),
            created: BTreeMap::new(),
            m,
        };
        let workers = workers(cx, &b)?;
        b.edms(cx, &workers)?;
        let (lanes, ppp) = b.lanes(cx, &workers)?;
        for (pi, p) in cx.phases.iter().enumerate() {
            let kernels = 4 * lanes.iter().filter(|l| l.phase == pi).count() + p.plan.copies.len();
            let gate = cx.gate(pi, kernels);
            let prefix = cx.kernel_prefix(p.op);
            for lane in lanes.iter().filter(|l| l.phase == pi) {
                b.kernels(cx, p, lane, &lanes, &gate, &prefix);
            }
            for &copy in &p.plan.copies {
                b.copy_kernel(cx, p, copy, &gate, &prefix)?;
            }
        }
        for (_, edm) in std::mem::take(&mut b.edms) {
            edm.install(&mut b.programs);
        }
        // The EDM ops run their plans over the communicator's topology.
        let phases = cx
            .phases
            .iter()
            .zip(ppp)
            .map(|(p, pages_per_packet)| PhaseRun {
                pages_per_packet,
                packet_bytes: pages_per_packet * p.tensors.slice.page_bytes(),
                algorithm: if cx.ops[p.op].comm.topology() == Topology::Ring { "ring" } else { "line" },
            })
            .collect();
        Ok(Lowered {
            programs: b.programs,
            phases,
            workers,
            report: Box::new(Vec::new),
            links: None,
            late_credits: Vec::new(),
        })
    }
}

/// Worker pairs per link and direction of every op: as asked, or tt-metal's
/// [`DEFAULT_WORKERS`] shrunk so that on every link the phases that may run at the same time fit
/// the EDM's 8 channels — the channels left by ops with explicit workers are shared evenly among
/// the uses of the link by ops on defaults. Phases that run one after the other (dependencies,
/// an all-reduce's two halves) reuse channels, so they do not count against each other.
fn workers(cx: &LowerCx, b: &Builder) -> Result<Vec<usize>, CclError> {
    let phases = cx.phases;
    // How many (flow, hop) uses each phase makes of each link: each needs a channel per
    // worker.
    let uses: Vec<BTreeMap<LinkId, usize>> = phases
        .iter()
        .map(|p| {
            let mut u = BTreeMap::new();
            for f in 0..p.plan.flows.len() {
                for k in 0..cx.ops[p.op].comm.size() {
                    for l in b.hop(cx, p, f, k).map(|h| h.1).unwrap_or_default() {
                        *u.entry(l).or_default() += 1;
                    }
                }
            }
            u
        })
        .collect();
    let after = after_matrix(phases);
    let max = MAX_CHANNELS;
    let mut out = Vec::with_capacity(cx.ops.len());
    for (i, req) in cx.ops.iter().enumerate() {
        if let Some(w) = req.knobs.workers {
            out.push(w);
            continue;
        }
        let mut w = DEFAULT_WORKERS;
        for pi in (0..phases.len()).filter(|&pi| phases[pi].op == i) {
            for &l in uses[pi].keys() {
                // The phases that may overlap this one on the link.
                let (mut fixed, mut shared) = (0, 0);
                for (qi, q) in phases.iter().enumerate() {
                    let overlaps = qi == pi || !(after[pi][qi] || after[qi][pi]);
                    let n = uses[qi].get(&l).copied().unwrap_or(0);
                    if !overlaps || n == 0 {
                        continue;
                    }
                    match cx.ops[q.op].knobs.workers {
                        Some(x) => fixed += x * n,
                        None => shared += n,
                    }
                }
                w = w.min(max.saturating_sub(fixed) / shared);
                if w == 0 {
                    let link = cx.cluster.link(l);
                    let id = |c: ChipIdx| cx.cluster.chip(c).id;
                    return Err(CclError::Invalid(format!(
                        "op '{}': no EDM channel is free on the link chip {} eth{} - chip {} eth{} ({fixed} of {max} taken by ops with explicit workers, {shared} uses by ops on defaults)",
                        req.name,
                        id(link.a.chip),
                        link.a.chan,
                        id(link.b.chip),
                        link.b.chan,
                    )));
                }
            }
        }
        out.push(w);
    }
    Ok(out)
}

/// Where a lane sits: phase, flow, the hop's ranks, its index among the hop's lanes, its link.
#[derive(Clone, Copy, Debug)]
struct LaneAt {
    phase: usize,
    flow: usize,
    from: usize,
    to: usize,
    j: usize,
    link: LinkId,
}

/// A sender worker on one chip and a receiver worker on the next, joined by an EDM channel.
struct Lane {
    phase: usize,
    flow: usize,
    from: usize,
    to: usize,
    j: usize,
    s_core: CoreRef,
    r_core: CoreRef,
    s_slot: WorkerSlot,
    r_slot: WorkerSlot,
    /// The sender's semaphore its chip's receiver increments per chunk to forward.
    fwd: (CoreCoord, u64),
    /// The receiver's semaphore the other flow's receiver increments per joined chunk.
    join: Option<(CoreCoord, u64)>,
    /// The order the sender walks: (send step, packet pages), window by window.
    send_seq: Walk,
    /// The order the receiver walks: (receive step, packet pages), window by window.
    recv_seq: Walk,
    /// The sender's relay buffer in its L1, when the plan relays partials.
    relay_base: u64,
    /// The receiver's semaphore the next hop's sender increments per relay slot it sent from.
    relay_free: (CoreCoord, u64),
    /// The sender core's circular buffer: packets filled by its reader, freed by its writer.
    s_cb: Cb,
    /// The receiver core's circular buffer.
    r_cb: Cb,
    channel: (ChannelInterface, ChannelInterface),
}

/// Refuses an op whose workers' staging cannot hold their buffers of packets as asked, or of
/// one page.
fn staging_fits(params: &Params, req: &OpRequest, slice: &TensorSpec) -> Result<(), OpError> {
    let (what, k) = (req.collective.name(), &req.knobs);
    let (packets, operands, relay) = staging_packets(req);
    let page = slice.page_bytes();
    let ppp = k.pages_per_packet.unwrap_or(1);
    let packet = ppp * page;
    let staging = staging_bytes(params);
    let need = packets * packet;
    if ppp == 0 || need > staging {
        return Err(OpError(format!(
            "{what} packets of {ppp} pages ({packet} B) exceed the workers' buffering: {CB_PACKETS} packets, each with the matching pages of {operands} operand(s), and {relay} relay packets need {need} B of worker L1, {staging} B are free"
        )));
    }
    Ok(())
}

/// The workers' staging needs of an op, in packets: its receiver's circular buffer holds
/// `CB_PACKETS` packets, each beside the matching pages of every operand it is reduced with;
/// its sender's holds `CB_PACKETS` packets and, for reductions, the relay buffer. Returns
/// (packets of staging needed, operands, relay packets).
fn staging_packets(req: &OpRequest) -> (u64, usize, u64) {
    let operands = match req.collective.redop() {
        None => 0,
        Some(_) if req.comm.topology() == Topology::Line && req.comm.size() > 2 => 2,
        Some(_) => 1,
    };
    let relays = req.collective.redop().is_some()
        || matches!(req.collective, Collective::Gather { .. } | Collective::Scatter { .. });
    let relay = if relays { RELAY_PACKETS } else { 0 };
    ((CB_PACKETS * (operands as u64 + 1)).max(CB_PACKETS + relay), operands, relay)
}

/// Bytes of worker L1 the staging area has: from [`STAGING`] to the L1 tensors.
fn staging_bytes(params: &Params) -> u64 {
    STAGING_END.min(params.worker_l1_bytes).saturating_sub(STAGING)
}

/// Pages per packet the workers' staging allows an op.
fn staging_ppp(params: &Params, req: &OpRequest, slice: &TensorSpec) -> u64 {
    staging_bytes(params) / staging_packets(req).0 / slice.page_bytes()
}

/// Pages per packet: as asked (if it fits the smallest EDM buffer), or else as many as the
/// smallest buffer holds (tt-metal sizes packets from the EDM buffer), at most `cap`.
pub(crate) fn packet_pages(
    asked: Option<u64>,
    page: u64,
    min_buffer: Option<u64>,
    cap: u64,
) -> Result<u64, OpError> {
    let buffer = min_buffer.unwrap_or(u64::MAX);
    let ppp = asked.unwrap_or((buffer / page).min(cap).max(1));
    if ppp == 0 || ppp * page > buffer {
        return Err(OpError(format!(
            "packets of {ppp} pages ({} B) do not fit the EDM buffers ({buffer} B); use fewer pages per packet, buffers or workers",
            ppp * page
        )));
    }
    Ok(ppp)
}

/// Per-packet page ranges of a slice's page range `[lo, hi)`.
pub(crate) fn packets(lo: u64, hi: u64, ppp: u64) -> Vec<(u64, u64)> {
    (lo..hi).step_by(ppp as usize).map(|p| (p, (p + ppp).min(hi))).collect()
}

/// The machine and programs being built.
struct Builder<'a> {
    cluster: &'a Cluster,
    m: &'a Machine,
    programs: Vec<Program>,
    next_core: Vec<usize>,
    edms: BTreeMap<LinkId, EdmLink>,
    /// The EDM channel slot of every (phase, flow, rank, lane index): its link and slot.
    slots: BTreeMap<(usize, usize, usize, usize), (LinkId, usize)>,
    /// Slots whose channel exists, with the channel's index in its EDM.
    created: BTreeMap<(LinkId, usize), usize>,
}

impl Builder<'_> {
    /// The links of each hop of phase `p`'s flow `f` from rank `k`, if the hop exists.
    fn hop(&self, cx: &LowerCx, p: &Phase, f: usize, k: usize) -> Option<(usize, Vec<LinkId>)> {
        let req = &cx.ops[p.op];
        let n = req.comm.size();
        let to = p.plan.flows[f].dir.next(k, n, req.comm.topology())?;
        let links = self.cluster.usable_links_between(req.comm.chip(k), req.comm.chip(to));
        Some((to, links[..req.knobs.links()].to_vec()))
    }

    /// One EDM per link used by any op, with a channel per lane of every op on it.
    fn edms(&mut self, cx: &LowerCx, workers: &[usize]) -> Result<(), CclError> {
        // Every lane a phase may have takes an EDM channel slot on its link: a slot already
        // used, in the same direction, only by phases this one runs after (the channel returns
        // to the link when they end), or a new one.
        let phases = cx.phases;
        let after = after_matrix(phases);
        let mut link_slots: BTreeMap<LinkId, Vec<(usize, Vec<usize>)>> = BTreeMap::new();
        let mut uses: BTreeMap<LinkId, (usize, u64, u64, Vec<&str>)> = BTreeMap::new();
        for (pi, p) in phases.iter().enumerate() {
            let req = &cx.ops[p.op];
            for f in 0..p.plan.flows.len() {
                for k in 0..req.comm.size() {
                    let Some((_, links)) = self.hop(cx, p, f, k) else { continue };
                    for j in 0..links.len() * workers[p.op] {
                        let l = links[j % links.len()];
                        let from_end = usize::from(self.cluster.link(l).a.chip != req.comm.chip(k));
                        let slots = link_slots.entry(l).or_default();
                        let slot = match slots
                            .iter()
                            .position(|(end, ps)| *end == from_end && ps.iter().all(|&q| after[pi][q]))
                        {
                            Some(i) => i,
                            None => {
                                slots.push((from_end, Vec::new()));
                                slots.len() - 1
                            }
                        };
                        slots[slot].1.push(pi);
                        self.slots.insert((pi, f, k, j), (l, slot));
                        let u = uses.entry(l).or_insert((
                            0,
                            req.knobs.buffers_per_channel,
                            p.slice.page_bytes(),
                            Vec::new(),
                        ));
                        u.0 = slots.len();
                        if !u.3.contains(&req.name.as_str()) {
                            u.3.push(&req.name);
                        }
                    }
                }
            }
        }
        for (l, (channels, buffers, page, names)) in uses {
            let link = self.cluster.link(l);
            let id = |c: ChipIdx| self.cluster.chip(c).id;
            if channels > MAX_CHANNELS {
                return Err(CclError::Invalid(format!(
                    "the link chip {} eth{} - chip {} eth{} needs {channels} EDM channels for ops {}; an EDM has {}",
                    id(link.a.chip),
                    link.a.chan,
                    id(link.b.chip),
                    link.b.chan,
                    names.join(", "),
                    MAX_CHANNELS
                )));
            }
            let end = |e: meshsim_topology::Endpoint| {
                (e.chip, e.chan, self.m.device(e.chip).noc_coord(CoreRef::Eth(e.chan)))
            };
            // Workers end their channels: the sender with its last message, the receiver after
            // reading its last (the guide's WORKER_INITIATED mode), so the EDM needs no counts.
            let cfg = EdmConfig {
                termination: Termination::WorkerInitiated,
                channels,
                buffers_per_channel: buffers,
                page_bytes: page,
                ..EdmConfig::default()
            };
            let edm = EdmLink::new(cfg, cx.params, end(link.a), end(link.b))
                .map_err(|e| CclError::Invalid(e.to_string()))?;
            self.edms.insert(l, edm);
        }
        Ok(())
    }

    fn core(&mut self, chip: ChipIdx) -> Result<CoreRef, CclError> {
        let k = self.next_core[chip.0 as usize];
        let soc = self.cluster.soc();
        if k >= soc.workers.len() {
            return Err(CclError::Invalid(format!(
                "chip {} has no worker core left: the ops need more than {}",
                self.cluster.chip(chip).id,
                soc.workers.len()
            )));
        }
        self.next_core[chip.0 as usize] += 1;
        Ok(CoreRef::Worker(soc.logical_worker(k as u64)))
    }

    /// A lane (worker pair and EDM channel) per phase, flow, hop and link x worker.
    /// Returns the lanes and every phase's pages per packet.
    fn lanes(&mut self, cx: &LowerCx, workers: &[usize]) -> Result<(Vec<Lane>, Vec<u64>), CclError> {
        let phases = cx.phases;
        let mut lanes = Vec::new();
        let mut ppps = Vec::new();
        for (pi, p) in phases.iter().enumerate() {
            let req = &cx.ops[p.op];
            let page = p.slice.page_bytes();
            let mut used: Vec<LinkId> = Vec::new();
            for f in 0..p.plan.flows.len() {
                for k in 0..req.comm.size() {
                    used.extend(self.hop(cx, p, f, k).map(|h| h.1).unwrap_or_default());
                }
            }
            let min_buffer = used.iter().map(|l| self.edms[l].buffer_bytes()).min();
            let ppp = packet_pages(
                req.knobs.pages_per_packet,
                page,
                min_buffer,
                staging_ppp(cx.params, req, &p.slice),
            )
            .map_err(CclError::from)?;
            ppps.push(ppp);
            let window = if p.plan.uses_relay() { RELAY_PACKETS as usize } else { usize::MAX };
            for (fi, flow) in p.plan.flows.iter().enumerate() {
                for from in 0..req.comm.size() {
                    let Some((to, links)) = self.hop(cx, p, fi, from) else { continue };
                    let count = links.len() * workers[p.op];
                    for j in 0..count {
                        let mine: Vec<(u64, u64)> = packets(flow.pages.0, flow.pages.1, ppp)
                            .into_iter()
                            .skip(j)
                            .step_by(count)
                            .collect();
                        let send_seq = sequence(flow.sends[from].len(), &mine, window);
                        if send_seq.is_empty() {
                            continue;
                        }
                        let at = LaneAt { phase: pi, flow: fi, from, to, j, link: links[j % links.len()] };
                        let seqs = (send_seq.into(), sequence(flow.receives[to].len(), &mine, window).into());
                        let lane = self.lane(cx, p, at, seqs, page, ppp * page)?;
                        lanes.push(lane);
                    }
                }
            }
        }
        Ok((lanes, ppps))
    }

    /// The lane `at` names: its two worker cores with their semaphores and circular buffers,
    /// and its EDM channel (a new one, or the next tenant of one earlier phases used), carrying
    /// `seqs` (the sender's and the receiver's walk) in packets of at most `packet` bytes.
    fn lane(
        &mut self,
        cx: &LowerCx,
        p: &Phase,
        at: LaneAt,
        seqs: (Walk, Walk),
        page: u64,
        packet: u64,
    ) -> Result<Lane, CclError> {
        let comm = &cx.ops[p.op].comm;
        let (a, b, link) = (comm.chip(at.from), comm.chip(at.to), at.link);
        let (joins, operands) = (p.plan.has_joins(), p.plan.max_operands());
        let sizes: Vec<u64> = seqs.0.iter().map(|&(_, lo, hi)| (hi - lo) * page).collect();
        let (s_core, r_core) = (self.core(a)?, self.core(b)?);
        let (da, db) = (self.m.device(a), self.m.device(b));
        let s_sem = self.programs[a.0 as usize].create_semaphore(&[s_core], 0);
        let fwd_sem = self.programs[a.0 as usize].create_semaphore(&[s_core], 0);
        let r_sem = self.programs[b.0 as usize].create_semaphore(&[r_core], 0);
        let join = joins.then(|| {
            let sem = self.programs[b.0 as usize].create_semaphore(&[r_core], 0);
            (db.noc_coord(r_core), db.semaphore_addr(r_core, sem))
        });
        let mut cb = |chip: ChipIdx, core: CoreRef, slot: u64| {
            let p = &mut self.programs[chip.0 as usize];
            let (filled, freed) = (p.create_semaphore(&[core], 0), p.create_semaphore(&[core], 0));
            let d = self.m.device(chip);
            Cb { filled: d.semaphore_addr(core, filled), freed: d.semaphore_addr(core, freed), slot }
        };
        let (s_cb, r_cb) = (cb(a, s_core, packet), cb(b, r_core, (1 + operands as u64) * packet));
        let relay_base = STAGING + CB_PACKETS * packet;
        let relay_free = {
            let sem = self.programs[b.0 as usize].create_semaphore(&[r_core], 0);
            (db.noc_coord(r_core), db.semaphore_addr(r_core, sem))
        };
        let s_slot = WorkerSlot { core: da.noc_coord(s_core), semaphore: da.semaphore_addr(s_core, s_sem) };
        let r_slot = WorkerSlot { core: db.noc_coord(r_core), semaphore: db.semaphore_addr(r_core, r_sem) };
        let from_end = if self.cluster.link(link).a.chip == a { 0 } else { 1 };
        let edm = self.edms.get_mut(&link).expect("every used link has an EDM");
        // The slot's channel, if an earlier phase's lane opened it, takes this lane as its next
        // tenant; otherwise the lane opens it.
        let (l, slot) = self.slots[&(at.phase, at.flow, at.from, at.j)];
        let channel = match self.created.get(&(l, slot)) {
            Some(&ch) => edm.add_tenant(ch, from_end, vec![s_slot], vec![r_slot], sizes),
            None => {
                let r = edm.add_channel(from_end, vec![s_slot], vec![r_slot], sizes);
                self.created.insert((l, slot), self.created.keys().filter(|(x, _)| *x == l).count());
                r
            }
        }
        .map_err(|e| CclError::Invalid(e.to_string()))?;
        Ok(Lane {
            phase: at.phase,
            flow: at.flow,
            from: at.from,
            to: at.to,
            j: at.j,
            send_seq: seqs.0,
            recv_seq: seqs.1,
            relay_base,
            relay_free,
            s_core,
            r_core,
            s_slot,
            r_slot,
            fwd: (s_slot.core, da.semaphore_addr(s_core, fwd_sem)),
            join,
            s_cb,
            r_cb,
            channel,
        })
    }

    /// A local copy's kernel on a worker of its rank's chip: reads the slice's pages a batch
    /// at a time into its L1 and writes them to their place.
    fn copy_kernel(
        &mut self,
        cx: &LowerCx,
        p: &Phase,
        copy: plan::Copy,
        gate: &Gate,
        prefix: &str,
    ) -> Result<(), CclError> {
        let chip = cx.ops[p.op].comm.chip(copy.rank);
        let core = self.core(chip)?;
        let (t, g) = (p.tensors, gate.clone());
        let batch = (staging_bytes(cx.params) / t.slice.page_bytes()).clamp(1, 8);
        let name = format!("{prefix}{}_copy", p.collective.tag());
        self.programs[chip.0 as usize].create_kernel(core, &name, 0, vec![], move |k| async move {
            let start = g.enter(&k).await;
            let pages = t.slice.pages();
            for lo in (0..pages).step_by(batch as usize) {
                let hi = (lo + batch).min(pages);
                let (place, from) = t.pages(copy.from, copy.slice, lo, hi);
                read_pages(&k, place, from, STAGING).await?;
                let (place, to) = t.pages(copy.to, copy.slice, lo, hi);
                write_pages(&k, place, to, STAGING).await?;
                k.noc_async_write_barrier().await?;
            }
            g.leave(&k, start);
            Ok(())
        });
        Ok(())
    }

    /// The kernels of `lane`: a reader and a writer on the sender core (the reader fetches the
    /// next packet while the writer pushes the last one into the EDM), and a reader and a
    /// writer on the receiver core (the reader pulls packets out of the EDM and their reduction
    /// operands; the writer reduces, then stores, or hands the partial to the next sender's
    /// relay buffer). All four walk the lane's sequence: the plan's steps, window by window.
    fn kernels(&mut self, cx: &LowerCx, p: &Phase, lane: &Lane, lanes: &[Lane], gate: &Gate, prefix: &str) {
        let req = &cx.ops[p.op];
        let flow = &p.plan.flows[lane.flow];
        let same = |q: &&Lane| q.phase == lane.phase && q.flow == lane.flow && q.j == lane.j;
        // A forwarding receiver feeds the sender of the next hop of its flow on its chip (same
        // lane index); that sender frees relay slots on the receiver that fed it. A joining
        // receiver signals the other flow's receiver on its chip.
        let next = lanes.iter().find(|q| same(q) && q.from == lane.to);
        let c = Rc::new(LaneCtx {
            t: p.tensors,
            gate: gate.clone(),
            packet: lane.s_cb.slot,
            sends: flow.sends[lane.from].clone().into(),
            receives: flow.receives[lane.to].clone().into(),
            send_seq: lane.send_seq.clone(),
            recv_seq: lane.recv_seq.clone(),
            s_cb: lane.s_cb,
            r_cb: lane.r_cb,
            s_sem: lane.s_slot.semaphore,
            r_sem: lane.r_slot.semaphore,
            fwd: lane.fwd.1,
            relay_base: lane.relay_base,
            relay_free: lane.relay_free.1,
            join_at: lane.join.map(|j| j.1),
            join_to: lanes
                .iter()
                .find(|q| q.phase == lane.phase && q.flow != lane.flow && q.to == lane.to && q.j == lane.j)
                .and_then(|q| q.join),
            forward_to: next.map(|q| q.fwd),
            relay_to: next.map(|q| (q.s_slot.core, q.relay_base)),
            fed_by: lanes.iter().find(|q| same(q) && q.to == lane.from).map(|q| q.relay_free),
            red: req.reduction(),
        });
        let (a, b) = (req.comm.chip(lane.from), req.comm.chip(lane.to));
        let name = |what: &str| format!("{prefix}{}_{what}", p.collective.tag());
        let (tx, rx) = lane.channel.clone();
        let prog = &mut self.programs;
        let c1 = c.clone();
        prog[a.0 as usize]
            .create_kernel(lane.s_core, &name("sender_reader"), 1, vec![], move |k| sender_reader(k, c1));
        let c2 = c.clone();
        prog[a.0 as usize]
            .create_kernel(lane.s_core, &name("sender_writer"), 0, vec![], move |k| sender_writer(k, c2, tx));
        let c3 = c.clone();
        prog[b.0 as usize].create_kernel(lane.r_core, &name("receiver_reader"), 1, vec![], move |k| {
            receiver_reader(k, c3, rx)
        });
        prog[b.0 as usize]
            .create_kernel(lane.r_core, &name("receiver_writer"), 0, vec![], move |k| receiver_writer(k, c));
    }
}
