//! All-gather on a ring or a line of chips: the one-op case of a [`Session`].
//!
//! ```text
//!  chip i:  input ─(DRAM read)─► sender worker ─► EDM ══► chip i+1 EDM ─► receiver worker ─(DRAM write)─► output
//!                                    ▲                                         │
//!                                    └──── forward: semaphore per packet ◄─────┘  (read back from output)
//! ```
//!
//! Every chip holds one slice of the gathered tensor; [`crate::plan::all_gather`] says which
//! slice moves where. Packets of `pages_per_packet` pages are dealt round-robin over the hop's
//! links (reserved links are never used) and over `workers` worker pairs per link, each with
//! its own EDM channel.

use meshsim_hw::Params;
use meshsim_topology::{ChipIdx, Cluster};

use crate::comm::Communicator;
pub use crate::op::{Bidir, CclError, OpError, OpRun, Topology};
use crate::op::{Collective, Knobs};
use crate::session::{OpRequest, Session};
use crate::tensor::{Memory, TensorSpec};

/// An all-gather to run.
#[derive(Clone, Debug)]
pub struct AllGatherSpec {
    /// The gathered (output) tensor on every chip.
    pub output: TensorSpec,
    /// The dimension gathered along.
    pub dim: usize,
    /// The chips in ring or line order.
    pub chips: Vec<ChipIdx>,
    /// Ring or line.
    pub topology: Topology,
    /// Links used per hop.
    pub links: usize,
    /// Worker pairs (and EDM channels) per link.
    pub workers: usize,
    /// Bidirectional mode (rings).
    pub bidir: Bidir,
    /// Pages per EDM packet; `None` fills the EDM buffer.
    pub pages_per_packet: Option<u64>,
    /// EDM buffers per channel.
    pub buffers_per_channel: u64,
    /// Move real bytes and check every output.
    pub verify: bool,
    /// Chip `k` of `chips` starts its program `k * skew_ns` after the first.
    pub skew_ns: u64,
    /// Record a full trace of the run into [`OpRun::trace`].
    pub trace: bool,
    /// Where the tensors are interleaved: DRAM banks or worker L1.
    pub memory: Memory,
}

impl AllGatherSpec {
    /// A unidirectional ring all-gather of `output` along `dim` over `chips` with one link and
    /// one worker pair per hop, packets as large as the EDM buffers allow, two buffers per EDM
    /// channel, tensors in DRAM, timing mode, no start skew, no trace. (The collective library's
    /// defaults, [`Knobs::default`], are tt-metal's; this spec is the explicit one-op form.)
    pub fn new(output: TensorSpec, dim: usize, chips: Vec<ChipIdx>) -> AllGatherSpec {
        let k = Knobs::default();
        AllGatherSpec {
            output,
            dim,
            chips,
            topology: Topology::Ring,
            links: 1,
            workers: 1,
            bidir: Bidir::None,
            pages_per_packet: k.pages_per_packet,
            buffers_per_channel: k.buffers_per_channel,
            verify: false,
            skew_ns: 0,
            trace: false,
            memory: k.memory,
        }
    }

    /// The knobs of this spec.
    pub fn knobs(&self) -> Knobs {
        Knobs {
            links: Some(self.links),
            workers: Some(self.workers),
            bidir: Some(self.bidir),
            pages_per_packet: self.pages_per_packet,
            packet_bytes: None,
            algorithm: None,
            buffers_per_channel: self.buffers_per_channel,
            memory: self.memory,
            persistent_buffers: false,
        }
    }
}

/// `collective` on `chips` as the only op of a session, with a start skew and a trace as asked.
pub(crate) fn run_one(
    cluster: &Cluster,
    params: &Params,
    req: OpRequest,
    verify: bool,
    skew_ns: u64,
    trace: bool,
) -> Result<OpRun, CclError> {
    let chips = req.comm.chips().to_vec();
    let mut s = Session::new(cluster, params);
    s.set_stack(crate::op::Stack::Edm);
    s.set_verify(verify);
    s.set_trace(trace);
    s.set_skew(chips, skew_ns)?;
    s.submit(req)?;
    let mut run = s.run()?;
    let mut one = run.op_run(0);
    one.trace = run.trace.take();
    Ok(one)
}

fn request(cluster: &Cluster, spec: &AllGatherSpec) -> Result<OpRequest, OpError> {
    let comm = Communicator::new(cluster, spec.chips.clone(), spec.topology)?;
    let mut req = OpRequest::new("all-gather", comm, Collective::AllGather, spec.output, spec.dim);
    req.knobs = spec.knobs();
    Ok(req)
}

/// Checks an all-gather's arguments against the cluster and `params`; returns the slice each
/// chip holds. (Running it checks the same, once.)
pub fn validate(cluster: &Cluster, params: &Params, spec: &AllGatherSpec) -> Result<TensorSpec, OpError> {
    validate_on_edm(cluster, params, &request(cluster, spec)?)
}

/// Checks a one-op request against the cluster and what the EDM stack, which runs the one-op
/// specs, accepts; returns the slice each chip holds.
pub(crate) fn validate_on_edm(
    cluster: &Cluster,
    params: &Params,
    req: &OpRequest,
) -> Result<TensorSpec, OpError> {
    use crate::transport::Transport;
    let slice = crate::session::validate(cluster, req)?;
    crate::edm::EdmTransport.accepts(req, params).map_err(|e| OpError(e.to_string()))?;
    Ok(slice)
}

/// Builds, runs and (optionally) verifies an all-gather on `cluster`.
pub fn all_gather(cluster: &Cluster, params: &Params, spec: &AllGatherSpec) -> Result<OpRun, CclError> {
    run_one(cluster, params, request(cluster, spec)?, spec.verify, spec.skew_ns, spec.trace)
}
