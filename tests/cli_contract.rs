//! The CLI's contract on the surfaces generated clusters and Blackhole opened: long lines up to
//! the 1D header's reach and a clear refusal past it, kernels whose buffers fit at any size the
//! shape allows, and defaults that fit the machine.

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
        let (code, time, err) = op(&[
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
            "--verify",
        ]);
        assert_eq!(code, 0, "{cluster}: {err}");
        assert!(time > 0.0);
    }
    let (code, out, err) = meshsim(&[
        "op",
        "reduce",
        "--cluster",
        "ring:12",
        "--shape",
        "1,1,32,65536",
        "--dim",
        "3",
        "--dtype",
        "bf16",
        "--verify",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("direct") && out.contains("true"), "{out}");
}

#[test]
fn with_no_topology_given_a_machine_without_a_ring_runs_its_line() {
    let (code, out, err) = meshsim(&[
        "op",
        "all-gather",
        "--cluster",
        "line:8",
        "--shape",
        "1,1,32,2048",
        "--dim",
        "3",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let j = json(&out);
    assert_eq!((j["topology"].as_str(), j["chips"].as_u64()), (Some("line"), Some(8)), "{out}");
    // Named chips along an open Galaxy row, and the start of a longer line.
    let (code, out, err) = meshsim(&[
        "op",
        "all-gather",
        "--cluster",
        "galaxy",
        "--chip-ids",
        "0,1,2,3",
        "--shape",
        "1,1,32,1024",
        "--dim",
        "3",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["topology"].as_str(), Some("line"));
    let (code, out, err) =
        meshsim(&["sweep", "all-gather", "--cluster", "line:35", "--chips", "5", "-b", "8K", "-e", "8K"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("5 chips, line"), "{out}");
    // Where the chips close a ring, the default stays the ring; a ring asked for stays asked.
    let (code, out, _) = meshsim(&[
        "op",
        "all-gather",
        "--cluster",
        "t3000",
        "--shape",
        "1,1,32,2048",
        "--dim",
        "3",
        "--format",
        "json",
    ]);
    assert_eq!((code, json(&out)["topology"].as_str()), (0, Some("ring")));
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
