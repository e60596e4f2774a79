//! Every result says how far to trust it (docs/guide.md, "How accurate it is"): `op`, `sweep`,
//! `run` and `regress` quote the accuracy record's error of the op on that architecture and
//! model, and agree with each other on the same op.

mod common;
use common::*;

/// A workload of two ops on a T3000: a reduce-scatter on a 4-chip line (tt-metal's sweep has
/// that communicator) and an all-reduce on the ring of 8 (tt-metal's sweep measures no
/// all-reduce).
const WORKLOAD: &str = "cluster: t3000
ops:
  - name: rs
    op: reduce-scatter
    comm: {chips: [4, 0, 2, 6], topology: line}
    shape: [1, 1, 32, 4096]
    dim: 3
  - name: ar
    op: all-reduce
    comm: {all: true, topology: ring}
    shape: [1, 1, 32, 4096]
    after: [rs]
";

#[test]
fn op_run_and_regress_quote_the_same_record_for_the_same_op() {
    // `op`: the text header's line and the JSON's object.
    let args = ["op", "reduce-scatter", "--cluster", "t3000", "--chips", "4", "--topology", "line"];
    let (code, text, err) = meshsim(&[&args[..], &["--shape", "1,1,32,4096"]].concat());
    assert_eq!(code, 0, "{err}");
    let line = text.lines().find(|l| l.starts_with("accuracy")).expect("an accuracy line");
    assert!(line.contains("against tt-metal's Wormhole sweep of reduce-scatter on a line of 4"), "{line}");
    let (code, out, err) = meshsim(&[&args[..], &["--shape", "1,1,32,4096", "--format", "json"]].concat());
    assert_eq!(code, 0, "{err}");
    let op = json(&out)["accuracy"].clone();
    let mean = op["mean_abs_error_pct"].as_f64().expect("a calibrated op has a mean");
    assert!(op["points"].as_u64().unwrap() > 0 && op["against_packet"].is_null());
    assert!(line.contains(&format!("mean |error| {mean:.1} %")), "{line}");

    // `run`: the same op in a workload carries the same object, a column, and the line.
    let path = file("trust/workload.yaml", WORKLOAD.as_bytes());
    let (code, out, err) = meshsim(&["run", path.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let ops = json(&out)["ops"].as_array().unwrap().clone();
    assert_eq!(ops[0]["accuracy"], op, "the workload's reduce-scatter is the op's");
    // tt-metal's sweep has no all-reduce: not calibrated, and so large.
    assert!(ops[1]["accuracy"]["basis"].is_null() && ops[1]["accuracy"]["large"] == true);
    let (code, text, err) = meshsim(&["run", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let header = text.lines().next().unwrap();
    assert!(header.trim_end().ends_with("accuracy"), "{header}");
    assert!(
        text.lines().any(|l| l.starts_with("rs ") && l.contains(&format!("{mean:.1} % vs hw"))),
        "{text}"
    );
    assert!(text.lines().any(|l| l.starts_with("ar ") && l.contains("not calibrated")), "{text}");
    assert!(
        text.contains("accuracy reduce-scatter on 4-chip lines (packet model): mean |error|")
            && text.contains("accuracy all-reduce on 8-chip rings (packet model): not calibrated"),
        "{text}"
    );

    // `regress`: a scenario of the same op says the same in its column.
    let suite = file(
        "trust/suite.yaml",
        b"scenarios:
  - name: t3000-rs-line
    op: reduce-scatter
    cluster: t3000
    chips: 4
    topology: line
    shape: [1, 1, 32, 4096]
  - name: n300-latency
    op: latency
    cluster: n300
    size: 16
",
    );
    let (code, out, err) = meshsim(&["regress", "--suite", suite.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 1, "scenarios with no baseline are new and fail the gate: {err}");
    let rows = json(&out).as_array().unwrap().clone();
    assert_eq!(rows[0]["status"], "new");
    assert_eq!(
        rows[0]["accuracy"],
        format!("{mean:.1} % vs hw{}", if mean >= 10.0 { ", large" } else { "" })
    );
    assert_eq!(rows[1]["accuracy"], "", "a microbenchmark is not an op");
}

#[test]
fn the_flow_model_also_says_how_far_it_is_from_the_packet_model() {
    let path = file("trust/flow.yaml", WORKLOAD.as_bytes());
    let (code, out, err) = meshsim(&["run", path.to_str().unwrap(), "--format", "json", "--model", "flow"]);
    assert_eq!(code, 0, "{err}");
    let ops = json(&out)["ops"].as_array().unwrap().clone();
    let against = &ops[0]["accuracy"]["against_packet"];
    assert!(against["scenarios"].as_u64().unwrap() > 0, "{against}");
    let (code, text, err) = meshsim(&["run", path.to_str().unwrap(), "--model", "flow", "--format", "csv"]);
    assert_eq!(code, 0, "{err}");
    let rs = text.lines().find(|l| l.starts_with("rs,")).unwrap();
    let mean = against["mean_abs_error_pct"].as_f64().unwrap();
    // The accuracy field is quoted when it holds a comma ("…, large; …").
    assert!(rs.trim_end_matches('"').ends_with(&format!("{mean:.1} % vs packet")), "{rs}");
}

#[test]
fn a_blackhole_sweep_and_op_say_what_the_record_says_of_blackhole() {
    // Blackhole's all-gather is calibrated against the BH Galaxy sweep; its all-reduce is not.
    let (code, text, err) = meshsim(&[
        "sweep",
        "all-gather",
        "--cluster",
        "bh_galaxy",
        "--chips",
        "8",
        "--minbytes",
        "64K",
        "--maxbytes",
        "64K",
    ]);
    assert_eq!(code, 0, "{err}");
    let line = text.lines().find(|l| l.starts_with("# accuracy")).expect("a sweep's accuracy line");
    assert!(line.contains("tt-metal's Blackhole sweep of all-gather"), "{line}");
    let (code, text, err) = meshsim(&[
        "op",
        "all-reduce",
        "--cluster",
        "bh_quietbox",
        "--shape",
        "1,1,32,4096",
        "--format",
        "csv",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(text.lines().nth(1).unwrap().ends_with(",not calibrated"), "{text}");
}
