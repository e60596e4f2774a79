//! End-to-end tests of the `meshsim` binary, organised by behaviour: topology, bad input,
//! parameters, benchmarks, calibration, ops and collectives (more in cli_runs.rs and
//! cli_collectives.rs).

mod common;
use common::*;

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

    #[test]
    fn a_generated_cluster_is_the_descriptor_it_prints() {
        let (code, yaml, err) = meshsim(&["topo", "torus:8x16:links=1", "--format", "yaml"]);
        assert_eq!(code, 0, "{err}");
        let path = file("torus8x16.yaml", yaml.as_bytes());
        let from_file = json(&meshsim(&["topo", path.to_str().unwrap(), "--format", "json"]).1);
        let (code, out, err) = meshsim(&["topo", "torus:8x16:links=1", "--format", "json"]);
        assert_eq!(code, 0, "{err}");
        let generated = json(&out);
        for key in ["chips", "links", "shape", "diameter", "ring", "links_per_pair"] {
            assert_eq!(generated[key], from_file[key], "{key}");
        }
        assert_eq!((generated["chips"].as_u64(), generated["links"].as_u64()), (Some(128), Some(256)));
        assert_eq!(generated["shape"], "torus 8x16");
        // Every kind, on both architectures, runs a collective.
        for (cluster, topology) in [
            ("ring:4", "ring"),
            ("line:4:links=1", "line"),
            ("mesh:2x4:arch=blackhole", "ring"),
            ("torus:4x4:arch=blackhole:links=3", "ring"),
        ] {
            let (code, out, err) = meshsim(&[
                "op",
                "all-gather",
                "--cluster",
                cluster,
                "--topology",
                topology,
                "--shape",
                "1,1,32,4096",
                "--dim",
                "3",
                "--verify",
            ]);
            assert_eq!(code, 0, "{cluster}: {err}");
            assert!(out.contains("all_gather") && out.contains("true"), "{cluster}: {out}");
        }
        let err = robustness_bad(&["topo", "torus:3x3:arch=blackhole:links=4"]);
        assert!(
            err.contains("links: 4: a blackhole chip has 3 usable Ethernet channels per direction"),
            "{err}"
        );
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
            "meshsim: unknown cluster 't4000': not a file, not one of the built-in clusters (n300, t3000, galaxy, galaxy_torus, p150, p300, bh_quietbox, bh_loudbox, bh_galaxy), and not a generated one (ring:N, line:N, mesh:RxC, torus:RxC)\n"
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

    #[test]
    fn a_parameter_file_applies_to_the_chips_of_its_architecture_only() {
        let wh = include_str!("../configs/wormhole_b0.yaml");
        let slow = file(
            "params_slow_wh.yaml",
            wh.replace("eth_link_latency_ns: 318", "eth_link_latency_ns: 900").as_bytes(),
        );
        let slow = slow.to_str().unwrap();
        let bh = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/blackhole.yaml");
        let time = |args: &[&str]| {
            let (code, out, err) = meshsim(
                &[&["op", "all-gather", "--shape", "1,1,32,1024", "--format", "json"], args].concat(),
            );
            assert_eq!(code, 0, "{err}");
            json(&out)["time_us"].as_f64().unwrap()
        };
        // On a Wormhole machine the Wormhole file applies; beside it, a Blackhole file applies
        // to a Blackhole machine's chips and leaves nothing else changed.
        assert!(time(&["--params", slow]) > time(&[]));
        let bh_alone = time(&["--cluster", "bh_quietbox"]);
        assert_eq!(time(&["--cluster", "bh_quietbox", "--params", bh]), bh_alone);
        // A file no chip of the command is of, a second file of one architecture and a file
        // naming no architecture are refused in one line.
        let stripped: String =
            wh.lines().filter(|l| !l.starts_with("arch:")).map(|l| format!("{l}\n")).collect();
        let none = file("params_no_arch.yaml", stripped.as_bytes());
        let cases: [(&[&str], &str); 3] = [
            (
                &["--params", bh],
                "a blackhole parameter file, but no chip the command runs on is blackhole (wormhole_b0)",
            ),
            (&["--params", slow, "--params", slow], "a second wormhole_b0 parameter file"),
            (&["--params", none.to_str().unwrap()], "names no architecture"),
        ];
        for (args, says) in cases {
            let (code, _, err) = meshsim(&[&["op", "all-gather", "--shape", "1,1,32,1024"], args].concat());
            assert_eq!((code, err.lines().count()), (2, 1), "{err}");
            assert!(err.contains(says), "{err}");
        }
        // The regression gate runs every suite with a Wormhole file: the Blackhole scenarios
        // keep their own parameters.
        let (code, _, err) = meshsim(&[
            "regress",
            "--params",
            concat!(env!("CARGO_MANIFEST_DIR"), "/configs/wormhole_b0.yaml"),
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("0 moved"), "{err}");
    }
}

mod what_ran {
    use super::*;

    #[test]
    fn op_and_topo_say_what_ran_and_bound_by_means_bound() {
        let (code, out, err) =
            meshsim(&["op", "all-reduce", "--cluster", "t3000", "--shape", "1,1,32,8192", "--links"]);
        assert_eq!(code, 0, "{err}");
        assert!(
            out.starts_with("machine   t3000 (wormhole_b0, 100 Gb/s links), fabric stack, packet model\n"),
            "{out}"
        );
        assert!(out.contains("ran on    8-chip ring 0 2 6 7 3 1 5 4\n"), "{out}");
        assert!(out.contains("packets of up to 4352 B (2 page(s) of 2048 B)"), "{out}");
        assert!(
            out.contains("algorithm ring + multicast (chosen by meshsim's default selection tree"),
            "{out}"
        );
        let verdict = out.lines().last().unwrap();
        let (code, js, _) = meshsim(&[
            "op",
            "all-reduce",
            "--cluster",
            "t3000",
            "--shape",
            "1,1,32,8192",
            "--links",
            "--packet-size",
            "2048",
            "--format",
            "json",
        ]);
        assert_eq!(code, 0);
        let v = json(&js);
        assert_eq!(
            (v["arch"].as_str(), v["link_gbps"].as_u64(), v["packet_size"].as_u64()),
            (Some("wormhole_b0"), Some(100), Some(2048))
        );
        // Below 80 % busy nothing is saturated: the verdict says latency and names the stage.
        let b = &v["bound_by"];
        let saturated = b["busy_pct"].as_f64().unwrap() >= 80.0;
        assert_eq!(b["bound"], if saturated { "bandwidth" } else { "latency" }, "{b}");
        assert!(b["longest_stage"]["stage"].is_string(), "{b}");
        assert!(
            verdict.starts_with("bound by: latency (no resource busy 80 % of the op): the longest stage"),
            "{verdict}"
        );
        let (_, topo, _) = meshsim(&["topo", "bh_galaxy"]);
        assert!(topo.contains("arch      blackhole, links at 200 Gb/s per direction"), "{topo}");
    }
}

mod small_errors {
    use super::*;

    fn time(args: &[&str]) -> f64 {
        let (code, out, err) = meshsim(&[args, &["--format", "json"]].concat());
        assert_eq!(code, 0, "{err}");
        json(&out)["time_us"].as_f64().unwrap()
    }

    #[test]
    fn ttnn_s_spellings_run_as_meshsim_s() {
        // The op as the tool prints it, ttnn's dtype name and its negative dim.
        let ours = time(&["op", "all-gather", "--shape", "1,1,32,1024", "--dim", "3", "--dtype", "bfp8"]);
        let ttnn =
            time(&["op", "all_gather", "--shape", "1,1,32,1024", "--dim", "-1", "--dtype", "bfloat8_b"]);
        assert_eq!(ours, ttnn);
        let w = file("ttnn_spellings.yaml", b"cluster: t3000\nops:\n  - {name: a, op: all_gather, comm: {all: true}, shape: [1, 1, 32, 1024], dim: -1, dtype: DataType::BFLOAT8_B}\n");
        let (code, out, err) = meshsim(&["run", w.to_str().unwrap(), "--format", "json"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(json(&out)["makespan_us"].as_f64().unwrap(), ours);
    }

    #[test]
    fn refusals_name_the_flag_and_the_way_out_in_one_line() {
        let cases: [(&[&str], &str); 4] = [
            (
                &["op", "all-gather", "--shape", "1,1,32,1024", "--dim", "-5"],
                "dim -5 is not a dimension of a 4-D tensor",
            ),
            (
                &["op", "all-gather", "--shape", "1,1,32,1024", "--chips", "9"],
                "9 chips asked for (--chips, count): cluster 't3000' has 8",
            ),
            (
                &["op", "all-gather", "--shape", "1,1,32,1024", "--packet-size", "8192"],
                "packet size 8192 B (--packet-size, packet_size)",
            ),
            (&["bench", "fabric-latency", "--noc-send", "scatter-write"], "invalid value 'scatter-write'"),
        ];
        for (args, says) in cases {
            let (code, out, err) = meshsim(args);
            assert_eq!((code, err.lines().count()), (2, 1), "{args:?}: {out}{err}");
            assert!(err.contains(says), "{args:?}: {err}");
        }
        let (_, help, _) = meshsim(&["op", "--help"]);
        assert!(help.contains("erisc-stall:CHIP:CHAN@TIME_US:STALL_US"), "--fault's help lists every kind");
        // A misspelt flag, op or key names the one meant; the old `links` of suites still runs.
        let (_, _, err) = meshsim(&["op", "all-gather", "--shape", "1,1,32,1024", "--topolgy", "ring"]);
        assert!(err.contains("a similar argument exists: '--topology'"), "{err}");
        let w = file("misspelt.yaml", b"cluster: t3000\nops:\n  - {name: a, op: all-gather, comm: {all: true}, shape: [1, 1, 32, 1024], num_linkz: 1}\n");
        let (code, _, err) = meshsim(&["run", w.to_str().unwrap()]);
        assert_eq!(code, 2);
        assert!(err.contains("unknown field `num_linkz` (did you mean `num_links`?)"), "{err}");
        let suite = file(
            "old-links.yaml",
            b"scenarios:\n  - {name: a, op: all-gather, cluster: t3000, shape: [1, 1, 32, 1024], links: 1}\n",
        );
        let (_, _, err) = meshsim(&["regress", "--suite", suite.to_str().unwrap()]);
        assert!(err.contains("`links` is now `num_links`"), "{err}");
        let suite = file(
            "misspelt-op.yaml",
            b"scenarios:\n  - {name: a, op: all-gater, cluster: t3000, shape: [1, 1, 32, 1024]}\n",
        );
        let (code, _, err) = meshsim(&["regress", "--suite", suite.to_str().unwrap()]);
        assert_eq!((code, err.lines().count()), (2, 1));
        assert!(err.contains("did you mean `all-gather`?"), "{err}");
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

mod bench_dram {
    use super::*;

    /// One point per page size and depth, in that order; deeper queues of one bank read more
    /// bytes per cycle until the endpoint's rate; bad points exit 2 in one line.
    #[test]
    fn one_row_per_page_and_depth_and_bad_points_exit_2() {
        let args = [
            "bench",
            "dram",
            "--cluster",
            "p150",
            "--page-size",
            "2K,8K",
            "--depth",
            "1,16",
            "--format",
            "json",
        ];
        let (code, out, err) = meshsim(&args);
        assert_eq!(code, 0, "{err}");
        let rows = json(&out);
        let rows = rows.as_array().unwrap();
        let got: Vec<(u64, u64)> =
            rows.iter().map(|r| (r["page_bytes"].as_u64().unwrap(), r["depth"].as_u64().unwrap())).collect();
        assert_eq!(got, [(2048, 1), (2048, 16), (8192, 1), (8192, 16)]);
        let rate = |i: usize| rows[i]["bytes_per_cycle"].as_f64().unwrap();
        assert!(rate(1) > 2.0 * rate(0) && rate(3) > rate(2), "{out}");
        for (bad, want) in [
            (["--page-size", "100"], "page size 100 B is not a positive multiple of 16 B"),
            (["--depth", "0"], "at least one read is needed"),
            (["--depth", "1000"], "1000 reads is more than the 256 meshsim runs"),
        ] {
            let (code, out, err) = meshsim(&[&["bench", "dram"][..], &bad[..]].concat());
            assert_eq!(code, 2, "{bad:?}: {out}{err}");
            assert!(err.contains(want) && err.lines().count() == 1, "{bad:?}: {err}");
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
        assert_eq!(rows.as_array().unwrap().len(), 41);
        assert!(rows.as_array().unwrap().iter().all(|r| r["ok"] == true));
        let slow =
            include_str!("../configs/wormhole_b0.yaml").replace("eth_link_gbps: 100", "eth_link_gbps: 40");
        let path = file("slow_gbps.yaml", slow.as_bytes());
        let (code, out, err) = meshsim(&["calibrate", "--params", path.to_str().unwrap(), "--format", "csv"]);
        assert_eq!(code, 1, "{err}");
        assert!(out.lines().any(|l| l.starts_with("bandwidth GB/s,8192,") && l.ends_with(",false")), "{out}");
        assert!(err.contains("calibration point(s) miss their tolerance"), "{err}");
    }

    /// The sweep sets' plots go into a directory, and only with --ccl or --blackhole; both are
    /// refused as bad input before anything runs.
    #[test]
    fn ccl_plots_need_the_ccl_set_and_a_directory() {
        let (code, _, err) = meshsim(&["calibrate", "--plot", "."]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("--ccl") && err.contains("--blackhole"), "{err}");
        let (code, _, err) = meshsim(&["calibrate", "--fabric", "--plot", "."]);
        assert_eq!(code, 2, "{err}");
        let not_dir = file("not_a_dir_bh.txt", b"x");
        let (code, _, err) = meshsim(&["calibrate", "--blackhole", "--plot", not_dir.to_str().unwrap()]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("not a directory"), "{err}");
        let not_dir = file("not_a_dir.txt", b"x");
        let (code, _, err) = meshsim(&["calibrate", "--ccl", "--plot", not_dir.to_str().unwrap()]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("not a directory"), "{err}");
        let (code, _, err) = meshsim(&["calibrate", "--ccl", "--fabric"]);
        assert_eq!(code, 2, "{err}");
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
            (&["--shape", "1,1,32,256", "--dim", "4"], "dim 4 is not a dimension of a 4-D tensor"),
            (&["--shape", "1,1,32,256", "--num-links", "3"], "3 links requested"),
            (&["--shape", "1,1,32,256", "--dtype", "fp8"], "unknown dtype 'fp8'"),
            (&["--shape", "1,1,32,256", "--chips", "3", "--topology", "ring"], "no ring of 3 chips"),
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
            "series,cluster,model,chips,topology,chip_ids,num_links,size_bytes,count,type,redop,root,time_us,algbw_gbps,busbw_gbps,algorithm,workers,packet_size,pages_per_packet"
        );
        assert_eq!(lines.len(), 4, "{out}");
        let sizes: Vec<u64> =
            lines[1..].iter().map(|l| l.split(',').nth(7).unwrap().parse().unwrap()).collect();
        // Each point says what ran, 2 bf16 pages of 2048 B in the Wormhole fabric's 4352 B
        // packets: the multicast factory with one worker, then from 64 pages per device on a
        // Wormhole ring the relay factory, with two workers at 1 MiB.
        let ran: Vec<Vec<&str>> = lines[1..].iter().map(|l| l.split(',').skip(15).collect()).collect();
        assert_eq!(ran[0], ["multicast", "1", "4352", "2"], "{out}");
        assert_eq!(ran[2], ["relay", "2", "4352", "2"], "{out}");
        // A reduce-scatter's points change algorithm and workers with size: the one-shot
        // direct path up to 512 KiB per rank on the T3000 ring, then the ring with tt-metal's
        // workers for the size; the text table says so under its rows.
        let (code, out, err) =
            meshsim(&["sweep", "reduce-scatter", "--cluster", "t3000", "-b", "64K", "-e", "4M", "-f", "4"]);
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains("# ran 65536-262144 B: direct, 1 worker(s), packets of up to 4352 B (2 page(s))"),
            "{out}"
        );
        assert!(
            out.contains("# ran 1048576-4194304 B: ring, 4 worker(s), packets of up to 4352 B (2 page(s))"),
            "{out}"
        );
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
        // Topologies and packet sizes take lists too: one series per combination, each row
        // saying which it ran; the commands that run one op take one packet size.
        let (code, out, err) = meshsim(
            &[
                &base[..],
                &[
                    "--chips",
                    "4",
                    "--topology",
                    "ring,line",
                    "--packet-size",
                    "2176,4352",
                    "--format",
                    "json",
                ],
            ]
            .concat(),
        );
        assert_eq!(code, 0, "{err}");
        let rows = json(&out);
        let ran: Vec<(String, String, u64)> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let s = |k: &str| r[k].as_str().unwrap().to_owned();
                (s("series"), s("topology"), r["packet_size"].as_u64().unwrap())
            })
            .step_by(2)
            .collect();
        let want = [
            ("ring 2176 B packets", "ring", 2176),
            ("ring 4352 B packets", "ring", 4352),
            ("line 2176 B packets", "line", 2176),
            ("line 4352 B packets", "line", 4352),
        ];
        assert_eq!(ran, want.map(|(a, b, c)| (a.to_owned(), b.to_owned(), c)), "{out}");
        let (code, _, err) =
            meshsim(&["op", "all-gather", "--shape", "1,1,32,1024", "--packet-size", "2176,4352"]);
        assert_eq!((code, err.lines().count()), (2, 1), "{err}");
        assert!(err.contains("a list makes one series each on sweep"), "{err}");
    }
}
