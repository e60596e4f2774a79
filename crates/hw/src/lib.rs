//! meshsim's hardware model, on the engine.
//!
//! - [`eth`]: Ethernet tx command queues and links, one direction per lane;
//! - [`noc`]: the two NoCs of a chip with per-link, per-packet contention;
//! - [`world`]: the whole cluster's hardware as one engine `World` (memories, cores, events);
//! - [`kernel`]: the device API kernels call (`noc_async_write`, `eth_send_packet`, ...);
//! - [`host`]: the host API (devices, programs, kernels, semaphores, launch);
//! - [`params`]: every number of the model, documented, from `configs/wormhole_b0.yaml`;
//! - [`trace`]: link utilisation, kernel marks, and Chrome / Perfetto trace-event output.

#![warn(missing_docs)]

pub mod eth;
pub mod host;
pub mod kernel;
pub mod noc;
pub mod params;
pub mod trace;
pub mod world;

pub use host::{CoreRef, Device, Machine, Program};
pub use kernel::{HwError, Kernel, NOC_TRIDS, Wake, get_noc_addr};
pub use params::Params;
pub use trace::{LinkUse, Mark, TraceData};
pub use world::{Hw, HwEvent, Mode, NegativeSemaphore};
