//! A session: one [`Machine`] shared by many collectives. Ops are submitted with their
//! communicator, tensor and knobs and return a handle; an op may run after other ops
//! (oneCCL's event dependencies). [`Session::run`] fills unset knobs (selection tree, the
//! transport's default links), asks the transport whether it accepts every op, plans every op
//! into phases, places their tensors ([`crate::place`]), hands the placed phases to its
//! [`Transport`] to lower, launches once, checks every hazard and reports every op and the
//! makespan. It knows nothing of the stack under it.
//!
//! ```text
//!  submit(op) ─► validate ─► queue (after, streams, waits)
//!  run():  select ─► accepts ─► phases (plans) ─► place ─► Transport::lower ─► one launch
//!          ─► hazards ─► per op: start, end, time, bytes, busbw, verified
//! ```
//!
//! Ops without a dependency between them run at the same time and contend for links, NoCs and
//! DRAM. An op with dependencies starts on every chip once each of them has ended on all its
//! chips (its kernels wait on a host event the last kernel of the dependency raises). An
//! all-reduce is a reduce-scatter followed by an all-gather of its result.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use meshsim_engine::{SignalId, Time};
use meshsim_hw::{Machine, Mode, Params};
use meshsim_topology::{ChipIdx, Cluster, Endpoint};

pub use crate::request::{Limits, OpHandle, OpRequest, OpResult, SessionRun, StreamId};
pub use crate::stacks::{MAX_WORKERS, default_links};
pub use crate::verify::{gather_page, reduce_page};

use crate::op::SimModel;
use crate::op::{Bidir, CclError, Collective, Given, Hazard, Knobs, OpError, Stack, Topology};
use crate::phase::Phase;
use crate::plan::{self, Plan};
use crate::schedule_view::ScheduleView;
use crate::select::{Algorithm, Select};
use crate::tensor::TensorSpec;
use crate::transport::{KernelTimes, LowerCx, Lowered, Transport};

/// The latest a chip may start after the first, in ns: one hour of simulated time (the clock
/// counts picoseconds in 64 bits, about 213 days).
pub const MAX_START_NS: u64 = 3_600_000_000_000;

/// One machine and the ops to run on it.
pub struct Session<'c> {
    pub(crate) cluster: &'c Cluster,
    pub(crate) params: Params,
    pub(crate) verify: bool,
    pub(crate) trace: bool,
    pub(crate) skew: Option<(Vec<ChipIdx>, u64)>,
    /// Faults injected into the run.
    pub(crate) faults: Vec<crate::fault::Fault>,
    pub(crate) ops: Vec<OpRequest>,
    /// The stack its selection tree's `stack=` conditions test.
    stack: Stack,
    /// The model that simulates its ops.
    model: SimModel,
    /// What carries its ops.
    transport: Box<dyn Transport>,
    /// Per op, the knobs its caller gave, before the selection tree and the defaults filled
    /// the rest: a caller's workers, or links other than the default, keep a ring
    /// reduce-scatter off the direct path, as tt-metal's host does.
    pub(crate) given: Vec<Knobs>,
    /// The selection tree (MPICH's Csel) that fills the knobs callers leave unset.
    select: Select,
    /// The collective context's limits.
    limits: Limits,
    /// Streams made, each with its last op.
    streams: Vec<Option<OpHandle>>,
    /// Ops the host has waited for: every op submitted later starts after them.
    waited: Vec<OpHandle>,
}

impl<'c> Session<'c> {
    /// An empty session on `cluster` with `params`, in timing mode, without a trace.
    pub fn new(cluster: &'c Cluster, params: &Params) -> Session<'c> {
        Session {
            cluster,
            params: params.clone(),
            verify: false,
            trace: false,
            skew: None,
            faults: Vec::new(),
            ops: Vec::new(),
            stack: Stack::DEFAULT,
            model: SimModel::Packet,
            transport: crate::stacks::transport(Stack::DEFAULT),
            given: Vec::new(),
            select: Select::default_tree(),
            limits: Limits::default(),
            streams: Vec::new(),
            waited: Vec::new(),
        }
    }

    /// Sets the collective context's limits; ops already submitted must fit them.
    pub fn set_limits(&mut self, limits: Limits) -> Result<(), CclError> {
        self.limits = limits;
        for (i, req) in self.ops.iter().enumerate() {
            self.within_limits(req, i)?;
        }
        Ok(())
    }

    /// Uses `tree` to choose algorithms and knobs callers leave unset (the default is
    /// [`Select::default_tree`]).
    pub fn set_select(&mut self, tree: Select) {
        self.select = tree;
    }

    /// Fills every op's unset knobs from the selection tree, pruned once per communicator.
    fn apply_selection(&mut self) {
        let mut pruned: BTreeMap<(Vec<ChipIdx>, bool), Select> = BTreeMap::new();
        for req in &mut self.ops {
            let (n, topo) = (req.comm.size(), req.comm.topology());
            let key = (req.comm.chips().to_vec(), topo == Topology::Ring);
            let tree = pruned.entry(key).or_insert_with(|| self.select.prune(n, topo, self.stack));
            let c = tree.choose(req.collective, n, req.tensor.bytes(), topo, self.stack);
            let k = &mut req.knobs;
            k.algorithm = k.algorithm.or(c.algorithm);
            k.links = k.links.or(c.links);
            k.workers = k.workers.or(c.workers);
            k.packet_bytes = k.packet_bytes.or(c.packet_bytes);
            k.bidir = k.bidir.or(c.bidir);
        }
    }

    /// A new stream.
    pub fn new_stream(&mut self) -> StreamId {
        self.streams.push(None);
        StreamId(self.streams.len() - 1)
    }

    /// The host waits for `op` (oneCCL's `wait` on a request): every op submitted from now on
    /// starts after it has ended on all its chips.
    pub fn wait(&mut self, op: OpHandle) -> Result<(), CclError> {
        if op.0 >= self.ops.len() {
            return Err(CclError::Invalid(format!("the host waits for op #{} which is not submitted", op.0)));
        }
        self.waited.push(op);
        Ok(())
    }

    /// Refuses an op (the `call`-th) beyond the context's limits.
    fn within_limits(&self, req: &OpRequest, call: usize) -> Result<(), CclError> {
        if let Some(max) = self.limits.max_calls.filter(|&m| call >= m) {
            return Err(CclError::Invalid(format!(
                "op '{}' is call {} of a collective context that takes {max} (max_calls)",
                req.name,
                call + 1
            )));
        }
        if let Some(max) = self.limits.max_message_bytes.filter(|&m| req.tensor.bytes() > m) {
            return Err(CclError::Invalid(format!(
                "op '{}': its {} B message exceeds the collective context's {max} B (max_message_bytes)",
                req.name,
                req.tensor.bytes()
            )));
        }
        Ok(())
    }

    /// Which stack carries every op: the EDM or the fabric (one per machine: an Ethernet core
    /// runs either an EDM or a router). The default is [`Stack::DEFAULT`], the fabric.
    pub fn set_stack(&mut self, stack: Stack) {
        self.stack = stack;
        self.transport = crate::stacks::transport_for(stack, self.model);
    }

    /// Which model simulates every op: every packet (the default) or flows
    /// ([`crate::flow`]); the stack stays the one set.
    pub fn set_model(&mut self, model: SimModel) {
        self.model = model;
        self.transport = crate::stacks::transport_for(self.stack, model);
    }

    /// Carries every op on `transport`, a caller's own (selection trees still test the stack
    /// set by [`Session::set_stack`]).
    pub fn set_transport(&mut self, transport: Box<dyn Transport>) {
        self.transport = transport;
    }

    /// Moves real bytes and checks every op's outputs.
    pub fn set_verify(&mut self, on: bool) {
        self.verify = on;
    }

    /// Records a full trace of the run.
    pub fn set_trace(&mut self, on: bool) {
        self.trace = on;
    }

    /// Chip `k` of `chips` starts its program `k * skew_ns` after the first.
    ///
    /// The last chip must start within [`MAX_START_NS`] of the first: a larger skew is refused
    /// as bad input rather than overflowing the simulated clock.
    pub fn set_skew(&mut self, chips: Vec<ChipIdx>, skew_ns: u64) -> Result<(), CclError> {
        let last = chips.len().saturating_sub(1) as u64;
        if skew_ns.checked_mul(last).is_none_or(|t| t > MAX_START_NS) {
            return Err(CclError::Invalid(format!(
                "a start skew of {skew_ns} ns per chip over {} chips starts the last one more than {} s after the first, the longest meshsim simulates",
                chips.len(),
                MAX_START_NS / 1_000_000_000
            )));
        }
        self.skew = Some((chips, skew_ns));
        Ok(())
    }

    /// Injects `fault` into the run (`crate::fault`): refused, naming it, when its chip or link
    /// is not in the cluster.
    pub fn add_fault(&mut self, fault: crate::fault::Fault) -> Result<(), CclError> {
        fault.resolve(self.cluster).map_err(CclError::Invalid)?;
        self.faults.push(fault);
        Ok(())
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        self.cluster
    }

    /// When each chip's program starts (the skew).
    pub(crate) fn start_of(&self) -> impl Fn(ChipIdx) -> Time + 'static {
        let skew = self.skew.clone();
        // A straggler's delay adds to its skew.
        let mut late = vec![Time::ZERO; self.cluster.chips().len()];
        for f in &self.faults {
            if let (crate::fault::Fault::Straggler { delay, .. }, Ok((chip, _))) =
                (f, f.resolve(self.cluster))
            {
                late[chip.0 as usize] += *delay;
            }
        }
        move |c| {
            let skewed = match &skew {
                Some((chips, ns)) => {
                    chips.iter().position(|&x| x == c).map_or(Time::ZERO, |k| Time::from_ns(k as u64 * ns))
                }
                None => Time::ZERO,
            };
            skewed + late[c.0 as usize]
        }
    }

    /// The chips the session's ops run on and its faults touch (a faulted link's both ends):
    /// the only chips its machine builds.
    fn used_chips(&self) -> Vec<ChipIdx> {
        let mut used: Vec<ChipIdx> = self.ops.iter().flat_map(|r| r.comm.chips().iter().copied()).collect();
        for f in &self.faults {
            if let Ok((_, Some(ep))) = f.resolve(self.cluster) {
                used.push(ep.chip);
                used.extend(self.cluster.connected(ep).map(|far| far.chip));
            }
        }
        used.sort();
        used.dedup();
        used
    }

    /// Puts the link faults into `m`, one merged fault per link.
    fn inject_faults(&self, m: &mut Machine) {
        let mut links: BTreeMap<Endpoint, meshsim_hw::eth::LinkFault> = BTreeMap::new();
        for f in &self.faults {
            match (f, f.resolve(self.cluster)) {
                (crate::fault::Fault::EriscStall { at, stall, .. }, Ok((_, Some(ep)))) => {
                    m.set_erisc_stall(ep, *at, *at + *stall);
                }
                (_, Ok((_, Some(ep)))) => f.apply(links.entry(ep).or_default()),
                _ => {}
            }
        }
        for (ep, fault) in links {
            m.set_link_fault(ep, fault);
        }
    }

    /// Checks `req` and queues it. Argument errors say what is wrong, not which op: a caller
    /// with many ops names it (resource errors at [`Session::run`] name the ops themselves).
    pub fn submit(&mut self, mut req: OpRequest) -> Result<OpHandle, CclError> {
        validate(self.cluster, &req)?;
        self.within_limits(&req, self.ops.len())?;
        if let Some(st) = req.stream {
            let last = self.streams.get(st.0).ok_or_else(|| {
                CclError::Invalid(format!("op '{}' is on stream #{} which was not made", req.name, st.0))
            })?;
            req.after.extend(*last);
        }
        req.after.extend(self.waited.iter().copied());
        req.after.sort();
        req.after.dedup();
        if let Some(bad) = req.after.iter().find(|h| h.0 >= self.ops.len()) {
            return Err(CclError::Invalid(format!(
                "op '{}' waits for op #{} which is not submitted",
                req.name, bad.0
            )));
        }
        if self.ops.iter().any(|o| o.name == req.name) {
            return Err(CclError::Invalid(format!("two ops are named '{}'", req.name)));
        }
        let stream = req.stream;
        self.ops.push(req);
        let h = OpHandle(self.ops.len() - 1);
        if let Some(st) = stream {
            self.streams[st.0] = Some(h);
        }
        Ok(h)
    }

    /// The phases of every op, in submission order, before their tensors are placed.
    fn phases(&self) -> Vec<Phase<()>> {
        let mut phases: Vec<Phase<()>> = Vec::new();
        let mut last_of: Vec<usize> = Vec::new();
        for (i, req) in self.ops.iter().enumerate() {
            let n = req.comm.size();
            let slice = req.tensor.split(req.dim, req.collective.chunks(n)).expect("validated");
            let deps: Vec<usize> = req.after.iter().map(|h| last_of[h.0]).collect();
            let topo = req.comm.topology();
            let reduce = |plan: Plan, collective: Collective| Phase {
                op: i,
                collective,
                plan,
                bidir: Bidir::None,
                slice,
                tensors: (),
                deps: deps.clone(),
            };
            let bidir = bidir_of(&self.params, req, &slice);
            let gather = |deps: Vec<usize>| Phase {
                op: i,
                collective: Collective::AllGather,
                plan: plan::all_gather(n, topo, bidir, slice.pages(), !(req.exclude_myself || req.in_place)),
                bidir,
                slice,
                tensors: (),
                deps,
            };
            let pages = slice.pages();
            // The op's collective in one phase, with its plan.
            let whole = |plan: Plan| Phase { collective: req.collective, plan, ..gather(deps.clone()) };
            match req.collective {
                Collective::AllGather => phases.push(gather(deps.clone())),
                Collective::ReduceScatter(_) => {
                    phases.push(reduce(plan::reduce_scatter(n, topo, pages), req.collective))
                }
                Collective::AllReduce(red) => {
                    phases.push(reduce(plan::reduce_scatter(n, topo, pages), Collective::ReduceScatter(red)));
                    phases.push(gather(vec![phases.len() - 1]));
                }
                // All-to-all has no plan here: a transport that carries it has its own algorithm.
                Collective::AllToAll => {
                    phases.push(Phase { collective: req.collective, ..gather(deps.clone()) })
                }
                Collective::Broadcast { root } => {
                    phases.push(whole(plan::broadcast(n, topo, bidir, root, pages, true)))
                }
                Collective::Reduce { red, root } if self.reduce_by_halves(req) => {
                    // Reduce-scatter, then gather the reduced slices to the root.
                    let slice = req.tensor.split(req.dim, n as u64).expect("checked");
                    let rs = plan::reduce_scatter(n, topo, slice.pages());
                    phases.push(Phase { slice, ..reduce(rs, Collective::ReduceScatter(red)) });
                    let g = plan::gather(n, topo, root, slice.pages());
                    let collective = Collective::Gather { root };
                    phases.push(Phase { slice, collective, deps: vec![phases.len() - 1], ..whole(g) });
                }
                Collective::Reduce { root, .. } => {
                    phases.push(reduce(plan::reduce(n, topo, root, pages), req.collective))
                }
                Collective::Gather { root } => phases.push(whole(plan::gather(n, topo, root, pages))),
                Collective::Scatter { root } => phases.push(whole(plan::scatter(n, topo, root, pages))),
                Collective::SendRecv => phases.push(whole(plan::send_recv(pages))),
            }
            last_of.push(phases.len() - 1);
        }
        phases
    }

    /// Whether a reduce runs as a reduce-scatter followed by a gather to the root (MPICH's
    /// reduce_scatter_gather): when the transport has `ring` for a reduce and the selection tree
    /// says `ring` (the default tree's sizes are meshsim's tuned choice) and the tensor splits evenly over the ranks. The direct path sends every rank's whole tensor into the
    /// root's two links, so its time grows with `n` times the tensor; the halves move about
    /// twice the tensor through every link, pipelined.
    fn reduce_by_halves(&self, req: &OpRequest) -> bool {
        req.knobs.algorithm == Some(Algorithm::Ring)
            && self.transport.algorithms(req.collective).contains(&Algorithm::Ring)
            && req.tensor.split(req.dim, req.comm.size() as u64).is_ok()
    }

    /// What the stack's worker kernels would do for every phase, as users read it
    /// (`meshsim op --schedule`), without running anything; `None` when the stack has no worker
    /// schedule to show (the EDM's).
    pub fn schedule(mut self) -> Result<Option<Vec<ScheduleView>>, CclError> {
        self.prepare()?;
        let used = self.used_chips();
        let mut m = Machine::for_chips(self.cluster.clone(), self.params.clone(), Mode::Timing, &used);
        let phases = self.placed()?;
        let done = self.phase_events(&mut m, &phases);
        let times: KernelTimes = Rc::new(RefCell::new(Vec::new()));
        let cx = self.lower_cx(&phases, &done, &times);
        self.transport.schedule(&cx)
    }

    /// Resolves every op's knobs as the run will: the caller's, checked against the stack,
    /// then the selection tree's and the default links; and refuses an op the stack cannot run.
    fn prepare(&mut self) -> Result<(), CclError> {
        self.given = self.ops.iter().map(|o| o.knobs).collect();
        for req in &self.ops {
            if let Some(m) = self.transport.refuses(req.collective, &Given::of(&req.knobs)) {
                return Err(CclError::Invalid(format!("op '{}': {m}", req.name)));
            }
        }
        self.apply_selection();
        let defaults = self.transport.default_links(self.cluster, &self.ops)?;
        for (req, links) in self.ops.iter_mut().zip(defaults) {
            req.knobs.links.get_or_insert(links);
        }
        for req in &self.ops {
            self.transport.accepts(req, &self.params)?;
        }
        Ok(())
    }

    /// Per phase, the event its last kernel raises on `m` when it leaves its gate.
    fn phase_events(&self, m: &mut Machine, phases: &[Phase]) -> Vec<SignalId> {
        let name = |p: &Phase| format!("op '{}' {} done", self.ops[p.op].name, p.collective.tag());
        phases.iter().map(|p| m.new_event(&name(p))).collect()
    }

    /// What a lowering sees of this session and its placed `phases`.
    fn lower_cx<'a>(
        &'a self,
        phases: &'a [Phase],
        done: &'a [SignalId],
        times: &'a KernelTimes,
    ) -> LowerCx<'a> {
        LowerCx {
            cluster: self.cluster,
            params: &self.params,
            ops: &self.ops,
            given: &self.given,
            phases,
            done,
            times,
        }
    }

    /// Every op's phases, placed in memory.
    fn placed(&self) -> Result<Vec<Phase>, CclError> {
        let planned = self.phases();
        let tensors = crate::place::place(self.cluster.soc(), &self.params, &self.ops, &planned)?;
        Ok(planned.into_iter().zip(tensors).map(|(p, t)| p.place(t)).collect())
    }

    /// Builds every op, runs them in one launch and measures each. A run that fails under
    /// injected faults says which were in force.
    pub fn run(self) -> Result<SessionRun, CclError> {
        let faults = self.faults.clone();
        self.run_inner().map_err(|e| with_faults(&faults, e))
    }

    fn run_inner(mut self) -> Result<SessionRun, CclError> {
        let can = self.transport.capabilities();
        if self.verify && !can.verifies {
            return Err(CclError::Invalid(format!(
                "the {} model moves no bytes, so it cannot verify outputs: verify with --model packet",
                self.model
            )));
        }
        if !self.faults.is_empty() && !can.faults {
            return Err(CclError::Invalid(format!(
                "the {} model does not model faults: inject them with --model packet",
                self.model
            )));
        }
        self.prepare()?;
        let mode = if self.verify { Mode::Functional } else { Mode::Timing };
        let used = self.used_chips();
        let mut m = Machine::for_chips(self.cluster.clone(), self.params.clone(), mode, &used);
        if self.trace {
            m.enable_trace();
        }
        self.inject_faults(&mut m);
        let phases = self.placed()?;
        let done = self.phase_events(&mut m, &phases);
        let times: KernelTimes = Rc::new(RefCell::new(Vec::new()));
        let cx = self.lower_cx(&phases, &done, &times);
        let lowered = self.transport.lower(&cx, &mut m)?;
        self.launch(m, &phases, lowered, &times)
    }

    /// Runs the lowered programs in one launch, checks every hazard the hardware recorded and
    /// measures every op.
    fn launch(
        &self,
        mut m: Machine,
        phases: &[Phase],
        mut lowered: Lowered,
        times: &KernelTimes,
    ) -> Result<SessionRun, CclError> {
        if self.verify {
            crate::verify::write_inputs(&m, &self.ops, phases)?;
        }
        let start_of = self.start_of();
        let stats = m
            .launch(std::mem::take(&mut lowered.programs), &start_of)
            .map_err(|error| CclError::Simulation { error, faults: Vec::new() })?;
        no_late_landing(&m, self.cluster, &lowered.late_credits)?;
        no_negative_semaphore(&m, self.cluster)?;
        let times = times.borrow();
        let ops: Vec<OpResult> =
            (0..self.ops.len()).map(|i| self.result(i, &m, phases, &times, &start_of, &lowered)).collect();
        let makespan = ops.iter().map(|o| o.end).max().unwrap_or(Time::ZERO)
            - ops.iter().map(|o| o.start).min().unwrap_or(Time::ZERO);
        let (links, link_ops) = match lowered.links.take() {
            Some(found) => found.into_iter().unzip(),
            None => (m.link_use(), Vec::new()),
        };
        let (marks, resources) = (m.marks(), m.resource_use());
        let trace = m.take_trace();
        let routers = (lowered.report)();
        Ok(SessionRun { ops, makespan, stats, links, link_ops, marks, resources, routers, trace })
    }

    /// What op `i` measured: its chips' first start and last end over its phases' kernels,
    /// its bus bandwidth, its outputs checked when verifying, and how it was lowered.
    fn result(
        &self,
        i: usize,
        m: &Machine,
        phases: &[Phase],
        times: &[(usize, ChipIdx, Time, Time)],
        start_of: &dyn Fn(ChipIdx) -> Time,
        lowered: &Lowered,
    ) -> OpResult {
        let runs = &lowered.phases;
        let req = &self.ops[i];
        let mine: Vec<usize> = (0..phases.len()).filter(|&p| phases[p].op == i).collect();
        let (first, last) = (mine[0], mine[mine.len() - 1]);
        let per_chip: Vec<(ChipIdx, Time, Time)> = req
            .comm
            .chips()
            .iter()
            .map(|&c| {
                let on = || times.iter().filter(|t| t.1 == c && mine.contains(&t.0));
                let start = on().map(|t| t.2).min().unwrap_or(start_of(c));
                (c, start, on().map(|t| t.3).max().unwrap_or(start))
            })
            .collect();
        // From the moment the last chip starts to the moment the last chip finishes.
        let start = per_chip.iter().map(|p| p.1).max().unwrap_or(Time::ZERO);
        let end = per_chip.iter().map(|p| p.2).max().unwrap_or(start);
        let time = end - start;
        let n = req.comm.size();
        let bytes = req.tensor.bytes();
        let busbw_gbps = if time.0 == 0 {
            0.0
        } else {
            bytes as f64 / (time.0 as f64 * 1e-12) / 1e9 * req.collective.busbw_factor(n)
        };
        let verified = self.verify.then(|| crate::verify::check(m, req, &phases[last]));
        OpResult {
            name: req.name.clone(),
            collective: req.collective,
            tensor: req.tensor,
            dim: req.dim,
            memory: req.knobs.memory,
            persistent_buffers: req.knobs.persistent_buffers,
            chips: req.comm.chips().to_vec(),
            topology: req.comm.topology(),
            start,
            end,
            time,
            bytes,
            busbw_gbps,
            per_chip,
            verified,
            workers: lowered.workers[i],
            bidir: phases[last].bidir,
            pages_per_packet: runs[first].pages_per_packet,
            packet_bytes: runs[first].packet_bytes,
            links: req.knobs.links(),
            transport: self.transport.name(),
            model: self.model,
            algorithm: mine.iter().map(|&p| runs[p].algorithm).collect::<Vec<_>>().join(" + "),
        }
    }
}

/// The bidirectional mode an op runs: as asked, or tt-metal's all-gather rule on a ring —
/// split-tensor when a rank's slice is larger than twice the ERISC L1, full-tensor otherwise.
fn bidir_of(params: &Params, req: &OpRequest, slice: &TensorSpec) -> Bidir {
    let gathers = matches!(
        req.collective,
        Collective::AllGather | Collective::AllReduce(_) | Collective::Broadcast { .. }
    );
    match req.knobs.bidir {
        Some(b) => b,
        None if gathers && req.comm.topology() == Topology::Ring => {
            if slice.bytes() > 2 * params.erisc_l1_bytes { Bidir::Split } else { Bidir::Full }
        }
        None => Bidir::None,
    }
}

/// A failed run's message with the faults in force, so the report names them.
fn with_faults(faults: &[crate::fault::Fault], e: CclError) -> CclError {
    if faults.is_empty() {
        return e;
    }
    let list: Vec<String> = faults.iter().map(ToString::to_string).collect();
    match e {
        CclError::Simulation { error, .. } => CclError::Simulation { error, faults: list },
        CclError::Protocol { hazard, .. } => CclError::Protocol { hazard, faults: list },
        other => other,
    }
}

/// The run's first Ethernet packet that landed on a core whose kernels had all finished (a
/// teardown bug of the transport), but for the transport's `credits` it may receive then, as a
/// protocol error naming the chip, channel, address and time.
fn no_late_landing(m: &Machine, cluster: &Cluster, credits: &[u64]) -> Result<(), CclError> {
    match m.late_landings().iter().find(|l| !credits.contains(&l.addr)) {
        None => Ok(()),
        Some(&landing) => Err(CclError::Protocol {
            hazard: Hazard::LateLanding { chip: cluster.chip(landing.chip).id, landing },
            faults: Vec::new(),
        }),
    }
}

/// The run's first semaphore an atomic decrement took below zero, as a protocol error naming
/// the chip, core, address and time.
pub(crate) fn no_negative_semaphore(m: &Machine, cluster: &Cluster) -> Result<(), CclError> {
    match m.negative_semaphores().first() {
        None => Ok(()),
        Some(&semaphore) => Err(CclError::Protocol {
            hazard: Hazard::NegativeSemaphore { chip: cluster.chip(semaphore.chip).id, semaphore },
            faults: Vec::new(),
        }),
    }
}

/// Checks an op's arguments against the cluster; returns the slice each rank holds.
pub(crate) fn validate(cluster: &Cluster, req: &OpRequest) -> Result<TensorSpec, OpError> {
    let n = req.comm.size();
    let what = req.collective.name();
    if n < 2 {
        let article = if what.starts_with('a') { "an" } else { "a" };
        return Err(OpError(format!("{article} {what} needs at least 2 chips, got {n}")));
    }
    if req.collective == Collective::SendRecv && n != 2 {
        return Err(OpError(format!("a send-recv runs on 2 chips (the sender, then the receiver), got {n}")));
    }
    if let Some(root) = req.collective.root().filter(|&r| r >= n) {
        return Err(OpError(format!(
            "root {root} is not a rank of the {n}-chip communicator (0..{})",
            n - 1
        )));
    }
    if req.exclude_myself && req.collective != Collective::AllGather {
        return Err(OpError(format!("exclude-myself applies to all-gather, not {what}")));
    }
    if req.in_place && req.collective != Collective::AllGather {
        return Err(OpError(format!("in-place applies to all-gather, not {what}")));
    }
    if req.in_place && req.exclude_myself {
        return Err(OpError(
            "an in-place all-gather has its own slice in place: exclude-myself does not apply".into(),
        ));
    }
    if let Some(r) = req.reducer.as_ref().filter(|_| req.collective.redop().is_none()) {
        return Err(OpError(format!("reducer '{}' applies to reducing collectives, not {what}", r.name())));
    }
    let slice = req.tensor.split(req.dim, req.collective.chunks(n)).map_err(|e| OpError(e.0))?;
    let k = &req.knobs;
    if k.links == Some(0) {
        return Err(OpError("links must be at least 1".into()));
    }
    if k.pages_per_packet == Some(0) {
        return Err(OpError("pages per packet must be at least 1".into()));
    }
    if k.packet_bytes == Some(0) {
        return Err(OpError("packet size must be at least 16 B".into()));
    }
    if k.workers.is_some_and(|w| w == 0 || w > MAX_WORKERS) {
        return Err(OpError(format!("workers per link must be 1..{MAX_WORKERS}")));
    }
    check_hops(cluster, req)?;
    if k.bidir.is_some_and(|b| b != Bidir::None) {
        if !matches!(
            req.collective,
            Collective::AllGather | Collective::AllReduce(_) | Collective::Broadcast { .. }
        ) {
            return Err(OpError(format!(
                "--bidir applies to all-gather, all-reduce and broadcast, not {what}"
            )));
        }
        if req.comm.topology() == Topology::Line {
            return Err(OpError(
                "a line all-gather is bidirectional by nature; --bidir applies to rings".into(),
            ));
        }
    }
    Ok(slice)
}

/// Refuses a communicator with a hop that has no usable link, or fewer than the links asked
/// for.
fn check_hops(cluster: &Cluster, req: &OpRequest) -> Result<(), OpError> {
    let n = req.comm.size();
    let chips = req.comm.chips();
    let hops = n - usize::from(req.comm.topology() == Topology::Line);
    for h in 0..hops {
        let (a, b) = (chips[h], chips[(h + 1) % n]);
        let have = cluster.usable_links_between(a, b).len();
        let id = |c: ChipIdx| cluster.chip(c).id;
        if have == 0 {
            return Err(OpError(format!(
                "chips {} and {} are not linked (reserved links excluded)",
                id(a),
                id(b)
            )));
        }
        if let Some(links) = req.knobs.links.filter(|&l| l > have) {
            return Err(OpError(format!(
                "{links} links requested, but the hop from chip {} to chip {} has {have} usable (reserved links excluded)",
                id(a),
                id(b)
            )));
        }
    }
    Ok(())
}
