//! The fuzzing harness's cases, shared by `tests/fuzz.rs` (fixed seeds and case counts, in CI)
//! and `examples/fuzz.rs` (random seeds for as long as asked).
//!
//! Each case is one `meshsim` command on a generated input — a mutated cluster description,
//! parameter file, regression suite or workload, or a generated op command line — and every
//! case must end as the CLI's contract says: no panic and no hang; exit 2 with exactly one line
//! `meshsim: ...` on stderr for bad input; otherwise success (or, where a simulation may fail
//! or a check may not hold, exit 1 without a panic).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use proptest::prelude::*;

/// What a generated input is fed to.
#[derive(Clone, Debug)]
pub enum Case {
    /// `meshsim topo FILE` on a cluster description.
    Cluster(Vec<u8>),
    /// `meshsim bench latency --params FILE` on a parameter file.
    Params(Vec<u8>),
    /// `meshsim regress --suite FILE --update` on a suite.
    Suite(Vec<u8>),
    /// `meshsim run FILE` on a workload.
    Workload(Vec<u8>),
    /// `meshsim ARGS...`.
    Args(Vec<String>),
    /// `meshsim ARGS...` with no fault injected: it runs (exit 0) or is refused as bad input
    /// (exit 2); a failed simulation (exit 1) is a bug of meshsim's.
    Strict(Vec<String>),
}

/// How a case broke the contract.
#[derive(Debug)]
pub struct Broken {
    /// The command run.
    pub command: String,
    /// The input file's bytes, when the case has one.
    pub input: Option<Vec<u8>>,
    /// What went wrong.
    pub why: String,
}

/// The longest a case may run before it counts as a hang.
pub const CASE_LIMIT: Duration = Duration::from_secs(60);

/// Runs `case` with the binary `meshsim`, its input written under `dir`; `Ok` is the exit code
/// (0, 1 or 2), `Err` says how the contract broke.
pub fn run(meshsim: &Path, dir: &Path, case: &Case) -> Result<i32, Broken> {
    let file = |name: &str, bytes: &[u8]| -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, bytes).expect("the fuzz directory is writable");
        p
    };
    let (args, input, may_fail): (Vec<String>, Option<Vec<u8>>, bool) = match case {
        Case::Cluster(b) => (vec!["topo".into(), s(&file("cluster.yaml", b))], Some(b.clone()), false),
        Case::Params(b) => (
            vec![
                "bench".into(),
                "latency".into(),
                "--params".into(),
                s(&file("params.yaml", b)),
                "--sizes".into(),
                "16".into(),
                "--samples".into(),
                "2".into(),
            ],
            Some(b.clone()),
            true,
        ),
        Case::Suite(b) => (
            vec!["regress".into(), "--suite".into(), s(&file("suite.yaml", b)), "--update".into()],
            Some(b.clone()),
            true,
        ),
        Case::Workload(b) => (vec!["run".into(), s(&file("workload.yaml", b))], Some(b.clone()), true),
        Case::Args(a) => (a.clone(), None, true),
        Case::Strict(a) => (a.clone(), None, false),
    };
    let command = format!("meshsim {}", args.join(" "));
    let broken = |why: String| Broken { command: command.clone(), input: input.clone(), why };
    let mut child = Command::new(meshsim)
        .args(&args)
        .current_dir(dir)
        .env_remove("RUST_BACKTRACE")
        .env("RAYON_NUM_THREADS", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| broken(format!("cannot start: {e}")))?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| broken(e.to_string()))? {
            break status;
        }
        if started.elapsed() > CASE_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(broken(format!("still running after {} s", CASE_LIMIT.as_secs())));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    if err.contains("panicked") || err.contains("internal error") || err.contains("backtrace") {
        return Err(broken(format!("panicked: {err}")));
    }
    match status.code() {
        Some(0) => Ok(0),
        Some(2) if err.lines().count() == 1 && err.starts_with("meshsim: ") => Ok(2),
        Some(2) => Err(broken(format!("bad input not in one `meshsim: ` line: {err:?}"))),
        Some(1) if may_fail && err.lines().all(|l| l.starts_with("meshsim: ")) && !err.is_empty() => Ok(1),
        code => Err(broken(format!("exit {code:?}: {err:?}"))),
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Numbers that break things: zero, one, off-by-one around powers of two, negative, huge,
/// floats and words where integers go.
const NASTY: &[&str] = &[
    "0",
    "1",
    "-1",
    "15",
    "16",
    "17",
    "31",
    "32",
    "33",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "1e30",
    "0.5",
    "-0",
    "nan",
    "x",
    "''",
    "~",
    "[]",
    "{}",
];

/// One edit of a text file.
#[derive(Clone, Debug)]
enum Edit {
    /// Replace the `n`-th number with a nasty value.
    Number(usize, usize),
    /// Delete line `n`.
    DeleteLine(usize),
    /// Repeat line `n`.
    DuplicateLine(usize),
    /// Swap lines `a` and `b`.
    SwapLines(usize, usize),
    /// Cut the file at a fraction of its length (per mille).
    Truncate(usize),
    /// Put a byte in at a fraction of the length (per mille).
    InsertByte(usize, u8),
    /// Replace the `n`-th word with the `m`-th word of the file.
    Word(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<usize>(), 0..NASTY.len()).prop_map(|(n, v)| Edit::Number(n, v)),
        2 => any::<usize>().prop_map(Edit::DeleteLine),
        2 => any::<usize>().prop_map(Edit::DuplicateLine),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        1 => (0usize..1000).prop_map(Edit::Truncate),
        1 => (0usize..1000, prop_oneof![Just(b'{'), Just(b'['), Just(b':'), Just(b'\t'), Just(b'-'), Just(b'#'), Just(0u8), Just(0xffu8)])
            .prop_map(|(at, b)| Edit::InsertByte(at, b)),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Word(a, b)),
    ]
}

/// Applies `edits` to `text`.
fn apply(text: &str, edits: &[Edit]) -> Vec<u8> {
    let mut t = text.to_owned();
    for e in edits {
        match *e {
            Edit::Number(n, v) => {
                let spans = spans(&t, |c| c.is_ascii_digit());
                if !spans.is_empty() {
                    let (a, b) = spans[n % spans.len()];
                    t.replace_range(a..b, NASTY[v]);
                }
            }
            Edit::DeleteLine(n) | Edit::DuplicateLine(n) => {
                let mut lines: Vec<&str> = t.lines().collect();
                if !lines.is_empty() {
                    let i = n % lines.len();
                    if matches!(e, Edit::DeleteLine(_)) {
                        lines.remove(i);
                    } else {
                        lines.insert(i, lines[i]);
                    }
                }
                t = lines.join("\n") + "\n";
            }
            Edit::SwapLines(a, b) => {
                let mut lines: Vec<&str> = t.lines().collect();
                if !lines.is_empty() {
                    let n = lines.len();
                    lines.swap(a % n, b % n);
                }
                t = lines.join("\n") + "\n";
            }
            Edit::Truncate(m) => {
                let mut at = t.len() * m / 1000;
                while !t.is_char_boundary(at) {
                    at -= 1;
                }
                t.truncate(at);
            }
            Edit::InsertByte(m, byte) => {
                let mut bytes = t.into_bytes();
                let at = bytes.len() * m / 1000;
                bytes.insert(at, byte);
                // Non-UTF-8 is the point of some edits: stop editing text and hand back bytes.
                match String::from_utf8(bytes) {
                    Ok(s) => t = s,
                    Err(e) => return e.into_bytes(),
                }
            }
            Edit::Word(a, b) => {
                let spans = spans(&t, |c| c.is_ascii_alphabetic() || c == '_');
                if !spans.is_empty() {
                    let (x0, x1) = spans[a % spans.len()];
                    let (y0, y1) = spans[b % spans.len()];
                    let word = t[y0..y1].to_owned();
                    t.replace_range(x0..x1, &word);
                }
            }
        }
    }
    t.into_bytes()
}

/// The byte ranges of maximal runs of characters satisfying `f`.
fn spans(t: &str, f: impl Fn(char) -> bool) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in t.char_indices() {
        match (f(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, t.len()));
    }
    out
}

/// A text mutated by one to four edits.
fn mutated(text: &'static str) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(edit(), 1..5).prop_map(move |edits| apply(text, &edits))
}

const N300: &str = include_str!("../../cluster_descriptions/n300.yaml");
const T3000: &str = include_str!("../../cluster_descriptions/t3000.yaml");
const PARAMS: &str = include_str!("../../configs/wormhole_b0.yaml");

/// A suite of two small scenarios.
const SUITE: &str = "\
description: fuzz
scenarios:
  - name: lat
    op: latency
    cluster: n300
    size: 16
    samples: 2
  - name: ag
    op: all-gather
    cluster: n300
    shape: [1, 1, 32, 64]
    dim: 3
    dtype: bf16
    verify: true
    tolerance_pct: 1
";

/// A workload of two small ops on a T3000.
const WORKLOAD: &str = "\
cluster: t3000
stack: fabric
ops:
  - name: ag
    op: all-gather
    comm: {all: true, topology: ring}
    shape: [1, 1, 32, 256]
    dim: 3
    dtype: bf16
  - name: rs
    op: reduce-scatter
    comm: {chips: [4, 5]}
    shape: [1, 1, 32, 128]
    dim: 3
    after: [ag]
";

/// A mutated cluster description.
pub fn cluster() -> impl Strategy<Value = Case> {
    prop_oneof![mutated(N300), mutated(T3000)].prop_map(Case::Cluster)
}

/// A mutated parameter file.
pub fn params() -> impl Strategy<Value = Case> {
    mutated(PARAMS).prop_map(Case::Params)
}

/// A mutated regression suite.
pub fn suite() -> impl Strategy<Value = Case> {
    mutated(SUITE).prop_map(Case::Suite)
}

/// A mutated workload.
pub fn workload() -> impl Strategy<Value = Case> {
    mutated(WORKLOAD).prop_map(Case::Workload)
}

/// An op or sweep command line: real flags with values from small valid ones to nonsense, so
/// what runs stays small (tensors of at most a few tiles per chip) and what is refused is
/// refused for every reason there is.
pub fn op_args() -> impl Strategy<Value = Case> {
    let op = prop_oneof![Just("all-gather"), Just("reduce-scatter"), Just("all-reduce"), Just("all-to-all")];
    let shape = (
        pick(&["1", "2"], &["0", "-1"]),
        pick(&["1", "2"], &["0"]),
        pick(&["32", "64"], &["0", "31", "4294967296"]),
        pick(&["256", "512", "1024"], &["64", "33", "18446744073709551615"]),
    )
        .prop_map(|(w, z, y, x)| format!("{w},{z},{y},{x}"));
    let flag = |name: &'static str, good: &'static [&'static str], bad: &'static [&'static str]| {
        pick(good, bad).prop_map(move |v| vec![name.to_owned(), v.to_owned()])
    };
    let flag = prop_oneof![
        flag("--dim", &["3", "2"], &["0", "1", "4", "-1", "x"]),
        flag("--dtype", &["bf16", "bfp8", "fp32", "uint32"], &["int8", ""]),
        flag("--topology", &["ring", "line"], &["star"]),
        flag("--num-links", &["1", "2"], &["0", "3", "9"]),
        flag("--workers", &["1", "2", "4"], &["0", "8", "99"]),
        flag("--chips", &["2", "4", "8"], &["0", "1", "3", "9", "33"]),
        flag("--chip-ids", &["0,1", "0,2,6,7"], &["0,0", "0,7", "0,99", ""]),
        flag("--axis", &["0", "1"], &["2"]),
        flag("--redop", &["sum", "max"], &["avg"]),
        flag("--bidir", &["none", "split", "full"], &["both"]),
        flag("--stack", &["fabric", "edm"], &["nccl"]),
        flag("--pages-per-packet", &["1", "2"], &["0", "5"]),
        flag("--packet-size", &["1K", "4K"], &["0", "16", "17", "1G"]),
        flag("--skew-ns", &["0", "1000"], &["18446744073709551615", "-5"]),
        flag("--cluster", &["n300", "t3000", "galaxy"], &["nowhere"]),
        flag(
            "--fault",
            &["link-degrade:0:6:0.5", "link-flap:0:6@5:10", "straggler:1:3", "erisc-stall:0:6@5:10"],
            &["link-down:0:6@1", "link-down:0:8", "meteor:1", "straggler:99:1", "link-flap:0:6@1e30:1"]
        ),
        flag("--random-faults", &["1", "2"], &["1001", "-1"]),
        Just(vec!["--verify".to_owned()]),
        Just(vec!["--links".to_owned()]),
        Just(vec!["--format".to_owned(), "json".to_owned()]),
    ];
    (op, shape, proptest::collection::vec(flag, 0..4)).prop_map(|(op, shape, flags)| {
        let mut a = vec!["op".to_owned(), op.to_owned(), "--shape".to_owned(), shape];
        a.extend(flags.into_iter().flatten());
        Case::Args(a)
    })
}

/// A machine of the op space: a built-in one or a generated ring, line, mesh or torus (either
/// architecture, 1 to 4 links per pair), with its rows and columns (a line or ring is one row).
fn machine() -> impl Strategy<Value = (String, usize, usize)> {
    let builtin = proptest::sample::select(vec![
        ("n300", 1, 2),
        ("t3000", 2, 4),
        ("galaxy", 4, 8),
        ("galaxy_torus", 4, 8),
        ("p150", 1, 1),
        ("p300", 1, 2),
        ("bh_quietbox", 2, 2),
        ("bh_loudbox", 2, 4),
        ("bh_galaxy", 4, 8),
    ])
    .prop_map(|(name, r, c)| (name.to_owned(), r, c));
    // Links per pair up to the architecture's channels per direction (4 on Wormhole, 3 on
    // Blackhole), now and then one too many.
    let suffix = prop_oneof![
        4 => proptest::sample::select(vec!["", ":links=2", ":links=4"]),
        3 => proptest::sample::select(vec![":arch=blackhole", ":links=2:arch=blackhole", ":links=3:arch=blackhole"]),
        1 => Just(":links=4:arch=blackhole"),
    ]
    .prop_map(str::to_owned);
    let chain =
        (prop_oneof![Just("ring"), Just("line")], prop_oneof![2usize..=12, 30usize..=72], suffix.clone())
            .prop_map(|(kind, n, x)| (format!("{kind}:{n}{x}"), 1, n));
    let grid = (prop_oneof![(Just("mesh"), 1usize..=8), (Just("torus"), 3usize..=8)], 3usize..=8, suffix)
        // meshsim names a grid's shorter side its rows.
        .prop_map(|((kind, r), c, x)| (format!("{kind}:{r}x{c}{x}"), r.min(c), r.max(c)));
    prop_oneof![3 => builtin, 2 => chain, 2 => grid]
}

/// Every collective the CLI runs, with whether it takes a root.
const OPS: &[(&str, bool)] = &[
    ("all-gather", false),
    ("reduce-scatter", false),
    ("all-reduce", false),
    ("all-to-all", false),
    ("broadcast", true),
    ("reduce", true),
    ("gather", true),
    ("scatter", true),
    ("send-recv", false),
];

/// An op over the whole space users reach: any machine above, every collective, the whole
/// cluster or `--chips K` or an `--axis`, with or without a topology, any root, dtype, link
/// count, packet size, stack and model, and a small tensor of a few tiles per rank that splits
/// evenly over the ranks the communicator has (so most cases run rather than being refused).
/// No fault is injected: a case that fails (exit 1) is meshsim's bug.
pub fn op_space() -> impl Strategy<Value = Case> {
    let comm = prop_oneof![
        2 => Just(None),
        3 => (2usize..=9).prop_map(|k| Some(("--chips", k))),
        1 => (0usize..=1).prop_map(|a| Some(("--axis", a)))
    ];
    let opt = |values: &'static [&'static str]| proptest::option::of(proptest::sample::select(values));
    let knobs = (
        opt(&["ring", "line"]),
        opt(&["bf16", "bfp8", "fp32", "uint32"]),
        prop_oneof![4 => Just(None), 2 => Just(Some("1")), 2 => Just(Some("2")), 1 => Just(Some("4"))],
        opt(&["1K", "2K", "4K", "4352", "6144", "7616", "8192"]),
        opt(&["packet", "flow"]),
        prop_oneof![6 => Just(None), 1 => Just(Some("edm"))],
        prop_oneof![4 => Just(false), 1 => Just(true)],
    );
    (
        machine(),
        proptest::sample::select(OPS),
        comm,
        prop_oneof![8 => 1u64..=3, 1 => Just(320u64), 1 => Just(1030u64)],
        0usize..=9,
        any::<bool>(),
        knobs,
    )
        .prop_map(|((cluster, rows, cols), (op, rooted), comm, tiles, root, tall, knobs)| {
            let (topology, dtype, links, packet, model, stack, verify) = knobs;
            let chips = rows * cols;
            // A send/receive is a pair; other ops take at most the machine's chips (now and
            // then one more).
            let comm = match comm {
                _ if op == "send-recv" => Some(("--chips", 2)),
                Some(("--chips", k)) if k > chips && k != 9 => Some(("--chips", chips)),
                c => c,
            };
            let ranks = match comm {
                None => chips,
                Some(("--axis", 0)) => rows,
                Some(("--axis", _)) => cols,
                Some((_, k)) => k,
            }
            .max(1) as u64;
            // The split dim holds `tiles` tiles per rank; the other is one tile.
            // Now and then a tensor of hundreds of tiles per rank (up to 2 MiB of bf16), where
            // kernels' buffers must stream rather than hold it; on a few ranks only, so the
            // packet model stays quick.
            let tiles = if tiles > 3 && ranks > 8 { 3 } else { tiles };
            let split = 32 * ranks * tiles;
            let shape = if tall { format!("1,1,{split},32") } else { format!("1,1,32,{split}") };
            let mut a: Vec<String> =
                ["op", op, "--cluster", &cluster, "--shape", &shape, "--dim", if tall { "2" } else { "3" }]
                    .iter()
                    .map(|x| x.to_string())
                    .collect();
            let mut flag = |name: &str, value: Option<&str>| {
                if let Some(v) = value {
                    a.push(name.to_owned());
                    a.push(v.to_owned());
                }
            };
            if let Some((name, k)) = comm {
                flag(name, Some(&k.to_string()));
            }
            if rooted {
                flag("--root", Some(&(root as u64 % ranks + u64::from(root == 9) * ranks).to_string()));
            }
            flag("--topology", topology);
            flag("--dtype", dtype);
            flag("--num-links", links);
            flag("--packet-size", packet.filter(|_| stack.is_none()));
            flag("--model", model);
            flag("--stack", stack);
            if verify && model != Some("flow") && tiles <= 3 {
                a.push("--verify".to_owned());
            }
            Case::Strict(a)
        })
}

/// A value: one of `good` nine times in ten, else one of `bad`.
fn pick(
    good: &'static [&'static str],
    bad: &'static [&'static str],
) -> impl Strategy<Value = &'static str> + Clone {
    prop_oneof![9 => proptest::sample::select(good), 1 => proptest::sample::select(bad)]
}

/// Every kind of case, evenly.
pub fn any_case() -> impl Strategy<Value = Case> {
    prop_oneof![cluster(), params(), suite(), workload(), op_args(), op_space()]
}
