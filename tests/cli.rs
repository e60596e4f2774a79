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
        check("comments.yaml", b"# nothing here\n", &["file is empty"]);
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
