//! docs/cli.md and `--help` cannot drift: every flag a command's `--help` lists is in that
//! command's section of docs/cli.md, every value a flag's `--help` offers is in the section
//! too, and every flag a section's heading shows is one the command takes.

mod common;
use common::*;

use std::collections::BTreeMap;

/// Every command and subcommand with a section in docs/cli.md.
const COMMANDS: [&str; 17] = [
    "params",
    "calibrate",
    "op",
    "sweep",
    "merge",
    "run",
    "regress",
    "replay",
    "topo",
    "tune",
    "peers",
    "bench latency",
    "bench bandwidth",
    "bench ring",
    "bench fabric",
    "bench fabric-latency",
    "bench dram",
];

/// Flags documented once for every command that takes them: `--exact` and `--full-report`
/// (global: "Exact shortcuts", "Exit codes") and `--link-gbps` (beside `--params`, "Clusters");
/// and clap's own.
const SHARED: [&str; 5] = ["--exact", "--full-report", "--link-gbps", "--help", "--version"];

/// docs/cli.md's sections by command: the text under each `## `meshsim CMD ...`` (and
/// `### `meshsim bench SUB ...``) heading up to the next heading of that level or above; a
/// bench subcommand's section includes the `bench` section before it (their shared flags).
fn sections() -> BTreeMap<String, (String, String)> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md")).unwrap();
    let mut out: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut cur: Option<String> = None;
    for line in doc.lines() {
        let heading = line.strip_prefix("## ").or_else(|| line.strip_prefix("### "));
        if let Some(h) = heading {
            cur = h.strip_prefix("`meshsim ").map(|rest| {
                let words: Vec<&str> =
                    rest.split([' ', '`']).take_while(|w| !w.starts_with(['-', '<', '['])).collect();
                words
                    .iter()
                    .filter(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" ")
            });
            if line.starts_with("## ") && cur.is_none() {
                continue;
            }
            if let Some(c) = &cur {
                out.entry(c.clone()).or_default().0 = h.to_owned();
            }
            continue;
        }
        if let Some(c) = &cur {
            out.entry(c.clone()).or_default().1 += &format!("{line}\n");
        }
    }
    let bench = out.get("bench").map(|s| s.1.clone()).unwrap_or_default();
    for (name, (_, text)) in out.iter_mut() {
        if name.starts_with("bench ") {
            text.push_str(&bench);
        }
    }
    out
}

/// The long flags a `--help` text lists, and per flag the values it offers (`[possible values:
/// a, b]` or the `- value:` lines of a long help).
fn flags(help: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut cur: Option<String> = None;
    for line in help.lines() {
        let t = line.trim();
        if let Some(flag) = t.split([' ', ',', '=', '<']).find(|w| w.starts_with("--")) {
            if t.starts_with('-') {
                cur = Some(flag.to_owned());
                out.entry(flag.to_owned()).or_default();
            }
        }
        if let (Some(f), Some(v)) = (&cur, t.strip_prefix("- ")) {
            if let Some(value) = v.split(':').next().filter(|v| !v.contains(' ')) {
                out.get_mut(f).unwrap().push(value.to_owned());
            }
        }
        if let (Some(f), Some(list)) = (&cur, t.split("[possible values: ").nth(1)) {
            for v in list.trim_end_matches(']').split(", ") {
                out.get_mut(f).unwrap().push(v.to_owned());
            }
        }
    }
    out
}

#[test]
fn every_flag_and_value_of_help_is_in_its_section_of_cli_md_and_back() {
    let docs = sections();
    let mut drift = Vec::new();
    for cmd in COMMANDS {
        let Some((heading, text)) = docs.get(cmd) else {
            drift.push(format!("{cmd}: no section in docs/cli.md"));
            continue;
        };
        let args: Vec<&str> = cmd.split(' ').chain(["--help"]).collect();
        let (code, help, err) = meshsim(&args);
        assert_eq!(code, 0, "{cmd}: {err}");
        let help = help.split("\nOptions:").nth(1).unwrap_or(&help).to_owned();
        let taken = flags(&help);
        if cmd == "bench fabric-latency" {
            // The reader sees the values clap offers (tt-metal's latency test has no scatter write).
            assert_eq!(taken["--noc-send"], ["write", "fused-atomic-inc"], "{help}");
        }
        for (flag, values) in &taken {
            if SHARED.contains(&flag.as_str()) {
                continue;
            }
            if !text.contains(flag.as_str()) && !heading.contains(flag.as_str()) {
                drift.push(format!("{cmd}: {flag} is not in its section"));
            }
            for v in values {
                if !text.contains(v.as_str()) && !heading.contains(v.as_str()) {
                    drift.push(format!("{cmd}: {flag}'s value {v} is not in its section"));
                }
            }
        }
        for word in heading.split([' ', '[', ']', '|', '`']).filter(|w| w.starts_with("--")) {
            if !taken.contains_key(word) {
                drift.push(format!("{cmd}: the heading shows {word}, which --help does not list"));
            }
        }
    }
    assert!(drift.is_empty(), "docs/cli.md and --help disagree:\n{}", drift.join("\n"));
}
