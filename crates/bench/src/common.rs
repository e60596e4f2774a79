//! What every microbenchmark shares: the set-up, the link it runs on, buffer layout and errors.

use meshsim_engine::{SimError, Stats};
use meshsim_hw::{Machine, Mode, Params, TraceData};
use meshsim_topology::{ChipIdx, Cluster};

/// A cluster and the model parameters to simulate it with.
#[derive(Clone)]
pub struct Setup {
    /// The cluster.
    pub cluster: Cluster,
    /// Model parameters.
    pub params: Params,
    /// Record a full trace of each point's run into [`Measured::trace`].
    pub trace: bool,
    /// The model that simulates the collective sweeps (microbenchmarks run on the packet
    /// model, which they measure).
    pub model: meshsim_ccl::op::SimModel,
}

impl Setup {
    /// `cluster` with `params`, not tracing.
    pub fn new(cluster: Cluster, params: Params) -> Setup {
        Setup { cluster, params, trace: false, model: meshsim_ccl::op::SimModel::Packet }
    }

    /// A fresh machine in timing mode, tracing if asked to.
    pub(crate) fn machine(&self) -> Machine {
        let mut m = Machine::new(self.cluster.clone(), self.params.clone(), Mode::Timing);
        if self.trace {
            m.enable_trace();
        }
        m
    }
}

/// A benchmark result with the engine's counters of the run that measured it.
#[derive(Clone, Debug)]
pub struct Measured<R> {
    /// The result.
    pub row: R,
    /// Events, simulated end time and event-log hash of the run.
    pub stats: Stats,
    /// The full trace, when the set-up asked for one.
    pub trace: Option<TraceData>,
}

impl<R> Measured<R> {
    /// `row` measured on `m`, whose launch returned `stats`.
    pub(crate) fn new(row: R, stats: Stats, m: &mut Machine) -> Measured<R> {
        Measured { row, stats, trace: m.take_trace() }
    }
}

/// Why a benchmark point could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A size that is not a positive multiple of 16 bytes.
    #[error("size {0} B is not a positive multiple of 16 B (Ethernet sends move 16 B words)")]
    BadSize(u64),
    /// The buffers do not fit in the ERISC kernel window.
    #[error(
        "{slots} slots of {size} B (+16 B sync each) need {need} B, but the ERISC kernel window holds {have} B"
    )]
    DoesNotFit {
        /// Slots asked for.
        slots: u64,
        /// Payload bytes per slot.
        size: u64,
        /// Bytes needed.
        need: u64,
        /// Bytes available.
        have: u64,
    },
    /// The cluster has no link user kernels may use.
    #[error("cluster '{0}' has no Ethernet link usable by user kernels")]
    NoLink(String),
    /// No ring of the requested hop count.
    #[error(
        "cluster '{cluster}' has no ring of {hops} hops with a usable link of its own per hop (the ring ping runs a receiver and a sender on each hop's Ethernet cores)"
    )]
    NoRing {
        /// The cluster.
        cluster: String,
        /// Hops asked for.
        hops: usize,
    },
    /// A benchmark argument outside its range.
    #[error("{0}")]
    BadArgument(String),
    /// The simulation failed (a bug in a benchmark program or the model), as reported.
    #[error("simulation failed: {0}")]
    Sim(String),
}

impl From<SimError> for BenchError {
    fn from(e: SimError) -> Self {
        BenchError::Sim(e.to_string())
    }
}

impl BenchError {
    /// Whether the error is the user's input (exit code 2) rather than a failure.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, BenchError::Sim(_))
    }
}

/// The first link user kernels may use: `(chip a, channel on a, chip b, channel on b)`, by
/// ascending chip then channel.
pub fn user_link(cluster: &Cluster) -> Result<(ChipIdx, u8, ChipIdx, u8), BenchError> {
    cluster
        .links()
        .iter()
        .filter(|l| !l.reserved && l.a.chip != l.b.chip)
        .map(|l| (l.a.chip, l.a.chan, l.b.chip, l.b.chan))
        .min()
        .ok_or_else(|| BenchError::NoLink(cluster.origin().to_owned()))
}

/// Buffer layout in the ERISC kernel window: a 16 B handshake scratch word, then `slots`
/// buffers of `size` payload bytes each followed by its 16 B sync record, then `extra` bytes.
pub(crate) struct Layout {
    pub(crate) handshake: u64,
    base: u64,
    stride: u64,
    end: u64,
}

impl Layout {
    pub(crate) fn new(p: &Params, size: u64, slots: u64, extra: u64) -> Result<Layout, BenchError> {
        if size == 0 || size % 16 != 0 {
            return Err(BenchError::BadSize(size));
        }
        if slots == 0 {
            return Err(BenchError::BadArgument("at least one buffer slot is needed".into()));
        }
        let (lo, hi) = p.erisc_window();
        let stride = size + 16;
        let need = 16 + slots * stride + extra;
        if lo + need > hi {
            return Err(BenchError::DoesNotFit { slots, size, need, have: hi - lo });
        }
        Ok(Layout { handshake: lo, base: lo + 16, stride, end: lo + 16 + slots * stride })
    }

    /// Address of slot `i`'s payload.
    pub(crate) fn slot(&self, i: u64) -> u64 {
        self.base + i * self.stride
    }

    /// Address of slot `i`'s sync record (right after its payload).
    pub(crate) fn sync(&self, i: u64) -> u64 {
        self.slot(i) + self.stride - 16
    }

    /// First free byte after the slots.
    pub(crate) fn end(&self) -> u64 {
        self.end
    }
}

/// The most samples a latency or ring benchmark takes (each a round trip simulated).
pub const MAX_SAMPLES: u64 = 1_000_000;
/// The most packets a bandwidth benchmark sends per flow.
pub const MAX_PACKETS: u64 = 10_000_000;

/// Checks a count asked for (`one` and `many` name its unit): at least one, at most `max` (more would run for hours
/// and is refused as bad input instead).
pub fn check_count((one, many): (&str, &str), n: u64, max: u64) -> Result<(), BenchError> {
    if n == 0 {
        return Err(BenchError::BadArgument(format!("at least one {one} is needed")));
    }
    if n > max {
        return Err(BenchError::BadArgument(format!("{n} {many} is more than the {max} meshsim runs")));
    }
    Ok(())
}
