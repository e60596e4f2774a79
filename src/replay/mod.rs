//! `meshsim replay`: tt-metal's ops perf report in, meshsim's predictions and their errors out.
//! The report's rows become collective instances ([`ccl`]), each runs on the machine the file
//! implies or the one named ([`place`]), and the correlation table ([`table`]) sets each
//! prediction beside what the chips measured. `--emit-workload` writes the instances as a
//! workload file ([`emit`]).

mod ccl;
mod emit;
mod place;
mod report;
mod table;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::ExitCode;

use rayon::prelude::*;

use crate::BadInput;
use crate::cli::ReplayArgs;
use crate::scenario::{RunError, Scenario, Size};
use ccl::{CclOp, Instance};
use place::{Machine, Mesh};
use report::Report;

/// What the chips measured for one instance: over its chips (each chip's median over replay
/// sessions) the fewest, median and most ns, and the spread of the sessions' slowest chip.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Measured {
    pub chips: usize,
    pub min_us: f64,
    pub median_us: f64,
    pub max_us: f64,
    /// (slowest − fastest) / fastest of the sessions' slowest chips, %; `None` with one session.
    pub session_spread_pct: Option<f64>,
    /// tt-metal's own estimate (`PM IDEAL [ns]`), where the file has one.
    pub pm_ideal_us: Option<f64>,
}

/// One replayed instance: what ran and how it compares.
#[derive(Clone, Debug)]
pub(crate) struct Replayed {
    /// Its place among the report's instances (from 1).
    pub index: usize,
    pub inst: Instance,
    pub op: CclOp,
    /// The chip groups it ran on.
    pub groups: Vec<Vec<u64>>,
    pub measured: Option<Measured>,
    /// meshsim's time (the slowest group's span), µs, and each group's result.
    pub predicted_us: f64,
    pub results: Vec<meshsim_ccl::request::OpResult>,
    /// What the mapping assumed.
    pub notes: Vec<String>,
}

/// An instance meshsim did not replay, and why.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Skipped {
    pub index: usize,
    pub op_code: String,
    pub op_id: u64,
    pub reason: String,
    /// The simulation failed (exit 1), rather than the op not being replayable.
    #[serde(skip)]
    pub failed: bool,
}

/// The whole replay, for the outputs.
pub(crate) struct Replay {
    pub file: String,
    pub layout: &'static str,
    pub arch: Option<String>,
    pub cluster: String,
    pub model: &'static str,
    pub done: Vec<Replayed>,
    pub skipped: Vec<Skipped>,
}

pub(crate) fn run_replay(a: ReplayArgs) -> anyhow::Result<ExitCode> {
    a.knobs.one_each("replay")?;
    let report = report::read(&a.report).map_err(BadInput)?;
    for w in &report.warnings {
        eprintln!("meshsim: warning: {}: {w}", a.report.display());
    }
    let instances = ccl::instances(&report);
    let device_rows = report.rows.iter().filter(|r| r.op_type == "tt_dnn_device");
    let arch = device_rows.clone().find_map(|r| r.arch.clone());
    let chips: BTreeSet<u64> = device_rows.filter_map(|r| r.device).collect();
    let spec = match &a.cluster {
        Some(c) => c.clone(),
        None => place::implied(arch.as_deref(), chips.len()).map_err(BadInput)?.to_owned(),
    };
    let mesh = match (&a.mesh, &a.chip_ids) {
        (Some(m), Some(ids)) => Some(Mesh::parse(m, ids.clone()).map_err(BadInput)?),
        _ => None,
    };
    let machine = Machine::new(&spec, mesh).map_err(BadInput)?;
    let model = a.model.load()?;
    model.check(&[machine.cluster.arch()]).map_err(|e| BadInput(e.to_string()))?;
    let (done, skipped) = replay_all(&a, &report, instances, &machine, &model);
    let failed = skipped.iter().any(|s| s.failed);
    let replay = Replay {
        file: a.report.display().to_string(),
        layout: report.layout.name(),
        arch,
        cluster: spec,
        model: a.sim.sim_model.as_str(),
        done,
        skipped,
    };
    if let Some(path) = &a.emit_workload {
        emit::write(path, &replay).map_err(BadInput)?;
        eprintln!("meshsim: workload of {} ops written to {}", replay.done.len(), path.display());
    }
    if a.output.format == crate::cli::OpFormat::TtOpsReport {
        crate::out::out!("{}", report_rows(&machine, &replay)?)?;
    } else {
        table::print(&replay, a.output.format.table())?;
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// The replay's predictions as an ops report: the report's own rows per chip, meshsim's span
/// of each chip in the duration column (see [`crate::ops_report`]).
fn report_rows(machine: &Machine, r: &Replay) -> anyhow::Result<String> {
    let results: Vec<Vec<meshsim_ccl::request::OpResult>> =
        r.done.iter().map(|x| x.results.clone()).collect();
    let ops: Vec<crate::ops_report::Op> = results
        .iter()
        .zip(&r.done)
        .map(|(res, x)| crate::ops_report::Op {
            instances: res.iter().collect(),
            packet_size: x.op.packet_size,
        })
        .collect();
    Ok(crate::ops_report::render(&machine.cluster, &ops)?)
}

/// Maps every instance, runs each distinct op once (in parallel: every run is its own
/// simulation, so the results do not depend on the threads), and sorts the outcomes.
fn replay_all(
    a: &ReplayArgs,
    report: &Report,
    instances: Vec<Instance>,
    machine: &Machine,
    model: &crate::scenario::ParamSource,
) -> (Vec<Replayed>, Vec<Skipped>) {
    let mut skipped = Vec::new();
    // Per instance placed: its index, the instance, the op as it runs, its groups and notes.
    type Planned = (usize, Instance, CclOp, Vec<Vec<u64>>, Vec<String>);
    let mut planned: Vec<Planned> = Vec::new();
    for (i, inst) in instances.into_iter().enumerate() {
        let skip = |reason: String, failed| Skipped {
            index: i + 1,
            op_code: inst.name.clone(),
            op_id: inst.id,
            reason,
            failed,
        };
        let op = match &inst.op {
            Ok(op) => op.clone(),
            Err(why) => {
                skipped.push(skip(why.clone(), false));
                continue;
            }
        };
        let devices: BTreeSet<u64> = inst.rows.iter().filter_map(|&r| report.rows[r].device).collect();
        match machine.groups(&op, &devices) {
            Ok((groups, note)) => {
                let (op, groups) = resolve(a, machine, op, groups);
                let mut notes = op.notes.clone();
                notes.extend(note);
                planned.push((i + 1, inst, op, groups, notes));
            }
            Err(why) => skipped.push(skip(why, false)),
        }
    }
    let scenarios: Vec<Scenario> = planned.iter().map(|p| scenario(&machine.spec, a, &p.2, &p.3)).collect();
    let mut distinct: BTreeMap<String, usize> = BTreeMap::new();
    let keys: Vec<String> = scenarios.iter().map(|s| format!("{s:?}")).collect();
    for (i, k) in keys.iter().enumerate() {
        distinct.entry(k.clone()).or_insert(i);
    }
    let firsts: Vec<usize> = distinct.values().copied().collect();
    let runs: BTreeMap<usize, Result<(f64, Vec<meshsim_ccl::request::OpResult>), RunError>> =
        firsts.par_iter().map(|&i| (i, predict(&scenarios[i], model))).collect();
    let mut done = Vec::new();
    for (j, (index, inst, op, groups, notes)) in planned.into_iter().enumerate() {
        match &runs[&distinct[&keys[j]]] {
            Ok((time, results)) => {
                let measured = measured(report, &inst);
                let results = results.clone();
                done.push(Replayed {
                    index,
                    inst,
                    op,
                    groups,
                    measured,
                    predicted_us: *time,
                    results,
                    notes,
                });
            }
            Err(e) => skipped.push(Skipped {
                index,
                op_code: inst.name.clone(),
                op_id: inst.id,
                reason: e.to_string(),
                failed: !matches!(e, RunError::Bad(_)),
            }),
        }
    }
    skipped.sort_by_key(|s| s.index);
    (done, skipped)
}

/// The op as it runs: the command line's knobs over the report's, a rooted op's root (its mesh
/// coordinate's chip, if that chip is in the group) and a send's sender first.
fn resolve(
    a: &ReplayArgs,
    machine: &Machine,
    mut op: CclOp,
    mut groups: Vec<Vec<u64>>,
) -> (CclOp, Vec<Vec<u64>>) {
    op.topology = a.topology.or(op.topology);
    op.links = a.num_links.or(op.links);
    // The report's links on a machine with fewer: as many as every hop has (an explicit
    // --num-links is kept, and refused if it does not fit).
    if a.num_links.is_none()
        && let (Some(want), Some(have)) = (op.links, machine.usable_links(&groups, op.topology))
        && want > have
        && have > 0
    {
        op.links = Some(have);
        op.notes
            .push(format!("{want} links per hop in the report; {have} usable on {}'s hops", machine.spec));
    }
    op.workers = a.workers.or(op.workers);
    op.dtype = a.dtype.unwrap_or(op.dtype);
    op.memory = a.knobs.memory().unwrap_or(op.memory);
    op.packet_size = a.knobs.packet_size().or(op.packet_size);
    let root = op.root_coord.and_then(|(r, c)| {
        let id = machine.chip_at(r as usize, c as usize)?;
        groups[0].iter().position(|&x| x == id)
    });
    if op.kind == crate::spec::OpKind::SendRecv {
        if let Some(r) = root {
            groups[0].rotate_left(r);
        }
    } else if op.kind.rooted() {
        op.root = root;
    }
    (op, groups)
}

/// The scenario that runs `op` on `groups` of `cluster`.
fn scenario(cluster: &str, a: &ReplayArgs, op: &CclOp, groups: &[Vec<u64>]) -> Scenario {
    Scenario {
        shape: Some(op.shape.to_vec()),
        dim: Some(op.dim),
        dtype: Some(op.dtype),
        topology: op.topology,
        num_links: op.links,
        workers: op.workers,
        root: op.root,
        groups: Some(groups.to_vec()),
        pages_per_packet: a.knobs.pages_per_packet(),
        buffers: a.knobs.buffers(),
        memory: Some(op.memory),
        persistent_buffers: op.persistent_buffers.then_some(true),
        skew_ns: Some(a.knobs.skew_ns).filter(|&s| s > 0),
        model: Some(a.sim.sim_model),
        packet_size: op.packet_size.map(Size::Bytes),
        ..Scenario::op(op.kind, cluster)
    }
}

/// Runs one scenario: the op's time, µs, and each communicator's result.
fn predict(
    s: &Scenario,
    model: &crate::scenario::ParamSource,
) -> Result<(f64, Vec<meshsim_ccl::request::OpResult>), RunError> {
    let out = s.run(Path::new("."), Some(model), false)?;
    let done = out.op.expect("an op scenario runs an op");
    Ok((out.time.as_us_f64(), done.ops))
}

/// The median of `v` (the mean of the middle two of an even count).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// What the instance's rows measured, if they hold kernel times.
fn measured(report: &Report, inst: &Instance) -> Option<Measured> {
    let mut by_chip: BTreeMap<Option<u64>, Vec<f64>> = BTreeMap::new();
    let mut by_session: BTreeMap<Option<u64>, f64> = BTreeMap::new();
    for &r in &inst.rows {
        let row = &report.rows[r];
        let Some(ns) = row.kernel_ns else { continue };
        by_chip.entry(row.device).or_default().push(ns);
        let s = by_session.entry(row.session).or_insert(0.0);
        *s = s.max(ns);
    }
    if by_chip.is_empty() {
        return None;
    }
    let chips: Vec<f64> = by_chip.into_values().map(median).collect();
    let sessions: Vec<f64> = by_session.into_values().collect();
    let lo = sessions.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = sessions.iter().copied().fold(0.0, f64::max);
    let ideal: Vec<f64> =
        inst.rows.iter().filter_map(|&r| report.rows[r].pm_ideal_ns).filter(|&v| v > 1.0).collect();
    Some(Measured {
        chips: chips.len(),
        min_us: chips.iter().copied().fold(f64::INFINITY, f64::min) / 1e3,
        median_us: median(chips.clone()) / 1e3,
        max_us: chips.iter().copied().fold(0.0, f64::max) / 1e3,
        session_spread_pct: (sessions.len() > 1 && lo > 0.0).then(|| 100.0 * (hi - lo) / lo),
        pm_ideal_us: (!ideal.is_empty()).then(|| median(ideal) / 1e3),
    })
}
