//! End-to-end tests of the `meshsim` binary, organised by behaviour.

use std::path::PathBuf;
use std::process::Command;

/// Runs meshsim with `args`; returns (exit code, stdout, stderr).
fn meshsim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_meshsim"))
        .args(args)
        .current_dir(std::env::temp_dir())
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("meshsim runs");
    (
        out.status.code().expect("exited"),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Writes `bytes` to a fresh file named after the test and returns its path.
fn file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("meshsim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    path
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).expect("valid JSON")
}

mod topo {
    use super::*;

    #[test]
    fn built_in_clusters_report_their_counts_shape_and_ring_from_any_directory() {
        let cases = [
            ("n300", 2, 2, 1, "line 2", 1),
            ("t3000", 8, 20, 4, "mesh 2x4", 4),
            ("galaxy", 32, 208, 0, "mesh 4x8", 10),
            ("galaxy_torus", 32, 256, 0, "torus 4x8", 6),
        ];
        for (name, chips, links, reserved, shape, diameter) in cases {
            let (code, out, err) = meshsim(&["topo", name, "--format", "json"]);
            assert_eq!(code, 0, "{err}");
            let v = json(&out);
            assert_eq!(v["chips"], chips, "{name}");
            assert_eq!(v["links"], links, "{name}");
            assert_eq!(v["reserved_links"], reserved, "{name}");
            assert_eq!(v["shape"], shape, "{name}");
            assert_eq!(v["diameter"], diameter, "{name}");
            assert_eq!(v["ring"].as_array().map(Vec::len), Some(chips), "{name}");
            let pair_links: u64 =
                v["links_per_pair"].as_array().unwrap().iter().map(|p| p["links"].as_u64().unwrap()).sum();
            assert_eq!(pair_links, links as u64);
        }
        let v = json(&meshsim(&["topo", "t3000", "--format", "json"]).1);
        assert_eq!(v["mmio_chips"], serde_json::json!([0, 1, 2, 3]));
        assert_eq!(v["ring"], serde_json::json!([0, 2, 6, 7, 3, 1, 5, 4]));
    }

    #[test]
    fn text_summary_names_everything_a_user_asks_first() {
        let (code, out, _) = meshsim(&["topo", "t3000"]);
        assert_eq!(code, 0);
        for want in [
            "chips     8",
            "links     20 (4 reserved for dispatch, 0 to remote hosts)",
            "pcie      0 1 2 3",
            "shape     mesh 2x4",
            "diameter  4",
            "ring      0 2 6 7 3 1 5 4",
            "     0 - 4    2 links, 1 usable   chan 8:0* 9:1",
        ] {
            assert!(out.contains(want), "missing {want:?} in\n{out}");
        }
    }

    #[test]
    fn dot_has_one_edge_per_pair_labelled_with_its_link_count() {
        let (code, out, _) = meshsim(&["topo", "galaxy", "--format", "dot"]);
        assert_eq!(code, 0);
        assert!(out.starts_with("graph cluster {"));
        assert_eq!(out.matches(" -- ").count(), 52);
        assert!(out.contains("chip0 -- chip1 [label=\"4\"];"));
    }

    #[test]
    fn a_file_path_works_as_well_as_a_name() {
        let text = "arch: {10: wormhole_b0, 20: wormhole_b0, 30: wormhole_b0}\nchips: {}\n\
                    ethernet_connections:\n  - [{chip: 10, chan: 0}, {chip: 20, chan: 0}]\n  - [{chip: 20, chan: 1}, {chip: 30, chan: 0}]\n\
                    chips_with_mmio: [10, 20, 30]\n";
        let path = file("line3.yaml", text.as_bytes());
        let (code, out, err) = meshsim(&["topo", path.to_str().unwrap(), "--format", "json"]);
        assert_eq!(code, 0, "{err}");
        let v = json(&out);
        assert_eq!((v["shape"].as_str(), v["ring"].is_null()), (Some("line 3"), true));
        assert_eq!(v["mmio_chips"], serde_json::json!([10, 20, 30]));
    }
}

/// Bad input: exit code 2, one line naming the file, the place and the problem; no panic.
mod bad_input {
    use super::*;

    fn check(name: &str, bytes: &[u8], want: &[&str]) {
        let path = file(name, bytes);
        let (code, out, err) = meshsim(&["topo", path.to_str().unwrap()]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(out.is_empty());
        assert_eq!(err.lines().count(), 1, "{name}: one line, got {err:?}");
        assert!(!err.contains("panicked") && !err.contains("backtrace"), "{err}");
        assert!(err.contains(name), "{name}: the file is named in {err:?}");
        for w in want {
            assert!(err.contains(w), "{name}: {w:?} not in {err:?}");
        }
    }

    const TWO: &str = "arch: {0: wormhole_b0, 1: wormhole_b0}\n";

    #[test]
    fn yaml_syntax_errors_give_line_and_column() {
        check(
            "syntax.yaml",
            b"arch: {0: wormhole_b0,\n  1: wormhole_b0\nethernet_connections: []\n",
            &[":3:", "expected ',' or '}'"],
        );
        check(
            "type.yaml",
            b"arch: [0, 1]\nethernet_connections: []\n",
            &[":1:7:", "arch: invalid type: sequence"],
        );
    }

    #[test]
    fn deeply_nested_files_are_refused_at_once_naming_the_limit() {
        // 200,000 nested brackets (400 KB): the parser alone took minutes; the scan is linear.
        let deep = format!("arch: {}{}\n", "[".repeat(200_000), "]".repeat(200_000));
        check("deep.yaml", deep.as_bytes(), &[":1:71:", "nested more than 64 deep"]);
        let deep = format!("cluster: t3000\nops: {}\n", "{a: ".repeat(100));
        let path = file("deep-workload.yaml", deep.as_bytes());
        let (code, _, err) = meshsim(&["run", path.to_str().unwrap()]);
        assert_eq!((code, err.lines().count()), (2, 1), "{err}");
        assert!(
            err.contains("nested more than 64 deep: meshsim reads at most 64 levels (line 2, column 262)"),
            "{err}"
        );
    }

    #[test]
    fn connections_to_unknown_chips_or_channels_name_the_entry() {
        check(
            "unknown_chip.yaml",
            format!("{TWO}ethernet_connections: [[{{chip: 0, chan: 1}}, {{chip: 5, chan: 0}}]]\n").as_bytes(),
            &["ethernet_connections[0]", "chip 5 is not in `arch`"],
        );
        check(
            "bad_chan.yaml",
            format!("{TWO}ethernet_connections: [[{{chip: 0, chan: 1}}, {{chip: 1, chan: 22}}]]\n")
                .as_bytes(),
            &["ethernet_connections[0]", "channel 22 is outside 0..15"],
        );
    }

    #[test]
    fn a_channel_used_twice_or_a_contradictory_duplicate_is_rejected() {
        check(
            "chan_twice.yaml",
            format!("{TWO}ethernet_connections:\n  - [{{chip: 0, chan: 1}}, {{chip: 1, chan: 0}}]\n  - [{{chip: 0, chan: 1}}, {{chip: 1, chan: 5}}]\n").as_bytes(),
            &["ethernet_connections[1]", "chip 0 channel 1 is already used by ethernet_connections[0]"],
        );
        check(
            "contradiction.yaml",
            format!("{TWO}ethernet_connections:\n  - [{{chip: 0, chan: 1}}, {{chip: 1, chan: 0}}, {{routing_enabled: true}}]\n  - [{{chip: 0, chan: 1}}, {{chip: 1, chan: 0}}, {{routing_enabled: false}}]\n").as_bytes(),
            &["ethernet_connections[1]", "contradicts ethernet_connections[0]"],
        );
    }

    #[test]
    fn missing_required_keys_are_named() {
        check("no_arch.yaml", b"ethernet_connections: []\n", &["missing required key `arch`"]);
        check("no_conns.yaml", TWO.as_bytes(), &["missing required key `ethernet_connections`"]);
    }

    #[test]
    fn empty_and_binary_files_are_refused() {
        check("empty.yaml", b"", &["file is empty"]);
        check("comments.yaml", b"# nothing here\n", &["holds only comments, no cluster description"]);
        check(
            "binary.yaml",
            &[0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0xff, 0xfe],
            &["not a YAML text file"],
        );
        check("latin1.yaml", b"arch: {0: caf\xe9}\n", &["not a YAML text file (binary data at byte 13)"]);
    }

    #[test]
    fn unknown_cluster_names_and_missing_files_exit_2() {
        let (code, _, err) = meshsim(&["topo", "t4000"]);
        assert_eq!(code, 2);
        assert_eq!(
            err,
            "meshsim: unknown cluster 't4000': not a file, and not one of the built-in clusters (n300, t3000, galaxy, galaxy_torus)\n"
        );
        let (code, _, err) = meshsim(&["topo", "missing/cluster.yaml"]);
        assert_eq!(code, 2);
        assert!(err.starts_with("meshsim: missing/cluster.yaml: cannot read:"), "{err}");
    }

    #[test]
    fn unknown_flags_and_formats_exit_2() {
        let (code, _, err) = meshsim(&["topo", "t3000", "--format", "xml"]);
        assert_eq!(code, 2);
        assert!(err.contains("invalid value 'xml'"), "{err}");
        assert_eq!(meshsim(&["frobnicate"]).0, 2);
    }
}

mod params {
    use super::*;

    #[test]
    fn every_parameter_is_printed_with_its_value_and_description() {
        let (code, out, _) = meshsim(&["params", "--format", "json"]);
        assert_eq!(code, 0);
        let v = json(&out);
        let rows = v.as_array().unwrap();
        assert!(rows.len() >= 20);
        let link = rows.iter().find(|r| r["name"] == "eth_link_gbps").unwrap();
        assert_eq!(link["value"], 100);
        assert!(rows.iter().all(|r| !r["description"].as_str().unwrap().is_empty()));
    }

    #[test]
    fn a_parameter_file_with_an_unknown_key_is_bad_input() {
        let text = format!("{}\nnoc_hops_per_cycle: 3\n", include_str!("../configs/wormhole_b0.yaml"));
        let path = file("params_unknown.yaml", text.as_bytes());
        let (code, _, err) = meshsim(&["params", "--params", path.to_str().unwrap()]);
        assert_eq!(code, 2);
        assert!(
            err.contains("params_unknown.yaml") && err.contains("unknown field `noc_hops_per_cycle`"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1);
    }
}

mod bench {
    use super::*;

    #[test]
    fn latency_bandwidth_and_ring_print_their_units_in_json() {
        let (code, out, err) =
            meshsim(&["bench", "latency", "--cluster", "n300", "--sizes", "16,1K", "--format", "json"]);
        assert_eq!(code, 0, "{err}");
        let v = json(&out);
        assert_eq!(v[1]["size_bytes"], 1024);
        assert!(v[0]["round_trip_ns"].as_f64().unwrap() > 800.0);
        let (code, out, _) = meshsim(&["bench", "bandwidth", "--sizes", "8K", "--format", "json"]);
        assert_eq!(code, 0);
        assert!(json(&out)[0]["gbps"].as_f64().unwrap() > 11.0);
        let (code, out, _) = meshsim(&[
            "bench",
            "ring",
            "--cluster",
            "t3000",
            "--hops",
            "4",
            "--sizes",
            "16",
            "--format",
            "json",
        ]);
        assert_eq!(code, 0);
        assert_eq!(json(&out)[0]["hops"], 4);
        assert!(json(&out)[0]["ns_per_hop"].as_f64().unwrap() > 500.0);
    }

    #[test]
    fn csv_has_a_header_and_one_line_per_size_in_input_order() {
        let (code, out, _) = meshsim(&[
            "bench",
            "bandwidth",
            "--bidir",
            "--slots",
            "4",
            "--sizes",
            "4K,256",
            "--format",
            "csv",
        ]);
        assert_eq!(code, 0);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "size_bytes,slots,directions,gbps,gbps_per_direction");
        assert!(lines[1].starts_with("4096,4,2,") && lines[2].starts_with("256,4,2,"), "{out}");
    }

    #[test]
    fn a_swapped_parameter_file_changes_the_result() {
        let slow = include_str!("../configs/wormhole_b0.yaml")
            .replace("eth_link_latency_ns: 318", "eth_link_latency_ns: 1318");
        let path = file("slow_link.yaml", slow.as_bytes());
        let base =
            json(&meshsim(&["bench", "latency", "--sizes", "16", "--format", "json"]).1)[0]["round_trip_ns"]
                .as_f64()
                .unwrap();
        let (code, out, _) = meshsim(&[
            "bench",
            "latency",
            "--sizes",
            "16",
            "--format",
            "json",
            "--params",
            path.to_str().unwrap(),
        ]);
        assert_eq!(code, 0);
        let slower = json(&out)[0]["round_trip_ns"].as_f64().unwrap();
        assert!((slower - base - 2000.0).abs() < 1.0, "two extra microseconds of wire: {base} -> {slower}");
    }

    #[test]
    fn plots_are_written_as_svg() {
        let path = std::env::temp_dir().join(format!("meshsim-cli-{}-bw.svg", std::process::id()));
        let (code, _, err) =
            meshsim(&["bench", "bandwidth", "--sizes", "16,1K,8K", "--plot", path.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("GB/s"));
    }

    #[test]
    fn impossible_benchmark_arguments_are_bad_input() {
        let cases: [(&[&str], &str); 6] = [
            (&["bench", "latency", "--sizes", "24"], "size 24 B is not a positive multiple of 16 B"),
            (&["bench", "latency", "--sizes", "0"], "'0' is not a positive size"),
            (&["bench", "bandwidth", "--sizes", "64K", "--slots", "16"], "16 slots of 65536 B"),
            (
                &["bench", "ring", "--cluster", "n300", "--hops", "8", "--sizes", "16"],
                "has no ring of 8 hops",
            ),
            (&["bench", "latency", "--cluster", "t4000"], "unknown cluster 't4000'"),
            (
                &["bench", "latency", "--sizes", "16", "--plot", "out.jpg"],
                "plots are written as .svg or .png",
            ),
        ];
        for (args, want) in cases {
            let (code, _, err) = meshsim(args);
            assert_eq!(code, 2, "{args:?}: {err}");
            assert!(err.contains(want), "{args:?}: {want:?} not in {err:?}");
            assert!(!err.contains("panicked"), "{err}");
        }
    }
}

mod calibrate {
    use super::*;

    #[test]
    fn the_model_meets_the_calibration_set_and_a_broken_parameter_fails_it() {
        let (code, out, err) = meshsim(&["calibrate", "--format", "json"]);
        assert_eq!(code, 0, "{err}");
        let rows = json(&out);
        assert_eq!(rows.as_array().unwrap().len(), 25);
        assert!(rows.as_array().unwrap().iter().all(|r| r["ok"] == true));
        let slow =
            include_str!("../configs/wormhole_b0.yaml").replace("eth_link_gbps: 100", "eth_link_gbps: 40");
        let path = file("slow_gbps.yaml", slow.as_bytes());
        let (code, out, err) = meshsim(&["calibrate", "--params", path.to_str().unwrap(), "--format", "csv"]);
        assert_eq!(code, 1, "{err}");
        assert!(out.lines().any(|l| l.starts_with("bandwidth GB/s,8192,") && l.ends_with(",false")), "{out}");
        assert!(err.contains("calibration point(s) miss their tolerance"), "{err}");
    }
}

mod op {
    use super::*;

    #[test]
    fn all_gather_reports_the_keys_users_script_against() {
        let (code, out, err) = meshsim(&[
            "op",
            "all-gather",
            "--cluster",
            "t3000",
            "--shape",
            "1,1,64,512",
            "--dim",
            "3",
            "--dtype",
            "bfp8",
            "--verify",
            "--format",
            "json",
        ]);
        assert_eq!(code, 0, "{err}");
        let v = json(&out);
        for key in [
            "op",
            "cluster",
            "chips",
            "size_bytes",
            "time_us",
            "algbw_gbps",
            "busbw_gbps",
            "per_chip",
            "verified",
        ] {
            assert!(!v[key].is_null(), "missing {key}");
        }
        assert_eq!(v["chips"], 8);
        assert_eq!(v["verified"], true);
        // Rank r is the r-th chip of the cluster's ring (as `topo` prints it), and the rows
        // come in rank order, not sorted by chip id.
        let (code, topo, err) = meshsim(&["topo", "t3000", "--format", "json"]);
        assert_eq!(code, 0, "{err}");
        let want: Vec<(u64, u64)> = json(&topo)["ring"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(r, c)| (r as u64, c.as_u64().unwrap()))
            .collect();
        let got: Vec<(u64, u64)> = v["per_chip"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["rank"].as_u64().unwrap(), c["chip"].as_u64().unwrap()))
            .collect();
        assert_eq!(got, want);
        let (alg, bus) = (v["algbw_gbps"].as_f64().unwrap(), v["busbw_gbps"].as_f64().unwrap());
        assert!((bus - alg * 7.0 / 8.0).abs() < 1e-9);
        let (code, out, _) = meshsim(&[
            "op",
            "all-gather",
            "--cluster",
            "t3000",
            "--shape",
            "1,1,32,256",
            "--chips",
            "4",
            "--topology",
            "line",
            "--format",
            "json",
        ]);
        assert_eq!(code, 0);
        assert_eq!(json(&out)["chip_ids"], serde_json::json!([4, 0, 2, 6]));
        assert!(json(&out)["verified"].is_null());
    }

    #[test]
    fn impossible_op_arguments_are_bad_input() {
        let base = ["op", "all-gather", "--cluster", "t3000"];
        let cases: [(&[&str], &str); 8] = [
            (&["--shape", "1,1,32,96"], "does not divide into 8 slices"),
            (&["--shape", "1,1,32,256", "--dim", "4"], "dim 4 is outside"),
            (&["--shape", "1,1,32,256", "--num-links", "3"], "3 links requested"),
            (&["--shape", "1,1,32,256", "--dtype", "fp8"], "unknown dtype 'fp8'"),
            (&["--shape", "1,1,32,256", "--chips", "3"], "no ring of 3 chips"),
            (&["--shape", "1,1,0,256"], "zero dimension"),
            (&["--shape", "1,1,256"], "--shape needs 4 values"),
            (&["--shape", "1,1,32,256", "--topology", "star"], "invalid value 'star'"),
        ];
        for (extra, want) in cases {
            let args: Vec<&str> = base.iter().chain(extra.iter()).copied().collect();
            let (code, _, err) = meshsim(&args);
            assert_eq!(code, 2, "{args:?}: {err}");
            assert!(err.contains(want), "{args:?}: {want:?} not in {err:?}");
            assert!(!err.contains("panicked"));
        }
        let (code, _, err) = meshsim(&["op", "all-gather", "--cluster", "t4000", "--shape", "1,1,32,256"]);
        assert_eq!(code, 2);
        assert!(err.contains("unknown cluster"));
    }
}

mod collective {
    use super::*;

    #[test]
    fn reduce_scatter_verifies_and_refuses_what_does_not_fit() {
        let (code, out, err) = meshsim(&[
            "op",
            "reduce-scatter",
            "--cluster",
            "t3000",
            "--shape",
            "1,1,64,512",
            "--redop",
            "max",
            "--verify",
            "--format",
            "json",
        ]);
        assert_eq!(code, 0, "{err}");
        let v = json(&out);
        assert_eq!(
            (v["op"].as_str(), v["verified"].as_bool(), v["redop"].as_str()),
            (Some("reduce_scatter"), Some(true), Some("max"))
        );
        let (code, _, err) =
            meshsim(&["op", "reduce-scatter", "--shape", "1,1,64,16384", "--pages-per-packet", "400"]);
        assert_eq!(code, 2);
        assert!(err.contains("pages_per_packet applies to the edm stack"), "{err}");
        let (code, _, err) = meshsim(&[
            "op",
            "reduce-scatter",
            "--stack",
            "edm",
            "--shape",
            "1,1,64,16384",
            "--pages-per-packet",
            "400",
        ]);
        assert_eq!(code, 2);
        assert!(err.contains("exceed the workers' buffering"), "{err}");
        let (code, _, err) = meshsim(&["op", "reduce-scatter", "--shape", "1,1,64,512", "--redop", "avg"]);
        assert_eq!(code, 2);
        assert!(err.contains("unknown reduction 'avg'"), "{err}");
    }

    #[test]
    fn sweeps_print_nccl_tests_columns_in_size_order() {
        let (code, out, err) = meshsim(&[
            "sweep",
            "all-gather",
            "--cluster",
            "t3000",
            "-b",
            "64K",
            "-e",
            "1M",
            "-f",
            "4",
            "--format",
            "csv",
        ]);
        assert_eq!(code, 0, "{err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "series,cluster,chips,num_links,workers,size_bytes,count,type,redop,root,time_us,algbw_gbps,busbw_gbps"
        );
        assert_eq!(lines.len(), 4, "{out}");
        let sizes: Vec<u64> =
            lines[1..].iter().map(|l| l.split(',').nth(5).unwrap().parse().unwrap()).collect();
        assert!(sizes.windows(2).all(|w| w[0] < w[1]) && sizes[0] >= 65536, "{sizes:?}");
        let path = std::env::temp_dir().join(format!("meshsim-cli-{}-sweep.svg", std::process::id()));
        let (code, _, err) = meshsim(&[
            "sweep",
            "reduce-scatter",
            "--cluster",
            "n300",
            "-b",
            "4K",
            "-e",
            "64K",
            "--plot",
            path.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(std::fs::read_to_string(&path).unwrap().contains("busbw"));
        let (code, _, err) = meshsim(&["sweep", "all-gather", "-b", "1M", "-e", "1K"]);
        assert_eq!(code, 2);
        assert!(err.contains("a sweep needs"), "{err}");
    }

    #[test]
    fn knob_lists_make_one_series_each_in_every_format() {
        let base = ["sweep", "all-gather", "--cluster", "t3000", "-b", "256K", "-e", "1M", "-f", "4"];
        let (code, out, err) =
            meshsim(&[&base[..], &["--stack", "edm", "--workers", "1,4", "--format", "json"]].concat());
        assert_eq!(code, 0, "{err}");
        let rows = json(&out);
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[0]["series"], "1 worker");
        assert_eq!(rows[3]["series"], "4 workers");
        assert_eq!(rows[3]["workers"], 4);
        for key in ["size_bytes", "count", "type", "redop", "root", "time_us", "algbw_gbps", "busbw_gbps"] {
            assert!(rows[0].get(key).is_some(), "{key}");
        }
        // More workers per link move more of the big gather.
        assert!(rows[3]["busbw_gbps"].as_f64() > rows[1]["busbw_gbps"].as_f64());
        // Text is nccl-tests' table, one block per series, nothing on stderr when not a terminal.
        let (code, out, err) = meshsim(&[
            "sweep",
            "all-gather",
            "--cluster",
            "t3000,galaxy_torus",
            "-b",
            "256K",
            "-e",
            "1M",
            "-f",
            "4",
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(err.is_empty(), "no progress bar off a terminal: {err:?}");
        assert_eq!(out.matches("# Avg bus bandwidth").count(), 2, "{out}");
        assert!(out.contains("on galaxy_torus (32 chips, ring)"), "{out}");
    }
}

/// Checks a file against the Chrome trace-event format as Perfetto reads it: a `traceEvents`
/// array; every event has `ph`, `pid` and (except metadata) a numeric `ts`; slices have a `tid`;
/// per track, timestamps never go back and every `B` has its `E`; `X` has a `dur` >= 0.
/// Returns the events.
fn check_trace(path: &std::path::Path) -> Vec<serde_json::Value> {
    use std::collections::BTreeMap;
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).expect("trace is JSON");
    let events = v["traceEvents"].as_array().expect("traceEvents array").clone();
    assert!(!events.is_empty());
    let mut last: BTreeMap<String, f64> = BTreeMap::new();
    let mut depth: BTreeMap<String, i64> = BTreeMap::new();
    for e in &events {
        let ph = e["ph"].as_str().unwrap_or_else(|| panic!("no ph: {e}"));
        let pid = e["pid"].as_u64().unwrap_or_else(|| panic!("no pid: {e}"));
        if ph == "M" {
            assert!(e["name"].is_string() && e["args"].is_object(), "{e}");
            continue;
        }
        let ts = e["ts"].as_f64().unwrap_or_else(|| panic!("no ts: {e}"));
        assert!(ts >= 0.0, "{e}");
        let track = match ph {
            "C" => {
                assert!(e["args"].as_object().unwrap().values().all(|x| x.is_number()), "{e}");
                format!("{pid}/counter/{}", e["name"].as_str().unwrap())
            }
            "B" | "E" | "X" | "i" => {
                let tid = e["tid"].as_u64().unwrap_or_else(|| panic!("no tid: {e}"));
                format!("{pid}/{tid}")
            }
            other => panic!("unexpected phase {other}: {e}"),
        };
        let prev = last.insert(track.clone(), ts).unwrap_or(0.0);
        assert!(ts >= prev, "timestamps go back on track {track}: {prev} then {ts}");
        match ph {
            "B" => {
                assert!(e["name"].is_string(), "{e}");
                *depth.entry(track).or_default() += 1;
            }
            "E" => {
                let d = depth.entry(track.clone()).or_default();
                *d -= 1;
                assert!(*d >= 0, "an E without its B on {track} at {ts}");
            }
            "X" => assert!(e["dur"].as_f64().unwrap() >= 0.0, "{e}"),
            _ => {}
        }
    }
    assert!(depth.values().all(|&d| d == 0), "unmatched B: {depth:?}");
    events
}

mod trace {
    use super::*;

    /// Runs meshsim with `args` and `--trace` into a temporary file named after `tag`; returns
    /// the exit code, both outputs and the trace file's path.
    fn run_traced(tag: &str, args: &[&str]) -> (i32, String, String, std::path::PathBuf) {
        let path = std::env::temp_dir().join(format!("meshsim-cli-{}-{tag}.json", std::process::id()));
        let (code, out, err) = meshsim(&[args, &["--trace", path.to_str().unwrap()]].concat());
        (code, out, err, path)
    }

    /// A fabric benchmark's trace shows its routers, its senders and the packets on the links.
    #[test]
    fn a_fabric_benchmark_trace_shows_routers_senders_and_packets() {
        let args =
            ["bench", "fabric", "--test", "neighbor-exchange", "--packet-size", "4096", "--packets", "20"];
        let (code, _, err, path) = run_traced("fabric-bench", &args);
        assert_eq!(code, 0, "{err}");
        let events = check_trace(&path);
        for kernel in ["router", "sender"] {
            assert!(events.iter().any(|e| e["cat"] == "kernel" && e["name"] == kernel), "{kernel}");
        }
        // 20 packets per flow, each of 4096 B + the header split into MTU-sized Ethernet packets.
        let big =
            events.iter().filter(|e| e["ph"] == "X" && e["args"]["bytes"].as_u64() == Some(1500)).count();
        assert!(big >= 20 * 2, "{big}");
        let _ = std::fs::remove_file(&path);
    }

    /// On the fabric stack the trace shows the routers' kernels and every link's packets too.
    #[test]
    fn a_fabric_all_gather_trace_is_valid_and_shows_its_routers() {
        let args = [
            "op",
            "all-gather",
            "--cluster",
            "t3000",
            "--shape",
            "1,1,32,2048",
            "--stack",
            "fabric",
            "--links",
            "--format",
            "json",
        ];
        let (code, out, err, path) = run_traced("fabric", &args);
        assert_eq!(code, 0, "{err}");
        assert_eq!(json(&out)["stack"], "fabric");
        let events = check_trace(&path);
        assert!(events.iter().any(|e| e["cat"] == "kernel" && e["name"] == "router"));
        assert!(
            events.iter().any(|e| e["ph"] == "X" && e["args"]["bytes"].as_u64().is_some_and(|b| b >= 1000))
        );
        // The report's routers: what each sent and received matches its peer's, no channel
        // held more slots than it has, and the verdict names the busiest resource.
        let report = json(&out);
        let routers = report["routers"].as_array().unwrap();
        assert!(!routers.is_empty());
        let sent: u64 = routers
            .iter()
            .map(|r| r["ch0_packets"].as_u64().unwrap() + r["ch1_packets"].as_u64().unwrap())
            .sum();
        let received: u64 = routers.iter().map(|r| r["rx_packets"].as_u64().unwrap()).sum();
        assert_eq!(sent, received);
        for r in routers {
            assert!(r["peak_ch0_slots"].as_u64().unwrap() <= 8 && r["peak_rx_slots"].as_u64().unwrap() <= 16);
            assert!(r["busy_pct"].as_f64().unwrap() <= 100.0);
        }
        let bound = &report["bound_by"];
        let most = routers.iter().map(|r| r["busy_us"].as_f64().unwrap()).fold(0.0, f64::max);
        assert!(bound["busy_us"].as_f64().unwrap() >= most, "{bound}");
        // Router channels' occupied slots are counter tracks of the trace.
        let slots: Vec<u64> = events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"].as_str().is_some_and(|n| n.ends_with("ch0 slots")))
            .map(|e| e["args"]["value"].as_u64().unwrap())
            .collect();
        assert!(!slots.is_empty() && slots.iter().all(|&v| v <= 8), "{slots:?}");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_galaxy_all_gather_trace_is_valid_and_shows_every_links_packets() {
        let args = [
            "op",
            "all-gather",
            "--cluster",
            "galaxy_torus",
            "--shape",
            "1,1,32,1024",
            "--stack",
            "edm",
            "--links",
            "--format",
            "json",
        ];
        let (code, out, err, path) = run_traced("galaxy", &args);
        assert_eq!(code, 0, "{err}");
        let report = json(&out);
        assert_eq!(report["chips"], 32);
        let events = check_trace(&path);
        // One process per chip.
        let procs = events.iter().filter(|e| e["ph"] == "M" && e["name"] == "process_name").count();
        assert_eq!(procs, 32);
        // Every link direction the report lists has a track holding its packets, and the
        // packets on it add up to its bytes.
        let links = report["link_use"].as_array().unwrap();
        assert!(links.len() >= 32, "a 32-chip ring uses at least 32 link directions");
        for l in links {
            let name = format!("eth{} tx → chip {} eth{}", l["from_chan"], l["to_chip"], l["to_chan"]);
            let track = events
                .iter()
                .find(|e| {
                    e["name"] == "thread_name" && e["pid"] == l["from_chip"] && e["args"]["name"] == name
                })
                .unwrap_or_else(|| panic!("no track '{name}' on chip {}", l["from_chip"]));
            let bytes: u64 = events
                .iter()
                .filter(|e| e["ph"] == "X" && e["pid"] == track["pid"] && e["tid"] == track["tid"])
                .map(|e| e["args"]["bytes"].as_u64().unwrap())
                .sum();
            assert_eq!(bytes, l["bytes"].as_u64().unwrap(), "{name}");
            // Its utilisation counter integrates to the busy time the report gives.
            let counter = format!("eth{} tx utilisation %", l["from_chan"]);
            let points: Vec<(f64, f64)> = events
                .iter()
                .filter(|e| e["ph"] == "C" && e["pid"] == l["from_chip"] && e["name"] == counter.as_str())
                .map(|e| (e["ts"].as_f64().unwrap(), e["args"]["busy"].as_f64().unwrap()))
                .collect();
            let window = points[1].0 - points[0].0;
            let busy_us: f64 = points.iter().map(|p| p.1 / 100.0 * window).sum();
            let want = l["busy_us"].as_f64().unwrap();
            assert!(
                (busy_us - want).abs() <= 1e-6 * want.max(1.0),
                "{name}: counters {busy_us} us, report {want} us"
            );
        }
        // Kernels have spans, waits say what they wait for, EDMs mark their handshakes, and the
        // link-utilisation counters stay within 0..100 %.
        assert!(events.iter().any(|e| e["cat"] == "kernel" && e["name"] == "edm"));
        let waits: Vec<&str> = events.iter().filter_map(|e| e["args"]["waits_for"].as_str()).collect();
        assert!(
            waits.iter().any(|w| w.contains("(EDM sender channel 0 semaphore) >= 1")),
            "{:?}",
            &waits[..5]
        );
        assert!(waits.iter().any(|w| w.contains("(NoC1 reads outstanding) == 0")));
        assert!(events.iter().filter(|e| e["name"] == "handshake done").count() >= 64);
        let utils: Vec<f64> =
            events.iter().filter(|e| e["ph"] == "C").map(|e| e["args"]["busy"].as_f64().unwrap()).collect();
        assert!(utils.iter().all(|&u| (0.0..=100.0 + 1e-9).contains(&u)) && utils.iter().any(|&u| u > 10.0));
        // The bottleneck is one of the links used, and the stages tile the run.
        let cp = &report["critical_path"];
        assert!(cp["bottleneck"].as_str().unwrap().starts_with("chip "), "{cp}");
        let stages = cp["stages"].as_array().unwrap();
        let names: Vec<&str> = stages.iter().map(|s| s["stage"].as_str().unwrap()).collect();
        assert_eq!(names, ["handshake", "first data", "steady state", "teardown"]);
        for w in stages.windows(2) {
            assert_eq!(w[0]["end_us"], w[1]["start_us"]);
        }
        assert!(stages[2]["duration_us"].as_f64().unwrap() > 0.0);
        // Beside the link, the busiest NoC port and DRAM bank, as shares of the op's time.
        let on_chip = &report["busiest_on_chip"];
        for kind in ["noc", "dram"] {
            let pct = on_chip[kind]["busy_pct"].as_f64().unwrap_or_else(|| panic!("{on_chip}"));
            assert!(pct > 0.0 && pct <= 100.0, "{on_chip}");
            assert!(on_chip[kind]["what"].as_str().unwrap().starts_with("chip "), "{on_chip}");
        }
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn benchmarks_trace_one_point_and_refuse_several() {
        let path = std::env::temp_dir().join(format!("meshsim-cli-{}-ring.json", std::process::id()));
        let p = path.to_str().unwrap();
        let (code, _, err) = meshsim(&["bench", "ring", "--cluster", "t3000", "--sizes", "1K", "--trace", p]);
        assert_eq!(code, 0, "{err}");
        let events = check_trace(&path);
        // Eight hops: both directions of eight links handshake, and the eight forward ones carry
        // the 1 KiB payload.
        let tracks = events
            .iter()
            .filter(|e| e["name"] == "thread_name" && e["args"]["name"].as_str().unwrap().contains(" tx → "))
            .count();
        assert_eq!(tracks, 16);
        let mut payload_tracks: Vec<(u64, u64)> = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["args"]["bytes"].as_u64().unwrap() >= 1024)
            .map(|e| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
            .collect();
        payload_tracks.sort();
        payload_tracks.dedup();
        assert_eq!(payload_tracks.len(), 8);
        let (code, _, err) = meshsim(&["bench", "latency", "--sizes", "16,32", "--trace", p]);
        assert_eq!(code, 2);
        assert!(err.contains("exactly one --sizes value"), "{err}");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn unwritable_outputs_are_refused_before_anything_runs() {
        let cases: [&[&str]; 4] = [
            &["op", "all-gather", "--shape", "1,1,64,1024", "--trace", "/nonexistent-dir/t.json"],
            &["bench", "latency", "--sizes", "16", "--trace", "/nonexistent-dir/t.json"],
            &["bench", "latency", "--plot", "out.txt"],
            &["sweep", "all-gather", "--plot", "/nonexistent-dir/s.svg"],
        ];
        for args in cases {
            let (code, out, err) = meshsim(args);
            assert_eq!(code, 2, "{args:?}: {err}");
            assert!(out.is_empty(), "{args:?} ran before refusing: {out}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }

    #[test]
    fn ops_check_their_own_determinism() {
        let (code, _, err) = meshsim(&[
            "op",
            "reduce-scatter",
            "--cluster",
            "t3000",
            "--shape",
            "1,1,64,2048",
            "--check-determinism",
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("deterministic: two runs gave"), "{err}");
    }
}

mod regress {
    use super::*;

    const SUITE: &str = "\
scenarios:
  - name: ping
    op: latency
    cluster: n300
    size: 512
  - name: gather
    op: all-gather
    cluster: t3000
    shape: [1, 1, 64, 1024]
    dtype: bfp8
  - name: loose
    op: bandwidth
    cluster: n300
    size: 4K
    tolerance_pct: 50
";

    #[test]
    fn a_model_change_fails_the_gate_naming_what_moved_and_update_accepts_it() {
        let suite = file("regress/suite.yaml", b"");
        std::fs::write(&suite, SUITE).unwrap();
        let baseline = suite.with_extension("baseline");
        let _ = std::fs::remove_file(&baseline);
        let s = suite.to_str().unwrap();
        // No baseline yet: every scenario is new, which fails.
        let (code, out, _) = meshsim(&["regress", "--suite", s]);
        assert_eq!(code, 1);
        assert_eq!(out.matches(" new").count(), 3, "{out}");
        // --update writes it; then the gate passes.
        let (code, _, err) = meshsim(&["regress", "--suite", s, "--update"]);
        assert_eq!(code, 0, "{err}");
        let text = std::fs::read_to_string(&baseline).unwrap();
        assert_eq!(text.lines().filter(|l| !l.starts_with('#')).count(), 3, "{text}");
        let (code, out, err) = meshsim(&["regress", "--suite", s, "--check-determinism"]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(err.contains("deterministic"), "{err}");
        // A slower link moves the exact scenarios; the loose one stays within its 50 %.
        let params = file("regress/slow.yaml", b"");
        let yaml = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/configs/wormhole_b0.yaml"))
            .unwrap()
            .replace("eth_link_latency_ns: 318", "eth_link_latency_ns: 400");
        std::fs::write(&params, yaml).unwrap();
        let (code, out, err) = meshsim(&["regress", "--suite", s, "--params", params.to_str().unwrap()]);
        assert_eq!(code, 1, "{out}{err}");
        let status = |name: &str| {
            out.lines()
                .find(|l| l.split_whitespace().nth(1) == Some(name))
                .unwrap()
                .split_whitespace()
                .last()
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            (status("ping").as_str(), status("gather").as_str(), status("loose").as_str()),
            ("moved", "moved", "ok")
        );
        assert!(err.contains("suite/ping, suite/gather"), "{err}");
        // A baseline entry without a scenario is reported, not ignored.
        std::fs::write(
            &suite,
            SUITE.replace("  - name: ping\n    op: latency\n    cluster: n300\n    size: 512\n", ""),
        )
        .unwrap();
        let (code, out, _) = meshsim(&["regress", "--suite", s]);
        assert_eq!(code, 1);
        assert!(out.lines().any(|l| l.contains("ping") && l.ends_with("missing")), "{out}");
        let (code, _, _) = meshsim(&["regress", "--suite", s, "--update"]);
        assert_eq!(code, 0);
        let (code, _, _) = meshsim(&["regress", "--suite", s]);
        assert_eq!(code, 0);
    }

    #[test]
    fn bad_suites_name_the_file_and_the_scenario() {
        let cases: [(&str, &str); 5] = [
            (
                "scenarios:\n  - {name: g, op: all-gather, cluster: t3000, shape: [1, 1, 32, 256], redop: max}\n",
                "scenario 'g': 'redop' does not apply to all-gather",
            ),
            (
                "scenarios:\n  - name: a\n    op: latency\n    cluster: n300\n    size: 16\n    hops: 4\n",
                "scenario 'a': 'hops' does not apply to latency",
            ),
            (
                "scenarios:\n  - name: a\n    op: all-gather\n    cluster: t3000\n    shape: [1, 1, 32]\n",
                "scenario 'a': shape needs 4 values",
            ),
            ("scenarios:\n  - name: a\n    op: teleport\n    cluster: n300\n", "unknown variant `teleport`"),
            (
                "scenarios:\n  - {name: a, op: latency, cluster: n300, size: 16}\n  - {name: a, op: latency, cluster: n300, size: 32}\n",
                "scenario 'a' is listed twice",
            ),
        ];
        for (i, (yaml, want)) in cases.iter().enumerate() {
            let path = file(&format!("bad-suite-{i}.yaml"), yaml.as_bytes());
            let (code, _, err) = meshsim(&["regress", "--suite", path.to_str().unwrap()]);
            assert_eq!(code, 2, "{yaml}: {err}");
            assert!(err.contains(want) && err.contains("bad-suite"), "{want:?} not in {err:?}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
        let (code, _, err) = meshsim(&["regress", "--suite", "/nonexistent/suite"]);
        assert_eq!(code, 2);
        assert!(err.contains("no such suite"), "{err}");
    }

    #[test]
    fn one_scenario_can_be_run_alone_and_traced() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/regress");
        let path = std::env::temp_dir().join(format!("meshsim-cli-{}-regress.json", std::process::id()));
        let p = path.to_str().unwrap();
        let (code, out, err) =
            meshsim(&["regress", "--suite", dir, "--scenario", "t3000-ring-8hops-16B", "--trace", p]);
        assert_eq!(code, 0, "{out}{err}");
        assert_eq!(out.lines().count(), 2, "header and the one scenario: {out}");
        assert!(check_trace(&path).iter().any(|e| e["cat"] == "packet"));
        std::fs::remove_file(&path).unwrap();
        let (code, _, err) = meshsim(&["regress", "--suite", dir, "--trace", p]);
        assert_eq!(code, 2, "--trace needs --scenario: {err}");
        let (code, _, err) = meshsim(&["regress", "--suite", dir, "--scenario", "nope"]);
        assert_eq!(code, 2);
        assert!(err.contains("no scenario named 'nope'"), "{err}");
    }

    #[test]
    fn the_projects_own_suite_passes_on_a_clean_checkout() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/regress");
        let (code, out, err) = meshsim(&["regress", "--suite", dir]);
        assert_eq!(code, 0, "{out}{err}");
        for system in ["n300", "t3000", "galaxy"] {
            assert!(
                out.contains(&format!("{system}-ag")) && out.contains(&format!("{system}-rs")),
                "{system}"
            );
        }
        assert!(out.contains("latency") && out.contains("bandwidth") && out.contains("ring"));
    }

    /// The engine's shortcuts are exact: every scenario of the project's own suites gives the
    /// same times, per-chip times, link use and busiest resources with and without them, and
    /// they fire on the large ones.
    #[test]
    fn every_regression_scenario_is_the_same_without_the_shortcuts() {
        let (code, _, err) = meshsim(&["regress", "--check-shortcuts"]);
        assert_eq!(code, 0, "{err}");
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("meshsim: shortcuts ")).collect();
        assert!(lines.len() >= 60, "{err}");
        let (mut large, mut saved, mut all) = (0, 0, 0);
        for l in &lines {
            assert!(l.contains(": same"), "{l}");
            let num = |key: &str| -> u64 {
                let at = l.find(key).unwrap_or_else(|| panic!("{l}"));
                let digits = l[..at].trim_end().rsplit(' ').next().unwrap();
                digits.parse().unwrap()
            };
            let (exact, elided) = (num(" exact"), num(" elided"));
            if exact > 100_000 {
                large += 1;
                assert!(elided > 0, "the shortcuts never fired: {l}");
                (saved, all) = (saved + elided, all + exact);
            }
        }
        assert!(large >= 5, "{err}");
        assert!(saved * 5 > all, "the shortcuts saved only {saved} of {all} events on the large scenarios");
    }
}

mod collectives {
    use super::*;

    #[test]
    fn every_collective_runs_from_the_cli_with_its_root_and_nccl_tests_factor() {
        // (op, extra args, busbw / algbw on 8 chips)
        let cases: [(&str, &[&str], f64); 9] = [
            ("broadcast", &["--root", "3"], 1.0),
            ("reduce", &["--root", "7", "--redop", "prod"], 1.0),
            ("gather", &["--root", "1"], 0.875),
            ("scatter", &["--root", "2"], 0.875),
            ("combine", &["--root", "4", "--redop", "min"], 1.0),
            ("all-combine", &["--redop", "max"], 1.75),
            ("all-gather", &["--exclude-myself"], 0.875),
            ("all-to-all", &[], 0.875),
            ("reduce-scatter", &["--redop", "min"], 0.875),
        ];
        for stack in ["fabric", "edm"] {
            for (op, extra, factor) in cases {
                if op == "all-to-all" && stack == "edm" {
                    continue;
                }
                let mut args = vec![
                    "op",
                    op,
                    "--shape",
                    "1,1,64,1024",
                    "--verify",
                    "--format",
                    "json",
                    "--stack",
                    stack,
                ];
                args.extend_from_slice(extra);
                let (code, out, err) = meshsim(&args);
                assert_eq!(code, 0, "{op} {stack}: {err}");
                let v = json(&out);
                assert_eq!(v["verified"], true, "{op} {stack}");
                let root =
                    extra.iter().position(|&a| a == "--root").map(|i| extra[i + 1].parse::<u64>().unwrap());
                assert_eq!(v["root"], serde_json::json!(root), "{op} {stack}");
                let (algbw, busbw) = (v["algbw_gbps"].as_f64().unwrap(), v["busbw_gbps"].as_f64().unwrap());
                assert!((busbw / algbw - factor).abs() < 1e-9, "{op} {stack}: {busbw} / {algbw}");
            }
        }
        let (code, out, err) = meshsim(&[
            "op",
            "send-recv",
            "--chip-ids",
            "4,0",
            "--shape",
            "1,1,64,1024",
            "--verify",
            "--format",
            "json",
        ]);
        assert_eq!(code, 0, "{err}");
        let v = json(&out);
        assert_eq!((v["op"].as_str(), v["chip_ids"].clone()), (Some("send_recv"), serde_json::json!([4, 0])));
        assert_eq!(v["verified"], true);
    }

    /// nccl-tests' in-place all-gather: the op verifies, saves the local copy, and a sweep
    /// fills the in-place columns with it.
    #[test]
    fn in_place_all_gather_verifies_and_fills_the_sweeps_in_place_columns() {
        for stack in ["fabric", "edm"] {
            let time = |extra: &[&str]| {
                let mut args = vec![
                    "op",
                    "all-gather",
                    "--shape",
                    "1,1,256,4096",
                    "--verify",
                    "--format",
                    "json",
                    "--stack",
                    stack,
                ];
                args.extend_from_slice(extra);
                let (code, out, err) = meshsim(&args);
                assert_eq!(code, 0, "{err}");
                let v = json(&out);
                assert_eq!(v["verified"], true);
                v["time_us"].as_f64().unwrap()
            };
            let (out_of_place, in_place) = (time(&[]), time(&["--in-place"]));
            assert!(in_place < out_of_place, "{stack}: in place {in_place} vs {out_of_place}");
        }
        let (code, out, err) =
            meshsim(&["sweep", "all-gather", "-b", "64K", "-e", "256K", "-f", "4", "--in-place"]);
        assert_eq!(code, 0, "{err}");
        for row in out.lines().filter(|l| !l.starts_with('#')) {
            let cols: Vec<&str> = row.split_whitespace().collect();
            assert_eq!(cols.len(), 13, "{row}");
            assert!(cols[9].parse::<f64>().is_ok() && cols[12] == "N/A", "{row}");
        }
        let (code, _, err) = meshsim(&["sweep", "reduce-scatter", "--in-place"]);
        assert_eq!((code, err.trim()), (2, "meshsim: --in-place applies to all_gather, not reduce_scatter"));
    }

    #[test]
    fn sweeps_of_rooted_collectives_print_their_root_and_refuse_it_elsewhere() {
        let (code, out, err) =
            meshsim(&["sweep", "scatter", "--root", "5", "-b", "64K", "-e", "256K", "-f", "4"]);
        assert_eq!(code, 0, "{err}");
        assert!(out.starts_with("# meshsim scatter on t3000 (8 chips, ring)"), "{out}");
        let rows: Vec<&str> = out.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).collect();
        assert_eq!(rows.len(), 2, "{out}");
        assert!(rows.iter().all(|r| r.split_whitespace().nth(4) == Some("5")), "{out}");
        let bad: [(&[&str], &str); 4] = [
            (
                &["sweep", "all-gather", "--root", "1"],
                "meshsim: --root applies to rooted ops (broadcast, reduce, gather, scatter, combine), not all_gather",
            ),
            (&["sweep", "gather", "--redop", "max"], "meshsim: --redop applies to reducing ops, not gather"),
            (
                &["op", "broadcast", "--shape", "1,1,64,1024", "--root", "8"],
                "meshsim: root 8 is not a rank of the 8-chip communicator (0..7)",
            ),
            (
                &["op", "send-recv", "--shape", "1,1,64,1024"],
                "meshsim: a send-recv runs on 2 chips (the sender, then the receiver), got 8",
            ),
        ];
        for (args, want) in bad {
            let (code, out, err) = meshsim(args);
            assert_eq!((code, out.as_str(), err.trim()), (2, "", want), "{args:?}");
        }
        let (code, _, err) = meshsim(&["op", "all-gather", "--shape", "1,1,64,1024", "--root", "1"]);
        assert_eq!((code, err.trim()), (2, "meshsim: 'root' does not apply to all-gather"));
    }

    #[test]
    fn all_reduce_verifies_and_reports_nccl_tests_busbw() {
        let (code, out, err) = meshsim(&[
            "op",
            "all-reduce",
            "--cluster",
            "t3000",
            "--shape",
            "1,1,64,1024",
            "--verify",
            "--format",
            "json",
        ]);
        assert_eq!(code, 0, "{err}");
        let v = json(&out);
        assert_eq!(v["op"], "all_reduce");
        assert_eq!(v["verified"], true);
        assert_eq!(v["redop"], "sum");
        let (algbw, busbw) = (v["algbw_gbps"].as_f64().unwrap(), v["busbw_gbps"].as_f64().unwrap());
        assert!((busbw / algbw - 1.75).abs() < 1e-9, "2(n-1)/n for 8 chips");
        // --bidir belongs to the all-gathers (an all-reduce's second phase), not reduce-scatter.
        let (code, _, err) = meshsim(&["op", "reduce-scatter", "--shape", "1,1,64,1024", "--bidir", "split"]);
        assert_eq!(
            (code, err.trim()),
            (2, "meshsim: --bidir applies to all-gather, all-reduce and broadcast, not reduce-scatter")
        );
    }

    #[test]
    fn axis_runs_every_row_or_column_at_once() {
        let (code, out, err) = meshsim(&[
            "op",
            "all-gather",
            "--cluster",
            "galaxy",
            "--axis",
            "1",
            "--shape",
            "1,1,32,4096",
            "--verify",
            "--format",
            "json",
        ]);
        assert_eq!(code, 0, "{err}");
        let v = json(&out);
        let ops = v["ops"].as_array().unwrap();
        assert_eq!(ops.len(), 4, "one all-gather per row");
        assert!(ops.iter().all(|o| o["chips"] == 8 && o["verified"] == true));
        let makespan = ops.iter().map(|o| o["end_us"].as_f64().unwrap()).fold(0.0, f64::max);
        assert_eq!(v["time_us"].as_f64().unwrap(), makespan);
        // Every chip appears once across the rows.
        let mut all: Vec<u64> = ops
            .iter()
            .flat_map(|o| o["chip_ids"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()))
            .collect();
        all.sort();
        assert_eq!(all, (0..32).collect::<Vec<_>>());
        // Columns of the T3000 are lines of 2; a ring over a mesh row does not close.
        let (code, out, _) = meshsim(&[
            "op",
            "all-reduce",
            "--cluster",
            "t3000",
            "--axis",
            "0",
            "--shape",
            "1,1,64,512",
            "--verify",
        ]);
        assert_eq!(code, 0);
        assert_eq!(out.lines().filter(|l| l.starts_with("all-reduce[")).count(), 4, "{out}");
        let (code, _, err) = meshsim(&[
            "op",
            "all-gather",
            "--cluster",
            "t3000",
            "--axis",
            "1",
            "--topology",
            "ring",
            "--shape",
            "1,1,32,512",
        ]);
        assert_eq!(code, 2);
        assert!(err.contains("cannot form a ring") && err.lines().count() == 1, "{err}");
        let (code, _, err) =
            meshsim(&["op", "all-gather", "--cluster", "n300", "--axis", "0", "--shape", "1,1,32,512"]);
        assert_eq!(code, 2);
        assert!(err.contains("is not a mesh or torus"), "{err}");
    }

    const WORKLOAD: &str = "cluster: galaxy
stack: edm
ops:
  - name: ag_rows
    op: all-gather
    comm: {axis: 1}
    shape: [1, 1, 32, 8192]
    dtype: bfp8
  - name: rs_cols
    op: reduce-scatter
    comm: {axis: 0}
    shape: [1, 1, 32, 4096]
    after: [ag_rows]
  - name: ar_pair
    op: all-reduce
    comm: {chips: [0, 1], topology: line}
    shape: [1, 1, 32, 1024]
    redop: max
";

    #[test]
    fn a_workload_runs_its_ops_in_dependency_order_and_verifies() {
        let path = file("workload.yaml", WORKLOAD.as_bytes());
        let (code, out, err) = meshsim(&["run", path.to_str().unwrap(), "--verify", "--format", "json"]);
        assert_eq!(code, 0, "{err}");
        let v = json(&out);
        assert_eq!(v["cluster"], "galaxy");
        let ops = v["ops"].as_array().unwrap();
        assert_eq!(ops.len(), 4 + 8 + 1);
        assert!(ops.iter().all(|o| o["verified"] == true));
        let end_of = |prefix: &str| {
            ops.iter()
                .filter(|o| o["name"].as_str().unwrap().starts_with(prefix))
                .map(|o| o["end_us"].as_f64().unwrap())
                .fold(0.0, f64::max)
        };
        let rows_end = end_of("ag_rows[");
        for o in ops.iter().filter(|o| o["name"].as_str().unwrap().starts_with("rs_cols[")) {
            assert!(
                o["start_us"].as_f64().unwrap() >= rows_end,
                "{o} starts before the rows end at {rows_end}"
            );
        }
        // The independent all-reduce runs from the start, beside the rows.
        let pair = ops.iter().find(|o| o["name"] == "ar_pair").unwrap();
        assert_eq!(pair["start_us"], 0.0);
        assert_eq!(pair["chip_ids"], serde_json::json!([0, 1]));
        assert_eq!(v["makespan_us"].as_f64().unwrap(), end_of(""));
        let (code, out, _) = meshsim(&["run", path.to_str().unwrap()]);
        assert_eq!(code, 0);
        assert!(out.starts_with("name ") && out.contains("\nmakespan_us "), "{out}");
    }

    #[test]
    fn workload_streams_run_in_order_rooted_ops_verify_and_limits_hold() {
        let text = "cluster: t3000
limits: {max_message_bytes: 1048576, max_calls: 4}
ops:
  - name: bcast
    op: broadcast
    comm: {all: true, topology: ring}
    root: 2
    shape: [1, 1, 64, 2048]
    stream: s0
  - name: gather
    op: gather
    comm: {all: true, topology: ring}
    root: 5
    shape: [1, 1, 64, 2048]
    stream: s1
  - name: reduce
    op: reduce
    comm: {all: true, topology: ring}
    root: 1
    redop: min
    shape: [1, 1, 64, 2048]
    stream: s0
";
        let path = file("streams.yaml", text.as_bytes());
        let (code, out, err) = meshsim(&["run", path.to_str().unwrap(), "--verify", "--format", "json"]);
        assert_eq!(code, 0, "{err}");
        let v = json(&out);
        let op =
            |name: &str| v["ops"].as_array().unwrap().iter().find(|o| o["name"] == name).unwrap().clone();
        let t = |name: &str, key: &str| op(name)[key].as_f64().unwrap();
        assert!(v["ops"].as_array().unwrap().iter().all(|o| o["verified"] == true));
        // s0 runs in order; s1 runs beside it.
        assert!(t("reduce", "start_us") >= t("bcast", "end_us"));
        assert!(t("gather", "start_us") < t("bcast", "end_us"));
        let big = text
            .replace("shape: [1, 1, 64, 2048]\n    stream: s1", "shape: [1, 1, 256, 4096]\n    stream: s1");
        let path = file("streams-big.yaml", big.as_bytes());
        let (code, _, err) = meshsim(&["run", path.to_str().unwrap()]);
        assert_eq!(code, 2);
        assert!(
            err.contains("op 'gather': its 2097152 B message exceeds the collective context's 1048576 B"),
            "{err}"
        );
        let cyclic = text.replace("    root: 2\n", "    root: 2\n    after: [reduce]\n");
        let path = file("streams-cyclic.yaml", cyclic.as_bytes());
        let (code, _, err) = meshsim(&["run", path.to_str().unwrap()]);
        assert_eq!(code, 2);
        assert!(err.contains("ops bcast, reduce wait for each other"), "{err}");
    }

    #[test]
    fn bad_workloads_are_one_line_naming_the_op() {
        let cases = [
            (
                WORKLOAD.replace("    after: [ag_rows]", "    after: [nope]"),
                "op 'rs_cols': after names 'nope'",
            ),
            (
                WORKLOAD.replace("    dtype: bfp8", "    dtype: bfp8\n    after: [rs_cols]"),
                "ops ag_rows, rs_cols wait for each other",
            ),
            (WORKLOAD.replace("    dtype: bfp8", "    dtipe: bfp8"), "unknown field `dtipe`"),
            (
                WORKLOAD.replace(
                    "comm: {chips: [0, 1], topology: line}",
                    "comm: {chips: [0, 9], topology: line}",
                ),
                "op 'ar_pair': chips [0, 9] cannot form a line",
            ),
            (
                WORKLOAD.replace("redop: max", "redop: max\n    workers: 4\n    num_links: 4"),
                "op 'ag_rows[0]': no EDM channel is free on the link chip 0 eth0 - chip 1 eth8",
            ),
            (WORKLOAD.replace("op: all-gather", "op: all-gathr"), "ops[0]: unknown op 'all-gathr'"),
            (WORKLOAD.replace("op: all-gather", "op: latency"), "ops[0]: unknown op 'latency'"),
            (WORKLOAD.replace("redop: max", "redop: max\n    root: 1"), "root does not apply to all-reduce"),
        ];
        for (i, (text, want)) in cases.iter().enumerate() {
            let path = file(&format!("bad-workload-{i}.yaml"), text.as_bytes());
            let (code, out, err) = meshsim(&["run", path.to_str().unwrap()]);
            assert_eq!(code, 2, "case {i}: {err}");
            assert!(out.is_empty());
            assert_eq!(err.lines().count(), 1, "case {i}: {err}");
            assert!(err.contains(want), "case {i}: {err}");
        }
    }
}

/// Every reproducer of the robustness issue: each fails on the main before it and passes now.
mod robustness {
    use super::*;
    use std::process::Stdio;

    use super::robustness_bad as bad;

    #[test]
    fn argument_errors_are_one_line_naming_the_command() {
        let err = bad(&["op", "all-gather", "--shape", "1,1,32,256", "--dim", "-1"]);
        assert!(err.contains("'-1' for '--dim"), "{err}");
        assert!(err.contains("meshsim op --help"), "{err}");
        assert!(bad(&["op", "all-gather", "--bogus"]).contains("'--bogus'"));
        assert!(bad(&["op", "all-gather"]).contains("--shape"));
        assert!(
            bad(&["op", "all-gather", "--shape", "1,1,32,32", "--topology", "star"]).contains("ring, line")
        );
        assert!(bad(&[]).contains("needs a command: params, calibrate, bench"));
        assert!(bad(&["bench"]).contains("`meshsim bench` needs a command: latency"));
        let (code, out, _) = meshsim(&["op", "all-gather", "--help"]);
        assert_eq!(code, 0);
        assert!(out.contains("Usage: meshsim op <OP> --shape"), "{out}");
    }

    #[test]
    fn a_closed_pipe_ends_quietly_and_a_full_disk_in_one_line() {
        // The reading end is closed before meshsim starts, so its first write meets a closed
        // pipe whatever the timing.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_meshsim"))
            .args(["topo", "galaxy_torus", "--format", "json"])
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
        let full = std::fs::File::create("/dev/full").unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_meshsim"))
            .args(["topo", "t3000"])
            .stdout(full)
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("cannot write the output") && err.contains("No space left"), "{err}");
    }

    #[test]
    fn numbers_that_overflow_are_refused_not_wrapped() {
        for skew in ["18446744073709551615", "3000000000000000"] {
            let err = bad(&["op", "all-gather", "--shape", "1,1,32,256", "--skew-ns", skew]);
            assert!(err.contains("start skew") && err.contains("3600 s"), "{err}");
        }
        let err = bad(&["bench", "ring", "--skew-ns", "18446744073709551615"]);
        assert!(err.contains("start skew"), "{err}");
        let err = bad(&["op", "all-gather", "--shape", "4294967296,4294967296,32,256"]);
        assert!(err.contains("1 TiB"), "{err}");
        assert!(
            bad(&["op", "all-gather", "--shape", "1,1,32,256", "--pages-per-packet", "0", "--stack", "edm"])
                .contains("at least 1")
        );
        // Counts that would run for hours (found by the fuzzing harness in a suite).
        assert!(bad(&["bench", "latency", "--samples", "4294967296"]).contains("more than the 1000000"));
        assert!(bad(&["bench", "ring", "--hops", "100000"]).contains("more than the 4096"));
    }

    #[test]
    fn cluster_files_that_cannot_be_are_refused_by_name() {
        let n300 =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/cluster_descriptions/n300.yaml"))
                .unwrap();
        let path = |name: &str, text: &str| file(name, text.as_bytes()).to_str().unwrap().to_owned();
        let selfie = n300.replace("{chip: 1, chan: 1}]", "{chip: 0, chan: 3}]");
        let err = bad(&["topo", &path("self-link.yaml", &selfie)]);
        assert!(err.contains("ethernet_connections[1]") && err.contains("same chip"), "{err}");
        let dup = n300.replace("arch: {0: wormhole_b0,", "arch: {0: wormhole_b0, 0: wormhole_b0,");
        assert!(bad(&["topo", &path("dup-arch.yaml", &dup)]).contains("arch: chip 0 appears twice"));
        let bh = n300.replace("arch: {0: wormhole_b0", "arch: {0: blackhole");
        assert!(bad(&["topo", &path("bh.yaml", &bh)]).contains("arch[0]: blackhole chips are not modelled"));
        let err = bad(&["topo", &path("comments.yaml", "# only\n# comments\n")]);
        assert!(err.contains("only comments"), "{err}");
        let err = bad(&["topo", &path("string.yaml", "\"hello\"\n")]);
        assert!(!err.contains("Raw") && err.contains("expected a cluster description"), "{err}");
        let err = bad(&[
            "topo",
            &path("chan.yaml", "arch: {0: wormhole_b0}\nethernet_connections: [[{chip: 0, chan: x}]]\n"),
        ]);
        assert!(!err.contains("i64") && err.contains("expected a whole number"), "{err}");
        let err = bad(&["topo", "/dev/zero"]);
        assert!(err.contains("larger than the 4 MiB"), "{err}");
        // A byte-order mark is not a second document.
        let (code, out, err) = meshsim(&["topo", &path("bom.yaml", &format!("\u{feff}{n300}"))]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("chips     2"));
    }

    #[test]
    fn knobs_that_do_not_apply_are_refused() {
        assert!(bad(&["op", "all-gather", "--shape", "1,1,32,256", "--redop", "max"]).contains("redop"));
        assert!(
            bad(&["sweep", "all-gather", "--redop", "max", "-b", "16K", "-e", "16K"]).contains("--redop")
        );
        assert!(
            bad(&["op", "reduce-scatter", "--shape", "1,1,32,256", "--bidir", "full"]).contains("--bidir")
        );
    }

    #[test]
    fn the_ring_ping_needs_a_link_per_hop_and_topo_says_so() {
        let err = bad(&["bench", "ring", "--cluster", "n300", "--hops", "2"]);
        assert!(err.contains("no ring of 2 hops with a usable link of its own per hop"), "{err}");
        let (code, out, _) = meshsim(&["topo", "n300"]);
        assert_eq!(code, 0);
        assert!(out.contains("ring      0 1   (both directions of one link: collectives only"), "{out}");
        // Collectives do run on that ring.
        let (code, _, err) = meshsim(&[
            "op",
            "all-gather",
            "--cluster",
            "n300",
            "--topology",
            "ring",
            "--shape",
            "1,1,64,64",
            "--verify",
        ]);
        assert_eq!(code, 0, "{err}");
    }

    #[test]
    fn regress_refuses_an_empty_suite_and_finds_its_suites_from_anywhere() {
        let empty = file("suites/empty.yaml", b"scenarios: []\n");
        assert!(bad(&["regress", "--suite", empty.to_str().unwrap()]).contains("the suite has no scenarios"));
        // From a directory outside the checkout (the tests run in the temporary directory).
        let (code, out, err) = meshsim(&["regress", "--scenario", "n300-ag-line-bf16"]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("n300-ag-line-bf16") && out.contains(" ok"), "{out}");
    }

    #[test]
    fn sweeps_say_which_sizes_ran_and_check_the_plot_before_running() {
        let (code, out, err) = meshsim(&["sweep", "all-gather", "-b", "1K", "-e", "16K"]);
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains("# sizes run (B): 1024-8192 as 8704, 16384 as 17408 (whole bfp8 tiles of 1088 B"),
            "{out}"
        );
        let sizes: Vec<&str> =
            out.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split_whitespace().next()).collect();
        assert_eq!(sizes, ["8704", "17408"]);
        let started = std::time::Instant::now();
        let err = bad(&["sweep", "all-gather", "-b", "16K", "-e", "256M", "--plot", "/proc/meshsim.svg"]);
        assert!(err.contains("/proc/meshsim.svg: cannot write"), "{err}");
        // Refused before the 256 MiB point ran (which takes seconds).
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let err = bad(&["op", "all-gather", "--shape", "1,1,32,256", "--trace", "/proc/meshsim.json"]);
        assert!(err.contains("cannot write the trace"), "{err}");
    }

    #[test]
    fn the_readme_knob_lists_run_with_their_defaults() {
        for args in [
            [
                "sweep",
                "all-gather",
                "--cluster",
                "galaxy_torus",
                "--num-links",
                "1,2",
                "-b",
                "16K",
                "-e",
                "16K",
            ],
            ["sweep", "reduce-scatter", "--workers", "1,2,4", "-b", "16K", "-e", "16K", "--format", "csv"],
        ] {
            let (code, _, err) = meshsim(&args);
            assert_eq!(code, 0, "{args:?}: {err}");
        }
        // The other examples that failed with their defaults.
        for args in [&["bench", "bandwidth", "--bidir"][..], &["bench", "ring", "--sizes", "16"]] {
            let (code, _, err) = meshsim(args);
            assert_eq!(code, 0, "{args:?}: {err}");
        }
    }
}

/// Sweeps that survive: points written as they finish, resumed, sharded and merged, and
/// stopped by Ctrl-C with what finished printed.
mod sweeps_that_survive {
    use super::*;

    const SWEEP: [&str; 10] =
        ["sweep", "all-gather", "-b", "16K", "-e", "4M", "-f", "4", "--dtype", "bf16,bfp8"];

    fn with(extra: &[&str]) -> (i32, String, String) {
        let args: Vec<&str> = SWEEP.iter().copied().chain(extra.iter().copied()).collect();
        meshsim(&args)
    }

    fn path(name: &str) -> String {
        let p = file(name, b"");
        std::fs::remove_file(&p).unwrap();
        p.to_str().unwrap().to_owned()
    }

    #[test]
    fn an_interrupted_sweep_resumed_and_a_sharded_sweep_merged_give_the_whole_table() {
        let (code, whole, err) = with(&[]);
        assert_eq!(code, 0, "{err}");
        let points = whole.lines().filter(|l| !l.starts_with('#')).count();
        assert_eq!(points, 10, "{whole}");
        // Every point is a line of --out, and --out does not change the table.
        let out = path("whole.jsonl");
        let (code, table, _) = with(&["--out", &out]);
        assert_eq!((code, table.as_str()), (0, whole.as_str()));
        let lines: Vec<String> = std::fs::read_to_string(&out).unwrap().lines().map(str::to_owned).collect();
        assert_eq!(lines.len(), points);
        let first = json(&lines[0]);
        for key in ["series", "cluster", "chips", "num_links", "workers", "size_bytes", "type", "busbw_gbps"]
        {
            assert!(first.get(key).is_some(), "{key} in {first}");
        }
        // Interrupted after 3 points, the last line cut mid-write: --resume runs the other 7.
        let cut = path("cut.jsonl");
        std::fs::write(&cut, format!("{}\n{}\n{}\n{}", lines[0], lines[1], lines[2], &lines[3][..20]))
            .unwrap();
        let (code, table, err) = with(&["--resume", &cut]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(table, whole);
        let resumed = std::fs::read_to_string(&cut).unwrap();
        assert_eq!(resumed.lines().filter(|l| l.starts_with('{') && l.ends_with('}')).count(), points);
        // A --resume file that does not exist yet: every point runs and goes to it.
        let fresh = path("fresh.jsonl");
        let (code, table, _) = with(&["--resume", &fresh]);
        assert_eq!((code, table.as_str()), (0, whole.as_str()));
        assert_eq!(std::fs::read_to_string(&fresh).unwrap().lines().count(), points);
        // Three shards, merged.
        let shards: Vec<String> = (0..3).map(|i| path(&format!("shard{i}.jsonl"))).collect();
        let mut ran = 0;
        for (i, s) in shards.iter().enumerate() {
            let (code, table, err) = with(&["--shard", &format!("{i}/3"), "--out", s]);
            assert_eq!(code, 0, "{err}");
            ran += table.lines().filter(|l| !l.starts_with('#')).count();
        }
        assert_eq!(ran, points, "each point runs in exactly one shard");
        let mut merge = vec!["merge"];
        merge.extend(shards.iter().map(String::as_str));
        merge.push(&out); // a point listed twice counts once
        let (code, merged, err) = meshsim(&merge);
        assert_eq!(code, 0, "{err}");
        assert_eq!(merged, whole);
        // Points of another sweep are refused, by file.
        let err = super::robustness_bad(&["sweep", "all-gather", "-b", "16K", "-e", "1M", "--resume", &out]);
        assert!(err.contains("of another sweep"), "{err}");
        assert!(super::robustness_bad(&["sweep", "all-gather", "--shard", "3/3"]).contains("0 to N-1"));
    }

    #[test]
    fn ctrl_c_keeps_and_prints_the_points_that_finished() {
        let out = path("interrupted.jsonl");
        let child = Command::new(env!("CARGO_BIN_EXE_meshsim"))
            .args(["sweep", "all-gather", "-b", "16K", "-e", "64M", "--out", &out])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Once the first point is in the file, press Ctrl-C.
        let started = std::time::Instant::now();
        while std::fs::read_to_string(&out).map_or(0, |s| s.lines().count()) == 0 {
            assert!(started.elapsed().as_secs() < 120, "no point finished");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let sent = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
        assert!(sent.success());
        let done = child.wait_with_output().unwrap();
        let (stdout, stderr) =
            (String::from_utf8(done.stdout).unwrap(), String::from_utf8(done.stderr).unwrap());
        assert_eq!(done.status.code(), Some(130), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("interrupted") && stderr.contains(&format!("--resume {out}")), "{stderr}");
        let rows = stdout.lines().filter(|l| !l.starts_with('#')).count();
        let saved = std::fs::read_to_string(&out).unwrap().lines().count();
        assert_eq!(rows, saved, "the table shows what the file keeps");
        // The largest points run first: the small ones never started.
        assert!(rows < 13, "not every point ran: {rows}");
    }
}

/// Runs meshsim with `args` and asserts bad input: exit 2, nothing on stdout, exactly one line
/// on stderr, starting `meshsim: ` and without a panic; returns that line.
fn robustness_bad(args: &[&str]) -> String {
    let (code, out, err) = meshsim(args);
    assert_eq!(code, 2, "{args:?}: {err}");
    assert!(out.is_empty(), "{args:?}: {out}");
    assert_eq!(err.lines().count(), 1, "{args:?}: one line, got {err:?}");
    assert!(err.starts_with("meshsim: "), "{err}");
    assert!(!err.contains("panicked") && !err.contains("internal error"), "{err}");
    err
}

/// Faults injected into op, sweep and run: each kind on both stacks.
mod faults {
    use super::*;

    /// The op's time and chip 3's (start, end), µs, of a 2 MiB T3000 ring all-gather.
    fn ag(stack: &str, faults: &[&str]) -> (f64, (f64, f64)) {
        let mut args =
            vec!["op", "all-gather", "--shape", "1,1,256,4096", "--format", "json", "--stack", stack];
        for f in faults {
            args.extend(["--fault", f]);
        }
        let (code, out, err) = meshsim(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        let v = json(&out);
        let chip3 = v["per_chip"].as_array().unwrap().iter().find(|c| c["chip"] == 3).unwrap().clone();
        (
            v["time_us"].as_f64().unwrap(),
            (chip3["start_us"].as_f64().unwrap(), chip3["end_us"].as_f64().unwrap()),
        )
    }

    #[test]
    fn degraded_and_flapping_links_stalled_eriscs_and_stragglers_make_the_op_later_on_both_stacks() {
        for stack in ["fabric", "edm"] {
            let (clean, (_, end3)) = ag(stack, &[]);
            // Link 0-2 (chip 0 channel 6) is a hop of the T3000 ring.
            let (half, _) = ag(stack, &["link-degrade:0:6:0.5"]);
            assert!(half > clean * 1.2, "{stack}: half rate {half} vs {clean}");
            let (longer, _) = ag(stack, &["link-degrade:0:6:1:3000"]);
            assert!(longer > clean + 3.0, "{stack}: 3 µs more latency {longer} vs {clean}");
            let (flap, _) = ag(stack, &["link-flap:0:6@20:50"]);
            assert!(
                flap > clean + 20.0 && flap < clean + 50.0 + 20.0,
                "{stack}: a 50 µs flap {flap} vs {clean}"
            );
            let (_, (start3, late_end3)) = ag(stack, &["straggler:3:40"]);
            assert_eq!(start3, 40.0, "{stack}");
            assert!(late_end3 > end3 + 20.0, "{stack}: chip 3 ends {late_end3} vs {end3}");
            // The ERISC of chip 0's hop to chip 2 stalled for 30 µs: its kernels (router, or
            // EDM) hold, so the op is later by up to the stall.
            let (stalled, _) = ag(stack, &["erisc-stall:0:6@20:30"]);
            assert!(
                stalled > clean + 10.0 && stalled <= clean + 30.0 + 1.0,
                "{stack}: stall {stalled} vs {clean}"
            );
            // A link or core not on the ring changes nothing.
            assert_eq!(ag(stack, &["link-degrade:0:14:0.5"]).0, clean, "{stack}");
            assert_eq!(ag(stack, &["erisc-stall:0:14@20:30"]).0, clean, "{stack}");
        }
    }

    #[test]
    fn a_link_down_for_good_fails_naming_the_fault_and_the_stalled_kernels() {
        for stack in ["fabric", "edm"] {
            let (code, out, err) = meshsim(&[
                "op",
                "all-gather",
                "--shape",
                "1,1,256,4096",
                "--stack",
                stack,
                "--fault",
                "link-down:0:6@20",
            ]);
            assert_eq!(code, 1, "{stack}: {err}");
            assert!(out.is_empty());
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains("deadlock") && err.contains("stalled: 'chip"), "{stack}: {err}");
            assert!(err.ends_with("faults injected: link-down:0:6@20\n"), "{stack}: {err}");
        }
    }

    #[test]
    fn random_faults_are_drawn_the_same_for_the_same_seed() {
        let run = |seed: &str| {
            let (code, out, err) = meshsim(&[
                "op",
                "all-gather",
                "--shape",
                "1,1,256,4096",
                "--format",
                "json",
                "--random-faults",
                "3",
                "--fault-seed",
                seed,
            ]);
            (code, if code == 0 { json(&out)["event_log_hash"].to_string() } else { err })
        };
        let a = run("11");
        assert_eq!(a, run("11"));
        assert_ne!(a, run("12"));
    }

    #[test]
    fn sweeps_and_workloads_take_faults_and_bad_specs_are_one_line() {
        let sweep = |extra: &[&str]| {
            let mut args = vec!["sweep", "all-gather", "-b", "1M", "-e", "1M", "--format", "json"];
            args.extend(extra);
            let (code, out, err) = meshsim(&args);
            assert_eq!(code, 0, "{err}");
            json(&out)[0]["time_us"].as_f64().unwrap()
        };
        assert!(sweep(&["--fault", "link-degrade:0:6:0.5"]) > sweep(&[]) * 1.1);
        let workload = |faults: &str| {
            let w = file(
                "faulty.yaml",
                format!(
                    "cluster: t3000\n{faults}ops:\n  - name: ag\n    op: all-gather\n    comm: {{all: true, topology: ring}}\n    shape: [1, 1, 256, 4096]\n"
                )
                .as_bytes(),
            );
            let (code, out, err) = meshsim(&["run", w.to_str().unwrap(), "--format", "json"]);
            assert_eq!(code, 0, "{err}");
            json(&out)["makespan_us"].as_f64().unwrap()
        };
        assert!(workload("faults: [\"link-flap:0:6@20:50\"]\n") > workload("") + 20.0);
        for (spec, want) in [
            ("link-down:0:8", "expected link-down:CHIP:CHAN@TIME_US"),
            ("link-degrade:0:6:2", "rate factor '2' is not in (0, 1]"),
            ("link-down:0:3@5", "chip 0 channel 3 has no link to another chip"),
            ("straggler:99:5", "chip 99 is not in the cluster"),
        ] {
            let err =
                super::robustness_bad(&["op", "all-gather", "--shape", "1,1,256,4096", "--fault", spec]);
            assert!(err.contains(want), "{spec}: {err}");
        }
        assert!(
            super::robustness_bad(&["op", "all-gather", "--shape", "1,1,256,4096", "--fault-seed", "3"])
                .contains("needs random_faults")
        );
    }
}

mod peers {
    use super::*;

    #[test]
    fn peers_lists_every_pair_with_access_atomics_links_and_hops() {
        let (code, out, err) = meshsim(&["peers", "t3000", "--format", "json"]);
        assert_eq!(code, 0, "{err}");
        let v = json(&out);
        let pairs = v.as_array().unwrap();
        assert_eq!(pairs.len(), 28);
        for p in pairs {
            let keys: Vec<&str> = p.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(keys, ["a", "b", "access", "atomics", "links", "hops"]);
            assert!(p["a"].as_u64() < p["b"].as_u64());
            // The fabric routes to every connected chip.
            assert_eq!((p["access"].as_bool(), p["atomics"].as_bool()), (Some(true), Some(true)));
        }
        let (code, out, _) = meshsim(&["peers", "t3000", "--stack", "edm", "--format", "csv"]);
        assert_eq!(code, 0);
        let mut lines = out.lines();
        assert_eq!(lines.next(), Some("a,b,access,atomics,links,hops"));
        // Chips 0 and 3 are two hops apart: no direct access over an EDM.
        assert!(out.lines().any(|l| l == "0,3,false,false,0,2"), "{out}");
        assert!(out.lines().filter(|l| l.contains(",true,")).all(|l| l.ends_with(",1")), "{out}");
        let (code, _, err) = meshsim(&["peers", "t3000", "--stack", "nccl"]);
        assert_eq!(code, 2);
        assert!(err.trim().contains("'--stack <STACK>': unknown stack 'nccl' (edm, fabric)"), "{err}");
    }
}

mod select {
    use super::*;

    /// `tune` writes a tree that `--select` reads back, and at every point it was tuned on the
    /// tuned tree's op is never slower than the default's (it runs the measured winner).
    #[test]
    fn a_tuned_tree_is_never_slower_than_the_default_where_it_was_tuned() {
        let tree = std::env::temp_dir().join(format!("meshsim-tuned-{}.yaml", std::process::id()));
        let (code, out, err) = meshsim(&[
            "tune",
            "all-reduce",
            "--cluster",
            "t3000",
            "-b",
            "16K",
            "-e",
            "256K",
            "-f",
            "4",
            "--out",
            tree.to_str().unwrap(),
            "--format",
            "json",
        ]);
        assert_eq!(code, 0, "{err}");
        let points = json(&out);
        let points = points.as_array().unwrap();
        assert_eq!(points.len(), 3);
        let text = std::fs::read_to_string(&tree).unwrap();
        assert!(text.contains("collective=all-reduce:\n  stack=fabric:\n    topology=ring:"), "{text}");
        for p in points {
            let size = p["size_bytes"].as_u64().unwrap();
            let shape = format!("1,1,32,{}", 32 * size / 1088);
            let time = |extra: &[&str]| {
                let mut args =
                    vec!["op", "all-reduce", "--shape", &shape, "--dtype", "bfp8", "--format", "json"];
                args.extend_from_slice(extra);
                let (code, out, err) = meshsim(&args);
                assert_eq!(code, 0, "{err}");
                json(&out)["time_us"].as_f64().unwrap()
            };
            let (default, tuned) = (time(&[]), time(&["--select", tree.to_str().unwrap()]));
            assert!(tuned <= default, "{size} B: tuned {tuned} us, default {default} us");
            assert_eq!(default, p["default_us"].as_f64().unwrap());
            assert_eq!(tuned, p["best_us"].as_f64().unwrap());
        }
        std::fs::remove_file(&tree).ok();
    }

    #[test]
    fn a_malformed_tree_is_one_line_naming_the_node() {
        let tree = file(
            "bad-select.yaml",
            b"collective=reduce-scatter:\n  stack=fabric:\n    msg_size<=4096: {algorithm: relay}\n    msg_size=any: {algorithm: ring}\n  stack=any: {algorithm: auto}\n",
        );
        for cmd in [&["op", "reduce-scatter", "--shape", "1,1,64,1024"][..], &["sweep", "reduce-scatter"][..]]
        {
            let mut args = cmd.to_vec();
            args.extend_from_slice(&["--select", tree.to_str().unwrap()]);
            let (code, out, err) = meshsim(&args);
            assert_eq!((code, out.as_str()), (2, ""), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.contains("collective=reduce-scatter > stack=fabric > msg_size<=4096: 'relay' is not an algorithm of reduce-scatter on the fabric stack (auto, ring, direct)"),
                "{err}"
            );
        }
    }

    /// A tree that sends small reduce-scatters round the ring instead of direct changes what
    /// runs: the op reports the algorithm the tree chose.
    #[test]
    fn select_changes_the_algorithm_an_op_runs() {
        let tree = file(
            "ring-only.yaml",
            b"collective=reduce-scatter:\n  stack=fabric: {algorithm: ring, workers: 2}\n  stack=any: {algorithm: auto}\n",
        );
        let run = |extra: &[&str]| {
            let mut args = vec!["op", "reduce-scatter", "--shape", "1,1,64,1024", "--format", "json"];
            args.extend_from_slice(extra);
            let (code, out, err) = meshsim(&args);
            assert_eq!(code, 0, "{err}");
            let v = json(&out);
            (v["algorithm"].as_str().unwrap().to_owned(), v["workers"].as_u64().unwrap())
        };
        assert_eq!(run(&[]).0, "direct");
        assert_eq!(run(&["--select", tree.to_str().unwrap()]), ("ring".to_owned(), 2));
    }
}
