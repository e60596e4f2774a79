//! meshsim's cluster descriptions.
//!
//! Two stages, as the file format demands: [`raw`] mirrors a tt-umd cluster descriptor exactly
//! as written (every variant found in the wild), and [`Cluster`] is the resolved form — dense
//! chip ids, links with both ends' channels, reserved dispatch links, the chip graph, its
//! inferred [`Shape`], rings, lines, distances and routes. The [`soc`] module reads SoC
//! descriptors (Ethernet core coordinates per channel, worker grid, DRAM cores, L1 sizes).
//! Built-in descriptions of N300, T3000 and Galaxy systems are in [`builtin`].

#![warn(missing_docs)]

mod arch;
pub mod builtin;
mod cluster;
mod error;
mod ids;
pub mod input;
pub mod raw;
mod shape;
pub mod soc;

pub use cluster::{
    Arch, Board, Chip, Cluster, ETH_CHANNELS, Endpoint, EthCoord, Hop, Link, Path, RemoteLink,
};
pub use error::TopologyError;
pub use ids::{ChipIdx, LinkId};
pub use shape::{Grid, Shape};
