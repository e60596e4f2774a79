//! meshsim's collective-communication layer on the hardware model.
//!
//! - [`edm`]: the ERISC Data Mover — a multi-channel, bidirectional data mover running on the
//!   Ethernet cores at both ends of a link — and its builder, which hands out the buffer and
//!   semaphore addresses workers need;
//! - [`worker`]: the worker side of the EDM's semaphore protocol;
//! - [`tensor`]: tensor shapes, dtypes, pages and their placement;
//! - [`op`]: collectives, reductions, the knobs every op shares, typed errors, an op's result;
//! - [`comm`]: communicators (ranks mapped to chips, ring or line);
//! - [`plan`]: algorithms as pure data (which slice moves where, in which order);
//! - [`session`]: one machine, many ops with dependencies, placed and lowered through a
//!   [`transport`] (the fabric's or the EDM's, see [`stacks`]), launched and measured in one
//!   place;
//! - [`transport`]: the seam a stack implements: what it accepts, how it lowers placed phases
//!   onto a machine, what it reports;
//! - [`allgather`], [`reducescatter`]: the one-op case of a session;
//! - [`group`]: choosing the chips of an op;
//! - [`sweep`]: nccl-tests-style size sweeps;
//! - [`critical`]: an op's bottleneck link and the stages of its critical path.

#![warn(missing_docs)]

pub mod allgather;
mod build;
pub mod comm;
pub mod critical;
pub mod edm;
pub mod fabric;
pub mod fault;
pub mod flow;
pub mod group;
mod named;
pub mod op;
pub mod peers;
pub mod phase;
mod place;
pub mod plan;
pub mod reducescatter;
pub mod request;
pub mod routers;
pub mod schedule_view;
pub mod select;
pub mod session;
pub mod stacks;
pub mod sweep;
pub mod tensor;
pub mod transport;
pub mod tune;
mod verify;
pub mod worker;
