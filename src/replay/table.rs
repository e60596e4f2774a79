//! The correlation table of a replay: per instance what ran, what the chips measured (fewest,
//! median and most over chips; the replay sessions' spread), meshsim's prediction and its error
//! against the median and the slowest chip (tt-metal's tests take the slowest as the op's time),
//! tt-metal's own estimate where the file has one; totals per op and for the file; the instances
//! not replayed and why. Text, CSV (the instance rows) and JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{Replay, Replayed};
use crate::cli::Format;
use crate::out::outln;

/// The error of `predicted` against `measured`, %.
fn error(predicted: f64, measured: f64) -> Option<f64> {
    (measured > 0.0).then(|| 100.0 * (predicted - measured) / measured)
}

/// One instance's row, as every format writes it.
#[derive(serde::Serialize)]
struct Row {
    index: usize,
    op: String,
    tt_op: String,
    op_id: u64,
    n: usize,
    groups: usize,
    chip_groups: Vec<Vec<u64>>,
    topology: String,
    links: String,
    shape: [u64; 4],
    dim: usize,
    dtype: String,
    memory: String,
    persistent_buffers: bool,
    traced: bool,
    sessions: usize,
    measured: Option<super::Measured>,
    predicted_us: f64,
    error_vs_median_pct: Option<f64>,
    error_vs_max_pct: Option<f64>,
    notes: Vec<String>,
}

fn row(r: &Replayed) -> Row {
    let m = r.measured.as_ref();
    Row {
        index: r.index,
        op: r.op.kind.json_name(),
        tt_op: r.inst.name.clone(),
        op_id: r.inst.id,
        n: r.op.n,
        groups: r.groups.len(),
        chip_groups: r.groups.clone(),
        topology: r.op.topology.map_or("default".into(), |t| t.to_string()),
        links: r.op.links.map_or("default".into(), |l| l.to_string()),
        shape: r.op.shape,
        dim: r.op.dim,
        dtype: r.op.dtype.to_string(),
        memory: format!("{:?}", r.op.memory).to_lowercase(),
        persistent_buffers: r.op.persistent_buffers,
        traced: r.inst.traced,
        sessions: r.inst.sessions,
        measured: r.measured.clone(),
        predicted_us: r.predicted_us,
        error_vs_median_pct: m.and_then(|m| error(r.predicted_us, m.median_us)),
        error_vs_max_pct: m.and_then(|m| error(r.predicted_us, m.max_us)),
        notes: r.notes.clone(),
    }
}

/// Totals of one op kind (or of the file): measured medians and maxima summed, predictions summed.
#[derive(serde::Serialize)]
struct Total {
    op: String,
    instances: usize,
    measured_median_us: f64,
    measured_max_us: f64,
    predicted_us: f64,
    error_vs_median_pct: Option<f64>,
    error_vs_max_pct: Option<f64>,
}

fn totals(done: &[Replayed]) -> Vec<Total> {
    let mut by: BTreeMap<String, Vec<&Replayed>> = BTreeMap::new();
    for r in done.iter().filter(|r| r.measured.is_some()) {
        by.entry(r.op.kind.json_name()).or_default().push(r);
        by.entry("all".into()).or_default().push(r);
    }
    let all = by.remove("all");
    by.into_iter().chain(all.map(|v| ("all".to_owned(), v))).map(|(op, v)| total(op, &v)).collect()
}

fn total(op: String, v: &[&Replayed]) -> Total {
    let sum = |f: &dyn Fn(&super::Measured) -> f64| {
        v.iter().filter_map(|r| r.measured.as_ref()).map(f).sum::<f64>()
    };
    let (med, max) = (sum(&|m| m.median_us), sum(&|m| m.max_us));
    let predicted = v.iter().map(|r| r.predicted_us).sum::<f64>();
    Total {
        op,
        instances: v.len(),
        measured_median_us: med,
        measured_max_us: max,
        predicted_us: predicted,
        error_vs_median_pct: error(predicted, med),
        error_vs_max_pct: error(predicted, max),
    }
}

/// Prints the replay in `format` (a table's; `replay` writes its tt-ops-report itself).
pub(crate) fn print(r: &Replay, format: Format) -> anyhow::Result<()> {
    let rows: Vec<Row> = r.done.iter().map(row).collect();
    match format {
        Format::Json => {
            let json = serde_json::json!({
                "report": r.file,
                "layout": r.layout,
                "arch": r.arch,
                "cluster": r.cluster,
                "model": r.model,
                "instances": rows,
                "totals": totals(&r.done),
                "not_replayed": r.skipped,
            });
            outln!("{}", serde_json::to_string_pretty(&json)?)?;
        }
        Format::Csv => outln!("{}", csv(&rows))?,
        Format::Text => outln!("{}", text(r, &rows))?,
    }
    Ok(())
}

/// A number for a table cell, `-` if absent.
fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// A signed percentage cell.
fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:+.1}"))
}

const HEADER: [&str; 18] = [
    "index",
    "op",
    "tt_op",
    "op_id",
    "n",
    "groups",
    "topology",
    "links",
    "shape",
    "dtype",
    "traced",
    "sessions",
    "measured_min_us",
    "measured_median_us",
    "measured_max_us",
    "predicted_us",
    "error_vs_median_pct",
    "error_vs_max_pct",
];

fn cells(r: &Row) -> Vec<String> {
    let m = r.measured.as_ref();
    vec![
        r.index.to_string(),
        r.op.clone(),
        r.tt_op.clone(),
        r.op_id.to_string(),
        r.n.to_string(),
        r.groups.to_string(),
        r.topology.clone(),
        r.links.clone(),
        r.shape.map(|d| d.to_string()).join("x"),
        r.dtype.clone(),
        if r.traced { "yes" } else { "no" }.into(),
        r.sessions.to_string(),
        cell(m.map(|m| m.min_us), 2),
        cell(m.map(|m| m.median_us), 2),
        cell(m.map(|m| m.max_us), 2),
        format!("{:.2}", r.predicted_us),
        pct(r.error_vs_median_pct),
        pct(r.error_vs_max_pct),
    ]
}

fn csv(rows: &[Row]) -> String {
    let mut out = HEADER.join(",");
    for r in rows {
        out += "\n";
        out += &cells(r).join(",");
    }
    out
}

/// Columns padded to their widest cell.
fn aligned(header: &[&str], body: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in body {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(&width)
            .map(|(c, &w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let mut out = line(header.to_vec());
    for r in body {
        out += "\n";
        out += &line(r.iter().map(String::as_str).collect());
    }
    out
}

fn text(r: &Replay, rows: &[Row]) -> String {
    let mut out = String::new();
    let arch = r.arch.as_deref().unwrap_or("architecture not given");
    let _ = writeln!(out, "report    {} ({}, {arch})", r.file, r.layout);
    let _ = writeln!(out, "machine   {}, {} model", r.cluster, r.model);
    let _ = writeln!(
        out,
        "ccl ops   {} instances: {} replayed, {} not",
        rows.len() + r.skipped.len(),
        rows.len(),
        r.skipped.len()
    );
    let short = [
        "#",
        "op",
        "n",
        "groups",
        "topology",
        "links",
        "shape",
        "dtype",
        "traced",
        "sessions",
        "min us",
        "median us",
        "max us",
        "spread %",
        "meshsim us",
        "err med %",
        "err max %",
        "pm ideal us",
    ];
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|x| {
            let c = cells(x);
            let m = x.measured.as_ref();
            let mut v = vec![c[0].clone(), c[1].clone()];
            v.extend(c[4..15].iter().cloned());
            v.push(cell(m.and_then(|m| m.session_spread_pct), 1));
            v.extend(c[15..18].iter().cloned());
            v.push(cell(m.and_then(|m| m.pm_ideal_us), 2));
            v
        })
        .collect();
    if !rows.is_empty() {
        let _ = writeln!(out, "\n{}", aligned(&short, &body));
        let t: Vec<Vec<String>> = totals(&r.done)
            .iter()
            .map(|t| {
                vec![
                    t.op.clone(),
                    t.instances.to_string(),
                    format!("{:.2}", t.measured_median_us),
                    format!("{:.2}", t.measured_max_us),
                    format!("{:.2}", t.predicted_us),
                    pct(t.error_vs_median_pct),
                    pct(t.error_vs_max_pct),
                ]
            })
            .collect();
        let head = ["totals", "instances", "median us", "max us", "meshsim us", "err med %", "err max %"];
        let _ = writeln!(out, "\n{}", aligned(&head, &t));
    }
    let notes: Vec<String> =
        rows.iter().flat_map(|x| x.notes.iter().map(move |n| format!("  #{}: {n}", x.index))).collect();
    if !notes.is_empty() {
        let _ = writeln!(out, "\nnotes\n{}", notes.join("\n"));
    }
    if !r.skipped.is_empty() {
        let _ = writeln!(out, "\nnot replayed");
        for s in &r.skipped {
            let _ = writeln!(out, "  #{} {} (op {}): {}", s.index, s.op_code, s.op_id, s.reason);
        }
    }
    out.trim_end().to_owned()
}
