//! Workload files: many ops on one machine, with communicators and dependencies.
//!
//! ```yaml
//! cluster: galaxy
//! ops:
//!   - name: ag_rows
//!     op: all-gather            # all-gather | reduce-scatter | all-reduce
//!     comm: {axis: 1}           # or {chips: [0, 1, 2, 3], topology: line} or {all: true, topology: ring}
//!     shape: [1, 1, 32, 8192]   # per communicator, as `--shape` of `meshsim op`
//!     dim: 3
//!     dtype: bfp8
//!   - name: rs_cols
//!     op: reduce-scatter
//!     comm: {axis: 0}
//!     shape: [1, 1, 32, 4096]
//!     after: [ag_rows]          # starts once every instance of ag_rows has ended
//!     stream: s0                # ops on one stream run in file order
//! limits: {max_message_bytes: 1048576, max_calls: 16}   # optional, LPF's context limits
//! ```
//!
//! Keys are `meshsim op`'s long flags with `_` for `-`. An op on an axis runs one instance per
//! row or column, named `name[i]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use meshsim_ccl::comm::Communicator;
use meshsim_ccl::op::SimModel;
use meshsim_ccl::op::{Bidir, CclError, Collective, Given, Knobs, RedOp, Stack, Topology};
use meshsim_ccl::session::{OpHandle, OpRequest, Session, SessionRun};

use crate::spec::{FaultKnobs, OpKind};
use meshsim_ccl::tensor::{DType, Layout, Memory, TensorSpec};
use meshsim_hw::Params;
use meshsim_topology::Cluster;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadFile {
    cluster: String,
    params: Option<PathBuf>,
    /// `fabric` (the default) or `edm`: one stack per machine.
    stack: Option<Stack>,
    /// Faults injected into the run (`--fault`'s specs).
    #[serde(default)]
    faults: Vec<String>,
    /// This many faults drawn from `fault_seed`.
    random_faults: Option<usize>,
    /// The seed of `random_faults` (default 0).
    fault_seed: Option<u64>,
    /// The collective context's limits (LPF's): the largest message and the most calls.
    limits: Option<LimitsSpec>,
    /// A selection tree, relative to the file.
    select: Option<PathBuf>,
    ops: Vec<WorkloadOp>,
}

/// `limits:` as written.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsSpec {
    max_message_bytes: Option<u64>,
    max_calls: Option<usize>,
}

/// One op of a workload, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadOp {
    name: String,
    op: OpKind,
    comm: CommSpec,
    shape: Vec<u64>,
    #[serde(default, deserialize_with = "crate::spec::deserialize_dim")]
    dim: Option<usize>,
    dtype: Option<DType>,
    redop: Option<RedOp>,
    root: Option<usize>,
    exclude_myself: Option<bool>,
    in_place: Option<bool>,
    num_links: Option<usize>,
    workers: Option<usize>,
    bidir: Option<Bidir>,
    pages_per_packet: Option<u64>,
    packet_size: Option<u64>,
    buffers: Option<u64>,
    memory: Option<Memory>,
    persistent_buffers: Option<bool>,
    #[serde(default)]
    after: Vec<String>,
    /// Its stream: ops on one stream run in file order.
    stream: Option<String>,
}

/// A communicator, as written: one of `axis`, `chips` or `all`, optionally a strided subset.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommSpec {
    axis: Option<usize>,
    chips: Option<Vec<u64>>,
    all: Option<bool>,
    topology: Option<Topology>,
    start: Option<usize>,
    stride: Option<usize>,
    count: Option<usize>,
}

/// A checked workload: ops in an order where every dependency comes first.
pub struct Workload {
    /// The file it came from.
    pub path: PathBuf,
    /// The cluster (a built-in name or a path relative to the file).
    pub cluster: String,
    /// The parameter file (relative to the workload file), if any.
    pub params: Option<PathBuf>,
    /// The transport every op runs on.
    pub stack: Stack,
    /// The faults of the file's `faults`, `random_faults` and `fault_seed` keys, as a
    /// scenario holds them.
    pub faults: FaultKnobs,
    /// The collective context's limits.
    limits: meshsim_ccl::session::Limits,
    /// The file's `select:` key, relative to the file.
    select_file: Option<PathBuf>,
    /// Program start skew: the k-th chip of the cluster starts k x this many ns after the first.
    pub skew_ns: u64,
    /// The selection tree the run uses (`None`: the embedded one).
    pub select: Option<meshsim_ccl::select::Select>,
    ops: Vec<WorkloadOp>,
}

impl Workload {
    /// Reads and checks a workload file: syntax, keys, names, dependencies (unknown and
    /// cyclic `after` are errors naming the op).
    pub fn load(path: &Path) -> Result<Workload, String> {
        let here = path.display();
        let text = meshsim_topology::input::read_input_text(path).map_err(|e| format!("{here}: {e}"))?;
        let mut file: WorkloadFile = meshsim_topology::input::from_yaml(&text).map_err(|e| {
            format!(
                "{here}: {}",
                meshsim_topology::input::plain_message(&e.to_string())
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        })?;
        if file.ops.is_empty() {
            return Err(format!("{here}: the workload has no ops"));
        }
        let order = dependency_order(&mut file.ops).map_err(|e| format!("{here}: {e}"))?;
        let stack = file.stack.unwrap_or(Stack::DEFAULT);
        let ops = order.into_iter().map(|i| file.ops[i].clone()).collect();
        let faults = FaultKnobs {
            faults: file.faults,
            random_faults: file.random_faults,
            fault_seed: file.fault_seed,
        };
        for spec in &faults.faults {
            spec.parse::<meshsim_ccl::fault::Fault>().map_err(|e| format!("{here}: {e}"))?;
        }
        let limits = file.limits.map_or(Default::default(), |l| meshsim_ccl::session::Limits {
            max_message_bytes: l.max_message_bytes,
            max_calls: l.max_calls,
        });
        Ok(Workload {
            path: path.to_owned(),
            cluster: file.cluster,
            params: file.params,
            stack,
            faults,
            limits,
            select_file: file.select,
            select: None,
            skew_ns: 0,
            ops,
        })
    }

    /// The command line's op knobs, each given one replacing every op's: packet size, pages
    /// per packet, buffers, memory; and the start skew over the cluster's chips.
    pub fn override_knobs(&mut self, k: &Overrides) {
        for o in &mut self.ops {
            o.packet_size = k.packet_size.or(o.packet_size);
            o.pages_per_packet = k.pages_per_packet.or(o.pages_per_packet);
            o.buffers = k.buffers.or(o.buffers);
            o.memory = k.memory.or(o.memory);
        }
        self.skew_ns = k.skew_ns;
    }

    /// The cluster as `load_cluster` takes it: a built-in name, or a path relative to the file.
    pub fn cluster_spec(&self) -> String {
        if Path::new(&self.cluster).extension().is_some() {
            self.path.parent().unwrap_or(Path::new(".")).join(&self.cluster).to_string_lossy().into_owned()
        } else {
            self.cluster.clone()
        }
    }

    /// The selection tree's path (`select:`), relative to the workload file.
    pub fn select_path(&self) -> Option<PathBuf> {
        self.select_file.as_ref().map(|p| self.path.parent().unwrap_or(Path::new(".")).join(p))
    }

    /// The parameter file's path, relative to the workload file.
    pub fn params_path(&self) -> Option<PathBuf> {
        self.params.as_ref().map(|p| self.path.parent().unwrap_or(Path::new(".")).join(p))
    }

    /// Submits every op to one session on `cluster` and runs it.
    pub fn run(
        &self,
        cluster: &Cluster,
        params: &Params,
        (verify, sim): (bool, SimModel),
        trace: bool,
    ) -> Result<SessionRun, CclError> {
        let mut s = Session::new(cluster, params);
        s.set_model(sim);
        s.set_limits(self.limits)?;
        if let Some(tree) = &self.select {
            s.set_select(tree.clone());
        }
        s.set_stack(self.stack);
        s.set_verify(verify);
        s.set_trace(trace);
        if self.skew_ns > 0 {
            let chips = (0..cluster.chips().len() as u32).map(meshsim_topology::ChipIdx).collect();
            s.set_skew(chips, self.skew_ns)?;
        }
        let here = |m: String| CclError::Invalid(format!("{}: {m}", self.path.display()));
        for f in self.faults.list(cluster).map_err(here)? {
            s.add_fault(f).map_err(|e| here(e.to_string()))?;
        }
        let mut handles: BTreeMap<&str, Vec<OpHandle>> = BTreeMap::new();
        for o in &self.ops {
            let named =
                |m: String| CclError::Invalid(format!("{}: op '{}': {m}", self.path.display(), o.name));
            let (collective, tensor, dim, knobs) = o.request(cluster).map_err(named)?;
            meshsim_ccl::stacks::check_given(self.stack, collective, &o.given()).map_err(named)?;
            let comms = o.comm.communicators(cluster).map_err(named)?;
            let after: Vec<OpHandle> = o.after.iter().flat_map(|d| handles[d.as_str()].clone()).collect();
            let many = comms.len() > 1;
            for (i, comm) in comms.into_iter().enumerate() {
                let name = if many { format!("{}[{i}]", o.name) } else { o.name.clone() };
                let mut req = OpRequest::new(&name, comm, collective, tensor, dim);
                req.knobs = knobs;
                req.after = after.clone();
                req.exclude_myself = o.exclude_myself.unwrap_or(false);
                req.in_place = o.in_place.unwrap_or(false);
                let h = s.submit(req).map_err(|e| match e {
                    CclError::Invalid(m) => named(m),
                    other => other,
                })?;
                handles.entry(o.name.as_str()).or_default().push(h);
            }
        }
        s.run().map_err(|e| match e {
            CclError::Invalid(m) => CclError::Invalid(format!("{}: {m}", self.path.display())),
            other => other,
        })
    }
}

/// Checks a workload's ops — one-word names, no name twice, every `after` naming an op — adds
/// each stream's order to `after`, and returns an order in which every op comes after its
/// dependencies (Kahn's algorithm, ready ops in file order); what is left is in a cycle.
fn dependency_order(ops: &mut [WorkloadOp]) -> Result<Vec<usize>, String> {
    // An op on a stream starts after the op before it on that stream (in file order).
    let mut last_on: BTreeMap<String, String> = BTreeMap::new();
    for o in ops.iter_mut() {
        if let Some(st) = &o.stream {
            if let Some(prev) = last_on.insert(st.clone(), o.name.clone())
                && !o.after.contains(&prev)
            {
                o.after.push(prev);
            }
        }
    }
    let index: BTreeMap<&str, usize> = ops.iter().enumerate().map(|(i, o)| (o.name.as_str(), i)).collect();
    for (i, o) in ops.iter().enumerate() {
        if o.name.is_empty() || o.name.contains(char::is_whitespace) {
            return Err(format!("op name '{}' must be one word", o.name));
        }
        if index[o.name.as_str()] != i {
            return Err(format!("two ops are named '{}'", o.name));
        }
        if let Some(dep) = o.after.iter().find(|d| !index.contains_key(d.as_str())) {
            return Err(format!("op '{}': after names '{dep}', which is not an op of this workload", o.name));
        }
    }
    // Kahn's algorithm, taking ready ops in file order; what is left is in a cycle.
    let mut order: Vec<usize> = Vec::new();
    let mut placed = vec![false; ops.len()];
    while order.len() < ops.len() {
        let ready =
            (0..ops.len()).find(|&i| !placed[i] && ops[i].after.iter().all(|d| placed[index[d.as_str()]]));
        match ready {
            Some(i) => {
                placed[i] = true;
                order.push(i);
            }
            None => {
                let cycle: Vec<&str> =
                    (0..ops.len()).filter(|&i| !placed[i]).map(|i| ops[i].name.as_str()).collect();
                return Err(format!("ops {} wait for each other (cyclic after)", cycle.join(", ")));
            }
        }
    }
    Ok(order)
}

impl WorkloadOp {
    /// The stack-specific knobs this op gives.
    fn given(&self) -> Given {
        Given {
            workers: self.workers.is_some(),
            bidir: self.bidir.is_some(),
            pages_per_packet: self.pages_per_packet.is_some(),
            buffers: self.buffers.is_some(),
            packet_size: self.packet_size.is_some(),
            persistent_buffers: self.persistent_buffers == Some(true),
        }
    }

    fn request(&self, _cluster: &Cluster) -> Result<(Collective, TensorSpec, usize, Knobs), String> {
        let collective = self.op.collective(self.redop.unwrap_or(RedOp::Sum), self.root.unwrap_or(0));
        if self.redop.is_some() && collective.redop().is_none() {
            return Err(format!("redop does not apply to {}", collective.name()));
        }
        if self.root.is_some() && collective.root().is_none() {
            return Err(format!("root does not apply to {}", collective.name()));
        }
        let shape: [u64; 4] = self
            .shape
            .clone()
            .try_into()
            .map_err(|v: Vec<u64>| format!("shape needs 4 values w,z,y,x, got {}", v.len()))?;
        let dtype = self.dtype.unwrap_or(DType::Bf16);
        let tensor = TensorSpec::new(shape, dtype, Layout::Tile).map_err(|e| e.0)?;
        let d = Knobs::default();
        let bidir = self.bidir;
        let memory = self.memory.unwrap_or(d.memory);
        let knobs = Knobs {
            links: self.num_links.or(d.links),
            workers: self.workers.or(d.workers),
            bidir,
            pages_per_packet: self.pages_per_packet,
            packet_bytes: self.packet_size,
            algorithm: None,
            buffers_per_channel: self.buffers.unwrap_or(d.buffers_per_channel),
            memory,
            persistent_buffers: self.persistent_buffers.unwrap_or(false),
        };
        Ok((collective, tensor, self.dim.unwrap_or(3), knobs))
    }
}

/// Op knobs a command line gives every op of a workload: each one given replaces the ops' own.
#[derive(Clone, Copy, Debug)]
pub struct Overrides {
    /// The fabric routers' packet payload, bytes.
    pub packet_size: Option<u64>,
    /// Pages per EDM packet.
    pub pages_per_packet: Option<u64>,
    /// EDM buffers per channel.
    pub buffers: Option<u64>,
    /// Where tensors are interleaved.
    pub memory: Option<Memory>,
    /// Program start skew per chip, ns.
    pub skew_ns: u64,
}

impl CommSpec {
    fn communicators(&self, cluster: &Cluster) -> Result<Vec<Communicator>, String> {
        let topology = self.topology;
        let chosen = [self.axis.is_some(), self.chips.is_some(), self.all == Some(true)];
        if chosen.iter().filter(|&&c| c).count() != 1 {
            return Err("comm needs exactly one of axis, chips or all: true".into());
        }
        let e = |e: meshsim_ccl::op::OpError| e.0;
        let base: Vec<Communicator> = if let Some(axis) = self.axis {
            Communicator::axis(cluster, axis, topology).map_err(e)?
        } else if let Some(ids) = &self.chips {
            vec![Communicator::choose_default(cluster, topology, None, Some(ids)).map_err(e)?]
        } else {
            vec![Communicator::choose_default(cluster, topology, None, None).map_err(e)?]
        };
        if self.start.is_none() && self.stride.is_none() && self.count.is_none() {
            return Ok(base);
        }
        base.iter()
            .map(|c| {
                let t = topology.unwrap_or(c.topology());
                c.strided(cluster, self.start.unwrap_or(0), self.stride.unwrap_or(1), self.count, t)
                    .map_err(e)
            })
            .collect()
    }
}
