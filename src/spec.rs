//! What scenarios, workload ops and the CLI's flags name alike: the ops ([`OpKind`]), what a
//! scenario runs ([`Kind`]) and the faults it injects ([`FaultKnobs`]).

use meshsim_ccl::op::{Collective, RedOp};
use meshsim_topology::Cluster;
use serde::Deserialize;

/// A CCL op as the command line, suites, workloads and sweep files name it: the one list of
/// them. `meshsim op <OP>`, `sweep <OP>`, `tune <OP>`, a scenario's and a workload op's `op:`
/// all read this enum; its clap names are its file names (`all-gather`), [`OpKind::json_name`]
/// its JSON and table name (`all_gather`), [`OpKind::nccl_name`] nccl-tests' (`sendrecv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OpKind {
    /// All-gather: every chip ends with the concatenation of all chips' slices along --dim.
    #[value(alias = "all_gather")]
    AllGather,
    /// Reduce-scatter: every chip ends with its slice of the reduction of all chips' tensors.
    #[value(alias = "reduce_scatter")]
    ReduceScatter,
    /// All-reduce: every chip ends with the reduction of all chips' tensors (reduce-scatter,
    /// then all-gather).
    #[value(alias = "all_reduce")]
    AllReduce,
    /// All-to-all: every rank sends chunk j of its tensor (split along --dim) to rank j, which
    /// keeps it as chunk i of its output (i the sender); fabric stack only.
    #[value(alias = "all_to_all")]
    AllToAll,
    /// Broadcast: every chip ends with the --root's tensor.
    Broadcast,
    /// Reduce: the --root ends with the reduction of all chips' tensors.
    Reduce,
    /// Gather: the --root ends with the concatenation of all chips' slices along --dim.
    Gather,
    /// Scatter: chip j ends with slice j (along --dim) of the --root's tensor.
    Scatter,
    /// Send/receive: the first of --chip-ids A,B sends its tensor to the second (a linked pair).
    #[value(alias = "send_recv")]
    SendRecv,
    /// Combine (LPF's name): the --root ends with the element-wise --redop of all chips'
    /// tensors; runs as reduce.
    Combine,
    /// All-combine (LPF's name): every chip ends with the element-wise --redop of all chips'
    /// tensors; runs as all-reduce.
    #[value(alias = "all_combine")]
    AllCombine,
}

impl OpKind {
    /// The collective it runs, with its reduction and root.
    pub fn collective(self, red: RedOp, root: usize) -> Collective {
        match self {
            OpKind::AllGather => Collective::AllGather,
            OpKind::ReduceScatter => Collective::ReduceScatter(red),
            OpKind::AllReduce | OpKind::AllCombine => Collective::AllReduce(red),
            OpKind::AllToAll => Collective::AllToAll,
            OpKind::Broadcast => Collective::Broadcast { root },
            OpKind::Reduce | OpKind::Combine => Collective::Reduce { red, root },
            OpKind::Gather => Collective::Gather { root },
            OpKind::Scatter => Collective::Scatter { root },
            OpKind::SendRecv => Collective::SendRecv,
        }
    }

    /// Whether the op reduces (takes `redop`).
    pub fn reduces(self) -> bool {
        self.collective(RedOp::Sum, 0).redop().is_some()
    }

    /// Whether the op has a root (takes `root`).
    pub fn rooted(self) -> bool {
        self.collective(RedOp::Sum, 0).root().is_some()
    }

    /// The collective with the reduction and root given, refused in one line when the op takes
    /// neither (`sweep` and `tune` check their flags so).
    pub fn collective_given(self, redop: Option<RedOp>, root: Option<usize>) -> Result<Collective, String> {
        if redop.is_some() && !self.reduces() {
            return Err(format!("--redop applies to reducing ops, not {}", self.nccl_name()));
        }
        if root.is_some() && !self.rooted() {
            return Err(format!(
                "--root applies to rooted ops (broadcast, reduce, gather, scatter, combine), not {}",
                self.nccl_name()
            ));
        }
        Ok(self.collective(redop.unwrap_or(RedOp::Sum), root.unwrap_or(0)))
    }

    /// The ops that take a bidirectional mode.
    pub fn takes_bidir(self) -> bool {
        matches!(self, OpKind::AllGather | OpKind::AllReduce | OpKind::AllCombine | OpKind::Broadcast)
    }

    /// The name on the command line and in files: the collective's, or LPF's for its two
    /// aliases.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Combine => "combine",
            OpKind::AllCombine => "all-combine",
            k => k.collective(RedOp::Sum, 0).name(),
        }
    }

    /// The name in JSON and tables (`all_gather`).
    pub fn json_name(self) -> String {
        self.name().replace('-', "_")
    }

    /// nccl-tests' name (`all_gather`, `sendrecv`), as sweep tables and point files give it.
    pub fn nccl_name(self) -> String {
        match self {
            OpKind::SendRecv => "sendrecv".into(),
            k => k.json_name(),
        }
    }

    /// The op named `name` in a file.
    pub fn named(name: &str) -> Option<OpKind> {
        <OpKind as clap::ValueEnum>::from_str(name, false).ok()
    }

    /// Every op's file name, comma-separated, for messages.
    pub fn names() -> String {
        <OpKind as clap::ValueEnum>::value_variants().iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
    }
}

/// A tensor dimension as ttnn counts it: 0 to 3, or -4 to -1 from the end (`--dim -1` is the
/// last, 3).
pub fn parse_dim(s: &str) -> Result<usize, String> {
    let d: i64 =
        s.trim().parse().map_err(|_| format!("'{s}' is not a dimension (0..3, or -4..-1 from the end)"))?;
    dim_of(d)
}

/// [`parse_dim`]'s rule on a number.
fn dim_of(d: i64) -> Result<usize, String> {
    match d {
        0..=3 => Ok(d as usize),
        -4..=-1 => Ok((d + 4) as usize),
        _ => Err(format!("dim {d} is not a dimension of a 4-D tensor (0..3, or -4..-1 from the end)")),
    }
}

/// Reads an optional `dim:` of a suite or workload as [`parse_dim`] does.
pub fn deserialize_dim<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    let v: Option<i64> = Option::deserialize(d)?;
    v.map(dim_of).transpose().map_err(serde::de::Error::custom)
}

impl<'de> Deserialize<'de> for OpKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        OpKind::named(&s).ok_or_else(|| {
            let names = OpKind::names();
            let hint = meshsim_topology::input::did_you_mean(&s, names.split(", "))
                .map_or(String::new(), |m| format!(": did you mean `{m}`?"));
            serde::de::Error::custom(format!("unknown op '{s}' ({names}){hint}"))
        })
    }
}

/// What a scenario runs: an op, a workload or a microbenchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A CCL op.
    Op(OpKind),
    /// A workload file of many ops.
    Workload,
    /// The single-link round-trip microbenchmark.
    Latency,
    /// The raw ERISC bandwidth microbenchmark.
    Bandwidth,
    /// The ring ping microbenchmark.
    Ring,
}

impl Kind {
    /// The benchmarks and workloads, by name.
    const OTHERS: [(Kind, &'static str); 4] = [
        (Kind::Workload, "workload"),
        (Kind::Latency, "latency"),
        (Kind::Bandwidth, "bandwidth"),
        (Kind::Ring, "ring"),
    ];

    /// The op, if it is one (not a microbenchmark or a workload).
    pub fn op(self) -> Option<OpKind> {
        match self {
            Kind::Op(k) => Some(k),
            _ => None,
        }
    }

    /// The name used in files and tables.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Op(k) => k.name(),
            other => Kind::OTHERS.iter().find(|(k, _)| *k == other).map_or("", |(_, n)| n),
        }
    }

    /// Whether this op takes a bidirectional mode (the bandwidth benchmark's `bidir` is a flag).
    pub fn takes_bidir(self) -> bool {
        self.op().is_some_and(OpKind::takes_bidir)
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        if let Some(k) = OpKind::named(&s) {
            return Ok(Kind::Op(k));
        }
        Kind::OTHERS.iter().find(|(_, n)| *n == s).map(|(k, _)| *k).ok_or_else(|| {
            let others: Vec<&str> = Kind::OTHERS.iter().map(|(_, n)| *n).collect();
            let names = OpKind::names();
            let all = names.split(", ").chain(others.iter().copied());
            let hint = meshsim_topology::input::did_you_mean(&s, all)
                .map_or(String::new(), |m| format!(": did you mean `{m}`?"));
            serde::de::Error::custom(format!(
                "unknown variant `{s}`{hint} ({}, {})",
                OpKind::names(),
                others.join(", ")
            ))
        })
    }
}

/// Faults to inject, as the CLI (`--fault`, `--random-faults`, `--fault-seed`), suites and
/// workloads write them.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct FaultKnobs {
    /// Fault specs (`link-down:CHIP:CHAN@TIME_US`, ...; see docs/cli.md).
    #[serde(default)]
    pub faults: Vec<String>,
    /// This many faults drawn from `fault_seed`.
    #[serde(default)]
    pub random_faults: Option<usize>,
    /// The seed of `random_faults` (default 0).
    #[serde(default)]
    pub fault_seed: Option<u64>,
}

impl FaultKnobs {
    /// Whether any fault is asked for.
    pub fn any(&self) -> bool {
        !self.faults.is_empty() || self.random_faults.is_some_and(|k| k > 0)
    }

    /// The faults: those named, then `random_faults` drawn from `fault_seed` over `cluster`.
    pub fn list(&self, cluster: &Cluster) -> Result<Vec<meshsim_ccl::fault::Fault>, String> {
        if self.fault_seed.is_some() && self.random_faults.is_none() {
            return Err("fault_seed (--fault-seed) needs random_faults (--random-faults K)".into());
        }
        let mut out = Vec::new();
        for spec in &self.faults {
            out.push(spec.parse()?);
        }
        if let Some(k) = self.random_faults {
            if k > 1000 {
                return Err(format!("{k} random faults is more than the 1000 meshsim draws"));
            }
            out.extend(meshsim_ccl::fault::Fault::random(cluster, self.fault_seed.unwrap_or(0), k));
        }
        Ok(out)
    }
}
