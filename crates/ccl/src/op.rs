//! What every collective shares: the collective and its reduction, the knobs every op takes
//! (declared once), ring or line, bidirectional modes, the library's typed errors and an op's
//! result.

use std::fmt;

use meshsim_engine::{Stats, Time};
use meshsim_topology::ChipIdx;

use crate::tensor::Memory;

use crate::named::named;

/// How slices move around a ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bidir {
    /// One direction only.
    None,
    /// Each slice split in two halves, one going each way around.
    Split,
    /// The whole slice goes half-way round each way.
    Full,
}
named!(Bidir, "bidirectional mode", None => "none", Split => "split", Full => "full");

/// The transport under the collectives: the legacy ERISC Data Mover launched per op, or the
/// persistent TT-Fabric routers tt-metal runs since 2025.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stack {
    /// The ERISC Data Mover of the CCL guide.
    Edm,
    /// TT-Fabric routers and worker kernels that inject packets into them.
    Fabric,
}
named!(Stack, "stack", Edm => "edm", Fabric => "fabric");

impl Stack {
    /// The stack tt-metal runs today, and meshsim's default: the fabric.
    pub const DEFAULT: Stack = Stack::Fabric;
}

/// Which stack-specific knobs a caller gave (flags, suite keys, workload keys, or a request's
/// knobs as submitted), for [`crate::transport::Transport::refuses`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Given {
    /// `workers`.
    pub workers: bool,
    /// `bidir`.
    pub bidir: bool,
    /// `pages_per_packet`.
    pub pages_per_packet: bool,
    /// `buffers`.
    pub buffers: bool,
    /// `packet_size`.
    pub packet_size: bool,
    /// `persistent_buffers`.
    pub persistent_buffers: bool,
}

impl Given {
    /// What a request's knobs give as submitted, before any default or selection (buffers
    /// per channel: when not the default).
    pub fn of(knobs: &Knobs) -> Given {
        Given {
            workers: knobs.workers.is_some(),
            bidir: knobs.bidir.is_some(),
            pages_per_packet: knobs.pages_per_packet.is_some(),
            buffers: knobs.buffers_per_channel != Knobs::default().buffers_per_channel,
            packet_size: knobs.packet_bytes.is_some(),
            persistent_buffers: knobs.persistent_buffers,
        }
    }
}

/// An algorithm a caller or a selection tree names ([`crate::select`]); which ones a
/// collective runs on a stack is the stack's transport's to say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// The library's own rule for the op's shape (tt-metal's where it has the collective).
    Auto,
    /// Chains along the ring or line: reduce-scatter's and all-reduce's reduction chains; a
    /// reduce's reduce-scatter then gather.
    Ring,
    /// One-shot point to point: the direct reduce-scatter and reduce; gather, scatter,
    /// send-recv and all-to-all.
    Direct,
    /// The all-gather (and broadcast) multicast factory.
    Multicast,
    /// The unicast (relay) all-gather factory, rings only.
    Relay,
}

named!(
    Algorithm,
    "algorithm",
    Auto => "auto",
    Ring => "ring",
    Direct => "direct",
    Multicast => "multicast",
    Relay => "relay",
);

/// Which model simulates a session: every packet, or flows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SimModel {
    /// The packet-level model: every packet through the hardware model (the reference).
    #[default]
    Packet,
    /// The flow-level model: each transfer as a fluid flow over the resources it uses.
    Flow,
}

named!(SimModel, "model", Packet => "packet", Flow => "flow");

impl serde::Serialize for SimModel {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// How a communicator's chips connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// A closed ring.
    Ring,
    /// An open line.
    Line,
}
// ttnn spells the line `Linear` (`ttnn.Topology.Linear`).
named!(Topology, "topology", Ring => "ring", Line => "line"; aliases: "linear" => Line);

/// An element-wise reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedOp {
    /// Element-wise sum.
    Sum,
    /// Element-wise maximum.
    Max,
    /// Element-wise minimum.
    Min,
    /// Element-wise product.
    Prod,
}
named!(RedOp, "reduction", Sum => "sum", Max => "max", Min => "min", Prod => "prod");

impl RedOp {
    /// Reduces `other` into `acc`, 32-bit word by word. Functional runs carry integer-valued
    /// test words, and every reduction here is exact on them (sums and products modulo 2^32),
    /// associative and commutative, so any order of application gives the same bytes.
    pub fn reduce_words(self, acc: &mut [u8], other: &[u8]) {
        for (a, b) in acc.chunks_exact_mut(4).zip(other.chunks_exact(4)) {
            let x = u32::from_le_bytes(a.try_into().expect("4 bytes"));
            let y = u32::from_le_bytes(b.try_into().expect("4 bytes"));
            let r = match self {
                RedOp::Sum => x.wrapping_add(y),
                RedOp::Max => x.max(y),
                RedOp::Min => x.min(y),
                RedOp::Prod => x.wrapping_mul(y),
            };
            a.copy_from_slice(&r.to_le_bytes());
        }
    }
}

/// A caller's reduction (LPF's reducer and combiner, MPI's user op): a function that combines
/// an array of elements `from` into `into`, element by element. Functional runs carry 32-bit
/// words; the library may cut both arrays into pieces (packets, pages) and call it on each,
/// and applies it in an order its plans fix, so the result is deterministic. It is exact
/// against the verification's rank-order reduction when the function is associative and
/// commutative.
#[derive(Clone)]
pub struct Reducer {
    name: std::sync::Arc<str>,
    f: std::sync::Arc<CombineFn>,
}

/// What a [`Reducer`] calls: combine `from` into `into`.
type CombineFn = dyn Fn(&mut [u32], &[u32]) + Send + Sync;

impl Reducer {
    /// A reducer applying `f` to each pair of elements: `into[i] = f(into[i], from[i])`.
    pub fn elementwise(name: &str, f: impl Fn(u32, u32) -> u32 + Send + Sync + 'static) -> Reducer {
        Reducer::arrays(name, move |into, from| {
            for (a, &b) in into.iter_mut().zip(from) {
                *a = f(*a, b);
            }
        })
    }

    /// A reducer combining whole arrays, as LPF's `lpf_combiner_t` does.
    pub fn arrays(name: &str, f: impl Fn(&mut [u32], &[u32]) + Send + Sync + 'static) -> Reducer {
        Reducer { name: name.into(), f: std::sync::Arc::new(f) }
    }

    /// Its name, as results report it.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Debug for Reducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Reducer({})", self.name)
    }
}

/// A reduction as kernels apply it: a built-in one, or the caller's.
#[derive(Clone, Debug)]
pub enum Reduction {
    /// [`RedOp`].
    Builtin(RedOp),
    /// A [`Reducer`].
    User(Reducer),
}

impl Reduction {
    /// Reduces `other` into `acc`, both little-endian 32-bit words.
    pub fn reduce_words(&self, acc: &mut [u8], other: &[u8]) {
        match self {
            Reduction::Builtin(r) => r.reduce_words(acc, other),
            Reduction::User(u) => {
                let words = |b: &[u8]| -> Vec<u32> {
                    b.chunks_exact(4).map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes"))).collect()
                };
                let mut into = words(acc);
                (u.f)(&mut into, &words(other));
                for (a, w) in acc.chunks_exact_mut(4).zip(into) {
                    a.copy_from_slice(&w.to_le_bytes());
                }
            }
        }
    }

    /// Its name: `sum`, ..., or the reducer's.
    pub fn name(&self) -> &str {
        match self {
            Reduction::Builtin(r) => r.as_str(),
            Reduction::User(u) => u.name(),
        }
    }
}

/// A collective operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collective {
    /// Every rank ends with the concatenation of all ranks' slices.
    AllGather,
    /// Every rank ends with its slice of the reduction of all ranks' tensors.
    ReduceScatter(RedOp),
    /// Every rank ends with the reduction of all ranks' tensors: reduce-scatter, then
    /// all-gather.
    AllReduce(RedOp),
    /// Every rank sends chunk j of its tensor to rank j, which puts it at its own chunk i of
    /// the output (i the sender's rank): a transpose of chunks across ranks.
    AllToAll,
    /// Every rank ends with the root's tensor.
    Broadcast {
        /// The rank that has the tensor.
        root: usize,
    },
    /// The root ends with the reduction of all ranks' tensors (LPF's combine).
    Reduce {
        /// The reduction.
        red: RedOp,
        /// The rank that ends with the result.
        root: usize,
    },
    /// The root ends with the concatenation of all ranks' slices.
    Gather {
        /// The rank that ends with the gathered tensor.
        root: usize,
    },
    /// Every rank `j` ends with slice `j` of the root's tensor.
    Scatter {
        /// The rank whose tensor is scattered.
        root: usize,
    },
    /// Rank 0 of a two-rank communicator sends its tensor to rank 1.
    SendRecv,
}

impl Collective {
    /// The name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            Collective::AllGather => "all-gather",
            Collective::ReduceScatter(_) => "reduce-scatter",
            Collective::AllReduce(_) => "all-reduce",
            Collective::AllToAll => "all-to-all",
            Collective::Broadcast { .. } => "broadcast",
            Collective::Reduce { .. } => "reduce",
            Collective::Gather { .. } => "gather",
            Collective::Scatter { .. } => "scatter",
            Collective::SendRecv => "send-recv",
        }
    }

    /// Its short name in kernel names, events and traces (`ag`, `rs`, ...).
    pub fn tag(self) -> &'static str {
        match self {
            Collective::AllGather => "ag",
            Collective::ReduceScatter(_) => "rs",
            Collective::AllReduce(_) => "ar",
            Collective::AllToAll => "a2a",
            Collective::Broadcast { .. } => "bcast",
            Collective::Reduce { .. } => "reduce",
            Collective::Gather { .. } => "gather",
            Collective::Scatter { .. } => "scatter",
            Collective::SendRecv => "sendrecv",
        }
    }

    /// Every collective, with the reduction `sum` and the root rank 0 where it has them, in the
    /// order lists of them are printed.
    pub const ALL: [Collective; 9] = [
        Collective::AllGather,
        Collective::ReduceScatter(RedOp::Sum),
        Collective::AllReduce(RedOp::Sum),
        Collective::AllToAll,
        Collective::Broadcast { root: 0 },
        Collective::Reduce { red: RedOp::Sum, root: 0 },
        Collective::Gather { root: 0 },
        Collective::Scatter { root: 0 },
        Collective::SendRecv,
    ];

    /// The collective of [`Collective::ALL`] that [`Collective::name`] calls `name`.
    pub fn named(name: &str) -> Option<Collective> {
        Collective::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The reduction, for reducing collectives.
    pub fn redop(self) -> Option<RedOp> {
        match self {
            Collective::ReduceScatter(r) | Collective::AllReduce(r) | Collective::Reduce { red: r, .. } => {
                Some(r)
            }
            _ => None,
        }
    }

    /// The root rank, for rooted collectives.
    pub fn root(self) -> Option<usize> {
        match self {
            Collective::Broadcast { root }
            | Collective::Reduce { root, .. }
            | Collective::Gather { root }
            | Collective::Scatter { root } => Some(root),
            _ => None,
        }
    }

    /// How many chunks the op's tensor is cut into along its dimension on `n` ranks: one per
    /// rank when ranks own slices of it, one when every rank holds (or gets) it whole.
    pub fn chunks(self, n: usize) -> u64 {
        match self {
            Collective::Broadcast { .. } | Collective::Reduce { .. } | Collective::SendRecv => 1,
            _ => n as u64,
        }
    }

    /// How many equal chunks a sweep's tensors are rounded to on `n` ranks: [`Collective::chunks`],
    /// but `n` for a reduce, whose tensor must split over the ranks to reduce-scatter and then
    /// gather (it goes direct otherwise).
    pub fn sweep_chunks(self, n: usize) -> u64 {
        match self {
            Collective::Reduce { .. } => n as u64,
            _ => self.chunks(n),
        }
    }

    /// nccl-tests' bus-bandwidth factor for `n` ranks: (n-1)/n for all-gather, reduce-scatter,
    /// all-to-all, gather and scatter, 2(n-1)/n for all-reduce, 1 for broadcast, reduce and
    /// send/receive.
    pub fn busbw_factor(self, n: usize) -> f64 {
        let f = (n as f64 - 1.0) / n as f64;
        match self {
            Collective::AllReduce(_) => 2.0 * f,
            Collective::Broadcast { .. } | Collective::Reduce { .. } | Collective::SendRecv => 1.0,
            _ => f,
        }
    }
}

/// The knobs every collective takes. `None` means "what tt-metal would run" (see
/// docs/model.md, "Defaults"): the session resolves it when the op's context is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Knobs {
    /// Links used per hop, each a routing plane on the fabric (tt-metal's `num_links`);
    /// reserved links are never used. `None`: 1 on the EDM stack (its ops' default); on the
    /// fabric, the fewest usable links over the communicator's hops (tt-metal's "minimum
    /// routing planes over the axis"), and 1 for all-to-all, which runs on link 0.
    pub links: Option<usize>,
    /// Worker pairs (and EDM channels) per link and direction; `None`: 4, as tt-metal's EDM
    /// ops, shrunk so that every op sharing a link fits its 8 EDM channels.
    pub workers: Option<usize>,
    /// Bidirectional mode (all-gather on a ring); `None`: split-tensor when a rank's slice is
    /// larger than twice the ERISC L1, full-tensor otherwise (tt-metal's all-gather).
    pub bidir: Option<Bidir>,
    /// Pages per EDM packet; `None`: as many as the EDM buffer holds (and the workers' buffers
    /// allow), as tt-metal sizes packets from the EDM buffer.
    pub pages_per_packet: Option<u64>,
    /// The fabric routers' packet payload, bytes (fabric stack; `None`: tt-metal's 4352). It is
    /// global to a fabric: every op of a session that gives one must give the same.
    pub packet_bytes: Option<u64>,
    /// The algorithm (`None`: the selection tree's, else the library's rule); see
    /// [`crate::select`].
    pub algorithm: Option<Algorithm>,
    /// EDM buffers per channel (default 2, tt-metal's).
    pub buffers_per_channel: u64,
    /// Where the op's tensors are interleaved: DRAM banks or worker L1 (default DRAM).
    pub memory: Memory,
    /// The output buffers persist from an earlier call (ttnn's `using_persistent_buffers`):
    /// the multicast all-gather then runs no init barrier before its first read
    /// (`shared/fabric.md` §11.2). Fabric stack; default off.
    pub persistent_buffers: bool,
}

impl Knobs {
    /// The links per hop, once the session has resolved the default.
    pub(crate) fn links(&self) -> usize {
        self.links.expect("the session resolves the link count before lowering")
    }
}

impl Default for Knobs {
    /// 2 buffers per EDM channel, tensors in DRAM; links, workers, bidirectional mode and
    /// packet size as tt-metal would choose them.
    fn default() -> Knobs {
        Knobs {
            links: None,
            workers: None,
            bidir: None,
            pages_per_packet: None,
            packet_bytes: None,
            algorithm: None,
            buffers_per_channel: 2,
            memory: Memory::Dram,
            persistent_buffers: false,
        }
    }
}

/// tt-metal's default worker count per link and direction for its EDM ops.
pub const DEFAULT_WORKERS: usize = 4;

/// A problem with an op's arguments (bad input).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{0}")]
pub struct OpError(pub String);

/// Why the library could not give a result. A failed simulation carries the engine's report
/// and a broken protocol its hazard, as values (never flattened to text), with the faults that
/// were in force; the command line picks its exit code from the variant.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum CclError {
    /// The request is wrong: arguments, communicators, resources that do not fit (exit 2).
    #[error("{0}")]
    Invalid(String),
    /// The simulation did not complete: a deadlock naming the stalled kernels, a time limit,
    /// or a kernel that failed (exit 1).
    #[error("simulation failed: {error}{}", injected(faults))]
    Simulation {
        /// The engine's report.
        error: meshsim_engine::SimError,
        /// The faults in force, as their specs (`link-down:0:6@20`).
        faults: Vec<String>,
    },
    /// The simulation completed but broke a protocol (exit 1).
    #[error("protocol error: {hazard}{}", injected(faults))]
    Protocol {
        /// What the hardware recorded.
        hazard: Hazard,
        /// The faults in force, as their specs.
        faults: Vec<String>,
    },
}

/// `; faults injected: a, b` when faults were in force.
fn injected(faults: &[String]) -> String {
    if faults.is_empty() { String::new() } else { format!("; faults injected: {}", faults.join(", ")) }
}

/// A protocol hazard a completed run recorded, with the chip's id as its cluster names it.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
pub enum Hazard {
    /// An Ethernet packet landed on a core whose kernels had all finished (a teardown bug of
    /// the transport).
    #[error("a packet landed on chip {chip} eth{} at {:#x} ({}) after its kernels finished", .landing.chan, .landing.addr, .landing.at)]
    LateLanding {
        /// The chip's id.
        chip: u64,
        /// Where and when.
        landing: meshsim_hw::world::LateLanding,
    },
    /// An atomic decrement took a semaphore below zero (a credit or count returned more often
    /// than it was taken).
    #[error("a semaphore went negative: chip {chip} core ({}, {}) at {:#x} became {} at {}", .semaphore.core.x, .semaphore.core.y, .semaphore.addr, .semaphore.value, .semaphore.at)]
    NegativeSemaphore {
        /// The chip's id.
        chip: u64,
        /// Which, what value and when.
        semaphore: meshsim_hw::NegativeSemaphore,
    },
}

impl CclError {
    /// Whether the caller gave bad input (as opposed to a simulation that failed).
    pub fn is_bad_input(&self) -> bool {
        matches!(self, CclError::Invalid(_))
    }
}

impl From<OpError> for CclError {
    fn from(e: OpError) -> CclError {
        CclError::Invalid(e.0)
    }
}

/// What a run of one op measured.
#[derive(Clone, Debug)]
pub struct OpRun {
    /// The op's time: from the moment the last of its chips started to the moment the last of
    /// its chips finished.
    pub time: Time,
    /// `(chip, start, end)` per chip, in rank order.
    pub per_chip: Vec<(ChipIdx, Time, Time)>,
    /// `Some(Ok)` when verified, `Some(Err(message))` on the first mismatch, `None` in timing mode.
    pub verified: Option<Result<(), String>>,
    /// Engine counters.
    pub stats: Stats,
    /// Use of every Ethernet link direction that carried a packet.
    pub links: Vec<meshsim_hw::LinkUse>,
    /// Kernel marks (EDM handshakes done, ...), in time order.
    pub marks: Vec<meshsim_hw::Mark>,
    /// The busiest NoC link or port and DRAM bank.
    pub resources: meshsim_hw::trace::ResourceUse,
    /// Every fabric router's statistics (fabric stack; empty on the EDM stack).
    pub routers: Vec<crate::routers::RouterUse>,
    /// The full trace, when asked for.
    pub trace: Option<meshsim_hw::TraceData>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_choices() {
        for b in [Bidir::None, Bidir::Split, Bidir::Full] {
            assert_eq!(b.as_str().parse::<Bidir>().unwrap(), b);
        }
        assert_eq!("line".parse::<Topology>().unwrap(), Topology::Line);
        assert_eq!("linear".parse::<Topology>().unwrap(), Topology::Line);
        assert_eq!("max".parse::<RedOp>().unwrap().to_string(), "max");
        assert_eq!("avg".parse::<RedOp>().unwrap_err(), "unknown reduction 'avg' (sum, max, min, prod)");
    }

    #[test]
    fn busbw_factors_follow_nccl_tests() {
        assert_eq!(Collective::AllGather.busbw_factor(8), 0.875);
        assert_eq!(Collective::AllReduce(RedOp::Sum).busbw_factor(8), 1.75);
    }
}
