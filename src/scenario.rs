//! A scenario: one op run or one microbenchmark point with every knob named. `meshsim op` builds
//! one from its flags; a regression suite lists them in YAML. Both run through [`Scenario::run`].
//!
//! ```yaml
//! - name: t3000-ag-ring-bfp8
//!   op: all-gather          # all-gather | reduce-scatter | all-reduce | workload | latency | bandwidth | ring
//!   cluster: t3000
//!   shape: [1, 1, 1024, 4096]
//!   dtype: bfp8
//!   tolerance_pct: 0.5      # optional; default 0 (any change fails)
//! ```

use std::path::{Path, PathBuf};

use meshsim_bench::{Measured, Setup, bandwidth, latency, ring};
use meshsim_ccl::comm::Communicator;
use meshsim_ccl::op::SimModel;
use meshsim_ccl::op::{Bidir, Given, Knobs, OpRun, RedOp, Stack, Topology};
use meshsim_ccl::schedule_view::ScheduleView;
use meshsim_ccl::session::{OpRequest, OpResult, Session, SessionRun};
use meshsim_ccl::tensor::{DType, Layout, Memory, TensorSpec};
use meshsim_engine::{Stats, Time};
use meshsim_hw::{Params, TraceData};
use meshsim_topology::{ChipIdx, Cluster, builtin};

use serde::Deserialize;

pub use crate::spec::{FaultKnobs, Kind, OpKind};

/// A byte size written as a number or with a K/M/G suffix.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Size {
    /// Bytes.
    Bytes(u64),
    /// `4K`, `1M`, ...
    Text(String),
}

impl Size {
    fn bytes(&self) -> Result<u64, String> {
        match self {
            Size::Bytes(n) => Ok(*n),
            Size::Text(s) => parse_size(s),
        }
    }
}

/// `bidir`: a mode for all-gather (`none`, `split`, `full`), a flag for the bandwidth benchmark.
#[derive(Clone, Debug)]
pub enum BidirValue {
    /// Bandwidth: both directions at once.
    Flag(bool),
    /// All-gather: `none`, `split` or `full`.
    Mode(Bidir),
}

impl<'de> Deserialize<'de> for BidirValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Flag(bool),
            Mode(String),
        }
        match Raw::deserialize(d)? {
            Raw::Flag(b) => Ok(BidirValue::Flag(b)),
            Raw::Mode(m) => m.parse().map(BidirValue::Mode).map_err(serde::de::Error::custom),
        }
    }
}

/// One run with every knob. Fields that do not apply to the scenario's `op` must be left out.
/// Keys left out are `None` (serde's rule for `Option` fields) and take the CLI's defaults.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Unique within its suite.
    pub name: String,
    /// What runs.
    pub op: Kind,
    /// A built-in cluster name or a cluster description file (relative to the suite file).
    pub cluster: String,
    /// A parameter file (relative to the suite file); the built-in parameters if absent.
    pub params: Option<PathBuf>,
    /// How far (in %) the simulated time may move before the regression gate fails.
    #[serde(default)]
    pub tolerance_pct: f64,
    /// Op: the tensor's shape `[w, z, y, x]` (the gathered output; the reduced input).
    pub shape: Option<Vec<u64>>,
    /// Op: the dimension gathered or scattered along (negative counts from the end).
    #[serde(default, deserialize_with = "crate::spec::deserialize_dim")]
    pub dim: Option<usize>,
    /// Op: element type.
    pub dtype: Option<DType>,
    /// Op: `ring` or `line`.
    pub topology: Option<Topology>,
    /// Op: links per hop (tt-metal's `num_links`).
    pub num_links: Option<usize>,
    /// Op: `num_links`' old name, read with a warning.
    pub links: Option<usize>,
    /// Op: worker pairs per link.
    pub workers: Option<usize>,
    /// All-gather mode or bandwidth flag.
    pub bidir: Option<BidirValue>,
    /// Reducing ops: `sum`, `max`, `min` or `prod`.
    pub redop: Option<RedOp>,
    /// Rooted ops (broadcast, reduce, gather, scatter, combine): the root's rank in the
    /// communicator (default 0).
    pub root: Option<usize>,
    /// All-gather: leave each rank's own slice out of its output (LPF's `exclude_myself`).
    pub exclude_myself: Option<bool>,
    /// All-gather: nccl-tests' in-place variant.
    pub in_place: Option<bool>,
    /// Op: a selection tree (relative to the suite file) instead of the default one.
    pub select: Option<PathBuf>,
    /// Op: run on this many chips.
    pub chips: Option<usize>,
    /// Op: run on these chips, in order.
    pub chip_ids: Option<Vec<u64>>,
    /// Op: run on every column (0) or every row (1) of the mesh at once.
    pub axis: Option<usize>,
    /// Op: run on each of these chip lists at once, one communicator each, in order.
    pub groups: Option<Vec<Vec<u64>>>,
    /// Workload: the workload file (relative to the suite file).
    pub workload: Option<PathBuf>,
    /// Op: pages per EDM packet.
    pub pages_per_packet: Option<u64>,
    /// Op: EDM buffers per channel.
    pub buffers: Option<u64>,
    /// Op: `dram` or `l1`.
    pub memory: Option<Memory>,
    /// Op (fabric): the outputs persist from an earlier call, so an all-gather runs no init
    /// barrier (ttnn's `using_persistent_buffers`).
    pub persistent_buffers: Option<bool>,
    /// Op or ring: start skew per chip, ns.
    pub skew_ns: Option<u64>,
    /// Op: faults injected (`faults`, `random_faults`, `fault_seed`).
    #[serde(flatten)]
    pub faults: FaultKnobs,
    /// Op: move real bytes and check the outputs.
    pub verify: Option<bool>,
    /// Op: the transport, `edm` or `fabric`.
    pub stack: Option<Stack>,
    /// Op or workload: the model that simulates it, `packet` (the default) or `flow`.
    pub model: Option<SimModel>,
    /// Op (fabric): the routers' packet payload, bytes.
    pub packet_size: Option<Size>,
    /// Benchmark: payload bytes per packet or ping.
    pub size: Option<Size>,
    /// Latency, bandwidth: buffer slots.
    pub slots: Option<u64>,
    /// Latency, ring: measured samples.
    pub samples: Option<u64>,
    /// Bandwidth: packets per direction.
    pub packets: Option<u64>,
    /// Bandwidth: forward every slot to a Tensix core.
    pub to_worker: Option<bool>,
    /// Ring: hops.
    pub hops: Option<usize>,
    /// Latency, ring: payload and sync sent separately.
    pub unmerged: Option<bool>,
}

/// What a scenario's run produced.
pub struct Outcome {
    /// The simulated time the scenario is judged by: the op's time, or the benchmark run's end.
    pub time: Time,
    /// Engine counters (events, event-log hash).
    pub stats: Stats,
    /// The cluster it ran on.
    pub cluster: Cluster,
    /// The full trace, when asked for.
    pub trace: Option<TraceData>,
    /// The op's run, for ops.
    pub op: Option<OpDone>,
}

impl Outcome {
    /// What a run measured, as comparable text: the time, the engine's end time and, for ops,
    /// every op's per-chip start and end, every link direction's bytes, packets, serializer
    /// busy time and landing times, and the busiest NoC port and DRAM bank. Two runs of one
    /// scenario with and without the engine's shortcuts must give equal fingerprints.
    pub fn fingerprint(&self) -> String {
        let mut f = format!("time {:?} end {:?}", self.time, self.stats.end_time);
        if let Some(op) = &self.op {
            for o in &op.ops {
                f += &format!(" | {} {:?}..{:?} {:?}", o.name, o.start, o.end, o.per_chip);
            }
            f += &format!(" | links {:?} | resources {:?}", op.run.links, op.run.resources);
        }
        f
    }
}

/// An op's run and what it ran on.
pub struct OpDone {
    /// The run of the first instance (with the run-wide counters); `time` is the makespan when
    /// the op ran on every row or column at once.
    pub run: OpRun,
    /// Every instance: one per communicator.
    pub ops: Vec<OpResult>,
    /// The chips, in ring or line order.
    pub chips: Vec<ChipIdx>,
    /// The tensor.
    pub tensor: TensorSpec,
    /// Topology.
    pub topology: Topology,
}

/// Why a scenario could not run: bad input (exit 2), or a simulation that failed (exit 1)
/// — an op's as the library's typed error, a microbenchmark's as its message.
#[derive(Debug)]
pub enum RunError {
    /// The scenario's arguments are wrong.
    Bad(String),
    /// An op's simulation failed or broke a protocol.
    Sim(meshsim_ccl::op::CclError),
    /// A microbenchmark's simulation failed.
    Failed(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Bad(m) | RunError::Failed(m) => f.write_str(m),
            RunError::Sim(e) => e.fmt(f),
        }
    }
}

/// A library error as a scenario error: bad input, or the failed simulation itself.
pub fn ccl_error(e: meshsim_ccl::op::CclError) -> RunError {
    if e.is_bad_input() { RunError::Bad(e.to_string()) } else { RunError::Sim(e) }
}

/// Whether two runs of one scenario were the same run — equal event counts, event-log hashes
/// and times; `Err` says how they differed.
pub fn same_run(first: (Time, &Stats), second: (Time, &Stats)) -> Result<(), String> {
    let ((t1, a), (t2, b)) = (first, second);
    if a.log_hash == b.log_hash && a.events == b.events && t1 == t2 {
        return Ok(());
    }
    Err(format!(
        "not deterministic: run 1 gave {} events, event-log hash {:016x}, {t1}; run 2 gave {} events, hash {:016x}, {t2}",
        a.events, a.log_hash, b.events, b.log_hash
    ))
}

/// Parses a byte size: `4096`, `4K`, `4KiB`, `1M`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.to_ascii_uppercase() {
        u if u.ends_with("KIB") || u.ends_with('K') => {
            (t.trim_end_matches(['K', 'k', 'i', 'B', 'b']), 1u64 << 10)
        }
        u if u.ends_with("MIB") || u.ends_with('M') => {
            (t.trim_end_matches(['M', 'm', 'i', 'B', 'b']), 1 << 20)
        }
        u if u.ends_with("GIB") || u.ends_with('G') => {
            (t.trim_end_matches(['G', 'g', 'i', 'B', 'b']), 1 << 30)
        }
        _ => (t, 1),
    };
    let n: u64 = num.parse().map_err(|_| format!("'{s}' is not a size (examples: 16, 4096, 4K, 1M)"))?;
    match n.checked_mul(mult) {
        Some(0) | None => Err(format!("'{s}' is not a positive size")),
        Some(v) => Ok(v),
    }
}

/// Loads a built-in cluster or a description file.
pub fn load_cluster(spec: &str) -> Result<Cluster, RunError> {
    builtin::cluster(spec).map_err(|e| RunError::Bad(e.to_string()))
}

/// Reads a selection tree (`--select`); a malformed one is bad input naming the file and node.
pub fn load_select(path: &Path) -> Result<meshsim_ccl::select::Select, String> {
    let here = path.display();
    let text = meshsim_topology::input::read_input_text(path).map_err(|e| format!("{here}: {e}"))?;
    meshsim_ccl::select::Select::parse(&text).map_err(|e| format!("{here}: {e}"))
}

/// The model's parameters as a command was given them: parameter files (`--params`, one per
/// architecture, each applying to its architecture's chips), every other architecture on its
/// built-in parameters, and a line rate for every link (`--link-gbps`).
#[derive(Clone, Debug, Default)]
pub struct ParamSource {
    /// The parameter files given, with their names, at most one per architecture.
    pub files: Vec<(String, Params)>,
    /// The Ethernet line rate of every link, Gb/s, over the parameters' own.
    pub link_gbps: Option<u64>,
}

impl ParamSource {
    /// Reads the parameter files; two of one architecture are refused.
    pub fn load<P: AsRef<Path>>(paths: &[P], link_gbps: Option<u64>) -> Result<ParamSource, RunError> {
        let mut files: Vec<(String, Params)> = Vec::new();
        for path in paths {
            let path = path.as_ref();
            let p = Params::load(path).map_err(|e| RunError::Bad(e.to_string()))?;
            if let Some((other, _)) = files.iter().find(|(_, q)| q.arch == p.arch) {
                return Err(RunError::Bad(format!(
                    "{}: a second {} parameter file (after {other}): give one per architecture",
                    path.display(),
                    p.arch
                )));
            }
            files.push((path.display().to_string(), p));
        }
        if link_gbps == Some(0) {
            return Err(RunError::Bad("--link-gbps must be positive".into()));
        }
        Ok(ParamSource { files, link_gbps })
    }

    /// Refuses a parameter file whose architecture none of `archs` (the machines' chips) is.
    pub fn check(&self, archs: &[meshsim_topology::Arch]) -> Result<(), RunError> {
        match self.files.iter().find(|(_, p)| !archs.contains(&p.arch())) {
            Some((name, p)) => Err(RunError::Bad(format!(
                "{name}: a {} parameter file, but no chip the command runs on is {} ({}): it would change nothing",
                p.arch,
                p.arch,
                archs.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ")
            ))),
            None => Ok(()),
        }
    }

    /// [`ParamSource::on`] for a command that runs on `cluster` alone: a parameter file of
    /// another architecture is refused.
    pub fn on_checked(&self, cluster: &Cluster) -> Result<Params, RunError> {
        self.check(&[cluster.arch()])?;
        Ok(self.on(cluster))
    }

    /// The parameters on `cluster`: the file of its architecture, or its architecture's built-in
    /// ones (`configs/<arch>.yaml`), as they apply there (a Galaxy's link rate), then
    /// `--link-gbps`.
    pub fn on(&self, cluster: &Cluster) -> Params {
        let arch = cluster.arch();
        let p = self
            .files
            .iter()
            .find(|(_, p)| p.arch() == arch)
            .map(|(_, p)| p.clone())
            .unwrap_or_else(|| Params::of(arch).expect("a resolved cluster's architecture is modelled"));
        let mut p = p.on(cluster);
        if let Some(g) = self.link_gbps {
            p.eth_link_gbps = g;
        }
        p
    }
}

impl Scenario {
    /// An op scenario named after `op` on `cluster` with every other key left out (each takes
    /// its default): what `meshsim op` and `meshsim replay` fill in.
    pub fn op(op: OpKind, cluster: &str) -> Scenario {
        Scenario {
            name: op.name().into(),
            op: Kind::Op(op),
            cluster: cluster.to_owned(),
            params: None,
            tolerance_pct: 0.0,
            shape: None,
            dim: None,
            dtype: None,
            topology: None,
            num_links: None,
            links: None,
            workers: None,
            bidir: None,
            redop: None,
            root: None,
            exclude_myself: None,
            in_place: None,
            select: None,
            chips: None,
            chip_ids: None,
            axis: None,
            groups: None,
            workload: None,
            pages_per_packet: None,
            buffers: None,
            memory: None,
            persistent_buffers: None,
            skew_ns: None,
            faults: FaultKnobs::default(),
            verify: None,
            stack: None,
            model: None,
            packet_size: None,
            size: None,
            slots: None,
            samples: None,
            packets: None,
            to_worker: None,
            hops: None,
            unmerged: None,
        }
    }

    /// Fields set that `op` does not take, by name.
    fn stray_fields(&self) -> Vec<&'static str> {
        let op = self.op.op();
        let op_only = [
            ("shape", self.shape.is_some()),
            ("dim", self.dim.is_some()),
            ("dtype", self.dtype.is_some()),
            ("topology", self.topology.is_some()),
            ("links", self.links.is_some()),
            ("num_links", self.num_links.is_some()),
            ("workers", self.workers.is_some()),
            ("chips", self.chips.is_some()),
            ("chip_ids", self.chip_ids.is_some()),
            ("axis", self.axis.is_some()),
            ("groups", self.groups.is_some()),
            ("pages_per_packet", self.pages_per_packet.is_some()),
            ("packet_size", self.packet_size.is_some()),
            ("buffers", self.buffers.is_some()),
            ("memory", self.memory.is_some()),
            ("persistent_buffers", self.persistent_buffers.is_some()),
            ("verify", self.verify.is_some()),
            ("faults", !self.faults.faults.is_empty()),
            ("random_faults", self.faults.random_faults.is_some()),
            ("fault_seed", self.faults.fault_seed.is_some()),
            ("skew_ns", self.skew_ns.is_some() && self.op != Kind::Ring),
            ("select", self.select.is_some()),
        ];
        // Keys that only some ops take.
        let only_some = [
            ("size", self.size.is_some(), [Kind::Latency, Kind::Bandwidth, Kind::Ring].as_slice()),
            ("slots", self.slots.is_some(), &[Kind::Latency, Kind::Bandwidth]),
            ("samples", self.samples.is_some(), &[Kind::Latency, Kind::Ring]),
            ("packets", self.packets.is_some(), &[Kind::Bandwidth]),
            ("to_worker", self.to_worker.is_some(), &[Kind::Bandwidth]),
            ("hops", self.hops.is_some(), &[Kind::Ring]),
            ("unmerged", self.unmerged.is_some(), &[Kind::Latency, Kind::Ring]),
            ("workload", self.workload.is_some(), &[Kind::Workload]),
        ];
        // Keys that only ops of a kind take.
        let only_ops = [
            ("redop", self.redop.is_some(), op.is_some_and(OpKind::reduces)),
            ("root", self.root.is_some(), op.is_some_and(OpKind::rooted)),
            ("exclude_myself", self.exclude_myself.is_some(), op == Some(OpKind::AllGather)),
            ("in_place", self.in_place.is_some(), op == Some(OpKind::AllGather)),
            (
                "bidir",
                self.bidir.is_some(),
                self.op.takes_bidir() || matches!(self.op, Kind::Op(OpKind::ReduceScatter) | Kind::Bandwidth),
            ),
        ];
        let mut out: Vec<&'static str> =
            op_only.iter().filter(|(_, set)| *set && op.is_none()).map(|(n, _)| *n).collect();
        out.extend(only_ops.iter().filter(|(_, set, ok)| *set && !ok).map(|(n, ..)| *n));
        if self.op == Kind::Workload && self.verify.is_some() {
            out.retain(|&n| n != "verify");
        }
        out.extend(only_some.iter().filter(|(_, set, ok)| *set && !ok.contains(&self.op)).map(|(n, ..)| *n));
        out
    }

    /// The cluster as `load_cluster` takes it: a built-in name, or a file path resolved
    /// against `base`.
    pub fn cluster_spec(&self, base: &Path) -> String {
        if Path::new(&self.cluster).extension().is_some() {
            base.join(&self.cluster).to_string_lossy().into_owned()
        } else {
            self.cluster.clone()
        }
    }

    /// Runs the scenario. Paths are relative to `base`; `params` overrides the scenario's own
    /// parameter file; `trace` records a full trace.
    pub fn run(&self, base: &Path, model: Option<&ParamSource>, trace: bool) -> Result<Outcome, RunError> {
        let bad = RunError::Bad;
        if let Some(field) = self.stray_fields().first() {
            return Err(bad(format!("'{field}' does not apply to {}", self.op.name())));
        }
        if !(self.tolerance_pct >= 0.0 && self.tolerance_pct.is_finite()) {
            return Err(bad(format!("tolerance_pct must be a percentage >= 0, got {}", self.tolerance_pct)));
        }
        let cluster = load_cluster(&self.cluster_spec(base))?;
        let params = match model {
            Some(m) => m.on(&cluster),
            None => {
                let own: Vec<PathBuf> = self.params.iter().map(|p| base.join(p)).collect();
                ParamSource::load(&own, None)?.on_checked(&cluster)?
            }
        };
        if self.op == Kind::Workload {
            let file = self.workload.as_ref().ok_or_else(|| bad("workload needs a workload file".into()))?;
            let w = crate::workload::Workload::load(&base.join(file)).map_err(bad)?;
            if w.cluster != self.cluster {
                return Err(bad(format!(
                    "cluster '{}' is not the workload's cluster '{}'",
                    self.cluster, w.cluster
                )));
            }
            let sim = self.model.unwrap_or_default();
            let run =
                w.run(&cluster, &params, (self.verify.unwrap_or(false), sim), trace).map_err(ccl_error)?;
            return Ok(Outcome { time: run.makespan, stats: run.stats, cluster, trace: run.trace, op: None });
        }
        if let Kind::Op(op) = self.op {
            self.run_op(op, base, cluster, &params, trace)
        } else {
            self.run_bench(cluster, params, trace)
        }
    }

    fn run_op(
        &self,
        op: OpKind,
        base: &Path,
        cluster: Cluster,
        params: &Params,
        trace: bool,
    ) -> Result<Outcome, RunError> {
        let (session, comms, tensor) = self.op_session(op, base, &cluster, params, trace)?;
        let all_run = session.run().map_err(ccl_error)?;
        Ok(outcome(cluster, all_run, &comms, tensor))
    }

    /// What the op's worker kernels would do, per phase, without running it (`op --schedule`):
    /// `None` when its stack has no worker schedule to show.
    pub fn schedule(&self, base: &Path, model: &ParamSource) -> Result<Option<Vec<ScheduleView>>, RunError> {
        let Kind::Op(op) = self.op else {
            return Err(RunError::Bad(format!("{} has no worker schedule", self.op.name())));
        };
        let cluster = load_cluster(&self.cluster_spec(base))?;
        let params = model.on(&cluster);
        let (session, _, _) = self.op_session(op, base, &cluster, &params, false)?;
        session.schedule().map_err(ccl_error)
    }

    /// The session that runs the op on every communicator, and those and its tensor.
    fn op_session<'c>(
        &self,
        op: OpKind,
        base: &Path,
        cluster: &'c Cluster,
        params: &Params,
        trace: bool,
    ) -> Result<(Session<'c>, Vec<Communicator>, TensorSpec), RunError> {
        let bad = RunError::Bad;
        let shape = self.shape.clone().ok_or_else(|| bad(format!("{} needs a shape", self.op.name())))?;
        let shape: [u64; 4] = shape
            .try_into()
            .map_err(|v: Vec<u64>| bad(format!("shape needs 4 values w,z,y,x, got {}", v.len())))?;
        let tensor =
            TensorSpec::new(shape, self.dtype.unwrap_or(DType::Bf16), Layout::Tile).map_err(|e| bad(e.0))?;
        let collective = op.collective(self.redop.unwrap_or(RedOp::Sum), self.root.unwrap_or(0));
        let comms = self.communicators(cluster)?;
        let knobs = self.knobs()?;
        let stack = self.stack.unwrap_or(Stack::DEFAULT);
        let mut session = Session::new(cluster, params);
        session.set_stack(stack);
        session.set_model(self.model.unwrap_or_default());
        if let Some(path) = &self.select {
            session.set_select(load_select(&base.join(path)).map_err(RunError::Bad)?);
        }
        session.set_verify(self.verify.unwrap_or(false));
        session.set_trace(trace);
        let all: Vec<ChipIdx> = comms.iter().flat_map(|c| c.chips().iter().copied()).collect();
        session.set_skew(all, self.skew_ns.unwrap_or(0)).map_err(ccl_error)?;
        for f in self.faults.list(session.cluster()).map_err(bad)? {
            session.add_fault(f).map_err(ccl_error)?;
        }
        let many = comms.len() > 1;
        for (i, comm) in comms.iter().enumerate() {
            let name = if many { format!("{}[{i}]", self.op.name()) } else { self.op.name().to_owned() };
            let mut req = OpRequest::new(&name, comm.clone(), collective, tensor, self.dim.unwrap_or(3));
            req.knobs = knobs;
            req.exclude_myself = self.exclude_myself.unwrap_or(false);
            req.in_place = self.in_place.unwrap_or(false);
            session.submit(req).map_err(ccl_error)?;
        }
        let given = Given {
            workers: self.workers.is_some(),
            bidir: self.bidir.is_some(),
            pages_per_packet: self.pages_per_packet.is_some(),
            buffers: self.buffers.is_some(),
            packet_size: self.packet_size.is_some(),
            persistent_buffers: self.persistent_buffers == Some(true),
        };
        meshsim_ccl::stacks::check_given(stack, collective, &given).map_err(bad)?;
        Ok((session, comms, tensor))
    }

    /// The communicators an op runs on: every row or column (`axis`), or one ring or line.
    fn communicators(&self, cluster: &Cluster) -> Result<Vec<Communicator>, RunError> {
        let bad = RunError::Bad;
        if let Some(groups) = &self.groups {
            if self.chips.is_some() || self.chip_ids.is_some() || self.axis.is_some() {
                return Err(bad(
                    "groups names every communicator's chips; it does not take chips, chip_ids or axis"
                        .into(),
                ));
            }
            return groups
                .iter()
                .map(|g| {
                    Communicator::choose_default(cluster, self.topology, None, Some(g)).map_err(|e| bad(e.0))
                })
                .collect();
        }
        match self.axis {
            Some(axis) => {
                if self.chips.is_some() || self.chip_ids.is_some() {
                    return Err(bad(
                        "axis runs on every row or column; it does not take chips or chip_ids".into()
                    ));
                }
                Communicator::axis(cluster, axis, self.topology).map_err(|e| bad(e.0))
            }
            None => Ok(vec![
                Communicator::choose_default(cluster, self.topology, self.chips, self.chip_ids.as_deref())
                    .map_err(|e| bad(e.0))?,
            ]),
        }
    }

    /// The op's knobs; those left out take the library's defaults (`Knobs::default`).
    fn knobs(&self) -> Result<Knobs, RunError> {
        if self.links.is_some() && self.num_links.is_some() {
            return Err(RunError::Bad(
                "num_links and links (its old name) are both given: keep num_links".into(),
            ));
        }
        let bidir: Option<Bidir> = match &self.bidir {
            None => None,
            Some(BidirValue::Mode(m)) => Some(*m),
            Some(BidirValue::Flag(_)) => {
                return Err(RunError::Bad("bidir of an all-gather is none, split or full".into()));
            }
        };
        let d = Knobs::default();
        Ok(Knobs {
            links: self.num_links.or(self.links).or(d.links),
            workers: self.workers.or(d.workers),
            bidir,
            pages_per_packet: self.pages_per_packet,
            packet_bytes: self.packet_size.as_ref().map(Size::bytes).transpose().map_err(RunError::Bad)?,
            algorithm: None,
            buffers_per_channel: self.buffers.unwrap_or(d.buffers_per_channel),
            memory: self.memory.unwrap_or(Memory::Dram),
            persistent_buffers: self.persistent_buffers.unwrap_or(false),
        })
    }

    fn run_bench(&self, cluster: Cluster, params: Params, trace: bool) -> Result<Outcome, RunError> {
        let model = self.model.unwrap_or_default();
        if !meshsim_ccl::stacks::capabilities(Stack::DEFAULT, model).microbenchmarks {
            return Err(RunError::Bad(format!(
                "{} is a microbenchmark of the packet model: it does not run on the {model} model",
                self.op.name()
            )));
        }
        let size = self
            .size
            .as_ref()
            .ok_or_else(|| RunError::Bad(format!("{} needs a size", self.op.name())))?
            .bytes()
            .map_err(RunError::Bad)?;
        let setup = Setup { cluster, params, trace, model: SimModel::Packet };
        let err = |e: meshsim_bench::BenchError| {
            if e.is_bad_input() { RunError::Bad(e.to_string()) } else { RunError::Failed(e.to_string()) }
        };
        /// The parts of a benchmark's result a scenario keeps: its run, not its row.
        fn done<R>(m: Measured<R>) -> (Stats, Option<TraceData>) {
            (m.stats, m.trace)
        }
        let unmerged = self.unmerged.unwrap_or(false);
        let (stats, trace) = match self.op {
            Kind::Latency => done(
                latency::latency(
                    &setup,
                    latency::LatencySpec {
                        size_bytes: size,
                        slots: self.slots.unwrap_or(16),
                        samples: self.samples.unwrap_or(4),
                        unmerged,
                    },
                )
                .map_err(err)?,
            ),
            Kind::Bandwidth => {
                let bidir = match &self.bidir {
                    None => false,
                    Some(BidirValue::Flag(b)) => *b,
                    Some(BidirValue::Mode(_)) => {
                        return Err(RunError::Bad(
                            "bidir of the bandwidth benchmark is true or false".into(),
                        ));
                    }
                };
                done(
                    bandwidth::bandwidth(
                        &setup,
                        bandwidth::BandwidthSpec {
                            size_bytes: size,
                            slots: self.slots,
                            packets: self.packets.unwrap_or(256),
                            bidir,
                            to_worker: self.to_worker.unwrap_or(false),
                        },
                    )
                    .map_err(err)?,
                )
            }
            _ => done(
                ring::ring(
                    &setup,
                    ring::RingSpec {
                        size_bytes: size,
                        hops: self.hops.unwrap_or(8),
                        samples: self.samples.unwrap_or(4),
                        unmerged,
                        start_skew_ns: self.skew_ns.unwrap_or(0),
                    },
                )
                .map_err(err)?,
            ),
        };
        Ok(Outcome { time: stats.end_time, stats, trace, op: None, cluster: setup.cluster })
    }
}

/// An op scenario's outcome: one op's run, or with several communicators (`axis`) their
/// makespan, every chip's span, and the first failed verification.
fn outcome(cluster: Cluster, mut all_run: SessionRun, comms: &[Communicator], tensor: TensorSpec) -> Outcome {
    let mut run = all_run.op_run(0);
    if comms.len() > 1 {
        run.time = all_run.makespan;
        run.per_chip = all_run.ops.iter().flat_map(|o| o.per_chip.iter().copied()).collect();
        run.verified = all_run
            .ops
            .iter()
            .find_map(|o| o.verified.clone().filter(|v| v.is_err()))
            .or_else(|| all_run.ops[0].verified.clone());
    }
    let trace = all_run.trace.take();
    Outcome {
        time: run.time,
        stats: run.stats.clone(),
        cluster,
        trace,
        op: Some(OpDone {
            run,
            ops: all_run.ops,
            chips: comms[0].chips().to_vec(),
            tensor,
            topology: comms[0].topology(),
        }),
    }
}
