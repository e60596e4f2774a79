//! What scenarios, workload ops and the CLI's flags name alike: the op a scenario runs
//! ([`Kind`]) and the faults it injects ([`FaultKnobs`]).

use meshsim_ccl::op::{Collective, RedOp};
use meshsim_topology::Cluster;
use serde::Deserialize;

/// What a scenario runs.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The all-gather op.
    AllGather,
    /// The reduce-scatter op.
    ReduceScatter,
    /// The all-reduce op.
    AllReduce,
    /// The all-to-all op (fabric stack).
    AllToAll,
    /// Broadcast from a root.
    Broadcast,
    /// Reduce to a root.
    Reduce,
    /// Gather to a root.
    Gather,
    /// Scatter from a root.
    Scatter,
    /// Send/receive between two chips.
    SendRecv,
    /// LPF's combine: an element-wise reduce to a root.
    Combine,
    /// LPF's all-combine: an element-wise all-reduce.
    AllCombine,
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
    /// Whether this is a CCL op (not a microbenchmark).
    pub fn is_op(self) -> bool {
        !matches!(self, Kind::Workload | Kind::Latency | Kind::Bandwidth | Kind::Ring)
    }

    /// The collective an op runs, with its reduction and root.
    pub fn collective(self, red: RedOp, root: usize) -> Option<Collective> {
        Some(match self {
            Kind::AllGather => Collective::AllGather,
            Kind::ReduceScatter => Collective::ReduceScatter(red),
            Kind::AllReduce | Kind::AllCombine => Collective::AllReduce(red),
            Kind::AllToAll => Collective::AllToAll,
            Kind::Broadcast => Collective::Broadcast { root },
            Kind::Reduce | Kind::Combine => Collective::Reduce { red, root },
            Kind::Gather => Collective::Gather { root },
            Kind::Scatter => Collective::Scatter { root },
            Kind::SendRecv => Collective::SendRecv,
            Kind::Workload | Kind::Latency | Kind::Bandwidth | Kind::Ring => return None,
        })
    }

    /// Whether the op reduces (takes `redop`).
    pub fn reduces(self) -> bool {
        self.collective(RedOp::Sum, 0).is_some_and(|c| c.redop().is_some())
    }

    /// Whether the op has a root (takes `root`).
    pub fn rooted(self) -> bool {
        self.collective(RedOp::Sum, 0).is_some_and(|c| c.root().is_some())
    }

    /// The ops that take a bidirectional mode.
    pub fn takes_bidir(self) -> bool {
        matches!(self, Kind::AllGather | Kind::AllReduce | Kind::AllCombine | Kind::Broadcast)
    }

    /// The name used in files and tables.
    pub fn name(self) -> &'static str {
        match self {
            Kind::AllGather => "all-gather",
            Kind::ReduceScatter => "reduce-scatter",
            Kind::AllReduce => "all-reduce",
            Kind::AllToAll => "all-to-all",
            Kind::Broadcast => "broadcast",
            Kind::Reduce => "reduce",
            Kind::Gather => "gather",
            Kind::Scatter => "scatter",
            Kind::SendRecv => "send-recv",
            Kind::Combine => "combine",
            Kind::AllCombine => "all-combine",
            Kind::Workload => "workload",
            Kind::Latency => "latency",
            Kind::Bandwidth => "bandwidth",
            Kind::Ring => "ring",
        }
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
