//! The built-in stacks: the transport of each [`Stack`], and what a caller asks of a stack
//! before it has a session.

use meshsim_topology::Cluster;

use crate::comm::Communicator;
use crate::op::SimModel;
use crate::op::{Collective, Given, Stack, Topology};
use crate::transport::{Capabilities, Transport};

/// The transport of `stack`.
pub fn transport(stack: Stack) -> Box<dyn Transport> {
    match stack {
        Stack::Edm => Box::new(crate::edm::EdmTransport),
        Stack::Fabric => Box::new(crate::fabric::FabricTransport),
    }
}

/// The transport of `stack` as `model` simulates it.
pub fn transport_for(stack: Stack, model: SimModel) -> Box<dyn Transport> {
    match model {
        SimModel::Packet => transport(stack),
        SimModel::Flow => Box::new(crate::flow::FlowTransport::new(stack, transport(stack))),
    }
}

/// What `stack` can do as `model` simulates it ([`Transport::capabilities`]), before there is
/// a session: whether it runs ops, verifies, takes faults, serves the microbenchmarks.
pub fn capabilities(stack: Stack, model: SimModel) -> Capabilities {
    transport_for(stack, model).capabilities()
}

/// Refuses, in one line naming the first, the knobs of another stack among those a caller gave
/// for `collective` on `stack`: the stack's own rule ([`Transport::refuses`]), as the session
/// applies it to every request.
pub fn check_given(stack: Stack, collective: Collective, given: &Given) -> Result<(), String> {
    transport(stack).refuses(collective, given).map_or(Ok(()), Err)
}

/// Most workers per link and direction an op may ask for: tt-metal's fabric reduce-scatter
/// runs up to 8; the EDM stack takes at most half an EDM's channels (checked when it runs).
pub const MAX_WORKERS: usize = crate::edm::MAX_CHANNELS;

/// The links per hop tt-metal would use for `collective` on `comm` over `stack`, when the op
/// runs alone ([`crate::op::Knobs::links`]): 1 on the EDM stack and for all-to-all; otherwise the fewest
/// usable links (routing planes) over the communicator's hops — meshsim's reserved dispatch
/// links already stand for tt-metal's "one fewer on a chip without MMIO". In a session, an op
/// riding on a longer fabric line takes that line's planes.
pub fn default_links(cluster: &Cluster, stack: Stack, collective: Collective, comm: &Communicator) -> usize {
    if stack == Stack::Edm || crate::fabric::on_link_zero(collective) {
        return 1;
    }
    let closed = comm.topology() == Topology::Ring && comm.size() > 2;
    crate::fabric::line_planes(cluster, &crate::fabric::Line { chips: comm.chips().to_vec(), closed })
}
