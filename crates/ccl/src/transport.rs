//! The seam between the collective library and a transport (a stack of data movers under it).
//!
//! A session plans every op, places its tensors and hands the placed phases to its transport,
//! which builds the programs that carry them ([`Transport::lower`]); the session launches them
//! once, checks every hazard the hardware recorded and measures each op. What a transport
//! accepts (collectives, algorithms, knobs) is its own one check ([`Transport::accepts`],
//! [`Transport::algorithms`]), used by the library, its selection trees, `tune` and the CLI.
//!
//! A transport's kernels take part through a [`Gate`] per phase: each kernel enters it (waiting
//! for the phase's dependencies) and leaves it when done; the last to leave ends the phase, and
//! the times they report are the op's per-chip times.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use meshsim_engine::{SignalId, Time};
use meshsim_hw::{Kernel, LinkUse, Machine, Params, Program};
use meshsim_topology::{ChipIdx, Cluster};

use crate::op::{Algorithm, CclError, Collective, Given, Knobs};
use crate::phase::Phase;
use crate::request::OpRequest;
use crate::routers::RouterUse;
use crate::schedule_view::ScheduleView;

/// What a transport can do besides running the ops it accepts: the one question the session,
/// the CLI, tune, regress and workloads ask ([`Transport::capabilities`],
/// `stacks::capabilities`) rather than naming a model or a stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// It carries ops on its stack at all (the flow model carries the fabric's only).
    pub runs_ops: bool,
    /// It moves the ops' bytes, so their outputs can be verified.
    pub verifies: bool,
    /// It models injected faults (link faults, stalls, stragglers).
    pub faults: bool,
    /// Its hardware serves the microbenchmarks (link latency and bandwidth, the ring, the
    /// fabric tests).
    pub microbenchmarks: bool,
}

impl Capabilities {
    /// Everything: a packet-level transport's.
    pub const ALL: Capabilities =
        Capabilities { runs_ops: true, verifies: true, faults: true, microbenchmarks: true };
}

/// A stack that carries collectives: the EDM, the fabric, or one of a caller's own.
pub trait Transport {
    /// Its name in results and messages (`edm`, `fabric`).
    fn name(&self) -> &'static str;

    /// The algorithms it runs `collective` with, [`Algorithm::Auto`] (its own rule) first.
    fn algorithms(&self, collective: Collective) -> &'static [Algorithm];

    /// The knobs of another stack among those a caller gave (before any default or selection),
    /// as one line naming the first: the one rule of what this stack takes, applied alike by
    /// the session to every request and by the CLI, suites and workloads to what they read
    /// (`stacks::check_given`). `None`: it takes them all.
    fn refuses(&self, collective: Collective, given: &Given) -> Option<String> {
        let _ = (collective, given);
        None
    }

    /// Refuses an op it cannot run once its knobs are resolved — a collective it does not
    /// carry, resources that do not fit — in one line naming the op.
    fn accepts(&self, req: &OpRequest, params: &Params) -> Result<(), CclError>;

    /// Links per hop of every op of a session, for ops whose caller left them unset (the
    /// session keeps the caller's).
    fn default_links(&self, cluster: &Cluster, ops: &[OpRequest]) -> Result<Vec<usize>, CclError>;

    /// What it can do besides running ops ([`Capabilities`]): by default everything, as a
    /// transport of packets on the hardware model can.
    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    /// What its worker kernels would do for every placed phase of `cx`, as users read it
    /// (`meshsim op --schedule`); `None` (the default) for a stack with no worker schedule.
    fn schedule(&self, cx: &LowerCx) -> Result<Option<Vec<ScheduleView>>, CclError> {
        let _ = cx;
        Ok(None)
    }

    /// Builds the programs that carry every placed phase on `m`: one per chip, every phase's
    /// kernels entering and leaving its [`Gate`] ([`LowerCx::gate`]).
    fn lower(&self, cx: &LowerCx, m: &mut Machine) -> Result<Lowered, CclError>;
}

/// What a lowering sees: the session's ops (knobs resolved), their placed phases, and the
/// phases' end events.
pub struct LowerCx<'a> {
    /// The cluster.
    pub cluster: &'a Cluster,
    /// The model's parameters.
    pub params: &'a Params,
    /// Every op, in submission order, its unset knobs filled (selection tree, default links).
    pub ops: &'a [OpRequest],
    /// Per op, the knobs its caller gave, before selection and defaults.
    pub given: &'a [Knobs],
    /// Every phase, placed, in order.
    pub phases: &'a [Phase],
    /// Per phase, the event its last kernel raises when it leaves its gate.
    pub done: &'a [SignalId],
    /// Where gates record their kernels' times.
    pub(crate) times: &'a KernelTimes,
}

impl LowerCx<'_> {
    /// What op `op`'s kernel names start with: its name and a slash when the session has more
    /// than one op.
    pub fn kernel_prefix(&self, op: usize) -> String {
        if self.ops.len() > 1 { format!("{}/", self.ops[op].name) } else { String::new() }
    }

    /// The gate of phase `phase` for `kernels` kernels, each of which must enter and leave it.
    pub fn gate(&self, phase: usize, kernels: usize) -> Gate {
        Gate::new(phase, &self.phases[phase].deps, self.done, kernels, self.times)
    }
}

/// What a lowering built.
pub struct Lowered {
    /// A program per chip, in chip order.
    pub programs: Vec<Program>,
    /// Per phase, its pages per packet and the algorithm it runs.
    pub phases: Vec<PhaseRun>,
    /// Per op, the workers per link and direction it runs with.
    pub workers: Vec<usize>,
    /// After the run, what the transport's own agents report (the fabric's routers).
    pub report: Box<dyn FnOnce() -> Vec<RouterUse>>,
    /// Link use the transport found itself, when its kernels put no packets on the machine's
    /// links (the flow model): every link direction its ops crossed, each with the ops that
    /// crossed it. `None`: the machine's counters say (without the ops).
    pub links: Option<Vec<(LinkUse, Vec<usize>)>>,
    /// Ethernet L1 words that may still land on a core after its kernels have ended: flow
    /// control a finished agent no longer waits for (a fabric router's last returned credits).
    /// Any other late landing is a protocol error.
    pub late_credits: Vec<u64>,
}

/// How a phase was lowered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhaseRun {
    /// Pages per packet.
    pub pages_per_packet: u64,
    /// A packet's payload at most, bytes: the fabric routers' (the session's), an EDM buffer's.
    pub packet_bytes: u64,
    /// The algorithm's name in results (`ring`, `multicast`, `direct`, ...).
    pub algorithm: &'static str,
}

/// `(phase, chip, start, end)` of every finished kernel that passed a gate.
pub(crate) type KernelTimes = Rc<RefCell<Vec<(usize, ChipIdx, Time, Time)>>>;

/// When a phase's kernels may start, and what they report when they finish.
#[derive(Clone)]
pub struct Gate {
    phase: usize,
    deps: Rc<[SignalId]>,
    done: SignalId,
    remaining: Rc<Cell<usize>>,
    times: KernelTimes,
}

impl Gate {
    /// The gate of phase `phase`, whose dependencies are `deps` (phase indices), for `kernels`
    /// kernels; `done` holds every phase's end event.
    fn new(phase: usize, deps: &[usize], done: &[SignalId], kernels: usize, times: &KernelTimes) -> Gate {
        Gate {
            phase,
            deps: deps.iter().map(|&d| done[d]).collect(),
            done: done[phase],
            remaining: Rc::new(Cell::new(kernels)),
            times: times.clone(),
        }
    }

    /// Waits until every phase this one depends on has ended; returns when the kernel entered.
    pub async fn enter(&self, k: &Kernel) -> Time {
        for &d in self.deps.iter() {
            k.wait_event(d).await;
        }
        k.now()
    }

    /// The kernel that entered at `start` is done: the last to leave ends the phase.
    pub fn leave(&self, k: &Kernel, start: Time) {
        self.times.borrow_mut().push((self.phase, k.chip(), start, k.now()));
        self.remaining.set(self.remaining.get() - 1);
        if self.remaining.get() == 0 {
            k.raise_event(self.done);
        }
    }
}
