//! meshsim's collective-communication layer on the hardware model.
//!
//! - [`edm`]: the ERISC Data Mover — a multi-channel, bidirectional data mover running on the
//!   Ethernet cores at both ends of a link — and its builder, which hands out the buffer and
//!   semaphore addresses workers need;
//! - [`worker`]: the worker side of the EDM's semaphore protocol;
//! - [`tensor`]: tensor shapes, dtypes, pages and their placement;
//! - [`allgather`]: the all-gather op;
//! - [`reducescatter`]: the ring reduce-scatter op;
//! - [`group`]: choosing the chips of an op;
//! - [`sweep`]: nccl-tests-style size sweeps;
//! - [`critical`]: an op's bottleneck link and the stages of its critical path.

#![warn(missing_docs)]

pub mod allgather;
mod build;
pub mod critical;
pub mod edm;
pub mod group;
pub mod reducescatter;
pub mod sweep;
pub mod tensor;
pub mod worker;
