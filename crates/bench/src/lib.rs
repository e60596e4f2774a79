//! meshsim's microbenchmarks, written against the device and host APIs the way tt-metal writes
//! its Ethernet microbenchmarks, and the sweeps and reports around them.
//!
//! - [`latency`]: single-link send + echo round trip over a ring of buffer slots;
//! - [`bandwidth`]: raw ERISC bandwidth, uni- or bi-directional, by packet size and slot count,
//!   optionally forwarding every slot to a Tensix core over the NoC;
//! - [`ring`]: the CCL guide's ring ping (receiver → NoC → sender → next chip);
//! - [`dram`]: one core's DRAM page reads by queue depth (tt-metal's single-core read test);
//! - [`calibration`]: the published points the model must reproduce, measured;
//! - [`ccl_calibration`]: the CCL set — tt-metal's CCL sweep, the ring fabric goldens and the
//!   to-worker curve;
//! - [`report`]: text tables, CSV and JSON of any sweep;
//! - [`plot`]: SVG and PNG plots of sweeps.
//!
//! Sweep points are independent simulations, run in parallel with rayon and returned in input
//! order.

#![warn(missing_docs)]

pub mod bandwidth;
pub mod bh_calibration;
pub mod calibration;
pub mod ccl_calibration;
mod common;
pub mod dram;
pub mod fabric;
pub mod latency;
mod placement;
pub mod plot;
pub mod report;
pub mod ring;

pub use common::{BenchError, Measured, Setup, user_link};
