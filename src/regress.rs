//! The op-timing regression gate: suites of scenarios, their committed baselines, and the
//! comparison that fails CI when a simulated time moves.
//!
//! ```text
//!  configs/regress/ccl.yaml       scenarios: [{name, op, cluster, knobs..., tolerance_pct}]
//!  configs/regress/ccl.baseline   <scenario> <simulated time in ps>   # <µs>
//! ```
//!
//! The simulator is deterministic, so a scenario's time changes only when its inputs, the model
//! or the programs change: by default any change fails. Scenarios run in parallel, each a
//! single-threaded simulation, and are reported in file order.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use meshsim_engine::{Stats, Time};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::scenario::{RunError, Scenario};

/// A suite file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    /// What the suite covers.
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    /// The scenarios, run and reported in this order.
    scenarios: Vec<Scenario>,
}

/// One suite: its file, its scenarios and where its baseline lives.
pub struct Suite {
    /// The suite file.
    pub path: PathBuf,
    /// The file stem: the suite's name in tables.
    pub name: String,
    /// Its scenarios.
    pub scenarios: Vec<Scenario>,
}

impl Suite {
    /// The baseline file next to the suite: same stem, `.baseline`.
    pub fn baseline_path(&self) -> PathBuf {
        self.path.with_extension("baseline")
    }

    pub(crate) fn base_dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }
}

/// Where the suites are when `--suite` is not given: `configs/regress` in the working directory
/// or the nearest parent that has one (so `regress` runs from anywhere in a checkout), else in
/// the checkout meshsim was built from.
pub fn default_suites() -> Result<PathBuf, String> {
    const DIR: &str = "configs/regress";
    let cwd = std::env::current_dir().map_err(|e| format!("cannot read the working directory: {e}"))?;
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR);
    cwd.ancestors()
        .map(|d| d.join(DIR))
        .find(|p| p.is_dir())
        .or_else(|| built.is_dir().then_some(built))
        .ok_or_else(|| {
            format!("no regression suites: no {DIR} in {} or its parents; pass --suite PATH", cwd.display())
        })
}

/// Loads the suite `path` names: one YAML file, or every `*.yaml` in a directory.
pub fn load_suites(path: &Path) -> Result<Vec<Suite>, String> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        v.sort();
        if v.is_empty() {
            return Err(format!("{}: no regression suite (*.yaml) in this directory", path.display()));
        }
        v
    } else if path.is_file() {
        vec![path.to_owned()]
    } else {
        return Err(format!("{}: no such suite file or directory", path.display()));
    };
    files
        .into_iter()
        .map(|f| {
            let text =
                meshsim_topology::input::read_input_text(&f).map_err(|e| format!("{}: {e}", f.display()))?;
            let file: SuiteFile = meshsim_topology::input::from_yaml(&text).map_err(|e| {
                format!(
                    "{}: {}",
                    f.display(),
                    suggest_key(&one_line(&meshsim_topology::input::plain_message(&e.to_string())))
                )
            })?;
            if file.scenarios.is_empty() {
                // A gate with nothing to run would pass whatever changed.
                return Err(format!("{}: the suite has no scenarios", f.display()));
            }
            let mut seen = BTreeMap::new();
            for s in &file.scenarios {
                if s.name.is_empty() || s.name.contains(char::is_whitespace) {
                    return Err(format!("{}: scenario name '{}' must be one word", f.display(), s.name));
                }
                if seen.insert(s.name.clone(), ()).is_some() {
                    return Err(format!("{}: scenario '{}' is listed twice", f.display(), s.name));
                }
            }
            for s in file.scenarios.iter().filter(|s| s.links.is_some()) {
                eprintln!(
                    "meshsim: warning: {}: scenario '{}': `links` is now `num_links` (tt-metal's name, as in workloads and on the command line)",
                    f.display(),
                    s.name
                );
            }
            let name = f.file_stem().map_or("suite".into(), |s| s.to_string_lossy().into_owned());
            Ok(Suite { path: f, name, scenarios: file.scenarios })
        })
        .collect()
}

/// A scenario's keys, for "did you mean" (serde cannot list them past the flattened fault keys).
const SCENARIO_KEYS: [&str; 39] = [
    "name",
    "op",
    "cluster",
    "params",
    "tolerance_pct",
    "shape",
    "dim",
    "dtype",
    "topology",
    "num_links",
    "links",
    "workers",
    "bidir",
    "redop",
    "root",
    "exclude_myself",
    "in_place",
    "select",
    "chips",
    "chip_ids",
    "axis",
    "groups",
    "workload",
    "pages_per_packet",
    "buffers",
    "memory",
    "persistent_buffers",
    "skew_ns",
    "faults",
    "random_faults",
    "fault_seed",
    "verify",
    "stack",
    "model",
    "packet_size",
    "size",
    "slots",
    "samples",
    "packets",
];

/// A suite error naming an unknown key, with the key it most likely meant.
fn suggest_key(message: &str) -> String {
    let Some(at) = message.find("unknown field `") else { return message.to_owned() };
    let rest = &message[at + "unknown field `".len()..];
    let (Some(end), false) = (rest.find('`'), message.contains("did you mean")) else {
        return message.to_owned();
    };
    let extra = ["to_worker", "hops", "unmerged"];
    match meshsim_topology::input::did_you_mean(&rest[..end], SCENARIO_KEYS.iter().chain(&extra).copied()) {
        Some(m) => message.replacen(
            &format!("`{}`", &rest[..end]),
            &format!("`{}` (did you mean `{m}`?)", &rest[..end]),
            1,
        ),
        None => message.to_owned(),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A baseline: simulated time per scenario name, in file order.
pub type Baseline = Vec<(String, Time)>;

/// Reads a baseline file; a missing file is an empty baseline.
pub fn read_baseline(path: &Path) -> Result<Baseline, String> {
    let text = match meshsim_topology::input::read_input_text(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let body = line.split('#').next().unwrap_or("").trim();
        if body.is_empty() {
            continue;
        }
        let mut words = body.split_whitespace();
        let (Some(name), Some(ps), None) = (words.next(), words.next(), words.next()) else {
            return Err(format!("{}:{}: expected '<scenario> <time in ps>'", path.display(), i + 1));
        };
        let ps: u64 =
            ps.parse().map_err(|_| format!("{}:{}: '{ps}' is not a time in ps", path.display(), i + 1))?;
        if out.iter().any(|(n, _)| n == name) {
            return Err(format!("{}:{}: scenario '{name}' appears twice", path.display(), i + 1));
        }
        out.push((name.to_owned(), Time(ps)));
    }
    Ok(out)
}

/// The text of a baseline file: a header, then one aligned line per scenario.
pub fn render_baseline(
    suite: &str,
    entries: &[(String, Time)],
    notes: &BTreeMap<String, String>,
    provenance: &str,
) -> String {
    let mut s = format!(
        "# meshsim regression baseline for {suite}.yaml: scenario, simulated time in ps (# and µs, and\n\
         # what bound it). Written by `meshsim regress --update`; review changes to it like code.\n\
         # {PROVENANCE}{provenance}\n"
    );
    // A fixed column, not the longest name: adding a scenario must not realign every line.
    for (name, t) in entries {
        let note = notes.get(name).map_or(String::new(), |n| format!("; {n}"));
        let _ = writeln!(s, "{name:<40}  {:>16}  # {:.6} us{note}", t.0, t.as_us_f64());
    }
    s
}

/// The comment that says which meshsim and which parameters wrote a baseline.
pub const PROVENANCE: &str = "written by ";

/// A baseline's provenance line (which meshsim and parameters wrote it) and each entry's note
/// (what bound the scenario then), from its comments; a missing file has neither.
pub fn read_notes(path: &Path) -> (Option<String>, BTreeMap<String, String>) {
    let Ok(text) = std::fs::read_to_string(path) else { return (None, BTreeMap::new()) };
    let mut provenance = None;
    let mut notes = BTreeMap::new();
    for line in text.lines() {
        if let Some(p) = line.strip_prefix("# ").and_then(|l| l.strip_prefix(PROVENANCE)) {
            provenance = Some(p.trim().to_owned());
            continue;
        }
        let Some((body, comment)) = line.split_once('#') else { continue };
        let (Some(name), Some((_, note))) = (body.split_whitespace().next(), comment.split_once(" us; "))
        else {
            continue;
        };
        notes.insert(name.to_owned(), note.trim().to_owned());
    }
    (provenance, notes)
}

/// How a scenario compares with its baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Within tolerance.
    Ok,
    /// Moved beyond its tolerance.
    Moved,
    /// No baseline entry.
    New,
    /// A baseline entry with no scenario.
    Missing,
    /// The simulation failed.
    Error,
    /// `--update` wrote the baseline.
    Updated,
}

impl Status {
    /// Whether this status fails the gate.
    pub fn fails(self) -> bool {
        matches!(self, Status::Moved | Status::New | Status::Missing | Status::Error)
    }
}

/// One row of the regression table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Suite name.
    pub suite: String,
    /// Scenario name.
    pub scenario: String,
    /// Baseline time, µs.
    pub baseline_us: Option<f64>,
    /// Time now, µs.
    pub now_us: Option<f64>,
    /// now − baseline, ps (exact).
    pub delta_ps: Option<i64>,
    /// (now − baseline) / baseline, %.
    pub change_pct: Option<f64>,
    /// Allowed change, %.
    pub tolerance_pct: f64,
    /// The verdict.
    pub status: Status,
    /// What ran, for an op: algorithm, topology, links, workers, packing and dtype (empty for
    /// a microbenchmark, or when it did not run).
    pub ran: String,
    /// How far to trust its time against hardware, for an op ([`crate::trust::Trust::short`]:
    /// the accuracy record's error of that op on that architecture and model); empty for a
    /// microbenchmark, or when it did not run.
    pub accuracy: String,
    /// Why, when the simulation failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Result of running one scenario.
pub struct Ran {
    /// The simulated time.
    pub time: Time,
    /// The run's counters.
    pub stats: Stats,
    /// What it measured, in full ([`crate::scenario::Outcome::fingerprint`]).
    pub fingerprint: String,
    /// What bound it, in a few words ([`crate::op_cmd::verdict_short`]); ops only.
    pub summary: Option<String>,
    /// What ran ([`crate::op_cmd::ran_short`]); ops only.
    pub what: Option<String>,
    /// How far to trust it ([`crate::trust::Trust::short`]); ops only.
    pub accuracy: Option<String>,
}

/// Runs the scenarios of `suites` (all of them, or those named `only`) in parallel. Bad input
/// (a scenario that cannot be run as written) is an `Err` naming the file and scenario;
/// simulation failures are per-scenario results.
#[allow(clippy::type_complexity)]
pub fn run_all(
    suites: &[Suite],
    only: Option<&str>,
    params: Option<&crate::scenario::ParamSource>,
    tick: &(dyn Fn() + Sync),
) -> Result<Vec<Vec<Option<Result<Ran, String>>>>, String> {
    let jobs = jobs(suites, only);
    let results: Vec<((usize, usize), Result<Ran, RunError>)> = jobs
        .par_iter()
        .with_max_len(1)
        .map(|&(i, j)| {
            let (suite, sc) = (&suites[i], &suites[i].scenarios[j]);
            let r = sc.run(suite.base_dir(), params, false).map(|o| {
                let first = o.op.as_ref().and_then(|d| d.ops.first());
                Ran {
                    time: o.time,
                    fingerprint: o.fingerprint(),
                    summary: o.op.as_ref().and_then(|d| crate::op_cmd::verdict_short(&o.cluster, &d.run)),
                    what: first.map(crate::op_cmd::ran_short),
                    accuracy: first.map(|op| crate::trust::Trust::of_op(o.cluster.arch(), op).short()),
                    stats: o.stats,
                }
            });
            tick();
            ((i, j), r)
        })
        .collect();
    let mut out: Vec<Vec<Option<Result<Ran, String>>>> =
        suites.iter().map(|s| s.scenarios.iter().map(|_| None).collect()).collect();
    for ((i, j), r) in results {
        out[i][j] = Some(match r {
            Ok(ran) => Ok(ran),
            Err(RunError::Bad(m)) => {
                return Err(format!(
                    "{}: scenario '{}': {m}",
                    suites[i].path.display(),
                    suites[i].scenarios[j].name
                ));
            }
            Err(e @ (RunError::Sim(_) | RunError::Failed(_))) => Err(e.to_string()),
        });
    }
    Ok(out)
}

/// Every (suite, scenario) index pair to run: all, or those `only` names.
fn jobs(suites: &[Suite], only: Option<&str>) -> Vec<(usize, usize)> {
    suites
        .iter()
        .enumerate()
        .flat_map(|(i, s)| (0..s.scenarios.len()).map(move |j| (i, j)))
        .filter(|&(i, j)| only.is_none_or(|n| suites[i].scenarios[j].name == n))
        .collect()
}

/// Compares one suite's results with its baseline; returns the table rows and, for `--update`,
/// the new baseline. With `only`, scenarios not run keep their baseline entries.
pub fn compare(
    suite: &Suite,
    results: &[Option<Result<Ran, String>>],
    baseline: &Baseline,
    update: bool,
) -> (Vec<Row>, Baseline) {
    let base: BTreeMap<&str, Time> = baseline.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    let mut rows = Vec::new();
    let mut new_baseline = Vec::new();
    for (sc, r) in suite.scenarios.iter().zip(results) {
        let was = base.get(sc.name.as_str()).copied();
        let Some(r) = r else {
            // Not selected: keep its entry as it was.
            if let Some(t) = was {
                new_baseline.push((sc.name.clone(), t));
            }
            continue;
        };
        let mut row = Row {
            suite: suite.name.clone(),
            scenario: sc.name.clone(),
            baseline_us: was.map(Time::as_us_f64),
            now_us: None,
            delta_ps: None,
            change_pct: None,
            tolerance_pct: sc.tolerance_pct,
            status: Status::Ok,
            ran: String::new(),
            accuracy: String::new(),
            error: None,
        };
        match r {
            Err(e) => {
                row.status = Status::Error;
                row.error = Some(e.clone());
                if let Some(t) = was {
                    new_baseline.push((sc.name.clone(), t));
                }
            }
            Ok(ran) => {
                row.now_us = Some(ran.time.as_us_f64());
                row.ran = ran.what.clone().unwrap_or_default();
                row.accuracy = ran.accuracy.clone().unwrap_or_default();
                new_baseline.push((sc.name.clone(), ran.time));
                row.status = match was {
                    None => Status::New,
                    Some(b) => {
                        let change = (ran.time.0 as f64 - b.0 as f64) / (b.0 as f64).max(1.0) * 100.0;
                        row.change_pct = Some(change);
                        row.delta_ps = Some(ran.time.0 as i64 - b.0 as i64);
                        let moved = if sc.tolerance_pct == 0.0 {
                            ran.time != b
                        } else {
                            change.abs() > sc.tolerance_pct
                        };
                        if moved { Status::Moved } else { Status::Ok }
                    }
                };
                if update && row.status != Status::Ok {
                    row.status = Status::Updated;
                }
            }
        }
        rows.push(row);
    }
    rows.extend(missing(suite, baseline, update));
    (rows, new_baseline)
}

/// The rows of baseline entries with no scenario: `missing`, or `updated` (dropped) under
/// `--update`.
fn missing(suite: &Suite, baseline: &Baseline, update: bool) -> Vec<Row> {
    baseline
        .iter()
        .filter(|(name, _)| !suite.scenarios.iter().any(|s| &s.name == name))
        .map(|(name, t)| Row {
            suite: suite.name.clone(),
            scenario: name.clone(),
            baseline_us: Some(t.as_us_f64()),
            now_us: None,
            delta_ps: None,
            change_pct: None,
            tolerance_pct: 0.0,
            status: if update { Status::Updated } else { Status::Missing },
            ran: String::new(),
            accuracy: String::new(),
            error: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(name: &str, tol: f64) -> Scenario {
        let yaml = format!("name: {name}\nop: latency\ncluster: n300\nsize: 16\ntolerance_pct: {tol}\n");
        serde_yaml::from_str(&yaml).unwrap()
    }

    #[test]
    fn baselines_round_trip_through_their_text() {
        let entries = vec![("a".to_owned(), Time(123_456_789)), ("long-name".to_owned(), Time(7))];
        let text = render_baseline("ccl", &entries, &BTreeMap::new(), "meshsim 0.1.0");
        let path = std::env::temp_dir().join(format!("meshsim-baseline-{}.baseline", std::process::id()));
        std::fs::write(&path, &text).unwrap();
        assert_eq!(read_baseline(&path).unwrap(), entries);
        std::fs::write(&path, "a 12\nb twelve\n").unwrap();
        let err = read_baseline(&path).unwrap_err();
        assert!(err.ends_with(":2: 'twelve' is not a time in ps"), "{err}");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn any_change_moves_a_zero_tolerance_scenario_and_tolerances_are_percentages() {
        let suite = Suite {
            path: "s.yaml".into(),
            name: "s".into(),
            scenarios: vec![scenario("exact", 0.0), scenario("loose", 1.0), scenario("fresh", 0.0)],
        };
        let ran = |ps| {
            Some(Ok(Ran {
                time: Time(ps),
                stats: Stats::default(),
                fingerprint: String::new(),
                summary: None,
                what: None,
                accuracy: None,
            }))
        };
        let results = vec![ran(1_000_001), ran(1_009_000), ran(5)];
        let baseline = vec![
            ("exact".to_owned(), Time(1_000_000)),
            ("loose".to_owned(), Time(1_000_000)),
            ("gone".to_owned(), Time(9)),
        ];
        let (rows, _) = compare(&suite, &results, &baseline, false);
        let got: Vec<(&str, Status)> = rows.iter().map(|r| (r.scenario.as_str(), r.status)).collect();
        assert_eq!(
            got,
            [
                ("exact", Status::Moved),
                ("loose", Status::Ok),
                ("fresh", Status::New),
                ("gone", Status::Missing)
            ]
        );
        let (rows, new) = compare(&suite, &results, &baseline, true);
        assert!(rows.iter().all(|r| !r.status.fails()));
        assert_eq!(
            new,
            [
                ("exact".to_owned(), Time(1_000_001)),
                ("loose".to_owned(), Time(1_009_000)),
                ("fresh".to_owned(), Time(5))
            ]
        );
    }
}

/// Per-rank bytes from which the flow model is held to [`FLOW_BOUND_LARGE`] of the packet
/// model, and below which to [`FLOW_BOUND_SMALL`] (issue 33's bounds).
pub const FLOW_LARGE_FROM: u64 = 1 << 20;
/// The flow model's allowed error from [`FLOW_LARGE_FROM`] bytes per rank up, %.
pub const FLOW_BOUND_LARGE: f64 = 3.0;
/// Its allowed error below, %.
pub const FLOW_BOUND_SMALL: f64 = 10.0;

/// The flow model's allowed error, %, for an op of `per_rank` bytes per rank (a workload's
/// ops all count as small unless every one is large).
pub fn flow_bound(per_rank: Option<u64>) -> f64 {
    if per_rank.is_some_and(|b| b >= FLOW_LARGE_FROM) { FLOW_BOUND_LARGE } else { FLOW_BOUND_SMALL }
}

/// A scenario on the flow model beside its baseline, the packet model's time.
#[derive(Clone, Debug, Serialize)]
pub struct FlowRow {
    /// Suite name.
    pub suite: String,
    /// Scenario name.
    pub scenario: String,
    /// The op's bytes per rank (its tensor over its ranks; none for a workload).
    pub per_rank_bytes: Option<u64>,
    /// The packet model's time (the baseline), µs.
    pub packet_us: Option<f64>,
    /// The flow model's time, µs.
    pub flow_us: Option<f64>,
    /// (flow − packet) / packet, %.
    pub error_pct: Option<f64>,
    /// The error allowed, % ([`flow_bound`]).
    pub bound_pct: f64,
    /// `ok`, `over` (beyond the bound), `skipped` (what the flow model does not run) or
    /// `error`.
    pub status: &'static str,
    /// Why it was skipped or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Why the flow model does not run scenario `sc`, if it does not: microbenchmarks measure
/// the packet model itself; the flow model carries the fabric stack, without faults.
fn flow_skips(suite: &Suite, sc: &Scenario) -> Option<String> {
    use crate::scenario::Kind;
    use meshsim_ccl::op::{SimModel, Stack};
    let can = |stack| meshsim_ccl::stacks::capabilities(stack, SimModel::Flow);
    let stack = match sc.op {
        Kind::Op(_) => sc.stack.unwrap_or(Stack::DEFAULT),
        Kind::Workload => {
            let file = sc.workload.as_ref()?;
            crate::workload::Workload::load(&suite.base_dir().join(file)).ok()?.stack
        }
        _ if !can(Stack::DEFAULT).microbenchmarks => {
            return Some("a microbenchmark of the packet model".into());
        }
        _ => return None,
    };
    if !can(stack).runs_ops {
        return Some(format!("the {stack} stack (the flow model carries the fabric)"));
    }
    if sc.faults.any() && !can(stack).faults {
        return Some("faults (the packet model's)".into());
    }
    None
}

/// Runs every op and workload scenario of `suites` (those `only` names) on the flow model and
/// compares each with its baseline: the flow model's error against the packet model.
pub fn run_flow(
    suites: &[Suite],
    baselines: &[Baseline],
    only: Option<&str>,
    params: Option<&crate::scenario::ParamSource>,
    tick: &(dyn Fn() + Sync),
) -> Vec<FlowRow> {
    let jobs = jobs(suites, only);
    jobs.par_iter()
        .with_max_len(1)
        .map(|&(i, j)| {
            let (suite, sc) = (&suites[i], &suites[i].scenarios[j]);
            let packet = baselines[i].iter().find(|(n, _)| *n == sc.name).map(|(_, t)| *t);
            let mut row = FlowRow {
                suite: suite.name.clone(),
                scenario: sc.name.clone(),
                per_rank_bytes: None,
                packet_us: packet.map(Time::as_us_f64),
                flow_us: None,
                error_pct: None,
                bound_pct: FLOW_BOUND_SMALL,
                status: "skipped",
                note: None,
            };
            if let Some(why) = flow_skips(suite, sc) {
                row.note = Some(why);
                tick();
                return row;
            }
            // The flow model moves no bytes: a verifying scenario's time is its timing run's.
            let mut flow = sc.clone();
            flow.model = Some(meshsim_ccl::op::SimModel::Flow);
            flow.verify = None;
            match flow.run(suite.base_dir(), params, false) {
                Ok(o) => {
                    row.per_rank_bytes =
                        o.op.as_ref().map(|d| d.tensor.bytes() / d.chips.len().max(1) as u64);
                    row.bound_pct = flow_bound(row.per_rank_bytes);
                    row.flow_us = Some(o.time.as_us_f64());
                    row.error_pct =
                        packet.map(|p| 100.0 * (o.time.0 as f64 - p.0 as f64) / (p.0 as f64).max(1.0));
                    row.status = match row.error_pct {
                        Some(e) if e.abs() <= row.bound_pct => "ok",
                        Some(_) => "over",
                        None => "error",
                    };
                    if packet.is_none() {
                        row.note = Some("no baseline".into());
                    }
                }
                Err(e) => {
                    row.status = "error";
                    row.note = Some(e.to_string());
                }
            }
            tick();
            row
        })
        .collect()
}
