//! `meshsim op`: one CCL op as a scenario, its summary, link report, trace and determinism check.

use crate::out::{out, outln};
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use meshsim_bench::report;
use meshsim_topology::Cluster;

use crate::cli::{Format, OpArgs};
use crate::scenario::{self, BidirValue, OpKind, RunError, Scenario};
use crate::{BadInput, ids, write_trace};

pub(crate) fn run_op(a: OpArgs) -> anyhow::Result<ExitCode> {
    crate::check_outputs(None, a.trace.as_deref())?;
    a.knobs.one_each("op")?;
    if a.shape.len() != 4 {
        return Err(BadInput(format!("--shape needs 4 values w,z,y,x, got {}", a.shape.len())).into());
    }
    let sc = scenario_of(&a);
    let model = a.model.load()?;
    model.check(&[crate::load_cluster(&a.cluster)?.arch()]).map_err(|e| BadInput(e.to_string()))?;
    if a.schedule {
        return print_schedule(&a, &sc, &model);
    }
    let out = run_scenario(&sc, &model, a.trace.is_some())?;
    if a.check_determinism {
        check_determinism(&sc, &model, &out)?;
    }
    let cluster = &out.cluster;
    if let (Some(path), Some(trace)) = (&a.trace, &out.trace) {
        write_trace(path, trace, cluster)?;
    }
    let done = out.op.as_ref().expect("an op scenario runs an op");
    if a.output.format == crate::cli::OpFormat::TtOpsReport {
        let op = crate::ops_report::Op {
            instances: done.ops.iter().collect(),
            packet_size: a.knobs.packet_size(),
        };
        out!("{}", crate::ops_report::render(cluster, &[op])?)?;
        return Ok(verified_exit(&done.run));
    }
    let ran = WhatRan::of(&a, cluster, &model.on(cluster), done);
    let summary = Summary::of(a.op, cluster, done);
    match a.output.format.table() {
        Format::Json => print_json(&a, &summary, &ran)?,
        Format::Csv | Format::Text => print_table(&a, &summary, &ran)?,
    }
    Ok(verified_exit(&done.run))
}

/// Exit 1 with the first mismatch if verification failed, else 0.
fn verified_exit(run: &meshsim_ccl::op::OpRun) -> ExitCode {
    if let Some(Err(mismatch)) = &run.verified {
        eprintln!("meshsim: verification failed: {mismatch}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// The scenario `op`'s flags describe.
fn scenario_of(a: &OpArgs) -> Scenario {
    Scenario {
        shape: Some(a.shape.clone()),
        dim: Some(a.dim),
        dtype: Some(a.dtype),
        topology: a.topology,
        num_links: a.num_links,
        workers: a.workers,
        bidir: a.bidir.map(BidirValue::Mode),
        redop: a.redop,
        root: a.root,
        exclude_myself: a.exclude_myself.then_some(true),
        in_place: a.in_place.then_some(true),
        select: a.select.clone(),
        chips: a.chips,
        chip_ids: a.chip_ids.clone(),
        axis: a.axis.map(usize::from),
        pages_per_packet: a.knobs.pages_per_packet(),
        buffers: a.knobs.buffers(),
        memory: Some(a.knobs.memory().unwrap_or(meshsim_ccl::tensor::Memory::Dram)),
        persistent_buffers: a.persistent_buffers.then_some(true),
        skew_ns: Some(a.knobs.skew_ns),
        faults: a.faults.knobs(),
        verify: Some(a.verify),
        stack: a.stack,
        model: Some(a.sim.sim_model),
        packet_size: a.knobs.packet_size().map(crate::scenario::Size::Bytes),
        ..Scenario::op(a.op, &a.cluster)
    }
}

/// One chip's part of the op, in rank order: the JSON's `per_chip` and the text's table.
#[derive(serde::Serialize)]
struct Chip {
    rank: usize,
    chip: u64,
    start_us: f64,
    end_us: f64,
}

/// What ran, beyond the op's own row: the machine's architecture and link rate, the packet size
/// and the rule that chose the algorithm (docs/cli.md, "what ran").
struct WhatRan {
    arch: String,
    link_gbps: u64,
    /// The fabric routers' packet payload (the knob or the architecture's default); on the EDM
    /// stack its packets' bytes.
    packet_bytes: u64,
    /// What chose the algorithm and the knobs left unset.
    selected_by: String,
    /// How far to trust the time: the accuracy record's nearest published points.
    trust: crate::trust::Trust,
    /// The op's JSON name (`all_gather`).
    op: String,
}

impl WhatRan {
    fn of(a: &OpArgs, cluster: &Cluster, params: &meshsim_hw::Params, done: &scenario::OpDone) -> WhatRan {
        let packet_bytes = done.ops[0].packet_bytes;
        let topology = format!("{:?}", done.topology).to_lowercase();
        let trust = crate::trust::Trust::of(
            cluster.arch(),
            &a.op.json_name(),
            (&topology, done.chips.len()),
            done.ops[0].model,
        );
        let selected_by = match &a.select {
            Some(p) => format!("the selection tree {}", p.display()),
            None => "meshsim's default selection tree and tt-metal's factory rules".into(),
        };
        WhatRan {
            arch: cluster.arch().to_string(),
            link_gbps: params.eth_link_gbps,
            packet_bytes,
            selected_by,
            trust,
            op: a.op.json_name(),
        }
    }

    /// The text header: the machine, the communicator, and every knob as it ran.
    fn text(&self, cluster: &Cluster, done: &scenario::OpDone, dim: usize) -> String {
        let o = &done.ops[0];
        let ids: Vec<String> = crate::ids(cluster, &done.chips).iter().map(u64::to_string).collect();
        let t = &done.tensor;
        let topology = format!("{:?}", done.topology).to_lowercase();
        let groups =
            if done.ops.len() > 1 { format!(" (one of {} at once)", done.ops.len()) } else { String::new() };
        format!(
            "machine   {} ({}, {} Gb/s links), {} stack, {} model\nran on    {}-chip {topology} {}{groups}\ntensor    {} {:?} dim {dim}\nknobs     {} link(s) per hop, {} worker(s) per link, packets of up to {} B ({} page(s) of {} B)\nalgorithm {} (chosen by {})\naccuracy  {}\n\n",
            cluster.origin(),
            self.arch,
            self.link_gbps,
            o.transport,
            o.model,
            done.chips.len(),
            ids.join(" "),
            t.dtype,
            t.shape,
            o.links,
            o.workers,
            self.packet_bytes,
            o.pages_per_packet,
            t.page_bytes(),
            o.algorithm,
            self.selected_by,
            self.trust.line(cluster.arch(), &self.op),
        )
    }
}

/// What `op` prints of a run, whatever the format.
struct Summary<'a> {
    kind: OpKind,
    cluster: &'a Cluster,
    done: &'a scenario::OpDone,
    run: &'a meshsim_ccl::op::OpRun,
    /// The tensor's bytes.
    size: u64,
    algbw: f64,
    busbw: f64,
    per_chip: Vec<Chip>,
    verified: Option<bool>,
    critical: Option<meshsim_ccl::critical::CriticalPath>,
}

impl<'a> Summary<'a> {
    fn of(kind: OpKind, cluster: &'a Cluster, done: &'a scenario::OpDone) -> Summary<'a> {
        let run = &done.run;
        let size = done.tensor.bytes();
        let algbw = size as f64 / run.time.as_ns_f64();
        let busbw = algbw * done.ops[0].collective.busbw_factor(done.chips.len());
        let per_chip = run
            .per_chip
            .iter()
            .enumerate()
            .map(|(rank, &(c, s, e))| Chip {
                rank,
                chip: cluster.chip(c).id,
                start_us: s.as_us_f64(),
                end_us: e.as_us_f64(),
            })
            .collect();
        let verified = run.verified.as_ref().map(|v| v.is_ok());
        let critical = meshsim_ccl::critical::critical_path(run);
        Summary { kind, cluster, done, run, size, algbw, busbw, per_chip, verified, critical }
    }
}

/// `op --format json`: one object, with the link report's parts under `--links`.
fn print_json(a: &OpArgs, s: &Summary, ran: &WhatRan) -> anyhow::Result<()> {
    let Summary { kind, cluster, done, run, size, algbw, busbw, ref per_chip, verified, ref critical } = *s;
    let name = kind.json_name();
    let mut json = serde_json::json!({
        "op": name,
        "cluster": cluster.origin(),
        "arch": ran.arch,
        "link_gbps": ran.link_gbps,
        "chips": done.chips.len(),
        "chip_ids": ids(cluster, &done.chips),
        "topology": format!("{:?}", done.topology).to_lowercase(),
        "stack": done.ops[0].transport,
        "model": done.ops[0].model.as_str(),
        "algorithm": done.ops[0].algorithm,
        "bidir": if done.ops[0].transport == meshsim_ccl::op::Stack::Fabric.as_str() {
            serde_json::Value::Null
        } else {
            serde_json::json!(done.ops[0].bidir.as_str())
        },
        "redop": if kind.reduces() { serde_json::json!(a.redop.unwrap_or(meshsim_ccl::op::RedOp::Sum).as_str()) } else { serde_json::Value::Null },
        "root": done.ops[0].collective.root(),
        "links": done.ops[0].links,
        "workers": done.ops[0].workers,
        "pages_per_packet": done.ops[0].pages_per_packet,
        "packet_size": ran.packet_bytes,
        "selected_by": ran.selected_by,
        "accuracy": ran.trust,
        "shape": done.tensor.shape,
        "dim": a.dim,
        "dtype": done.tensor.dtype.to_string(),
        "size_bytes": size,
        "time_us": run.time.as_us_f64(),
        "algbw_gbps": algbw,
        "busbw_gbps": busbw,
        "per_chip": per_chip,
        "verified": verified,
        "events": run.stats.events,
        "event_log_hash": format!("{:016x}", run.stats.log_hash),
    });
    if a.axis.is_some() {
        json["ops"] = op_rows(cluster, &done.ops).iter().map(op_json).collect();
    }
    if a.link_report {
        let rows = link_rows(cluster, &run.links, run.time);
        json["link_use"] = serde_json::to_value(&rows)?;
        json["critical_path"] = critical_json(cluster, critical.as_ref());
        // The flow model has no NoC or DRAM resource to name.
        json["busiest_on_chip"] = if a.sim.sim_model == meshsim_ccl::op::SimModel::Flow {
            serde_json::Value::Null
        } else {
            resources_json(cluster, &run.resources, run.time)
        };
        json["routers"] = serde_json::to_value(router_rows(cluster, &run.routers, run.time))?;
        json["bound_by"] = bound_by(cluster, &run.links, &run.resources, &run.routers).map_or(
            serde_json::Value::Null,
            |(kind, what, busy)| {
                let pct = 100.0 * busy.as_ns_f64() / run.time.as_ns_f64().max(1e-9);
                let stage = longest_stage(critical.as_ref()).map(
                    |s| serde_json::json!({"stage": s.name, "duration_us": (s.end - s.start).as_us_f64()}),
                );
                serde_json::json!({
                    "bound": if pct >= SATURATED_PCT { "bandwidth" } else { "latency" },
                    "kind": kind,
                    "what": what,
                    "busy_us": busy.as_us_f64(),
                    "busy_pct": pct,
                    "longest_stage": stage,
                })
            },
        );
    }
    outln!("{}", serde_json::to_string_pretty(&json)?)?;
    Ok(())
}

/// `op --format text|csv`: the summary row, the per-chip or per-op table, and under `--links`
/// the link, router and critical-path reports.
fn print_table(a: &OpArgs, s: &Summary, ran: &WhatRan) -> anyhow::Result<()> {
    let Summary { cluster, done, run, size, algbw, busbw, ref per_chip, verified, ref critical, .. } = *s;
    let name = s.kind.json_name();
    if matches!(a.output.format.table(), Format::Text) {
        out!("{}", ran.text(cluster, done, a.dim))?;
    }
    #[derive(serde::Serialize)]
    struct Row<'a> {
        op: String,
        algorithm: String,
        chips: usize,
        size_bytes: u64,
        time_us: f64,
        algbw_gbps: f64,
        busbw_gbps: f64,
        verified: String,
        model: &'static str,
        topology: String,
        links: usize,
        workers: usize,
        packet_size: u64,
        pages_per_packet: u64,
        dtype: String,
        #[serde(rename = "accuracy", serialize_with = "crate::trust::as_short")]
        trust: &'a crate::trust::Trust,
    }
    let row = Row {
        op: name,
        algorithm: done.ops[0].algorithm.clone(),
        chips: done.chips.len(),
        size_bytes: size,
        time_us: run.time.as_us_f64(),
        algbw_gbps: algbw,
        busbw_gbps: busbw,
        verified: verified.map_or("-".into(), |v| v.to_string()),
        model: done.ops[0].model.as_str(),
        topology: format!("{:?}", done.topology).to_lowercase(),
        links: done.ops[0].links,
        workers: done.ops[0].workers,
        packet_size: ran.packet_bytes,
        pages_per_packet: done.ops[0].pages_per_packet,
        dtype: done.tensor.dtype.to_string(),
        trust: &ran.trust,
    };
    out!("{}", report::render(&[row], a.output.format.table().into()))?;
    if matches!(a.output.format.table(), Format::Text) && a.axis.is_some() {
        out!("\n{}", report::render(&op_rows(cluster, &done.ops), report::Format::Text))?;
    } else if matches!(a.output.format.table(), Format::Text) {
        out!("\n{}", report::render(per_chip, report::Format::Text))?;
    }
    if a.link_report {
        let rows = link_rows(cluster, &run.links, run.time);
        out!("\n{}", report::render(&rows, a.output.format.table().into()))?;
        let routers = router_rows(cluster, &run.routers, run.time);
        if !routers.is_empty() {
            out!("\n{}", report::render(&routers, a.output.format.table().into()))?;
        }
        if matches!(a.output.format.table(), Format::Text) {
            out!("{}", critical_text(cluster, critical.as_ref(), run.time))?;
            if a.sim.sim_model != meshsim_ccl::op::SimModel::Flow {
                out!("{}", resources_text(cluster, &run.resources, run.time))?;
            }
            let busiest = bound_by(cluster, &run.links, &run.resources, &run.routers);
            if let Some(line) = verdict_text(busiest, longest_stage(critical.as_ref()), run.time, "op") {
                outln!("{line}")?;
            }
        }
    }
    Ok(())
}

/// One op instance of a session, as `op --axis` and `run` print it.
#[derive(serde::Serialize)]
pub(crate) struct OpRow {
    name: String,
    op: &'static str,
    algorithm: String,
    chips: usize,
    start_us: f64,
    end_us: f64,
    time_us: f64,
    busbw_gbps: f64,
    verified: String,
    model: &'static str,
    /// What ran: the chips' ring or line, links per hop, workers per link and direction,
    /// pages per packet and the dtype.
    topology: String,
    links: usize,
    workers: usize,
    packet_size: u64,
    pages_per_packet: u64,
    dtype: String,
    /// How far to trust its time: a table's `accuracy` column in a few words
    /// ([`crate::trust::Trust::short`]), the JSON's in full.
    #[serde(rename = "accuracy", serialize_with = "crate::trust::as_short")]
    trust: crate::trust::Trust,
    #[serde(skip_serializing)]
    chip_ids: Vec<u64>,
}

/// What an op ran, in a few words: `ring; 8-chip ring; 1 link; 4 workers; 4352 B packets of 2
/// pages; bf16`.
pub(crate) fn ran_short(o: &meshsim_ccl::session::OpResult) -> String {
    let plural = |n: usize, one: &str| if n == 1 { format!("1 {one}") } else { format!("{n} {one}s") };
    format!(
        "{}; {}-chip {}; {}; {}; {} B packets of {} pages; {}",
        o.algorithm,
        o.chips.len(),
        o.topology,
        plural(o.links, "link"),
        plural(o.workers, "worker"),
        o.packet_bytes,
        o.pages_per_packet,
        o.tensor.dtype
    )
}

/// A row per op instance.
pub(crate) fn op_rows(cluster: &Cluster, ops: &[meshsim_ccl::session::OpResult]) -> Vec<OpRow> {
    ops.iter()
        .map(|o| (o, crate::trust::Trust::of_op(cluster.arch(), o)))
        .map(|(o, trust)| OpRow {
            name: o.name.clone(),
            op: o.collective.name(),
            algorithm: o.algorithm.clone(),
            chips: o.chips.len(),
            start_us: o.start.as_us_f64(),
            end_us: o.end.as_us_f64(),
            time_us: o.time.as_us_f64(),
            busbw_gbps: o.busbw_gbps,
            verified: o.verified.as_ref().map_or("-".into(), |v| v.is_ok().to_string()),
            model: o.model.as_str(),
            topology: o.topology.to_string(),
            links: o.links,
            workers: o.workers,
            packet_size: o.packet_bytes,
            pages_per_packet: o.pages_per_packet,
            dtype: o.tensor.dtype.to_string(),
            trust,
            chip_ids: ids(cluster, &o.chips),
        })
        .collect()
}

/// How far to trust each kind of op in `rows`, a line per op, communicator shape and model (a
/// workload's instances on every row share one): `accuracy all-gather on 8-chip lines (packet
/// model): mean |error| ...`.
pub(crate) fn accuracy_lines(arch: meshsim_topology::Arch, rows: &[OpRow]) -> String {
    let mut seen = std::collections::BTreeSet::new();
    let mut text = String::new();
    for r in rows {
        if seen.insert((r.op, &r.topology, r.chips, r.model)) {
            let line = r.trust.line(arch, r.op);
            text += &format!(
                "accuracy {} on {}-chip {}s ({} model): {line}\n",
                r.op, r.chips, r.topology, r.model
            );
        }
    }
    if text.is_empty() { text } else { format!("\n{text}") }
}

/// The JSON of one op instance: the row's keys with `chip_ids`, `verified` as a boolean and
/// `accuracy` in full.
pub(crate) fn op_json(r: &OpRow) -> serde_json::Value {
    serde_json::json!({
        "name": r.name, "op": r.op, "algorithm": r.algorithm, "chips": r.chips, "chip_ids": r.chip_ids,
        "start_us": r.start_us, "end_us": r.end_us, "time_us": r.time_us,
        "busbw_gbps": r.busbw_gbps, "model": r.model, "topology": r.topology, "links": r.links,
        "workers": r.workers, "packet_size": r.packet_size, "pages_per_packet": r.pages_per_packet,
        "dtype": r.dtype, "accuracy": r.trust,
        "verified": match r.verified.as_str() { "true" => serde_json::json!(true), "false" => serde_json::json!(false), _ => serde_json::Value::Null },
    })
}

/// `op --schedule`: what every worker kernel of the op would do, per phase, as text or JSON.
fn print_schedule(a: &OpArgs, sc: &Scenario, model: &scenario::ParamSource) -> anyhow::Result<ExitCode> {
    let views = sc.schedule(Path::new("."), model).map_err(|e| match e {
        RunError::Bad(m) => BadInput(m).into(),
        RunError::Sim(e) => anyhow::Error::new(e),
        RunError::Failed(m) => anyhow::anyhow!(m),
    })?;
    let Some(views) = views else {
        return Err(BadInput(format!(
            "the {} stack has no worker schedule to show: --schedule shows the fabric's",
            sc.stack.unwrap_or(meshsim_ccl::op::Stack::DEFAULT)
        ))
        .into());
    };
    match a.output.format.table() {
        Format::Json => outln!("{}", serde_json::to_string_pretty(&views)?)?,
        Format::Csv | Format::Text => {
            for v in &views {
                out!("{v}")?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs a scenario with `model`, mapping its errors to exit codes.
fn run_scenario(
    sc: &Scenario,
    model: &scenario::ParamSource,
    trace: bool,
) -> anyhow::Result<scenario::Outcome> {
    sc.run(Path::new("."), Some(model), trace).map_err(|e| match e {
        RunError::Bad(m) => BadInput(m).into(),
        RunError::Sim(e) => anyhow::Error::new(e),
        RunError::Failed(m) => anyhow::anyhow!(m),
    })
}

/// Runs `sc` again and fails (exit 1) unless the event log hashes and times are equal.
fn check_determinism(
    sc: &Scenario,
    model: &scenario::ParamSource,
    first: &scenario::Outcome,
) -> anyhow::Result<()> {
    let again = run_scenario(sc, model, false)?;
    scenario::same_run((first.time, &first.stats), (again.time, &again.stats)).map_err(anyhow::Error::msg)?;
    eprintln!(
        "meshsim: deterministic: two runs gave {} events, event-log hash {:016x}",
        first.stats.events, first.stats.log_hash
    );
    Ok(())
}

/// One link direction's use, as the `--links` table shows it.
#[derive(serde::Serialize)]
pub(crate) struct LinkRow {
    from_chip: u64,
    from_chan: u8,
    to_chip: u64,
    to_chan: u8,
    bytes: u64,
    packets: u64,
    busy_us: f64,
    busy_pct: f64,
}

pub(crate) fn link_rows(
    cluster: &Cluster,
    links: &[meshsim_hw::LinkUse],
    time: meshsim_engine::Time,
) -> Vec<LinkRow> {
    links
        .iter()
        .map(|l| LinkRow {
            from_chip: cluster.chip(l.from.chip).id,
            from_chan: l.from.chan,
            to_chip: cluster.chip(l.to.chip).id,
            to_chan: l.to.chan,
            bytes: l.bytes,
            packets: l.packets,
            busy_us: l.busy.as_us_f64(),
            busy_pct: 100.0 * l.busy.as_ns_f64() / time.as_ns_f64().max(1e-9),
        })
        .collect()
}

/// One fabric router's row in the link report.
#[derive(serde::Serialize)]
pub(crate) struct RouterRow {
    chip: u64,
    chan: u8,
    plane: usize,
    ch0_packets: u64,
    ch1_packets: u64,
    rx_packets: u64,
    forwarded: u64,
    written: u64,
    peak_ch0_slots: u64,
    peak_ch1_slots: u64,
    peak_rx_slots: u64,
    credit_wait_us: f64,
    busy_us: f64,
    busy_pct: f64,
}

/// The routers that carried anything, by chip and channel.
pub(crate) fn router_rows(
    cluster: &Cluster,
    routers: &[meshsim_ccl::fabric::RouterUse],
    time: meshsim_engine::Time,
) -> Vec<RouterRow> {
    let mut rows: Vec<RouterRow> = routers
        .iter()
        .filter(|r| r.stats.sent.iter().sum::<u64>() + r.stats.received > 0)
        .map(|r| RouterRow {
            chip: cluster.chip(r.at.chip).id,
            chan: r.at.chan,
            plane: r.plane,
            ch0_packets: r.stats.sent[0],
            ch1_packets: r.stats.sent[1],
            rx_packets: r.stats.received,
            forwarded: r.stats.forwarded,
            written: r.stats.written,
            peak_ch0_slots: r.stats.peak_slots[0],
            peak_ch1_slots: r.stats.peak_slots[1],
            peak_rx_slots: r.stats.peak_rx_slots,
            credit_wait_us: r.stats.credit_wait.as_us_f64(),
            busy_us: r.stats.busy.as_us_f64(),
            busy_pct: 100.0 * r.stats.busy.as_ns_f64() / time.as_ns_f64().max(1e-9),
        })
        .collect();
    rows.sort_by_key(|r| (r.chip, r.chan));
    rows
}

/// What bound a run: the busiest of its bottleneck link, NoC port, DRAM bank and router ERISC
/// (kind, what, busy time).
pub(crate) fn bound_by(
    cluster: &Cluster,
    links: &[meshsim_hw::LinkUse],
    r: &meshsim_hw::trace::ResourceUse,
    routers: &[meshsim_ccl::fabric::RouterUse],
) -> Option<(&'static str, String, meshsim_engine::Time)> {
    let [noc, dram] = resources(cluster, r);
    let link = meshsim_hw::trace::bottleneck(links).map(|l| (link_name(cluster, l), l.busy));
    let router =
        routers.iter().max_by_key(|u| (u.stats.busy, std::cmp::Reverse((u.at.chip, u.at.chan)))).map(|u| {
            (
                format!("chip {} eth{} router (plane {})", cluster.chip(u.at.chip).id, u.at.chan, u.plane),
                u.stats.busy,
            )
        });
    [("Ethernet link", link), ("NoC", noc), ("DRAM", dram), ("router ERISC", router)]
        .into_iter()
        .filter_map(|(kind, x)| x.map(|(name, busy)| (kind, name, busy)))
        .max_by_key(|&(_, _, busy)| busy)
}

/// The busy share of the op's time at which a resource binds it: below it, no resource is
/// saturated and the op is bound by latency (docs/cli.md, "bound by").
pub(crate) const SATURATED_PCT: f64 = 80.0;

/// The verdict's line: bandwidth-bound by the busiest resource when it is busy at least
/// [`SATURATED_PCT`] of `time`; otherwise latency-bound, with the critical path's longest stage
/// (when known) and the busiest resource beside it. `of` names the span (`op`, `makespan`).
pub(crate) fn verdict_text(
    busiest: Option<(&'static str, String, meshsim_engine::Time)>,
    stage: Option<&meshsim_ccl::critical::Stage>,
    time: meshsim_engine::Time,
    of: &str,
) -> Option<String> {
    let (kind, what, busy) = busiest?;
    let pct = 100.0 * busy.as_ns_f64() / time.as_ns_f64().max(1e-9);
    let resource = format!("{kind}, {what} ({:.3} us busy, {pct:.1} % of the {of})", busy.as_us_f64());
    if pct >= SATURATED_PCT {
        return Some(format!("bound by: {resource}"));
    }
    let longest = stage.map_or(String::new(), |s| {
        format!(
            " the longest stage of the critical path is {} ({:.3} us);",
            s.name,
            (s.end - s.start).as_us_f64()
        )
    });
    Some(format!(
        "bound by: latency (no resource busy {SATURATED_PCT:.0} % of the {of}):{longest} busiest {resource}"
    ))
}

/// A run's verdict in a few words, as a baseline keeps it beside its time: `bandwidth: <the
/// saturated resource> <share>`, or `latency: <longest stage> <duration>; busiest <resource>
/// <share>`; `None` for a run that crossed no link.
pub(crate) fn verdict_short(cluster: &Cluster, run: &meshsim_ccl::op::OpRun) -> Option<String> {
    let (kind, what, busy) = bound_by(cluster, &run.links, &run.resources, &run.routers)?;
    let pct = 100.0 * busy.as_ns_f64() / run.time.as_ns_f64().max(1e-9);
    if pct >= SATURATED_PCT {
        return Some(format!("bandwidth: {kind} {what} {pct:.1} %"));
    }
    let cp = meshsim_ccl::critical::critical_path(run);
    let stage = longest_stage(cp.as_ref())
        .map_or(String::new(), |s| format!("{} {:.3} us; ", s.name, (s.end - s.start).as_us_f64()));
    Some(format!("latency: {stage}busiest {kind} {what} {pct:.1} %"))
}

/// The critical path's longest stage.
pub(crate) fn longest_stage(
    cp: Option<&meshsim_ccl::critical::CriticalPath>,
) -> Option<&meshsim_ccl::critical::Stage> {
    cp?.stages.iter().max_by_key(|s| s.end - s.start)
}

/// A link direction as reports name it: `chip A ethX -> chip B ethY`.
pub(crate) fn link_name(cluster: &Cluster, l: &meshsim_hw::LinkUse) -> String {
    format!(
        "chip {} eth{} -> chip {} eth{}",
        cluster.chip(l.from.chip).id,
        l.from.chan,
        cluster.chip(l.to.chip).id,
        l.to.chan
    )
}

fn critical_text(
    cluster: &Cluster,
    cp: Option<&meshsim_ccl::critical::CriticalPath>,
    time: meshsim_engine::Time,
) -> String {
    let Some(cp) = cp else {
        return "\nbottleneck: none (nothing crossed a link)\n".into();
    };
    let mut s = format!(
        "\nbottleneck: {} ({} B, busy {:.3} us, {:.1} % of the op)\ncritical path:\n",
        link_name(cluster, &cp.link),
        cp.link.bytes,
        cp.link.busy.as_us_f64(),
        100.0 * cp.link.busy.as_ns_f64() / time.as_ns_f64().max(1e-9)
    );
    for st in &cp.stages {
        let _ = writeln!(
            s,
            "  {:<13} {:>12.3} us  ({:.3} .. {:.3} us)",
            st.name,
            (st.end - st.start).as_us_f64(),
            st.start.as_us_f64(),
            st.end.as_us_f64()
        );
    }
    s
}

fn critical_json(cluster: &Cluster, cp: Option<&meshsim_ccl::critical::CriticalPath>) -> serde_json::Value {
    let Some(cp) = cp else { return serde_json::Value::Null };
    serde_json::json!({
        "bottleneck": link_name(cluster, &cp.link),
        "bottleneck_busy_us": cp.link.busy.as_us_f64(),
        "stages": cp.stages.iter().map(|st| serde_json::json!({
            "stage": st.name,
            "start_us": st.start.as_us_f64(),
            "end_us": st.end.as_us_f64(),
            "duration_us": (st.end - st.start).as_us_f64(),
        })).collect::<Vec<_>>(),
    })
}

/// The busiest NoC port and DRAM bank as `(what, busy)`.
fn resources(
    cluster: &Cluster,
    r: &meshsim_hw::trace::ResourceUse,
) -> [Option<(String, meshsim_engine::Time)>; 2] {
    use meshsim_hw::noc::Port;
    let noc = r.noc.map(|(chip, p)| {
        let port = match p.port {
            Port::X => {
                if p.noc == 0 {
                    "+x link"
                } else {
                    "-x link"
                }
            }
            Port::Y => {
                if p.noc == 0 {
                    "+y link"
                } else {
                    "-y link"
                }
            }
            Port::Inject => "injection port",
            Port::Eject => "ejection port",
        };
        (format!("chip {} NoC{} router {} {port}", cluster.chip(chip).id, p.noc, p.at), p.busy)
    });
    let dram = r
        .dram
        .map(|d| (format!("chip {} DRAM bank {} ({} B)", cluster.chip(d.chip).id, d.bank, d.bytes), d.busy));
    [noc, dram]
}

fn resources_text(
    cluster: &Cluster,
    r: &meshsim_hw::trace::ResourceUse,
    time: meshsim_engine::Time,
) -> String {
    let mut s = String::from("busiest on chip:\n");
    for (kind, what) in ["NoC", "DRAM"].iter().zip(resources(cluster, r)) {
        match what {
            Some((name, busy)) => {
                let pct = 100.0 * busy.as_ns_f64() / time.as_ns_f64().max(1e-9);
                let _ =
                    writeln!(s, "  {kind:<13} {:>12.3} us  ({pct:.1} % of the op)  {name}", busy.as_us_f64());
            }
            None => {
                let _ = writeln!(s, "  {kind:<13} unused");
            }
        }
    }
    s
}

fn resources_json(
    cluster: &Cluster,
    r: &meshsim_hw::trace::ResourceUse,
    time: meshsim_engine::Time,
) -> serde_json::Value {
    let [noc, dram] = resources(cluster, r).map(|x| {
        x.map_or(serde_json::Value::Null, |(name, busy)| {
            serde_json::json!({
                "what": name,
                "busy_us": busy.as_us_f64(),
                "busy_pct": 100.0 * busy.as_ns_f64() / time.as_ns_f64().max(1e-9),
            })
        })
    });
    serde_json::json!({"noc": noc, "dram": dram})
}
