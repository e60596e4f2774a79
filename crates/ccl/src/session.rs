//! A session: one [`Machine`] shared by many collectives. Ops are submitted with their
//! communicator, tensor and knobs and return a handle; an op may run after other ops
//! (oneCCL's event dependencies). [`Session::run`] hands out the machine's resources — worker
//! cores, L1 and DRAM tensors, EDM channels (one EDM per link, shared by every op that uses
//! it) — lowers every op's plan onto the EDM with one generic sender and one generic receiver
//! kernel per lane, launches once and reports every op and the makespan.
//!
//! ```text
//!  submit(op) ─► validate ─► Plan (algo, pure data)
//!  run():  tensors ─► EDM channels per link ─► lanes (worker pair + channel) ─► kernels
//!          ─► one launch ─► per op: start, end, time, bytes, busbw, verified
//! ```
//!
//! Ops without a dependency between them run at the same time and contend for links, NoCs and
//! DRAM. An op with dependencies starts on every chip once each of them has ended on all its
//! chips (its kernels wait on a host event the last kernel of the dependency raises). An
//! all-reduce is a reduce-scatter followed by an all-gather of its result.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use meshsim_engine::{SignalId, TaskResult, Time};
use meshsim_hw::{CoreRef, Kernel, Machine, Mode, Params, Program};
use meshsim_topology::soc::CoreCoord;
use meshsim_topology::{ChipIdx, Cluster, Endpoint, LinkId};

/// The latest a chip may start after the first, in ns: one hour of simulated time (the clock
/// counts picoseconds in 64 bits, about 213 days).
pub const MAX_START_NS: u64 = 3_600_000_000_000;

use crate::build::{host_read, host_write, read_pages, write_pages};
use crate::comm::Communicator;
use crate::edm::{ChannelInterface, EdmConfig, EdmLink, Termination, WorkerSlot};
use crate::op::{
    Bidir, CclError, Collective, DEFAULT_WORKERS, Knobs, OpError, OpRun, Reducer, Reduction, Stack, Topology,
};
use crate::plan::{self, Loc, Plan, Recv, Send};
use crate::select::{Algorithm, Select};
use crate::tensor::{Memory, Placement, TensorSpec};
use crate::worker::{ReceiverWorker, SenderWorker};

/// Where the worker kernels' circular buffers start in a worker's L1.
pub(crate) const STAGING: u64 = 0x10000;
/// Where they must end: L1-interleaved tensors start here.
const STAGING_END: u64 = crate::tensor::L1_TENSOR_BASE;
/// Packets a worker's circular buffer between its reader and writer holds (double buffering,
/// as tt-metal's CCL workers size their CBs): the reader fills one while the writer drains the
/// other.
pub const CB_PACKETS: u64 = 2;
/// Packets a sender's relay buffer holds: partial results its chip's receiver hands it to
/// forward. It is also the slicer's window: a reduction's lane runs every step of the plan over
/// this many packets before the next ones (the guide's tensor slicer), so what a chip injects
/// into a window always fits in the next chip's relay and the ring cannot deadlock.
pub const RELAY_PACKETS: u64 = 4;
/// Worker cores a chip hands out (the 8 x 10 Tensix grid).
pub(crate) const WORKER_CORES: usize = 80;

/// A submitted op: oneCCL's request, and the event other ops may wait for (their `after`).
/// [`Session::wait`] makes the host wait for it; [`SessionRun::result`] gives what it measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OpHandle(pub usize);

/// An in-order queue of ops (oneCCL's stream): an op submitted on a stream starts once the
/// op submitted on it before has ended on all its chips; ops on different streams, or on
/// none, may overlap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct StreamId(pub usize);

/// What a collective context admits, as LPF's `lpf_collectives_init` sets it: the largest
/// message (nccl-tests' size of an op: its gathered output, its input, its root's tensor) and
/// the most calls. `None`: no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// The largest message, bytes.
    pub max_message_bytes: Option<u64>,
    /// The most ops one session takes.
    pub max_calls: Option<usize>,
}

/// An op to submit.
#[derive(Clone, Debug)]
pub struct OpRequest {
    /// Its name in results, traces and errors.
    pub name: String,
    /// The ranks it runs on.
    pub comm: Communicator,
    /// What it does.
    pub collective: Collective,
    /// The tensor each rank holds: the gathered output of an all-gather, the input of a
    /// reduce-scatter or all-reduce.
    pub tensor: TensorSpec,
    /// The dimension gathered or scattered along.
    pub dim: usize,
    /// Links, workers, packets, buffers, memory.
    pub knobs: Knobs,
    /// Ops that must end on all their chips before this one starts (events it waits for).
    pub after: Vec<OpHandle>,
    /// The stream it is submitted on: it starts after the stream's previous op.
    pub stream: Option<StreamId>,
    /// All-gather only: each rank leaves its own slice out of its output (LPF's
    /// `exclude_myself`), saving the local copy.
    pub exclude_myself: bool,
    /// All-gather only: nccl-tests' in-place variant. Each rank's slice already sits at its
    /// place in the output (there is no separate input), so it is sent from there and not
    /// copied.
    pub in_place: bool,
    /// Reducing collectives: the caller's reducer, applied instead of the collective's
    /// built-in reduction.
    pub reducer: Option<Reducer>,
}

impl OpRequest {
    /// The reduction its kernels apply: the caller's reducer, or the built-in one; `None` for
    /// collectives that do not reduce.
    pub fn reduction(&self) -> Option<Reduction> {
        let red = self.collective.redop()?;
        Some(match &self.reducer {
            Some(u) => Reduction::User(u.clone()),
            None => Reduction::Builtin(red),
        })
    }
}

impl OpRequest {
    /// `collective` of `tensor` along `dim` on `comm`, with default knobs and no dependency.
    pub fn new(
        name: &str,
        comm: Communicator,
        collective: Collective,
        tensor: TensorSpec,
        dim: usize,
    ) -> OpRequest {
        OpRequest {
            name: name.to_owned(),
            comm,
            collective,
            tensor,
            dim,
            knobs: Knobs::default(),
            after: Vec::new(),
            stream: None,
            exclude_myself: false,
            in_place: false,
            reducer: None,
        }
    }
}

/// What one op of a session measured.
#[derive(Clone, Debug)]
pub struct OpResult {
    /// The op's name.
    pub name: String,
    /// What it did.
    pub collective: Collective,
    /// Its chips, in rank order.
    pub chips: Vec<ChipIdx>,
    /// When the last of its chips started.
    pub start: Time,
    /// When the last of its chips finished.
    pub end: Time,
    /// `end - start`.
    pub time: Time,
    /// nccl-tests' size: the gathered output of an all-gather, the input of a reduction.
    pub bytes: u64,
    /// nccl-tests' bus bandwidth, GB/s.
    pub busbw_gbps: f64,
    /// `(chip, start, end)` per chip, in rank order.
    pub per_chip: Vec<(ChipIdx, Time, Time)>,
    /// `Some(Ok)` when verified, `Some(Err(first mismatch))`, `None` in timing mode.
    pub verified: Option<Result<(), String>>,
    /// Worker pairs per link and direction it ran with (its knob, or the default resolved).
    pub workers: usize,
    /// The bidirectional mode its all-gather ran with.
    pub bidir: Bidir,
    /// Pages per packet it ran with (its first phase's): of an EDM buffer, or of a fabric
    /// packet.
    pub pages_per_packet: u64,
    /// Links (routing planes on the fabric) used per hop: the knob, or its default.
    pub links: usize,
    /// The transport it ran on.
    pub stack: Stack,
    /// The algorithm of each of its phases, joined by " + ": on the fabric a reduce-scatter's
    /// `ring`, `line` or `direct` (one-shot), an all-gather's `multicast` or `relay` factory,
    /// all-to-all's `direct`; on the EDM stack the communicator's topology.
    pub algorithm: String,
}

/// What a session's run measured.
#[derive(Clone, Debug)]
pub struct SessionRun {
    /// Every op, in submission order.
    pub ops: Vec<OpResult>,
    /// From the first op's start to the last op's end.
    pub makespan: Time,
    /// Engine counters.
    pub stats: meshsim_engine::Stats,
    /// Use of every Ethernet link direction that carried a packet.
    pub links: Vec<meshsim_hw::LinkUse>,
    /// Kernel marks, in time order.
    pub marks: Vec<meshsim_hw::Mark>,
    /// The busiest NoC link or port and DRAM bank.
    pub resources: meshsim_hw::trace::ResourceUse,
    /// Every fabric router's statistics (fabric stack; empty on the EDM stack).
    pub routers: Vec<crate::fabric::RouterUse>,
    /// The full trace, when asked for.
    pub trace: Option<meshsim_hw::TraceData>,
}

impl SessionRun {
    /// What op `h` measured (the request's completion).
    pub fn result(&self, h: OpHandle) -> &OpResult {
        &self.ops[h.0]
    }

    /// The run of op `i` as a one-op result (shares the run-wide counters).
    pub fn op_run(&self, i: usize) -> OpRun {
        let o = &self.ops[i];
        OpRun {
            time: o.time,
            per_chip: o.per_chip.clone(),
            verified: o.verified.clone(),
            stats: self.stats.clone(),
            links: self.links.clone(),
            marks: self.marks.clone(),
            resources: self.resources,
            routers: self.routers.clone(),
            trace: None,
        }
    }
}

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
    pub(crate) stack: Stack,
    /// Per op, the knobs its caller gave, before the selection tree and the defaults filled
    /// the rest: a caller's links, workers or packet size keep a ring reduce-scatter off the
    /// direct path, as tt-metal's host does.
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

/// A plan of one op (an all-reduce has two) with what lowering needs.
pub(crate) struct Phase {
    pub(crate) op: usize,
    pub(crate) kind: &'static str,
    pub(crate) plan: Plan,
    /// The bidirectional mode the plan runs (resolved; `None` for reductions).
    pub(crate) bidir: Bidir,
    pub(crate) slice: TensorSpec,
    /// Pages per packet the staging area allows (reductions), before the EDM buffers cap it.
    staging_ppp: u64,
    pub(crate) tensors: Option<Tensors>,
    /// Phases that must end first.
    pub(crate) deps: Vec<usize>,
}

/// Where a phase's tensors live, and how a plan's locations map to pages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tensors {
    pub(crate) input: Placement,
    pub(crate) output: Placement,
    scratch: Option<Placement>,
    pub(crate) slice: TensorSpec,
    pub(crate) dim: usize,
    pub(crate) n: u64,
    /// The input is the rank's own slice of the output (an in-place all-gather).
    pub(crate) in_place: bool,
}

impl Tensors {
    /// Page `q` of rank `rank`'s own slice: in its input, or where it sits in the output.
    pub(crate) fn own_page(&self, rank: usize, q: u64) -> (&Placement, u64) {
        if self.in_place {
            (&self.output, self.slice.page_in_whole(self.dim, self.n, rank as u64, q))
        } else {
            (&self.input, q)
        }
    }

    /// The placement of `loc`, and the pages there of pages `lo..hi` of slice `s`: the slice's
    /// own pages, or where they sit in the whole tensor.
    fn pages(&self, loc: Loc, s: usize, lo: u64, hi: u64) -> (&Placement, impl Iterator<Item = u64> + '_) {
        let (place, whole) = match loc {
            Loc::InputSlice if self.in_place => (&self.output, true),
            Loc::InputSlice => (&self.input, false),
            Loc::InputWhole => (&self.input, true),
            Loc::OutputWhole => (&self.output, true),
            Loc::OutputSlice => (&self.output, false),
            Loc::Scratch => (self.scratch.as_ref().expect("reductions have scratch"), true),
            Loc::Relay => unreachable!("relay buffers are L1 slots, not tensor pages"),
        };
        let map = move |p| if whole { self.slice.page_in_whole(self.dim, self.n, s as u64, p) } else { p };
        (place, (lo..hi).map(map))
    }
}

/// The order a lane's sender or receiver walks: (plan step, packet pages `lo..hi`).
type Walk = Rc<[(usize, u64, u64)]>;

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

/// A circular buffer between a core's reader and writer kernels: `CB_PACKETS` slots of
/// `slot` bytes at [`STAGING`], and two local counters.
#[derive(Clone, Copy, Debug)]
struct Cb {
    filled: u64,
    freed: u64,
    slot: u64,
}

impl Cb {
    fn at(&self, k: u64) -> u64 {
        STAGING + (k % CB_PACKETS) * self.slot
    }

    /// Producer: waits for slot `k` to be free.
    async fn reserve(&self, kn: &Kernel, k: u64) -> TaskResult {
        if k >= CB_PACKETS {
            kn.noc_semaphore_wait_min(self.freed, (k + 1 - CB_PACKETS) as u32).await?;
        }
        Ok(())
    }

    /// Consumer: waits for slot `k` to be filled.
    async fn wait_filled(&self, kn: &Kernel, k: u64) -> TaskResult {
        kn.noc_semaphore_wait_min(self.filled, (k + 1) as u32).await?;
        Ok(())
    }

    fn push(&self, kn: &Kernel) -> TaskResult {
        bump(kn, self.filled)
    }

    fn pop(&self, kn: &Kernel) -> TaskResult {
        bump(kn, self.freed)
    }
}

/// The order a lane walks `steps` steps over its packets `mine`: every step over the first
/// `window` packets, then every step over the next, and so on (the guide's slicer).
fn sequence(steps: usize, mine: &[(u64, u64)], window: usize) -> Vec<(usize, u64, u64)> {
    mine.chunks(window.max(1))
        .flat_map(|w| (0..steps).flat_map(move |s| w.iter().map(move |&(lo, hi)| (s, lo, hi))))
        .collect()
}

/// Increments a word of this core's L1 (a local CB counter).
fn bump(k: &Kernel, addr: u64) -> TaskResult {
    k.add_u32(addr, 1)?;
    Ok(())
}

/// `(phase, chip, start, end)` of every finished worker kernel.
pub(crate) type KernelTimes = Rc<RefCell<Vec<(usize, ChipIdx, Time, Time)>>>;

/// When a phase's kernels may start, and what they report when they finish.
#[derive(Clone)]
pub(crate) struct Gate {
    pub(crate) phase: usize,
    pub(crate) deps: Rc<[SignalId]>,
    pub(crate) done: SignalId,
    pub(crate) remaining: Rc<Cell<usize>>,
    pub(crate) times: KernelTimes,
}

impl Gate {
    /// The gate of phase `phase`, whose dependencies are `deps` (phase indices), for `kernels`
    /// kernels; `done` holds every phase's end event.
    pub(crate) fn new(
        phase: usize,
        deps: &[usize],
        done: &[SignalId],
        kernels: usize,
        times: &KernelTimes,
    ) -> Gate {
        Gate {
            phase,
            deps: deps.iter().map(|&d| done[d]).collect(),
            done: done[phase],
            remaining: Rc::new(Cell::new(kernels)),
            times: times.clone(),
        }
    }

    pub(crate) async fn enter(&self, k: &Kernel) -> Time {
        for &d in self.deps.iter() {
            k.wait_event(d).await;
        }
        k.now()
    }

    pub(crate) fn leave(&self, k: &Kernel, start: Time) {
        self.times.borrow_mut().push((self.phase, k.chip(), start, k.now()));
        self.remaining.set(self.remaining.get() - 1);
        if self.remaining.get() == 0 {
            k.raise_event(self.done);
        }
    }
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
            stack: Stack::Edm,
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

    /// Which transport carries every op: the EDM or the fabric (one per machine: an Ethernet
    /// core runs either an EDM or a router).
    pub fn set_stack(&mut self, stack: Stack) {
        self.stack = stack;
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

    /// What op `op`'s kernel names start with: its name and a slash when the session has more
    /// than one op.
    pub(crate) fn kernel_prefix(&self, op: usize) -> String {
        if self.ops.len() > 1 { format!("{}/", self.ops[op].name) } else { String::new() }
    }

    /// Checks `req` and queues it. Argument errors say what is wrong, not which op: a caller
    /// with many ops names it (resource errors at [`Session::run`] name the ops themselves).
    pub fn submit(&mut self, mut req: OpRequest) -> Result<OpHandle, CclError> {
        validate(self.cluster, &self.params, &req)?;
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

    /// The phases of every op, in submission order.
    pub(crate) fn phases(&self) -> Vec<Phase> {
        let mut phases: Vec<Phase> = Vec::new();
        let mut last_of: Vec<usize> = Vec::new();
        for (i, req) in self.ops.iter().enumerate() {
            let n = req.comm.size();
            let slice = req.tensor.split(req.dim, req.collective.chunks(n)).expect("validated");
            let deps: Vec<usize> = req.after.iter().map(|h| last_of[h.0]).collect();
            let topo = req.comm.topology();
            let reduce = |plan: Plan, kind: &'static str| Phase {
                op: i,
                kind,
                staging_ppp: staging_ppp(&self.params, req, &slice),
                plan,
                bidir: Bidir::None,
                slice,
                tensors: None,
                deps: deps.clone(),
            };
            let bidir = bidir_of(&self.params, req, &slice);
            let gather = |deps: Vec<usize>| Phase {
                op: i,
                kind: "ag",
                plan: plan::all_gather(n, topo, bidir, slice.pages(), !(req.exclude_myself || req.in_place)),
                bidir,
                slice,
                staging_ppp: staging_ppp(&self.params, req, &slice),
                tensors: None,
                deps,
            };
            let pages = slice.pages();
            let other = |kind: &'static str, plan: Plan| Phase { kind, plan, ..gather(deps.clone()) };
            match req.collective {
                Collective::AllGather => phases.push(gather(deps.clone())),
                Collective::ReduceScatter(_) => {
                    phases.push(reduce(plan::reduce_scatter(n, topo, pages), "rs"))
                }
                Collective::AllReduce(_) => {
                    phases.push(reduce(plan::reduce_scatter(n, topo, pages), "rs"));
                    phases.push(gather(vec![phases.len() - 1]));
                }
                // The fabric stack's own algorithm (the EDM stack refuses it); the plan is unused.
                Collective::AllToAll => phases.push(Phase { kind: "a2a", ..gather(deps.clone()) }),
                Collective::Broadcast { root } => {
                    phases.push(other("bcast", plan::broadcast(n, topo, bidir, root, pages, true)))
                }
                Collective::Reduce { root, .. } if self.reduce_by_halves(req) => {
                    // Reduce-scatter, then gather the reduced slices to the root.
                    let slice = req.tensor.split(req.dim, n as u64).expect("checked");
                    let rs = plan::reduce_scatter(n, topo, slice.pages());
                    let staging_ppp = staging_ppp(&self.params, req, &slice);
                    phases.push(Phase { slice, staging_ppp, ..reduce(rs, "rs") });
                    let g = plan::gather(n, topo, root, slice.pages());
                    phases.push(Phase { slice, deps: vec![phases.len() - 1], ..other("gather", g) });
                }
                Collective::Reduce { root, .. } => {
                    phases.push(reduce(plan::reduce(n, topo, root, pages), "reduce"))
                }
                Collective::Gather { root } => {
                    phases.push(other("gather", plan::gather(n, topo, root, pages)))
                }
                Collective::Scatter { root } => {
                    phases.push(other("scatter", plan::scatter(n, topo, root, pages)))
                }
                Collective::SendRecv => phases.push(other("sendrecv", plan::send_recv(pages))),
            }
            last_of.push(phases.len() - 1);
        }
        phases
    }

    /// Whether a reduce runs as a reduce-scatter followed by a gather to the root (MPICH's
    /// reduce_scatter_gather): on the fabric, when the selection tree says `ring` (the default
    /// tree's sizes are meshsim's tuned choice) and the tensor splits evenly over the ranks. The direct path sends every rank's whole tensor into the
    /// root's two links, so its time grows with `n` times the tensor; the halves move about
    /// twice the tensor through every link, pipelined.
    pub(crate) fn reduce_by_halves(&self, req: &OpRequest) -> bool {
        self.stack == Stack::Fabric
            && req.knobs.algorithm == Some(Algorithm::Ring)
            && req.tensor.split(req.dim, req.comm.size() as u64).is_ok()
    }

    /// Builds every op, runs them in one launch and measures each. A run that fails under
    /// injected faults says which were in force.
    pub fn run(self) -> Result<SessionRun, CclError> {
        let faults = self.faults.clone();
        self.run_inner().map_err(|e| with_faults(&faults, e))
    }

    fn run_inner(mut self) -> Result<SessionRun, CclError> {
        self.given = self.ops.iter().map(|o| o.knobs).collect();
        self.apply_selection();
        let defaults = match self.stack {
            Stack::Fabric => crate::fabric::lower::default_links(&self)?,
            Stack::Edm => vec![1; self.ops.len()],
        };
        for (req, links) in self.ops.iter_mut().zip(defaults) {
            req.knobs.links.get_or_insert(links);
        }
        let mode = if self.verify { Mode::Functional } else { Mode::Timing };
        let mut m = Machine::new(self.cluster.clone(), self.params.clone(), mode);
        if self.trace {
            m.enable_trace();
        }
        self.inject_faults(&mut m);
        let mut phases = self.phases();
        self.place_tensors(&mut phases)?;
        if self.stack == Stack::Fabric {
            return crate::fabric::lower::run(&self, m, phases);
        }
        let edm_most = crate::edm::MAX_CHANNELS / 2;
        if let Some(op) = self.ops.iter().find(|o| o.knobs.workers.is_some_and(|w| w > edm_most)) {
            return Err(CclError::Invalid(format!(
                "op '{}': workers per link must be 1..{edm_most} on the edm stack",
                op.name
            )));
        }
        if let Some(op) = self.ops.iter().find(|o| o.collective == Collective::AllToAll) {
            return Err(CclError::Invalid(format!(
                "op '{}': all-to-all runs on the fabric stack only",
                op.name
            )));
        }
        let mut b = Builder {
            cluster: self.cluster,
            programs: (0..self.cluster.chips().len()).map(|c| Program::new(ChipIdx(c as u32))).collect(),
            next_core: vec![0; self.cluster.chips().len()],
            edms: BTreeMap::new(),
            slots: BTreeMap::new(),
            created: BTreeMap::new(),
            m,
        };
        let workers = self.workers(&b, &phases)?;
        b.edms(&self, &phases, &workers)?;
        let (lanes, ppp) = b.lanes(&self, &phases, &workers)?;
        let times = Rc::new(RefCell::new(Vec::new()));
        let done: Vec<SignalId> = phases
            .iter()
            .map(|p| b.m.new_event(&format!("op '{}' {} done", self.ops[p.op].name, p.kind)))
            .collect();
        for (pi, p) in phases.iter().enumerate() {
            let kernels = 4 * lanes.iter().filter(|l| l.phase == pi).count() + p.plan.copies.len();
            let gate = Gate::new(pi, &p.deps, &done, kernels, &times);
            let prefix = self.kernel_prefix(p.op);
            for lane in lanes.iter().filter(|l| l.phase == pi) {
                b.kernels(&self, p, lane, &lanes, &gate, &prefix);
            }
            for &copy in &p.plan.copies {
                b.copy_kernel(&self, p, copy, &gate, &prefix)?;
            }
        }
        if self.verify {
            self.write_inputs(&b.m, &phases)?;
        }
        let start_of = self.start_of();
        for (_, edm) in std::mem::take(&mut b.edms) {
            edm.install(&mut b.programs);
        }
        let stats = b.m.launch(b.programs, &start_of).map_err(|e| CclError::Simulation(e.to_string()))?;
        if let Some(late) = b.m.late_landings().first() {
            return Err(CclError::Protocol(format!(
                "EDM protocol error: a packet landed on chip {} eth{} at {:#x} ({}) after its kernels finished",
                self.cluster.chip(late.chip).id,
                late.chan,
                late.addr,
                late.at
            )));
        }
        no_negative_semaphore(&b.m, self.cluster)?;
        let times = times.borrow();
        // The EDM ops run their plans over the communicator's topology.
        let algorithms: Vec<&'static str> = phases
            .iter()
            .map(|p| if self.ops[p.op].comm.topology() == Topology::Ring { "ring" } else { "line" })
            .collect();
        let ops: Vec<OpResult> = (0..self.ops.len())
            .map(|i| self.result(i, &b.m, &phases, &times, &start_of, (&workers, &ppp, &algorithms)))
            .collect();
        let makespan = ops.iter().map(|o| o.end).max().unwrap_or(Time::ZERO)
            - ops.iter().map(|o| o.start).min().unwrap_or(Time::ZERO);
        let (links, marks, resources) = (b.m.link_use(), b.m.marks(), b.m.resource_use());
        let trace = b.m.take_trace();
        Ok(SessionRun { ops, makespan, stats, links, marks, resources, routers: Vec::new(), trace })
    }

    /// Worker pairs per link and direction of every op: as asked, or tt-metal's
    /// [`DEFAULT_WORKERS`] shrunk so that on every link the phases that may run at the same time
    /// fit the EDM's 8 channels — the channels left by ops with explicit workers are shared
    /// evenly among the uses of the link by ops on defaults. Phases that run one after the
    /// other (dependencies, an all-reduce's two halves) reuse channels, so they do not count
    /// against each other.
    fn workers(&self, b: &Builder, phases: &[Phase]) -> Result<Vec<usize>, CclError> {
        // How many (flow, hop) uses each phase makes of each link: each needs a channel per
        // worker.
        let uses: Vec<BTreeMap<LinkId, usize>> = phases
            .iter()
            .map(|p| {
                let mut u = BTreeMap::new();
                for f in 0..p.plan.flows.len() {
                    for k in 0..self.ops[p.op].comm.size() {
                        for l in b.hop(self, p, f, k).map(|h| h.1).unwrap_or_default() {
                            *u.entry(l).or_default() += 1;
                        }
                    }
                }
                u
            })
            .collect();
        let after = after_matrix(phases);
        let max = crate::edm::MAX_CHANNELS;
        let mut out = Vec::with_capacity(self.ops.len());
        for (i, req) in self.ops.iter().enumerate() {
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
                        match self.ops[q.op].knobs.workers {
                            Some(x) => fixed += x * n,
                            None => shared += n,
                        }
                    }
                    w = w.min(max.saturating_sub(fixed) / shared);
                    if w == 0 {
                        let link = self.cluster.link(l);
                        let id = |c: ChipIdx| self.cluster.chip(c).id;
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

    /// Gives every phase its tensors, in submission order, each after the last in its memory.
    pub(crate) fn place_tensors(&self, phases: &mut [Phase]) -> Result<(), CclError> {
        let mut next: BTreeMap<bool, u64> = BTreeMap::new();
        let mut alloc = |memory: Memory, page: u64, pages: u64| -> Placement {
            let first = Placement::first(memory, page);
            let base = *next.get(&(memory == Memory::L1)).unwrap_or(&first.base);
            let p = Placement { base, ..first };
            next.insert(memory == Memory::L1, p.after(pages).base);
            p
        };
        let mut i = 0;
        while i < phases.len() {
            let req = &self.ops[phases[i].op];
            let (slice, mem) = (phases[i].slice, req.knobs.memory);
            // The chunks the phase cuts the op's tensor into.
            let n = req.tensor.pages() / slice.pages();
            let (page, whole) = (slice.page_bytes(), slice.pages() * n);
            let fits = |p: &Placement, pages: u64, what: &str| -> Result<(), CclError> {
                if p.base + p.bank_bytes(pages) > p.capacity(&self.params) {
                    return Err(CclError::Invalid(format!(
                        "op '{}': {what} do not fit in {mem} ({} B per bank free of {} B)",
                        req.name,
                        p.capacity(&self.params).saturating_sub(p.base),
                        p.capacity(&self.params)
                    )));
                }
                Ok(())
            };
            let t = |input, output, scratch| Tensors {
                input,
                output,
                scratch,
                slice,
                dim: req.dim,
                n,
                in_place: false,
            };
            match req.collective {
                Collective::AllToAll | Collective::Broadcast { .. } | Collective::SendRecv => {
                    let (input, output) = (alloc(mem, page, whole), alloc(mem, page, whole));
                    fits(
                        &output,
                        whole,
                        &format!("input and output ({} B per chip)", 2 * req.tensor.bytes()),
                    )?;
                    phases[i].tensors = Some(t(input, output, None));
                }
                Collective::AllGather if req.in_place => {
                    let output = alloc(mem, page, whole);
                    fits(&output, whole, &format!("the output ({} B per chip)", n * slice.bytes()))?;
                    phases[i].tensors = Some(Tensors { in_place: true, ..t(output, output, None) });
                }
                Collective::AllGather | Collective::Gather { .. } => {
                    let (input, output) = (alloc(mem, page, slice.pages()), alloc(mem, page, whole));
                    fits(
                        &output,
                        whole,
                        &format!("input and output ({} B per chip)", (n + 1) * slice.bytes()),
                    )?;
                    phases[i].tensors = Some(t(input, output, None));
                }
                Collective::Scatter { .. } => {
                    let (input, output) = (alloc(mem, page, whole), alloc(mem, page, slice.pages()));
                    fits(
                        &output,
                        slice.pages(),
                        &format!("input and output ({} B per chip)", (n + 1) * slice.bytes()),
                    )?;
                    phases[i].tensors = Some(t(input, output, None));
                }
                Collective::ReduceScatter(_) | Collective::AllReduce(_) | Collective::Reduce { .. } => {
                    // Partials travel through the senders' relay buffers; only a line parks one
                    // per rank (the side that arrives first), in scratch.
                    let input = alloc(mem, page, whole);
                    let scratch = phases[i].plan.has_joins().then(|| alloc(mem, page, whole));
                    let output = alloc(mem, page, slice.pages());
                    let what = format!("input, scratch and output ({} B per chip)", 2 * req.tensor.bytes());
                    fits(&output, slice.pages(), &what)?;
                    phases[i].tensors = Some(t(input, output, scratch));
                    // A second phase (an all-reduce's all-gather, a reduce's gather) takes the
                    // reduced slice to its whole result.
                    if phases.get(i + 1).is_some_and(|q| q.op == phases[i].op) {
                        let result = alloc(mem, page, whole);
                        fits(&result, whole, "input, scratch, reduced slice and output")?;
                        phases[i + 1].tensors = Some(t(output, result, None));
                        i += 1;
                    }
                }
            }
            i += 1;
        }
        Ok(())
    }

    /// Host writes of every op's input (functional mode).
    pub(crate) fn write_inputs(&self, m: &Machine, phases: &[Phase]) -> Result<(), CclError> {
        for (i, req) in self.ops.iter().enumerate() {
            let p = phases.iter().find(|p| p.op == i).expect("every op has a phase");
            let t = p.tensors.expect("placed");
            let page = t.slice.page_bytes();
            for (k, &chip) in req.comm.chips().iter().enumerate() {
                let (pages, data): (u64, &dyn Fn(u64) -> Vec<u8>) = match req.collective {
                    Collective::AllGather | Collective::Gather { .. } => {
                        (t.slice.pages(), &|q| gather_page(k as u64, q, page))
                    }
                    // Only the root (rank 0 of a send/receive) has an input.
                    Collective::Broadcast { root } | Collective::Scatter { root } if k != root => continue,
                    Collective::SendRecv if k != 0 => continue,
                    Collective::AllToAll
                    | Collective::Broadcast { .. }
                    | Collective::Scatter { .. }
                    | Collective::SendRecv => (req.tensor.pages(), &|q| gather_page(k as u64, q, page)),
                    Collective::ReduceScatter(_) | Collective::AllReduce(_) | Collective::Reduce { .. } => {
                        (req.tensor.pages(), &|q| reduce_page(k as u64, q, page))
                    }
                };
                for q in 0..pages {
                    let (place, at) = t.own_page(k, q);
                    let (bank, addr) = place.page(at);
                    host_write(m, chip, place, bank, addr, &data(q)).map_err(|e| CclError::Invalid(e.0))?;
                }
            }
        }
        Ok(())
    }

    pub(crate) fn result(
        &self,
        i: usize,
        m: &Machine,
        phases: &[Phase],
        times: &[(usize, ChipIdx, Time, Time)],
        start_of: &dyn Fn(ChipIdx) -> Time,
        (workers, ppp, algorithms): (&[usize], &[u64], &[&'static str]),
    ) -> OpResult {
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
        let verified = self.verify.then(|| self.check(i, m, phases));
        OpResult {
            name: req.name.clone(),
            collective: req.collective,
            chips: req.comm.chips().to_vec(),
            start,
            end,
            time,
            bytes,
            busbw_gbps,
            per_chip,
            verified,
            workers: workers[i],
            bidir: phases[last].bidir,
            pages_per_packet: ppp[first],
            links: req.knobs.links(),
            stack: self.stack,
            algorithm: mine.iter().map(|&p| algorithms[p]).collect::<Vec<_>>().join(" + "),
        }
    }

    /// Checks op `i`'s outputs on every rank against what the collective must produce.
    fn check(&self, i: usize, m: &Machine, phases: &[Phase]) -> Result<(), String> {
        let req = &self.ops[i];
        let last = phases.iter().rev().find(|p| p.op == i).expect("every op has a phase");
        let t = last.tensors.expect("placed");
        let (n, page) = (req.comm.size() as u64, t.slice.page_bytes());
        let whole = req.tensor.pages();
        let reduction = req.reduction();
        let reduced = |_, q: u64| {
            let red = reduction.as_ref().expect("a reducing collective");
            let mut want = reduce_page(0, q, page);
            for k in 1..n {
                red.reduce_words(&mut want, &reduce_page(k, q, page));
            }
            want
        };
        for (c, &chip) in req.comm.chips().iter().enumerate() {
            // (page of the output, expected bytes) for every output page of this rank.
            let c64 = c as u64;
            let expect: Vec<(u64, Vec<u8>)> = match req.collective {
                Collective::AllGather | Collective::Gather { .. } => (0..n)
                    .filter(|&s| match req.collective {
                        Collective::Gather { root } => c == root,
                        _ => !(req.exclude_myself && s == c64),
                    })
                    .flat_map(|s| (0..t.slice.pages()).map(move |p| (s, p)))
                    .map(|(s, p)| (t.slice.page_in_whole(req.dim, n, s, p), gather_page(s, p, page)))
                    .collect(),
                Collective::ReduceScatter(red) => (0..t.slice.pages())
                    .map(|p| (p, reduced(red, t.slice.page_in_whole(req.dim, n, c as u64, p))))
                    .collect(),
                Collective::AllReduce(red) => (0..whole).map(|q| (q, reduced(red, q))).collect(),
                Collective::Reduce { red, root } if c == root => {
                    (0..whole).map(|q| (q, reduced(red, q))).collect()
                }
                Collective::Broadcast { root } => {
                    (0..whole).map(|q| (q, gather_page(root as u64, q, page))).collect()
                }
                Collective::Scatter { root } => (0..t.slice.pages())
                    .map(|p| (p, gather_page(root as u64, t.slice.page_in_whole(req.dim, n, c64, p), page)))
                    .collect(),
                Collective::SendRecv if c == 1 => (0..whole).map(|q| (q, gather_page(0, q, page))).collect(),
                Collective::Reduce { .. } | Collective::SendRecv => Vec::new(),
                // Chunk s of rank c's output is chunk c of rank s's input.
                Collective::AllToAll => (0..n)
                    .flat_map(|s| (0..t.slice.pages()).map(move |p| (s, p)))
                    .map(|(s, p)| {
                        let from = t.slice.page_in_whole(req.dim, n, c as u64, p);
                        (t.slice.page_in_whole(req.dim, n, s, p), gather_page(s, from, page))
                    })
                    .collect(),
            };
            for (q, want) in expect {
                let (bank, addr) = t.output.page(q);
                let got = host_read(m, chip, &t.output, bank, addr, page)?;
                if let Some(w) = (0..page as usize).step_by(4).find(|&w| got[w..w + 4] != want[w..w + 4]) {
                    let word = |b: &[u8]| u32::from_le_bytes(b[w..w + 4].try_into().expect("4 bytes"));
                    return Err(format!(
                        "chip {}: output byte offset {} (page {q}): expected {:#010x}, got {:#010x}",
                        m.cluster().chip(chip).id,
                        q * page + w as u64,
                        word(&want),
                        word(&got)
                    ));
                }
            }
        }
        Ok(())
    }
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

/// Most workers per link and direction an op may ask for: tt-metal's fabric reduce-scatter
/// runs up to 8; the EDM stack takes at most half an EDM's channels (checked when it runs).
pub const MAX_WORKERS: usize = crate::edm::MAX_CHANNELS;

/// The links per hop tt-metal would use for `collective` on `comm` over `stack`, when the op
/// runs alone ([`Knobs::links`]): 1 on the EDM stack and for all-to-all; otherwise the fewest
/// usable links (routing planes) over the communicator's hops — meshsim's reserved dispatch
/// links already stand for tt-metal's "one fewer on a chip without MMIO". In a session, an op
/// riding on a longer fabric line takes that line's planes.
pub fn default_links(cluster: &Cluster, stack: Stack, collective: Collective, comm: &Communicator) -> usize {
    if stack == Stack::Edm || crate::fabric::lower::on_link_zero(collective) {
        return 1;
    }
    let closed = comm.topology() == Topology::Ring && comm.size() > 2;
    crate::fabric::lower::line_planes(cluster, &crate::fabric::Line { chips: comm.chips().to_vec(), closed })
}

/// Checks an op's arguments against the cluster.
/// A failed run's message with the faults in force, so the report names them.
fn with_faults(faults: &[crate::fault::Fault], e: CclError) -> CclError {
    if faults.is_empty() {
        return e;
    }
    let list: Vec<String> = faults.iter().map(ToString::to_string).collect();
    match e {
        CclError::Simulation(m) => CclError::Simulation(format!("{m}; faults injected: {}", list.join(", "))),
        CclError::Protocol(m) => CclError::Protocol(format!("{m}; faults injected: {}", list.join(", "))),
        other => other,
    }
}

/// The run's first semaphore an atomic decrement took below zero, as a protocol error naming
/// the chip, core, address and time.
pub(crate) fn no_negative_semaphore(m: &Machine, cluster: &Cluster) -> Result<(), CclError> {
    match m.negative_semaphores().first() {
        None => Ok(()),
        Some(neg) => Err(CclError::Protocol(format!(
            "a semaphore went negative: chip {} core ({}, {}) at {:#x} became {} at {}",
            cluster.chip(neg.chip).id,
            neg.core.x,
            neg.core.y,
            neg.addr,
            neg.value,
            neg.at
        ))),
    }
}

pub(crate) fn validate(cluster: &Cluster, params: &Params, req: &OpRequest) -> Result<TensorSpec, OpError> {
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
        if let Some(links) = k.links.filter(|&l| l > have) {
            return Err(OpError(format!(
                "{links} links requested, but the hop from chip {} to chip {} has {have} usable (reserved links excluded)",
                id(a),
                id(b)
            )));
        }
    }
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
    // The workers' staging must hold their buffers of packets as asked, or of one page.
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
    Ok(slice)
}

/// `after[p][q]`: phase `p` starts only after phase `q` has ended (directly or through others).
pub(crate) fn after_matrix(phases: &[Phase]) -> Vec<Vec<bool>> {
    let n = phases.len();
    let mut after = vec![vec![false; n]; n];
    // Dependencies point to earlier phases, so one pass in order closes them transitively.
    for p in 0..n {
        for &d in &phases[p].deps {
            let inherited = after[d].clone();
            for (mine, &theirs) in after[p].iter_mut().zip(&inherited) {
                *mine |= theirs;
            }
            after[p][d] = true;
        }
    }
    after
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

/// The bytes of page `p` of rank `k`'s all-gather input: distinct words per rank, page and
/// offset.
pub fn gather_page(k: u64, p: u64, page: u64) -> Vec<u8> {
    (0..page / 4).flat_map(|i| (((k << 24) ^ (p << 10) ^ i) as u32).to_le_bytes()).collect()
}

/// The bytes of page `q` of rank `k`'s reduction input: small integers, so sums are exact.
pub fn reduce_page(k: u64, q: u64, page: u64) -> Vec<u8> {
    (0..page / 4).flat_map(|i| ((k + 1) * 1000 + (q * 7 + i) % 997).to_le_bytes()[..4].to_vec()).collect()
}

/// The machine and programs being built.
struct Builder<'a> {
    cluster: &'a Cluster,
    m: Machine,
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
    fn hop(&self, s: &Session, p: &Phase, f: usize, k: usize) -> Option<(usize, Vec<LinkId>)> {
        let req = &s.ops[p.op];
        let n = req.comm.size();
        let to = p.plan.flows[f].dir.next(k, n, req.comm.topology())?;
        let links = self.cluster.usable_links_between(req.comm.chip(k), req.comm.chip(to));
        Some((to, links[..req.knobs.links()].to_vec()))
    }

    /// One EDM per link used by any op, with a channel per lane of every op on it.
    fn edms(&mut self, s: &Session, phases: &[Phase], workers: &[usize]) -> Result<(), CclError> {
        // Every lane a phase may have takes an EDM channel slot on its link: a slot already
        // used, in the same direction, only by phases this one runs after (the channel returns
        // to the link when they end), or a new one.
        let after = after_matrix(phases);
        let mut link_slots: BTreeMap<LinkId, Vec<(usize, Vec<usize>)>> = BTreeMap::new();
        let mut uses: BTreeMap<LinkId, (usize, u64, u64, Vec<&str>)> = BTreeMap::new();
        for (pi, p) in phases.iter().enumerate() {
            let req = &s.ops[p.op];
            for f in 0..p.plan.flows.len() {
                for k in 0..req.comm.size() {
                    let Some((_, links)) = self.hop(s, p, f, k) else { continue };
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
            if channels > crate::edm::MAX_CHANNELS {
                return Err(CclError::Invalid(format!(
                    "the link chip {} eth{} - chip {} eth{} needs {channels} EDM channels for ops {}; an EDM has {}",
                    id(link.a.chip),
                    link.a.chan,
                    id(link.b.chip),
                    link.b.chan,
                    names.join(", "),
                    crate::edm::MAX_CHANNELS
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
            let edm = EdmLink::new(cfg, &s.params, end(link.a), end(link.b))
                .map_err(|e| CclError::Invalid(e.to_string()))?;
            self.edms.insert(l, edm);
        }
        Ok(())
    }

    fn core(&mut self, chip: ChipIdx) -> Result<CoreRef, CclError> {
        let k = self.next_core[chip.0 as usize];
        if k >= WORKER_CORES {
            return Err(CclError::Invalid(format!(
                "chip {} has no worker core left: the ops need more than {WORKER_CORES}",
                self.cluster.chip(chip).id
            )));
        }
        self.next_core[chip.0 as usize] += 1;
        Ok(CoreRef::Worker(CoreCoord { x: (k % 8) as u32, y: (k / 8) as u32 }))
    }

    /// A lane (worker pair and EDM channel) per phase, flow, hop and link x worker.
    /// Returns the lanes and every phase's pages per packet.
    fn lanes(
        &mut self,
        s: &Session,
        phases: &[Phase],
        workers: &[usize],
    ) -> Result<(Vec<Lane>, Vec<u64>), CclError> {
        let mut lanes = Vec::new();
        let mut ppps = Vec::new();
        for (pi, p) in phases.iter().enumerate() {
            let req = &s.ops[p.op];
            let page = p.slice.page_bytes();
            let mut used: Vec<LinkId> = Vec::new();
            for f in 0..p.plan.flows.len() {
                for k in 0..req.comm.size() {
                    used.extend(self.hop(s, p, f, k).map(|h| h.1).unwrap_or_default());
                }
            }
            let min_buffer = used.iter().map(|l| self.edms[l].buffer_bytes()).min();
            let ppp = packet_pages(req.knobs.pages_per_packet, page, min_buffer, p.staging_ppp)
                .map_err(CclError::from)?;
            ppps.push(ppp);
            let window = if p.plan.uses_relay() { RELAY_PACKETS as usize } else { usize::MAX };
            for (fi, flow) in p.plan.flows.iter().enumerate() {
                for from in 0..req.comm.size() {
                    let Some((to, links)) = self.hop(s, p, fi, from) else { continue };
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
                        let lane = self.lane(s, p, at, seqs, page, ppp * page)?;
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
        s: &Session,
        p: &Phase,
        at: LaneAt,
        seqs: (Walk, Walk),
        page: u64,
        packet: u64,
    ) -> Result<Lane, CclError> {
        let comm = &s.ops[p.op].comm;
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
        s: &Session,
        p: &Phase,
        copy: plan::Copy,
        gate: &Gate,
        prefix: &str,
    ) -> Result<(), CclError> {
        let chip = s.ops[p.op].comm.chip(copy.rank);
        let core = self.core(chip)?;
        let (t, g) = (p.tensors.expect("placed"), gate.clone());
        let batch = (staging_bytes(&s.params) / t.slice.page_bytes()).clamp(1, 8);
        let name = format!("{prefix}{}_copy", p.kind);
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
    fn kernels(&mut self, s: &Session, p: &Phase, lane: &Lane, lanes: &[Lane], gate: &Gate, prefix: &str) {
        let req = &s.ops[p.op];
        let flow = &p.plan.flows[lane.flow];
        let same = |q: &&Lane| q.phase == lane.phase && q.flow == lane.flow && q.j == lane.j;
        // A forwarding receiver feeds the sender of the next hop of its flow on its chip (same
        // lane index); that sender frees relay slots on the receiver that fed it. A joining
        // receiver signals the other flow's receiver on its chip.
        let next = lanes.iter().find(|q| same(q) && q.from == lane.to);
        let c = Rc::new(LaneCtx {
            t: p.tensors.expect("placed"),
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
        let name = |what: &str| format!("{prefix}{}_{what}", p.kind);
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

/// What a lane's four kernels share, resolved when the lane is built.
struct LaneCtx {
    t: Tensors,
    gate: Gate,
    /// Bytes of a packet slot (the sender's CB slot and relay slot).
    packet: u64,
    sends: Rc<[Send]>,
    receives: Rc<[Recv]>,
    send_seq: Walk,
    recv_seq: Walk,
    s_cb: Cb,
    r_cb: Cb,
    /// The sender's EDM credit semaphore, the receiver's.
    s_sem: u64,
    r_sem: u64,
    /// The sender's forward semaphore (chunks its chip's receiver made ready).
    fwd: u64,
    relay_base: u64,
    /// The receiver's semaphore the next sender increments per relay slot it freed.
    relay_free: u64,
    /// The receiver's join semaphore, and the other flow's receiver's it signals.
    join_at: Option<u64>,
    join_to: Option<(CoreCoord, u64)>,
    /// The next hop's sender on this chip: its forward semaphore, its core and relay buffer.
    forward_to: Option<(CoreCoord, u64)>,
    relay_to: Option<(CoreCoord, u64)>,
    /// The receiver that feeds this lane's sender: its relay-free semaphore.
    fed_by: Option<(CoreCoord, u64)>,
    red: Option<Reduction>,
}

/// Increments a semaphore of another core of this chip.
async fn inc_at(k: &Kernel, (at, addr): (CoreCoord, u64)) -> TaskResult {
    k.noc_semaphore_inc(k.get_noc_addr(at.x, at.y, addr), 1).await?;
    Ok(())
}

/// The sender's reader: fetches every packet that is not relayed into the sender's CB, a
/// forwarded one once its chip's receiver has stored it.
async fn sender_reader(k: Kernel, c: Rc<LaneCtx>) -> TaskResult {
    let start = c.gate.enter(&k).await;
    let (t, cb) = (&c.t, c.s_cb);
    let (mut n, mut forwarded) = (0u64, 0u32);
    for &(si, lo, hi) in c.send_seq.iter() {
        let step = &c.sends[si];
        if step.from == Loc::Relay {
            continue; // the writer sends it from the relay buffer
        }
        if step.forwarded {
            forwarded += 1;
            k.noc_semaphore_wait_min(c.fwd, forwarded).await?;
        }
        cb.reserve(&k, n).await?;
        let (place, pages) = t.pages(step.from, step.slice, lo, hi);
        read_pages(&k, place, pages, cb.at(n)).await?;
        cb.push(&k)?;
        n += 1;
    }
    c.gate.leave(&k, start);
    Ok(())
}

/// The sender's writer: pushes every packet into the EDM — from the CB, or from the relay buffer
/// where its chip's receiver put a partial — and its own slice's copy into the output; the last
/// message carries the channel's termination signal.
async fn sender_writer(k: Kernel, c: Rc<LaneCtx>, tx: ChannelInterface) -> TaskResult {
    let start = c.gate.enter(&k).await;
    let (t, cb) = (&c.t, c.s_cb);
    let mut w = SenderWorker::new(tx, c.s_sem, 0);
    let (mut n, mut relayed) = (0u64, 0u64);
    for (i, &(si, lo, hi)) in c.send_seq.iter().enumerate() {
        let step = &c.sends[si];
        let last = i + 1 == c.send_seq.len();
        if step.from == Loc::Relay {
            // The receiver has put the partial in relay slot `relayed`.
            k.noc_semaphore_wait_min(c.fwd, (relayed + 1) as u32).await?;
            w.send(&k, c.relay_base + (relayed % RELAY_PACKETS) * c.packet).await?;
            if last {
                w.terminate(&k).await?;
            }
            k.noc_async_write_barrier().await?;
            inc_at(&k, c.fed_by.expect("a relayed send has a feeding receiver")).await?;
            relayed += 1;
            continue;
        }
        cb.wait_filled(&k, n).await?;
        if let Some(to) = step.copy_to {
            let (place, pages) = t.pages(to, step.slice, lo, hi);
            write_pages(&k, place, pages, cb.at(n)).await?;
        }
        w.send(&k, cb.at(n)).await?;
        if last {
            w.terminate(&k).await?;
        }
        k.noc_async_write_barrier().await?;
        cb.pop(&k)?;
        n += 1;
    }
    c.gate.leave(&k, start);
    Ok(())
}

/// The receiver's reader: pulls every packet out of the EDM into the receiver's CB with the
/// matching pages of its reduction operands (after a join, the other side's partial); then
/// ends the channel.
async fn receiver_reader(k: Kernel, c: Rc<LaneCtx>, rx: ChannelInterface) -> TaskResult {
    let start = c.gate.enter(&k).await;
    let (t, cb) = (&c.t, c.r_cb);
    let mut w = ReceiverWorker::new(rx, c.r_sem, 0);
    let (mut n, mut joined) = (0u64, 0u32);
    for &(si, lo, hi) in c.recv_seq.iter() {
        let step = &c.receives[si];
        cb.reserve(&k, n).await?;
        let bytes = w.receive(&k, cb.at(n)).await?;
        if step.wait_join {
            joined += 1;
            k.noc_semaphore_wait_min(c.join_at.expect("a joining receiver has a join semaphore"), joined)
                .await?;
        }
        for (i, &loc) in step.reduce_with.iter().enumerate() {
            let (place, pages) = t.pages(loc, step.slice, lo, hi);
            let at = cb.at(n) + (i as u64 + 1) * bytes;
            read_pages(&k, place, pages, at).await?;
        }
        cb.push(&k)?;
        n += 1;
    }
    // Read the last message: the receiver channel may end.
    w.terminate(&k).await?;
    c.gate.leave(&k, start);
    Ok(())
}

/// The receiver's writer: reduces each packet with its operands, then stores it or hands it to
/// the next sender's relay buffer (once that slot is free), and signals joins and forwards.
async fn receiver_writer(k: Kernel, c: Rc<LaneCtx>) -> TaskResult {
    let start = c.gate.enter(&k).await;
    let (t, cb) = (&c.t, c.r_cb);
    let reduce = k.cycles(k.params().tile_reduce_cycles);
    let (mut n, mut relayed) = (0u64, 0u64);
    for &(si, lo, hi) in c.recv_seq.iter() {
        let step = &c.receives[si];
        cb.wait_filled(&k, n).await?;
        let at = cb.at(n);
        let bytes = (hi - lo) * t.slice.page_bytes();
        if !step.reduce_with.is_empty() {
            if k.is_functional() {
                let red = c.red.as_ref().expect("a reducing step belongs to a reduction");
                let mut acc = k.read_bytes(at, bytes)?;
                for i in 1..=step.reduce_with.len() as u64 {
                    red.reduce_words(&mut acc, &k.read_bytes(at + i * bytes, bytes)?);
                }
                k.write_bytes(at, &acc)?;
            }
            k.delay(Time(reduce.0 * (hi - lo) * step.reduce_with.len() as u64)).await;
        }
        if step.to == Loc::Relay {
            // Into the next sender's relay slot once that sender has sent what was there.
            if relayed >= RELAY_PACKETS {
                k.noc_semaphore_wait_min(c.relay_free, (relayed + 1 - RELAY_PACKETS) as u32).await?;
            }
            let (core, base) = c.relay_to.expect("a relaying receiver has a next hop");
            let slot = base + (relayed % RELAY_PACKETS) * c.packet;
            k.noc_async_write(at, k.get_noc_addr(core.x, core.y, slot), bytes).await?;
            relayed += 1;
        } else {
            let (place, pages) = t.pages(step.to, step.slice, lo, hi);
            write_pages(&k, place, pages, at).await?;
        }
        k.noc_async_write_barrier().await?;
        if step.signal_join {
            inc_at(&k, c.join_to.expect("a join signal has a partner")).await?;
        }
        if step.forward {
            inc_at(&k, c.forward_to.expect("a forwarding receiver has a next hop")).await?;
        }
        cb.pop(&k)?;
        n += 1;
    }
    c.gate.leave(&k, start);
    Ok(())
}
