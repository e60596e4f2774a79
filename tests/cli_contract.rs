//! The CLI's contract across its surfaces: long lines up to the 1D header's reach and a clear
//! refusal past it, kernels whose buffers fit at any size the shape allows, defaults that fit
//! the machine, and the same op knobs on every command that runs ops.

mod common;

use common::*;

/// Runs `args` and returns (exit code, stdout, stderr), with the op's time from its JSON when
/// it ran.
fn op(args: &[&str]) -> (i32, f64, String) {
    let mut a = args.to_vec();
    a.extend(["--format", "json"]);
    let (code, out, err) = meshsim(&a);
    let time = if code == 0 { json(&out)["time_us"].as_f64().expect("a time") } else { 0.0 };
    (code, time, err)
}

#[test]
fn routes_up_to_the_long_header_s_64_hops_run_on_both_models() {
    // A 39-hop multicast line, a 33-hop broadcast round a ring, a reduce over 128 chips (its
    // gather 64 hops round the ring), a 63-hop all-to-all along a Blackhole torus's chips.
    let cases: [&[&str]; 4] = [
        &[
            "op",
            "all-gather",
            "--cluster",
            "line:40",
            "--topology",
            "line",
            "--shape",
            "1,1,32,1280",
            "--dim",
            "3",
        ],
        &["op", "broadcast", "--cluster", "ring:34", "--shape", "1,1,32,1088", "--dim", "3", "--root", "0"],
        &[
            "op",
            "reduce",
            "--cluster",
            "mesh:8x16:links=2",
            "--shape",
            "1,1,32,4096",
            "--dim",
            "3",
            "--root",
            "0",
        ],
        &[
            "op",
            "all-to-all",
            "--cluster",
            "torus:8x8:arch=blackhole",
            "--topology",
            "line",
            "--shape",
            "1,1,32,2048",
            "--dim",
            "3",
        ],
    ];
    for args in cases {
        for model in ["packet", "flow"] {
            let mut a = args.to_vec();
            a.extend(["--model", model]);
            let (code, time, err) = op(&a);
            assert_eq!(code, 0, "{a:?}: {err}");
            assert!(time > 0.0, "{a:?}");
        }
    }
}

#[test]
fn routes_past_the_header_s_reach_are_refused_in_one_line_naming_the_limit_and_the_way_out() {
    for model in ["packet", "flow"] {
        let (code, _, err) = op(&[
            "op",
            "all-gather",
            "--cluster",
            "line:70",
            "--shape",
            "1,1,32,2240",
            "--dim",
            "3",
            "--model",
            model,
        ]);
        assert_eq!(code, 2, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("69 hops") && err.contains("beyond the 64"), "{err}");
        assert!(err.contains("--chips") && err.contains("--topology ring"), "{err}");
    }
    // A sweep over every chip of a 32x32 torus: the multicast goes half-way round 1,024 chips.
    let (code, _, err) =
        meshsim(&["sweep", "all-gather", "--cluster", "torus:32x32", "-b", "1K", "-e", "2K"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("meshsim: ") && err.contains("512 hops") && err.contains("fewer chips"), "{err}");
    // Tune says why its base choice does not run.
    let (code, _, err) = meshsim(&["tune", "all-gather", "--cluster", "line:70", "-b", "64K", "-e", "64K"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("does not run with the base tree's choice") && err.contains("69 hops"), "{err}");
    // The fabric benchmarks, whose lines are a cluster's rows and columns.
    let (code, _, err) = meshsim(&[
        "bench",
        "fabric",
        "--cluster",
        "line:70",
        "--test",
        "linear-multicast",
        "--packet-size",
        "4096",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("69 hops") && err.contains("at most 65 chips"), "{err}");
}

#[test]
fn a_reduce_larger_than_its_reducers_staging_runs_and_verifies_on_both_architectures() {
    // 12 does not divide the tensor, so the reduce goes straight to its root: each reducer's
    // share (1 MiB, the whole 4 MiB tensor over 4 reducers) streams through its staging area
    // in blocks; laid out whole it ran past the L1 window.
    for cluster in ["ring:12", "ring:12:arch=blackhole"] {
        let args = [
            "op",
            "reduce",
            "--cluster",
            cluster,
            "--shape",
            "1,1,32,65536",
            "--dim",
            "3",
            "--dtype",
            "bf16",
        ];
        let (code, out, err) = meshsim(&[&args[..], &["--verify"]].concat());
        assert_eq!(code, 0, "{cluster}: {err}");
        let row = out.lines().find(|l| l.starts_with("reduce ")).unwrap_or_default();
        assert!(row.contains("direct") && row.contains("true"), "{cluster}: {out}");
    }
}

/// The topology and chip count an all-gather of `x` elements per row runs on with `extra`
/// flags (no topology given unless they give one).
fn runs_on(cluster: &str, extra: &[&str], x: u64) -> (String, u64) {
    let shape = format!("1,1,32,{x}");
    let args = [
        &["op", "all-gather", "--cluster", cluster, "--shape", &shape, "--dim", "3", "--format", "json"],
        extra,
    ];
    let (code, out, err) = meshsim(&args.concat());
    assert_eq!(code, 0, "{cluster} {extra:?}: {err}");
    let j = json(&out);
    (j["topology"].as_str().unwrap_or_default().to_owned(), j["chips"].as_u64().unwrap_or_default())
}

#[test]
fn with_no_topology_given_a_machine_without_a_ring_runs_its_line() {
    let line = |chips: u64| ("line".to_owned(), chips);
    assert_eq!(runs_on("line:8", &[], 2048), line(8));
    // Named chips along an open Galaxy row.
    assert_eq!(runs_on("galaxy", &["--chip-ids", "0,1,2,3"], 1024), line(4));
    // A mesh of odd sides has no ring through every chip: its default is a line snaking
    // through them all.
    assert_eq!(runs_on("mesh:5x7", &[], 1120), line(35));
    // The start of a longer line, on a sweep too.
    let (code, out, err) =
        meshsim(&["sweep", "all-gather", "--cluster", "line:35", "--chips", "5", "-b", "8K", "-e", "8K"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("5 chips, line"), "{out}");
    // Where the chips close a ring, the default stays the ring; a ring asked for stays asked.
    assert_eq!(runs_on("t3000", &[], 2048), ("ring".to_owned(), 8));
    let (code, _, err) = meshsim(&[
        "op",
        "all-gather",
        "--cluster",
        "line:8",
        "--topology",
        "ring",
        "--shape",
        "1,1,32,2048",
        "--dim",
        "3",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("has no ring of 8 chips"), "{err}");
}

/// Every command that runs ops takes the knobs of how an op's data moves (`OpKnobs`, declared
/// once): a sweep point with `--packet-size` is the op with the same flag, and the flag counts.
mod op_knobs_everywhere {
    use super::*;

    fn sweep_time(extra: &[&str]) -> f64 {
        let mut args = vec!["sweep", "all-gather", "-b", "256K", "-e", "256K", "--num-links", "1"];
        args.extend_from_slice(&[
            "--dtype",
            "bf16",
            "--topology",
            "line",
            "--chips",
            "2",
            "--format",
            "json",
        ]);
        args.extend_from_slice(extra);
        let (code, out, err) = meshsim(&args);
        assert_eq!(code, 0, "{err}");
        json(&out)[0]["time_us"].as_f64().unwrap()
    }

    #[test]
    fn sweep_run_and_tune_take_the_packet_size_skew_and_memory_an_op_takes() {
        let op = |extra: &[&str]| {
            let mut args =
                vec!["op", "all-gather", "--shape", "1,1,32,4096", "--num-links", "1", "--dtype", "bf16"];
            args.extend_from_slice(&["--topology", "line", "--chips", "2", "--format", "json"]);
            args.extend_from_slice(extra);
            let (code, out, err) = meshsim(&args);
            assert_eq!(code, 0, "{err}");
            json(&out)["time_us"].as_f64().unwrap()
        };
        for extra in [&["--packet-size", "6144"][..], &["--skew-ns", "500"], &["--memory", "l1"]] {
            assert_eq!(sweep_time(extra), op(extra), "{extra:?}");
        }
        // Each knob counts: a sweep that dropped one would still equal the op without it.
        for extra in [&["--packet-size", "6144"][..], &["--skew-ns", "500"], &["--memory", "l1"]] {
            assert_ne!(sweep_time(extra), sweep_time(&[]), "{extra:?}");
        }
        // A workload run takes them too, overriding every op's.
        let workload = |extra: &str| {
            format!(
                "cluster: t3000\nops:\n  - name: ag\n    op: all-gather\n    comm: {{chips: [0, 1], topology: line}}\n    shape: [1, 1, 32, 4096]\n    dtype: bf16\n    num_links: 1\n{extra}"
            )
        };
        let run = |path: &PathBuf, extra: &[&str]| {
            let mut args = vec!["run", path.to_str().unwrap(), "--format", "json"];
            args.extend_from_slice(extra);
            let (code, out, err) = meshsim(&args);
            assert_eq!(code, 0, "{err}");
            json(&out)["makespan_us"].as_f64().unwrap()
        };
        let (plain, sized) = (workload(""), workload("    packet_size: 6144\n"));
        let (plain, sized) =
            (file("knobs-plain.yaml", plain.as_bytes()), file("knobs-sized.yaml", sized.as_bytes()));
        assert_eq!(run(&plain, &["--packet-size", "6144"]), run(&sized, &[]));
        assert_ne!(run(&plain, &[]), run(&sized, &[]));
        // tune too: a given packet size is the only one its candidates try.
        let candidates = |extra: &[&str]| {
            let mut args = vec!["tune", "all-gather", "-b", "16K", "-e", "16K", "--chips", "4", "--topology"];
            args.extend_from_slice(&["line", "--format", "json"]);
            args.extend_from_slice(extra);
            let (code, _, err) = meshsim(&args);
            assert_eq!(code, 0, "{err}");
            // The measurements go to stderr when the tree goes to stdout.
            json(&err)[0]["candidates"].as_u64().unwrap()
        };
        assert_eq!((candidates(&[]), candidates(&["--packet-size", "6144"])), (9, 3));
        // The stack's one rule refuses another stack's knob in a sweep as in an op.
        let err = robustness_bad(&["sweep", "all-gather", "-e", "64K", "--pages-per-packet", "2"]);
        assert!(err.contains("pages_per_packet applies to the edm stack"), "{err}");
    }
}

/// `op --schedule` prints the fabric schedule the op would run, one entry per worker kernel,
/// without running it; its JSON names the algorithm and packing the run reports, and every
/// page a multicast all-gather sends is counted on the ranks it reaches. The EDM has no such
/// schedule and says so in one line, exit 2.
#[test]
fn op_schedule_shows_what_each_worker_kernel_does() {
    let args = ["op", "all-gather", "--cluster", "t3000", "--shape", "1,1,32,4096", "--chips", "4"];
    let (code, out, err) = meshsim(&[&args[..], &["--schedule", "--format", "json"]].concat());
    assert_eq!(code, 0, "{err}");
    let phases = json(&out);
    let phase = &phases[0];
    let ran = json(&meshsim(&[&args[..], &["--format", "json"]].concat()).1);
    assert_eq!(phase["algorithm"], "multicast");
    assert_eq!(phase["algorithm"], ran["algorithm"], "{phase} against {ran}");
    assert_eq!(phase["pages_per_packet"], ran["pages_per_packet"]);
    assert_eq!(phase["planes"], ran["links"]);
    assert_eq!(phase["ranks"], 4);
    let kernels = phase["kernels"].as_array().expect("kernels");
    let planes = phase["planes"].as_u64().expect("planes") as usize;
    // Two direction kernels per rank and plane; each forward one waits, once its data is out,
    // for the three others' final increments on its plane (the completion barrier).
    assert_eq!(kernels.len(), 4 * planes * 2);
    // (At least the three others: an even ring's antipode reaches a rank from both sides.)
    for k in kernels.iter().filter(|k| k["direction"] == "forward") {
        assert!(k["waits"].as_u64().is_some_and(|w| w >= 3), "{k}");
    }
    // Every other rank receives each rank's packets once: the multicast ranges of a rank's
    // kernels cover the three others, each packet once.
    let pages: u64 = 4096 * 32 * 2 / 4 / 2048;
    let per_packet = phase["pages_per_packet"].as_u64().expect("pages per packet");
    for rank in 0..4u64 {
        let mut reached = [0u64; 4];
        for k in kernels.iter().filter(|k| k["rank"] == rank && k["role"] == "multicast") {
            for s in k["sends"].as_array().expect("sends") {
                for to in s["to"].as_array().expect("to") {
                    reached[to.as_u64().expect("a rank") as usize] += s["packets"].as_u64().expect("packets");
                }
            }
        }
        for (r, &got) in reached.iter().enumerate() {
            let want = if r as u64 == rank { 0 } else { pages.div_ceil(per_packet) };
            assert_eq!(got, want, "rank {rank}'s packets on rank {r}");
        }
    }
    let (code, text, _) = meshsim(&[&args[..], &["--schedule"]].concat());
    assert_eq!(code, 0);
    assert!(text.starts_with("op 'all-gather' ag: multicast on a 4-rank ring"), "{text}");
    // One worker per link injects straight into its router; a reduce-scatter's four share it
    // through a mux with tt-metal's one slot each (shared/fabric.md §11.3).
    assert!(phase["mux_slots"].is_null(), "{phase}");
    let rs = ["op", "reduce-scatter", "--shape", "1,1,32,65536", "--workers", "4", "--schedule"];
    let (code, text, err) = meshsim(&rs);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.lines().next().is_some_and(
            |l| l.ends_with("4 worker(s) per link and direction, behind a mux with 1 slot(s) each")
        ),
        "{text}"
    );
    let (_, out, _) = meshsim(&[&rs[..], &["--format", "json"]].concat());
    assert_eq!(json(&out)[0]["mux_slots"], 1);
    let (code, _, err) = meshsim(&[&args[..], &["--schedule", "--stack", "edm"]].concat());
    assert_eq!(code, 2);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no worker schedule"), "{err}");
}

/// Every knob a sweep takes is a list, one series per value (docs/cli.md, "meshsim sweep"):
/// each series of a list runs as the sweep of that value alone, and its label names it.
#[test]
fn every_sweep_knob_takes_a_list_of_series_each_the_sweep_of_its_value() {
    let sweep = |op: &str, extra: &[&str]| -> Vec<(String, f64)> {
        let args = ["sweep", op, "-b", "64K", "-e", "64K", "--chips", "4", "--format", "json"];
        let (code, out, err) = meshsim(&[&args[..], extra].concat());
        assert_eq!(code, 0, "{op} {extra:?}: {err}");
        let rows = json(&out);
        let rows = rows.as_array().unwrap();
        rows.iter()
            .map(|r| (r["series"].as_str().unwrap().to_owned(), r["time_us"].as_f64().unwrap()))
            .collect()
    };
    let edm: &[&str] = &["--stack", "edm"];
    /// An op, its stack flags, the knob, two values and their series' labels.
    type Case<'a> = (&'a str, &'a [&'a str], &'a str, [&'a str; 2], [&'a str; 2]);
    let cases: [Case; 6] = [
        ("all-gather", &[], "--memory", ["dram", "l1"], ["in DRAM", "in L1"]),
        ("reduce-scatter", &[], "--redop", ["sum", "max"], ["sum", "max"]),
        ("broadcast", &[], "--root", ["0", "3"], ["root 0", "root 3"]),
        ("all-gather", edm, "--bidir", ["none", "full"], ["bidir none", "bidir full"]),
        ("all-gather", edm, "--pages-per-packet", ["1", "4"], ["1 page", "4 pages"]),
        ("all-gather", edm, "--buffers", ["1", "2"], ["1 buffer", "2 buffers"]),
    ];
    for (op, stack, flag, values, labels) in cases {
        let both = sweep(op, &[stack, &[flag, &values.join(",")]].concat());
        assert_eq!(both.len(), 2, "{flag}: {both:?}");
        for ((label, time), (value, want)) in both.iter().zip(values.iter().zip(labels)) {
            assert_eq!(label, want, "{flag}");
            let alone = sweep(op, &[stack, &[flag, value]].concat());
            assert_eq!(alone[0].1, *time, "{flag} {value}: the list's series is the sweep of it alone");
        }
        if flag != "--redop" {
            // The knob counts: its two values are two different runs (a max and a sum cost the
            // same in timing mode).
            assert_ne!(both[0].1, both[1].1, "{flag}: {both:?}");
        }
    }
    // A list is checked as one value is, before anything runs; one op takes one value.
    let err = robustness_bad(&["sweep", "all-gather", "--redop", "sum,max"]);
    assert!(err.contains("--redop applies to reducing ops"), "{err}");
    let err = robustness_bad(&["op", "all-gather", "--shape", "1,1,32,1024", "--memory", "dram,l1"]);
    assert!(err.contains("--memory takes one value on op"), "{err}");
}
