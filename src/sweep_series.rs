//! A sweep's knobs and series: what every series shares, and every combination of the knobs
//! a sweep lists (clusters, topologies, dtypes, links, workers, packet sizes, pages per packet,
//! buffers, memory, bidirectional modes, reductions, roots), each checked against the op,
//! resolved to its communicators and spec and labelled by the values that vary.

use crate::BadInput;
use crate::cli::OpKnobs;
use crate::load_cluster;
use crate::spec::OpKind;
use meshsim_ccl::op::Topology;
use meshsim_ccl::op::{Bidir, Given, RedOp, Stack};
use meshsim_ccl::tensor::{DType, Memory};
use meshsim_topology::Cluster;

/// The knobs of a sweep that every series shares.
pub(crate) struct SweepKnobs {
    pub(crate) op: OpKind,
    pub(crate) axis: Option<u8>,
    pub(crate) stack: Stack,
    /// The model that simulates every point.
    pub(crate) model: meshsim_ccl::op::SimModel,
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
    /// How every point's data moves: packet sizes, pages per packet, buffers, memory (each a
    /// list, one series per value: see [`SeriesKnobs`]), skew.
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

/// The knob values a sweep runs a series for, each a list (`[None]`: the default).
pub(crate) struct SeriesKnobs {
    pub(crate) clusters: Vec<String>,
    pub(crate) topologies: Vec<Option<Topology>>,
    pub(crate) dtypes: Vec<DType>,
    pub(crate) num_links: Vec<Option<usize>>,
    pub(crate) workers: Vec<Option<usize>>,
    pub(crate) packet_sizes: Vec<Option<u64>>,
    pub(crate) pages_per_packet: Vec<Option<u64>>,
    pub(crate) buffers: Vec<Option<u64>>,
    pub(crate) memory: Vec<Option<Memory>>,
    pub(crate) bidir: Vec<Option<Bidir>>,
    pub(crate) redop: Vec<Option<RedOp>>,
    pub(crate) root: Vec<Option<usize>>,
}

/// A flag's list of values as series: one per value, or the default alone when none is given.
pub(crate) fn each<T: Clone>(values: &[T]) -> Vec<Option<T>> {
    if values.is_empty() { vec![None] } else { values.iter().cloned().map(Some).collect() }
}

/// One series to run: its cluster (as named and loaded), its spec and its label.
pub(crate) struct Job {
    pub(crate) name: String,
    pub(crate) cluster: Cluster,
    pub(crate) spec: meshsim_ccl::sweep::SweepSpec,
    pub(crate) label: String,
}

/// Every series of the sweep, resolved (each combination's op checked, clusters loaded,
/// communicators chosen, faults drawn) and labelled by the knobs that vary; a lone series by
/// cluster and dtype. Bad input is an error before any series runs.
pub(crate) fn jobs(k: &SweepKnobs, series: &SeriesKnobs) -> anyhow::Result<Vec<Job>> {
    let bad = |m: String| anyhow::Error::new(BadInput(m));
    let points = series_knobs(series);
    let ops = points.iter().map(|p| sweep_op(k, p)).collect::<Result<Vec<_>, _>>().map_err(bad)?;
    let d = k.knobs.knobs();
    let mut jobs = Vec::new();
    for name in &series.clusters {
        let c = load_cluster(name)?;
        let faults = k.faults.list(&c).map_err(bad)?;
        for &topology in &series.topologies {
            let comms = series_comms(k, &c, topology).map_err(bad)?;
            for (p, &op) in points.iter().zip(&ops) {
                let spec = meshsim_ccl::sweep::SweepSpec {
                    op,
                    comms: comms.clone(),
                    links: p.links,
                    workers: p.workers,
                    dtype: p.dtype,
                    stack: k.stack,
                    model: k.model,
                    faults: faults.clone(),
                    select: k.select.clone(),
                    in_place: k.in_place,
                    knobs: meshsim_ccl::op::Knobs {
                        packet_bytes: p.packet_size,
                        pages_per_packet: p.pages_per_packet,
                        buffers_per_channel: p.buffers.unwrap_or(d.buffers_per_channel),
                        memory: p.memory.unwrap_or(d.memory),
                        ..d
                    },
                    skew_ns: k.knobs.skew_ns,
                };
                let label = series_label(series, name, topology, p);
                jobs.push(Job { name: name.clone(), cluster: c.clone(), spec, label });
            }
        }
    }
    Ok(jobs)
}

/// The op of one series, once its flags are checked against the op and the stack.
fn sweep_op(k: &SweepKnobs, p: &SeriesPoint) -> Result<meshsim_ccl::sweep::SweepOp, String> {
    let kind = k.op;
    let collective = kind.collective_given(p.redop, p.root)?;
    if p.bidir.is_some_and(|b| b != Bidir::None) && !kind.takes_bidir() {
        return Err(format!("--bidir applies to all-gather, all-reduce and broadcast, not {}", k.op_name()));
    }
    if k.in_place && kind != OpKind::AllGather {
        return Err(format!("--in-place applies to all_gather, not {}", k.op_name()));
    }
    let given = Given { workers: p.workers.is_some(), bidir: p.bidir.is_some(), ..k.knobs.given() };
    meshsim_ccl::stacks::check_given(k.stack, collective, &given)?;
    Ok(meshsim_ccl::sweep::SweepOp { collective, bidir: p.bidir.filter(|_| kind.takes_bidir()) })
}

/// One series' knob values, of those a sweep may list.
#[derive(Clone, Copy)]
struct SeriesPoint {
    dtype: DType,
    links: Option<usize>,
    workers: Option<usize>,
    packet_size: Option<u64>,
    pages_per_packet: Option<u64>,
    buffers: Option<u64>,
    memory: Option<Memory>,
    bidir: Option<Bidir>,
    redop: Option<RedOp>,
    root: Option<usize>,
}

/// Every combination of the listed knobs after cluster and topology, in the order of
/// [`SeriesPoint`]'s fields (the last varies fastest).
fn series_knobs(series: &SeriesKnobs) -> Vec<SeriesPoint> {
    fn expand<T: Copy>(
        points: Vec<SeriesPoint>,
        values: &[T],
        set: fn(&mut SeriesPoint, T),
    ) -> Vec<SeriesPoint> {
        points
            .into_iter()
            .flat_map(|p| {
                values.iter().map(move |&v| {
                    let mut q = p;
                    set(&mut q, v);
                    q
                })
            })
            .collect()
    }
    let first = SeriesPoint {
        dtype: DType::Bf16,
        links: None,
        workers: None,
        packet_size: None,
        pages_per_packet: None,
        buffers: None,
        memory: None,
        bidir: None,
        redop: None,
        root: None,
    };
    let mut out = expand(vec![first], &series.dtypes, |p, v| p.dtype = v);
    out = expand(out, &series.num_links, |p, v| p.links = v);
    out = expand(out, &series.workers, |p, v| p.workers = v);
    out = expand(out, &series.packet_sizes, |p, v| p.packet_size = v);
    out = expand(out, &series.pages_per_packet, |p, v| p.pages_per_packet = v);
    out = expand(out, &series.buffers, |p, v| p.buffers = v);
    out = expand(out, &series.memory, |p, v| p.memory = v);
    out = expand(out, &series.bidir, |p, v| p.bidir = v);
    out = expand(out, &series.redop, |p, v| p.redop = v);
    expand(out, &series.root, |p, v| p.root = v)
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
    let plural = |n: u64, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let or = |v: Option<String>, default: &str| v.unwrap_or_else(|| format!("default {default}"));
    let label: Vec<String> = [
        (series.clusters.len() > 1, cluster.to_owned()),
        (series.topologies.len() > 1, or(topology.map(|t| t.to_string()), "topology")),
        (series.dtypes.len() > 1, p.dtype.to_string()),
        (series.num_links.len() > 1, or(p.links.map(|l| plural(l as u64, "link")), "links")),
        (series.workers.len() > 1, or(p.workers.map(|w| plural(w as u64, "worker")), "workers")),
        (series.packet_sizes.len() > 1, or(p.packet_size.map(|b| format!("{b} B packets")), "packets")),
        (series.pages_per_packet.len() > 1, or(p.pages_per_packet.map(|n| plural(n, "page")), "pages")),
        (series.buffers.len() > 1, or(p.buffers.map(|n| plural(n, "buffer")), "buffers")),
        (series.memory.len() > 1, or(p.memory.map(|m| format!("in {m}")), "memory")),
        (series.bidir.len() > 1, or(p.bidir.map(|b| format!("bidir {b}")), "bidir")),
        (series.redop.len() > 1, or(p.redop.map(|r| r.to_string()), "redop")),
        (series.root.len() > 1, or(p.root.map(|r| format!("root {r}")), "root")),
    ]
    .into_iter()
    .filter_map(|(varies, part)| varies.then_some(part))
    .collect();
    if label.is_empty() { format!("{cluster} {}", p.dtype) } else { label.join(" ") }
}
