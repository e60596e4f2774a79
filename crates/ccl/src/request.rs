//! What a caller gives a session and what it gets back: an op request with its dependencies
//! (oneCCL's request, stream and event), a collective context's limits, and the results of a
//! run.

use meshsim_engine::Time;
use meshsim_topology::ChipIdx;

use crate::comm::Communicator;
use crate::op::{Bidir, Collective, Knobs, OpRun, Reducer, Reduction};
use crate::tensor::TensorSpec;

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
    /// Its tensor, as [`OpRequest::tensor`].
    pub tensor: TensorSpec,
    /// The dimension gathered or scattered along.
    pub dim: usize,
    /// Where its tensors were interleaved.
    pub memory: crate::tensor::Memory,
    /// Whether its outputs persisted from an earlier call ([`Knobs::persistent_buffers`]).
    pub persistent_buffers: bool,
    /// Its chips, in rank order.
    pub chips: Vec<ChipIdx>,
    /// Whether its chips formed a ring or a line.
    pub topology: crate::op::Topology,
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
    /// Its packets' payload at most, bytes (its first phase's): the fabric routers' payload, or
    /// an EDM buffer's bytes.
    pub packet_bytes: u64,
    /// Links (routing planes on the fabric) used per hop: the knob, or its default.
    pub links: usize,
    /// The transport it ran on ([`crate::transport::Transport::name`]).
    pub transport: &'static str,
    /// The model that simulated it.
    pub model: crate::op::SimModel,
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
    /// Per link direction of `links`, the ops (by index) whose packets crossed it, when the
    /// model knows (the flow model); empty when it does not (the packet model counts packets
    /// per link, not per op).
    pub link_ops: Vec<Vec<usize>>,
    /// Kernel marks, in time order.
    pub marks: Vec<meshsim_hw::Mark>,
    /// The busiest NoC link or port and DRAM bank.
    pub resources: meshsim_hw::trace::ResourceUse,
    /// Every fabric router's statistics (fabric stack; empty on the EDM stack).
    pub routers: Vec<crate::routers::RouterUse>,
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
