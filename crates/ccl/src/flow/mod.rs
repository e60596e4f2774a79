//! The flow-level model: a third [`Transport`], beside the EDM's and the fabric's packet-level
//! ones, that carries the same sessions — communicators, selection, defaults, plans and
//! placement — but simulates each plan step's transfers as fluid flows sharing link
//! directions, router ERISCs and worker kernels max-min fairly ([`net`]), so its cost grows
//! with the number of transfers, not with the bytes.
//!
//! [`FlowTransport`] solves the whole session's flows when it lowers it ([`fabric`]), then
//! emits one kernel per chip and phase that enters the phase's gate, waits out the time the
//! flows gave that chip and leaves: the session's gates, measurements, results and outputs
//! are the packet model's own. Its costs per packet ([`cost`]) come from the same parameters.
//! It models the fabric stack; docs/model.md, "The flow model", says what it leaves out.

pub(crate) mod cost;
pub(crate) mod fabric;
mod mva;
pub mod net;

use meshsim_hw::{CoreRef, LinkUse, Machine, Params, Program};
use meshsim_topology::{ChipIdx, Cluster};

pub use net::{FlowId, FlowNet, ResourceId};

use crate::op::{Algorithm, CclError, Collective, Given, Stack};
use crate::request::OpRequest;
use crate::schedule_view::ScheduleView;
use crate::transport::{Capabilities, LowerCx, Lowered, Transport};

/// The flow model of a stack: the stack's own rules (algorithms, knobs, default links), its
/// transfers simulated as flows.
pub struct FlowTransport {
    stack: Stack,
    inner: Box<dyn Transport>,
}

impl FlowTransport {
    /// The flow model of `stack`, whose packet-level transport `inner` gives its rules.
    pub fn new(stack: Stack, inner: Box<dyn Transport>) -> FlowTransport {
        FlowTransport { stack, inner }
    }
}

impl Transport for FlowTransport {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn algorithms(&self, collective: Collective) -> &'static [Algorithm] {
        self.inner.algorithms(collective)
    }

    fn refuses(&self, collective: Collective, given: &Given) -> Option<String> {
        self.inner.refuses(collective, given)
    }

    /// Flows carry no bytes and model no faults nor the microbenchmarks' hardware; they carry
    /// the fabric stack's ops.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            runs_ops: self.stack == Stack::Fabric,
            verifies: false,
            faults: false,
            microbenchmarks: false,
        }
    }

    fn accepts(&self, req: &OpRequest, params: &Params) -> Result<(), CclError> {
        if !self.capabilities().runs_ops {
            return Err(CclError::Invalid(format!(
                "op '{}': the flow model carries the fabric stack; run the {} stack with --model packet",
                req.name,
                self.inner.name()
            )));
        }
        self.inner.accepts(req, params)
    }

    fn default_links(&self, cluster: &Cluster, ops: &[OpRequest]) -> Result<Vec<usize>, CclError> {
        self.inner.default_links(cluster, ops)
    }

    /// The flow model reads the inner stack's schedule: the same one.
    fn schedule(&self, cx: &LowerCx) -> Result<Option<Vec<ScheduleView>>, CclError> {
        self.inner.schedule(cx)
    }

    fn lower(&self, cx: &LowerCx, _m: &mut Machine) -> Result<Lowered, CclError> {
        let solved = fabric::solve(cx)?;
        let chips = cx.cluster.chips().len();
        let mut programs: Vec<Program> = (0..chips).map(|c| Program::new(ChipIdx(c as u32))).collect();
        let soc = cx.cluster.soc();
        for (pi, ends) in solved.ends.iter().enumerate() {
            let gate = cx.gate(pi, ends.len());
            let start = solved.starts[pi];
            let name = format!("{}flow", cx.kernel_prefix(cx.phases[pi].op));
            // One core per phase (kernels of phases that overlap must not share one).
            let core = CoreRef::Worker(soc.logical_worker((pi % soc.workers.len()) as u64));
            for &(chip, end) in ends {
                let (g, wait) = (gate.clone(), end.saturating_sub(start));
                programs[chip.0 as usize].create_kernel(core, &name, 0, vec![], move |k| async move {
                    let at = g.enter(&k).await;
                    k.delay(wait).await;
                    g.leave(&k, at);
                    Ok(())
                });
            }
        }
        // As the machine lists its counters: by sending chip and channel.
        let mut links: Vec<(LinkUse, Vec<usize>)> =
            solved.links.iter().map(|l| (link_use(cx.cluster, l), l.ops.clone())).collect();
        links.sort_by_key(|l| (l.0.from.chip, l.0.from.chan));
        Ok(Lowered {
            programs,
            phases: solved.runs,
            workers: solved.workers,
            report: Box::new(Vec::new),
            links: Some(links),
            late_credits: Vec::new(),
        })
    }
}

/// A flow run's link direction as the machine's counters would name it: the plane-th usable
/// link between its chips (as the fabric puts its routing planes on them) from the sending
/// end. Its payload times are when its first flow's first packet landed and its last flow
/// ended; it has no handshake of its own (the flow model's phase setup holds the routers'),
/// so no first landing before the first payload's.
fn link_use(cluster: &Cluster, l: &fabric::FlowLink) -> LinkUse {
    let usable = cluster.usable_links_between(l.from, l.to);
    let (from, to) = cluster.link(usable[l.plane]).ends_from(l.from).expect("a plane's link joins its chips");
    LinkUse {
        from,
        to,
        bytes: l.bytes,
        packets: l.packets,
        busy: l.busy,
        first_land: None,
        first_payload: Some(l.first),
        last_payload: Some(l.last),
    }
}
