//! `meshsim replay` end to end: tt-metal's ops perf report in, the correlation table out; the
//! report meshsim writes (`--format tt-ops-report`) read back to the same times; workloads
//! emitted from a report; and bad reports refused in one line.

mod common;
use common::*;

/// The leading columns of a 2026 report, then one input and one output block.
const HEADER: &str = "OP CODE,OP TYPE,GLOBAL CALL COUNT,DEVICE ID,DEVICE ARCH,ATTRIBUTES,DEVICE KERNEL DURATION [ns],INPUT_0_W_PAD[LOGICAL],INPUT_0_Z_PAD[LOGICAL],INPUT_0_Y_PAD[LOGICAL],INPUT_0_X_PAD[LOGICAL],INPUT_0_LAYOUT,INPUT_0_DATATYPE,INPUT_0_MEMORY,OUTPUT_0_W_PAD[LOGICAL],OUTPUT_0_Z_PAD[LOGICAL],OUTPUT_0_Y_PAD[LOGICAL],OUTPUT_0_X_PAD[LOGICAL],OUTPUT_0_LAYOUT,OUTPUT_0_DATATYPE,OUTPUT_0_MEMORY,METAL TRACE ID,METAL TRACE REPLAY SESSION ID,PM IDEAL [ns]";

/// One row: `op` on `device` of op id `id`, with `attrs`, input and output widths `x_in`,
/// `x_out`, and a kernel time.
fn row(
    op: &str,
    id: u64,
    device: u64,
    arch: &str,
    attrs: &str,
    ns: u64,
    (x_in, x_out): (u64, u64),
) -> String {
    format!(
        "{op},tt_dnn_device,{},{device},{arch},{attrs},{ns},1[1],1[1],32[32],{x_in}[{x_in}],TILE,BFLOAT16,DEV_0_DRAM_INTERLEAVED,1[1],1[1],32[32],{x_out}[{x_out}],TILE,BFLOAT16,DEV_0_DRAM_INTERLEAVED,,,",
        (id << 10) | device
    )
}

fn report(rows: &[String]) -> Vec<u8> {
    let mut s = HEADER.to_owned();
    for r in rows {
        s += "\r\n";
        s += r;
    }
    s.into_bytes()
}

#[test]
fn a_report_meshsim_writes_replays_to_its_own_times() {
    for (cluster, extra) in [
        ("t3000", vec!["--topology", "ring"]),
        ("bh_loudbox", vec!["--axis", "1", "--topology", "line", "--num-links", "2"]),
    ] {
        let mut args = vec!["op", "all-gather", "--cluster", cluster, "--shape", "1,1,64,4096"];
        args.extend(&extra);
        let (code, own, err) = meshsim(&[&args[..], &["--format", "tt-ops-report"]].concat());
        assert_eq!(code, 0, "{err}");
        assert!(
            own.starts_with("OP CODE,OP TYPE,GLOBAL CALL COUNT,DEVICE ID,DEVICE ARCH,ATTRIBUTES,"),
            "{own}"
        );
        assert!(own.contains("\r\n"), "tt-metal's reports end lines with CRLF");
        let (_, direct, _) = meshsim(&[&args[..], &["--format", "json"]].concat());
        let time = json(&direct)["time_us"].as_f64().unwrap();
        let path = file(&format!("own-{cluster}.csv"), own.as_bytes());
        let (code, out, err) = meshsim(&["replay", path.to_str().unwrap(), "--format", "json"]);
        assert_eq!(code, 0, "{err}");
        let v = json(&out);
        assert_eq!(v["cluster"], cluster, "the report's architecture and chip count imply the machine");
        let i = &v["instances"][0];
        assert_eq!(v["instances"].as_array().unwrap().len(), 1);
        assert!((i["predicted_us"].as_f64().unwrap() - time).abs() < 1e-9, "{i}");
        assert!(i["error_vs_max_pct"].as_f64().unwrap().abs() < 1e-6, "{i}");
        let chips = if cluster == "t3000" { 8 } else { 4 };
        assert_eq!(i["n"], chips);
        assert_eq!(i["groups"], if cluster == "t3000" { 1 } else { 2 });
        assert_eq!(i["measured"]["chips"], 8);
    }
}

#[test]
fn instances_group_by_op_id_and_trace_fold_sessions_and_skip_what_is_not_a_plain_ccl() {
    let ag = "{'cluster_axis': 'std::nullopt'; 'dim': '3'; 'num_links': '1'; 'ring_size': '8'; 'topology': 'Topology::Ring'}";
    let fused = "{'num_links': '1'; 'ring_size': '8'; 'topology': 'Topology::Ring'}";
    let mut rows = Vec::new();
    for d in 0..8 {
        rows.push(row("MatmulDeviceOperation", 1, d, "wormhole_b0", "{}", 5000, (1024, 1024)));
        rows.push(row(
            "AllGatherAsyncDeviceOperation",
            2,
            d,
            "wormhole_b0",
            ag,
            30_000 + 100 * d,
            (1024, 8192),
        ));
        rows.push(row("LayerNormPostAllGatherDeviceOperation", 3, d, "wormhole_b0", "{}", 900, (1024, 1024)));
        rows.push(row(
            "AllGatherMatmulAsyncDeviceOperation",
            4,
            d,
            "wormhole_b0",
            fused,
            70_000,
            (1024, 8192),
        ));
        rows.push(row("AllToAllDispatchDeviceOperation", 5, d, "wormhole_b0", fused, 9_000, (1024, 1024)));
    }
    let path = file("grouping.csv", &report(&rows));
    let (code, out, err) = meshsim(&["replay", path.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let inst = v["instances"].as_array().unwrap();
    assert_eq!(inst.len(), 1, "the matmul and the norm are not CCLs: {out}");
    let m = &inst[0]["measured"];
    assert_eq!(
        (m["chips"].as_u64(), m["min_us"].as_f64(), m["max_us"].as_f64()),
        (Some(8), Some(30.0), Some(30.7))
    );
    assert!((m["median_us"].as_f64().unwrap() - 30.35).abs() < 1e-9);
    let skipped = v["not_replayed"].as_array().unwrap();
    let reasons: Vec<&str> = skipped.iter().map(|s| s["reason"].as_str().unwrap()).collect();
    assert_eq!(skipped.len(), 2, "{out}");
    assert!(reasons[0].contains("fused"), "{reasons:?}");
    assert!(reasons[1].contains("MoE"), "{reasons:?}");
    // The text table names both, and the totals.
    let (_, text, _) = meshsim(&["replay", path.to_str().unwrap()]);
    assert!(text.contains("not replayed") && text.contains("AllGatherMatmulAsyncDeviceOperation"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("all ")), "{text}");
}

#[test]
fn an_emitted_workload_runs_the_replayed_ops_in_file_order() {
    let w = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/workloads/galaxy_rows_then_columns.yaml");
    let (code, own, err) = meshsim(&["run", w, "--format", "tt-ops-report"]);
    assert_eq!(code, 0, "{err}");
    let path = file("galaxy-own.csv", own.as_bytes());
    let wl = path.with_extension("yaml");
    let (code, out, err) = meshsim(&[
        "replay",
        path.to_str().unwrap(),
        "--emit-workload",
        wl.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["cluster"], "galaxy");
    let groups: Vec<u64> =
        v["instances"].as_array().unwrap().iter().map(|i| i["groups"].as_u64().unwrap()).collect();
    assert_eq!(groups, [4, 8], "every row, then every column: {out}");
    let text = std::fs::read_to_string(&wl).unwrap();
    assert!(
        text.contains("after: [i1_all_gather_g0, i1_all_gather_g1, i1_all_gather_g2, i1_all_gather_g3]"),
        "{text}"
    );
    let (code, ran, err) = meshsim(&["run", wl.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&ran)["ops"].as_array().unwrap().len(), 12);
}

#[test]
fn bad_reports_are_one_line_and_exit_2() {
    let cases: [(&str, &[u8], &str); 3] = [
        ("device-only.csv", b"DEVICE ID,DEVICE KERNEL DURATION [ns]\n0,5\n", "device-only"),
        (
            "no-machine.csv",
            &report(&[
                row("X", 1, 0, "wormhole_b0", "{}", 5, (32, 32)),
                row("X", 1, 1, "wormhole_b0", "{}", 5, (32, 32)),
                row("X", 1, 2, "wormhole_b0", "{}", 5, (32, 32)),
            ]),
            "--cluster",
        ),
        ("empty.csv", b"", "not an ops perf report"),
    ];
    for (name, bytes, says) in cases {
        let path = file(name, bytes);
        let (code, out, err) = meshsim(&["replay", path.to_str().unwrap()]);
        assert_eq!(code, 2, "{name}: {out}{err}");
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
    }
    let (code, _, err) = meshsim(&["replay", "/nonexistent/report.csv"]);
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
}

#[test]
fn a_blackhole_report_of_two_lines_maps_every_instance_to_the_loudbox_rows() {
    let line = |extra: &str| {
        format!(
            "{{'cluster_axis': '1'; 'dim': '3'; 'num_links': '2'; 'ring_size': '4'; 'topology': 'Topology::Linear'{extra}}}"
        )
    };
    let generic = "{'axis_num_devices': '[2; 4]'; 'axis_num_links': '[1; 2]'; 'axis_topology': '[Topology::Linear; Topology::Linear]'; 'cluster_axis': '1'; 'dim': '-1'}";
    let a2a = "{'cluster_axis': '1'; 'in_dim': '3'; 'num_devices': '4'; 'num_links': '2'; 'out_dim': '2'; 'topology': 'Topology::Linear'}";
    let ops: [(&str, String, (u64, u64)); 5] = [
        ("AllGatherAsyncDeviceOperation", line(""), (1024, 4096)),
        ("ReduceScatterMinimalAsyncDeviceOperation", line(""), (4096, 1024)),
        ("AllGatherDeviceOperation", generic.into(), (512, 2048)),
        ("AllToAllAsyncGenericDeviceOperation", a2a.into(), (4096, 4096)),
        (
            "AllGatherAsyncDeviceOperation",
            line("; 'using_persistent_buffers': 'true'")
                .replace("'cluster_axis': '1'", "'cluster_axis': '0'"),
            (1024, 4096),
        ),
    ];
    let mut rows = Vec::new();
    for (i, (op, attrs, shapes)) in ops.iter().enumerate() {
        for d in 0..8 {
            rows.push(row(op, i as u64 + 1, d, "blackhole", attrs, 20_000 + 500 * d, *shapes));
        }
    }
    rows[3] = rows[3].replace(",21500,", ",n/a,");
    let path = file("bh-lines.csv", &report(&rows));
    let (code, out, err) = meshsim(&["replay", path.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("line 5: DEVICE KERNEL DURATION [ns] 'n/a' is not a number (row left out)"),
        "{err}"
    );
    let v = json(&out);
    assert_eq!(v["cluster"], "bh_loudbox");
    let inst = v["instances"].as_array().unwrap();
    let ops: Vec<&str> = inst.iter().map(|i| i["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["all_gather", "reduce_scatter", "all_gather", "all_to_all", "all_gather"], "{out}");
    for i in inst {
        assert_eq!((i["n"].as_u64(), i["topology"].as_str()), (Some(4), Some("line")), "{i}");
        assert_eq!(i["chip_groups"], serde_json::json!([[0, 1, 3, 2], [4, 5, 7, 6]]), "{i}");
        assert_eq!(i["links"], "2", "{i}");
    }
    assert_eq!(inst[0]["measured"]["chips"], 7, "the unreadable row is left out");
    assert_eq!(inst[2]["dim"], 3, "dim -1 counts from the end");
    assert_eq!(inst[3]["dim"], 3, "all-to-all splits along in_dim");
    let notes = inst[4]["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n.as_str().unwrap().contains("cluster_axis 0 runs on the machine's axis 1")),
        "{notes:?}"
    );
    assert_eq!(
        (inst[4]["persistent_buffers"].as_bool(), inst[0]["persistent_buffers"].as_bool()),
        (Some(true), Some(false))
    );
}

/// The synthetic example beside tt-metal's report format (`$MESHSIM_OPS_REPORT`, set by
/// .ci/run when the workplace's shared/ has it): its three CCL instances found and mapped.
#[test]
fn the_shared_example_report_replays() {
    let Ok(path) = std::env::var("MESHSIM_OPS_REPORT") else {
        eprintln!("MESHSIM_OPS_REPORT not set: the shared example report not replayed");
        return;
    };
    let (code, out, err) = meshsim(&["replay", &path, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let inst = v["instances"].as_array().unwrap();
    let what: Vec<(&str, u64, u64, bool, u64)> = inst
        .iter()
        .map(|i| {
            (
                i["op"].as_str().unwrap(),
                i["n"].as_u64().unwrap(),
                i["groups"].as_u64().unwrap(),
                i["traced"].as_bool().unwrap(),
                i["sessions"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        what,
        [("all_gather", 8, 1, true, 2), ("reduce_scatter", 8, 1, false, 1), ("all_gather", 4, 2, false, 1)],
        "{out}"
    );
    assert_eq!(inst[2]["topology"], "line");
    assert!(v["not_replayed"].as_array().unwrap().is_empty(), "{out}");
}
