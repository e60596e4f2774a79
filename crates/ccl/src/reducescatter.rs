//! Reduce-scatter on a ring or a line: every chip ends with one slice of the element-wise
//! reduction (sum or max) of all chips' tensors. The one-op case of a [`crate::session::Session`].
//!
//! ```text
//!  chip c: receiver worker: partial from c-1 (EDM) + own slice (DRAM) ─reduce─► scratch ─► sender worker ─► EDM ─► c+1
//!                                                                   └─ last step ─► output
//! ```
//!
//! [`crate::plan::reduce_scatter`] says which partial moves where. The receiver holds the
//! incoming packet and the matching pages of each operand side by side in its L1 staging area,
//! so a packet must fit that many times in the worker's L1 and once in an EDM buffer; a
//! configuration that does not is refused before anything runs. Reduction arithmetic works on
//! 32-bit words (test data is integer-valued, so results are exact); timing charges
//! `tile_reduce_cycles` per page and operand.

use meshsim_hw::Params;
use meshsim_topology::{ChipIdx, Cluster};

use crate::allgather::run_one;
use crate::comm::Communicator;
pub use crate::op::RedOp;
use crate::op::{Bidir, CclError, Collective, Knobs, OpError, OpRun, Topology};
use crate::session::OpRequest;
use crate::tensor::TensorSpec;

/// A reduce-scatter to run.
#[derive(Clone, Debug)]
pub struct ReduceScatterSpec {
    /// The tensor every chip holds (and reduces); chip `k` of `chips` gets slice `k` of it.
    pub input: TensorSpec,
    /// The dimension scattered along.
    pub dim: usize,
    /// The chips in ring or line order.
    pub chips: Vec<ChipIdx>,
    /// Ring or line.
    pub topology: Topology,
    /// The reduction.
    pub op: RedOp,
    /// Links used per hop.
    pub links: usize,
    /// Worker pairs (and EDM channels) per link.
    pub workers: usize,
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
    pub memory: crate::tensor::Memory,
}

impl ReduceScatterSpec {
    /// A ring reduce-scatter of `input` along `dim` over `chips` reducing with `op`, with one
    /// link and one worker pair per hop (see [`crate::allgather::AllGatherSpec::new`]).
    pub fn new(input: TensorSpec, dim: usize, chips: Vec<ChipIdx>, op: RedOp) -> ReduceScatterSpec {
        let k = Knobs::default();
        ReduceScatterSpec {
            input,
            dim,
            chips,
            topology: Topology::Ring,
            op,
            links: 1,
            workers: 1,
            pages_per_packet: k.pages_per_packet,
            buffers_per_channel: k.buffers_per_channel,
            verify: false,
            skew_ns: 0,
            trace: false,
            memory: k.memory,
        }
    }
}

fn request(cluster: &Cluster, spec: &ReduceScatterSpec) -> Result<OpRequest, OpError> {
    let comm = Communicator::new(cluster, spec.chips.clone(), spec.topology)?;
    let mut req =
        OpRequest::new("reduce-scatter", comm, Collective::ReduceScatter(spec.op), spec.input, spec.dim);
    req.knobs = Knobs {
        links: Some(spec.links),
        workers: Some(spec.workers),
        bidir: Some(Bidir::None),
        pages_per_packet: spec.pages_per_packet,
        packet_bytes: None,
        algorithm: None,
        buffers_per_channel: spec.buffers_per_channel,
        memory: spec.memory,
        persistent_buffers: false,
    };
    Ok(req)
}

/// Checks a reduce-scatter's arguments; returns the slice each chip ends with. (Running it
/// checks the same, once.)
pub fn validate(cluster: &Cluster, params: &Params, spec: &ReduceScatterSpec) -> Result<TensorSpec, OpError> {
    crate::allgather::validate_on_edm(cluster, params, &request(cluster, spec)?)
}

/// Builds, runs and (optionally) verifies a reduce-scatter on `cluster`.
pub fn reduce_scatter(
    cluster: &Cluster,
    params: &Params,
    spec: &ReduceScatterSpec,
) -> Result<OpRun, CclError> {
    run_one(cluster, params, request(cluster, spec)?, spec.verify, spec.skew_ns, spec.trace)
}
