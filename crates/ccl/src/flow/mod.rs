//! The flow-level model (issue 33, in progress): each plan step's transfers as fluid flows
//! sharing link directions, router ERISCs, NoC and DRAM max-min fairly. [`net`] is its solver;
//! the transport that lowers phases onto it is not written yet.

pub mod net;

pub use net::{FlowId, FlowNet, ResourceId};
