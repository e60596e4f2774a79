//! What the CLI tests share: running the binary, writing input files, reading JSON and
//! checking traces, and the bad-input assertion.

#![allow(dead_code)]

pub use std::path::PathBuf;
pub use std::process::Command;

/// Runs meshsim with `args`; returns (exit code, stdout, stderr).
pub fn meshsim(args: &[&str]) -> (i32, String, String) {
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
pub fn file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("meshsim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    path
}

pub fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).expect("valid JSON")
}

/// Checks a file against the Chrome trace-event format as Perfetto reads it: a `traceEvents`
/// array; every event has `ph`, `pid` and (except metadata) a numeric `ts`; slices have a `tid`;
/// per track, timestamps never go back and every `B` has its `E`; `X` has a `dur` >= 0.
/// Returns the events.
pub fn check_trace(path: &std::path::Path) -> Vec<serde_json::Value> {
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

/// Runs meshsim with `args` and asserts bad input: exit 2, nothing on stdout, exactly one line
/// on stderr, starting `meshsim: ` and without a panic; returns that line.
pub fn robustness_bad(args: &[&str]) -> String {
    let (code, out, err) = meshsim(args);
    assert_eq!(code, 2, "{args:?}: {err}");
    assert!(out.is_empty(), "{args:?}: {out}");
    assert_eq!(err.lines().count(), 1, "{args:?}: one line, got {err:?}");
    assert!(err.starts_with("meshsim: "), "{err}");
    assert!(!err.contains("panicked") && !err.contains("internal error"), "{err}");
    err
}
