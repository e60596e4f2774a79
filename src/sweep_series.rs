//! A sweep's knobs and series: what every series shares, and every combination of the knobs
//! a sweep lists (clusters, topologies, dtypes, links, workers, packet sizes), each resolved
//! to its communicators and spec and labelled by the values that vary.

use crate::BadInput;
use crate::cli::OpKnobs;
use crate::load_cluster;
use crate::spec::OpKind;
use meshsim_ccl::op::Topology;
use meshsim_ccl::op::{Bidir, RedOp, Stack};
use meshsim_ccl::tensor::DType;
use meshsim_topology::Cluster;

/// The knobs of a sweep that every series shares.
pub(crate) struct SweepKnobs {
    pub(crate) op: OpKind,
    pub(crate) axis: Option<u8>,
    pub(crate) bidir: Option<Bidir>,
    pub(crate) stack: Stack,
    /// The model that simulates every point.
    pub(crate) model: meshsim_ccl::op::SimModel,
    pub(crate) redop: Option<RedOp>,
    pub(crate) root: Option<usize>,
    /// The selection tree (`None`: the embedded one).
    pub(crate) select: Option<meshsim_ccl::select::Select>,
    /// Also run every point in place (all-gather).
    pub(crate) in_place: bool,
    pub(crate) chips: Option<usize>,
    pub(crate) chip_ids: Option<Vec<u64>>,
    pub(crate) min: u64,
    pub(crate) max: u64,
    pub(crate) factor: u64,
    /// Faults injected into every point.
    pub(crate) faults: crate::scenario::FaultKnobs,
    /// How every point's data moves: packet size, pages per packet, buffers, memory, skew.
    pub(crate) knobs: OpKnobs,
}

impl SweepKnobs {
    pub(crate) fn op_name(&self) -> String {
        self.op.nccl_name()
    }

    /// What the table's header says of the whole sweep.
    pub(crate) fn header(&self) -> SweepHeader {
        SweepHeader {
            op: self.op_name(),
            min: self.min,
            max: self.max,
            factor: self.factor,
            model: self.model,
        }
    }
}

/// What a sweep's text header says of the whole sweep: the op and the sizes asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SweepHeader {
    /// nccl-tests' op name (`all_gather`).
    pub(crate) op: String,
    /// `-b`, `-e`, `-f`.
    pub(crate) min: u64,
    pub(crate) max: u64,
    pub(crate) factor: u64,
    /// The model that simulated it.
    pub(crate) model: meshsim_ccl::op::SimModel,
}

/// The knob values a sweep runs a series for, each a list (`None`: the default).
pub(crate) struct SeriesKnobs<'a> {
    pub(crate) clusters: &'a [String],
    pub(crate) topologies: &'a [Option<Topology>],
    pub(crate) dtypes: &'a [DType],
    pub(crate) num_links: &'a [Option<usize>],
    pub(crate) workers: &'a [Option<usize>],
    pub(crate) packet_sizes: &'a [Option<u64>],
}

/// One series to run: its cluster (as named and loaded), its spec and its label.
pub(crate) struct Job {
    pub(crate) name: String,
    pub(crate) cluster: Cluster,
    pub(crate) spec: meshsim_ccl::sweep::SweepSpec,
    pub(crate) label: String,
}

/// Every series of the sweep, resolved (clusters loaded, communicators chosen, faults drawn)
/// and labelled by the knobs that vary; a lone series by cluster and dtype.
pub(crate) fn jobs(
    k: &SweepKnobs,
    op: meshsim_ccl::sweep::SweepOp,
    series: &SeriesKnobs,
) -> anyhow::Result<Vec<Job>> {
    let bad = |m: String| anyhow::Error::new(BadInput(m));
    let mut jobs = Vec::new();
    for name in series.clusters {
        let c = load_cluster(name)?;
        let faults = k.faults.list(&c).map_err(bad)?;
        for &topology in series.topologies {
            let comms = series_comms(k, &c, topology).map_err(bad)?;
            for knobs in series_knobs(series) {
                let SeriesPoint { dtype, links, workers, packet_size } = knobs;
                let spec = meshsim_ccl::sweep::SweepSpec {
                    op,
                    comms: comms.clone(),
                    links,
                    workers,
                    dtype,
                    stack: k.stack,
                    model: k.model,
                    faults: faults.clone(),
                    select: k.select.clone(),
                    in_place: k.in_place,
                    knobs: meshsim_ccl::op::Knobs { packet_bytes: packet_size, ..k.knobs.knobs() },
                    skew_ns: k.knobs.skew_ns,
                };
                let label = series_label(series, name, topology, &knobs);
                jobs.push(Job { name: name.clone(), cluster: c.clone(), spec, label });
            }
        }
    }
    Ok(jobs)
}

/// One series' knob values, of those a sweep may list.
#[derive(Clone, Copy)]
struct SeriesPoint {
    dtype: DType,
    links: Option<usize>,
    workers: Option<usize>,
    packet_size: Option<u64>,
}

/// Every combination of the listed dtypes, links, workers and packet sizes, in that order.
fn series_knobs(series: &SeriesKnobs) -> Vec<SeriesPoint> {
    let mut out = Vec::new();
    for &dtype in series.dtypes {
        for &links in series.num_links {
            for &workers in series.workers {
                for &packet_size in series.packet_sizes {
                    out.push(SeriesPoint { dtype, links, workers, packet_size });
                }
            }
        }
    }
    out
}

/// The communicators a series runs on: every row or column with `--axis`, else the one
/// `--chips` or `--chip-ids` (or the default) picks, as a `topology` ring or line.
fn series_comms(
    k: &SweepKnobs,
    c: &Cluster,
    topology: Option<Topology>,
) -> Result<Vec<meshsim_ccl::comm::Communicator>, String> {
    use meshsim_ccl::comm::Communicator;
    match k.axis {
        Some(axis) => Communicator::axis(c, axis.into(), topology).map_err(|e| e.0),
        None => Communicator::choose_default(c, topology, k.chips, k.chip_ids.as_deref())
            .map(|comm| vec![comm])
            .map_err(|e| e.0),
    }
}

/// A series' label: the knobs that vary between series; a lone series by cluster and dtype.
fn series_label(series: &SeriesKnobs, cluster: &str, topology: Option<Topology>, p: &SeriesPoint) -> String {
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let label: Vec<String> = [
        (series.clusters.len() > 1, cluster.to_owned()),
        (series.topologies.len() > 1, topology.map_or("default topology".into(), |t| t.to_string())),
        (series.dtypes.len() > 1, p.dtype.to_string()),
        (series.num_links.len() > 1, p.links.map_or("default links".into(), |l| plural(l, "link"))),
        (series.workers.len() > 1, p.workers.map_or("default workers".into(), |w| plural(w, "worker"))),
        (
            series.packet_sizes.len() > 1,
            p.packet_size.map_or("default packets".into(), |b| format!("{b} B packets")),
        ),
    ]
    .into_iter()
    .filter_map(|(varies, part)| varies.then_some(part))
    .collect();
    if label.is_empty() { format!("{cluster} {}", p.dtype) } else { label.join(" ") }
}
