//! `meshsim run`: a workload of many ops on one machine — a row per op instance, the
//! makespan, link use across all ops, a trace of every op.

use crate::out::{out, outln};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use meshsim_bench::report;
use meshsim_ccl::request::SessionRun;
use meshsim_topology::Cluster;

use crate::cli::Format;
use crate::op_cmd::{
    LinkRow, accuracy_lines, bound_by, link_name, link_rows, op_json, op_rows, router_rows, verdict_text,
};
use crate::workload::Workload;
use crate::{BadInput, load_cluster, load_model, write_trace};

pub(crate) fn run_workload(
    path: &Path,
    format: crate::cli::OpFormat,
    link_report: bool,
    trace: Option<&Path>,
    (verify, sim): (bool, meshsim_ccl::op::SimModel),
    (model, select): (crate::cli::ParamsFile, Option<PathBuf>),
    (faults, knobs): (crate::cli::FaultArgs, crate::cli::OpKnobs),
) -> anyhow::Result<ExitCode> {
    crate::check_outputs(None, trace)?;
    knobs.one_each("run")?;
    let w = load_workload(path, select, (&faults, &knobs))?;
    let cluster = load_cluster(&w.cluster_spec())?;
    let params = {
        let files =
            if model.params.is_empty() { w.params_path().into_iter().collect() } else { model.params };
        load_model(&files, model.link_gbps)?.on_checked(&cluster).map_err(|e| BadInput(e.to_string()))?
    };
    let done = w.run(&cluster, &params, (verify, sim), trace.is_some())?;
    let run = &done;
    if let (Some(path), Some(t)) = (trace, &run.trace) {
        write_trace(path, t, &cluster)?;
    }
    if format == crate::cli::OpFormat::TtOpsReport {
        out!("{}", crate::ops_report::render(&cluster, &report_ops(&run.ops, knobs.packet_size()))?)?;
        return Ok(verified_exit(run));
    }
    let format = format.table();
    let rows = op_rows(&cluster, &run.ops);
    match format {
        Format::Json => {
            let mut json = serde_json::json!({
                "cluster": cluster.origin(),
                "makespan_us": run.makespan.as_us_f64(),
                "ops": rows.iter().map(op_json).collect::<Vec<_>>(),
                "events": run.stats.events,
                "event_log_hash": format!("{:016x}", run.stats.log_hash),
            });
            if link_report {
                json["link_use"] = serde_json::to_value(run_link_rows(&cluster, run))?;
                json["routers"] = serde_json::to_value(router_rows(&cluster, &run.routers, run.makespan))?;
            }
            outln!("{}", serde_json::to_string_pretty(&json)?)?;
        }
        Format::Csv | Format::Text => {
            out!("{}", report::render(&rows, format.into()))?;
            if matches!(format, Format::Text) {
                outln!("\nmakespan_us {:.3}", run.makespan.as_us_f64())?;
                out!("{}", accuracy_lines(cluster.arch(), &rows))?;
            }
            if link_report {
                out!("\n{}", report::render(&run_link_rows(&cluster, run), format.into()))?;
                if matches!(format, Format::Text)
                    && let Some(line) = shared_links(&cluster, run)
                {
                    outln!("{line}")?;
                }
                let routers = router_rows(&cluster, &run.routers, run.makespan);
                if !routers.is_empty() {
                    out!("\n{}", report::render(&routers, format.into()))?;
                }
                let busiest = bound_by(&cluster, &run.links, &run.resources, &run.routers);
                if matches!(format, Format::Text)
                    && let Some(line) = verdict_text(busiest, None, run.makespan, "makespan")
                {
                    outln!("{line}")?;
                }
            }
        }
    }
    Ok(verified_exit(run))
}

/// The workload at `path` with the command line's op knobs over every op's, its faults joined
/// by the command line's (whose random draw replaces the file's), and its selection tree.
fn load_workload(
    path: &Path,
    select: Option<PathBuf>,
    (faults, knobs): (&crate::cli::FaultArgs, &crate::cli::OpKnobs),
) -> anyhow::Result<Workload> {
    let mut w = Workload::load(path).map_err(BadInput)?;
    w.override_knobs(&knobs.overrides());
    let extra = faults.knobs();
    w.faults.faults.extend(extra.faults);
    if extra.random_faults.is_some() || extra.fault_seed.is_some() {
        w.faults.random_faults = extra.random_faults;
        w.faults.fault_seed = extra.fault_seed;
    }
    if let Some(path) = select.or_else(|| w.select_path()) {
        w.select = Some(crate::scenario::load_select(&path).map_err(BadInput)?);
    }
    Ok(w)
}

/// Exit 1 naming the first op whose verification failed, else 0.
fn verified_exit(run: &meshsim_ccl::request::SessionRun) -> ExitCode {
    if let Some((o, Err(m))) =
        run.ops.iter().find_map(|o| o.verified.as_ref().map(|v| (o, v))).filter(|(_, v)| v.is_err())
    {
        eprintln!("meshsim: op '{}': verification failed: {m}", o.name);
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// A workload's ops as report ops: the instances of one workload op (`name[i]`, one per
/// communicator) are one op, as tt-metal reports an op on every row or column of a mesh.
fn report_ops(
    ops: &[meshsim_ccl::request::OpResult],
    packet_size: Option<u64>,
) -> Vec<crate::ops_report::Op<'_>> {
    let mut out: Vec<(String, crate::ops_report::Op)> = Vec::new();
    for o in ops {
        let base = o.name.split('[').next().unwrap_or(&o.name).to_owned();
        match out.last_mut() {
            Some((b, op)) if *b == base => op.instances.push(o),
            _ => out.push((base, crate::ops_report::Op { instances: vec![o], packet_size })),
        }
    }
    out.into_iter().map(|x| x.1).collect()
}

/// A link direction's row in `run`'s link report: `op`'s columns, then the op instances whose
/// packets crossed it, by name (the flow model's; `-` on the packet model, which counts
/// packets per link, not per op).
#[derive(serde::Serialize)]
struct RunLinkRow {
    #[serde(flatten)]
    link: LinkRow,
    ops: String,
}

fn run_link_rows(cluster: &Cluster, run: &SessionRun) -> Vec<RunLinkRow> {
    link_rows(cluster, &run.links, run.makespan)
        .into_iter()
        .enumerate()
        .map(|(i, link)| RunLinkRow { link, ops: op_names(run, i).unwrap_or_else(|| "-".into()) })
        .collect()
}

/// The names of the ops whose packets crossed link direction `i`, when the model knows them.
fn op_names(run: &SessionRun, i: usize) -> Option<String> {
    let ops = run.link_ops.get(i)?;
    Some(ops.iter().map(|&o| run.ops[o].name.as_str()).collect::<Vec<_>>().join(" "))
}

/// The links ops contended on, in a line: how many link directions carried more than one op's
/// packets and the busiest of them; `None` when the model does not say which ops crossed a link.
fn shared_links(cluster: &Cluster, run: &SessionRun) -> Option<String> {
    if run.link_ops.is_empty() && !run.links.is_empty() {
        return None;
    }
    let shared: Vec<usize> = (0..run.links.len()).filter(|&i| run.link_ops[i].len() > 1).collect();
    let Some(&busiest) = shared.iter().max_by_key(|&&i| (run.links[i].busy, std::cmp::Reverse(i))) else {
        return Some("shared links: none (no link direction carried more than one op's packets)".into());
    };
    let l = &run.links[busiest];
    Some(format!(
        "shared links: {} link direction(s) carried more than one op's packets; the busiest, {} ({}), busy {:.3} us, {:.1} % of the makespan",
        shared.len(),
        link_name(cluster, l),
        op_names(run, busiest).unwrap_or_default(),
        l.busy.as_us_f64(),
        100.0 * l.busy.as_ns_f64() / run.makespan.as_ns_f64().max(1e-9)
    ))
}
