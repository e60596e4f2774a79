//! `meshsim regress`: the regression gate's command — run, compare, update, report.

use crate::out::out;
use std::path::Path;
use std::process::ExitCode;

use meshsim_bench::report;

use crate::cli::GateFormat;
use crate::{BadInput, load_model, progress, write_trace};
use crate::{regress, scenario};

pub(crate) fn run_regress(
    suite_path: &Path,
    update: bool,
    only: Option<&str>,
    trace: Option<&Path>,
    (check, check_shortcuts): (bool, bool),
    model: crate::cli::ParamsFile,
    format: GateFormat,
) -> anyhow::Result<ExitCode> {
    crate::check_outputs(None, trace)?;
    let suites = regress::load_suites(suite_path).map_err(BadInput)?;
    let find = |name: &str| {
        suites.iter().find_map(|s| s.scenarios.iter().find(|sc| sc.name == name).map(|sc| (s, sc)))
    };
    if let Some(name) = only
        && find(name).is_none()
    {
        return Err(BadInput(format!("{}: no scenario named '{name}'", suite_path.display())).into());
    }
    let (params, baselines) = params_and_baselines(&model, &suites)?;
    let total =
        suites.iter().flat_map(|s| &s.scenarios).filter(|sc| only.is_none_or(|n| sc.name == n)).count();
    let pb = progress(total as u64, "regress");
    let results = regress::run_all(&suites, only, params.as_ref(), &|| pb.inc(1)).map_err(BadInput)?;
    pb.finish_and_clear();
    let shortcuts_differ = if check_shortcuts {
        meshsim_engine::set_shortcuts_by_default(false);
        let pb = progress(total as u64, "regress --exact");
        let exact = regress::run_all(&suites, only, params.as_ref(), &|| pb.inc(1)).map_err(BadInput);
        pb.finish_and_clear();
        meshsim_engine::set_shortcuts_by_default(true);
        compare_shortcuts(&suites, &results, &exact?)
    } else {
        0
    };
    let rows =
        compare_and_update(&suites, &results, &baselines, only, (update, &provenance(params.as_ref())))?;
    match format.table() {
        Some(f) => out!("{}", report::render(&rows, f.into()))?,
        None => out!("{}", crate::junit::render("meshsim regress", &crate::junit::gate_cases(&rows)))?,
    }
    let failing = summarise(&rows, update);
    if !update {
        explain_moves(suite_path, &suites, &results, &rows, &model);
    }
    // One scenario again, for determinism and traces.
    let picked =
        only.and_then(find).or_else(|| suites.iter().find_map(|s| s.scenarios.first().map(|sc| (s, sc))));
    if let Some((suite, sc)) = picked.filter(|_| check || trace.is_some())
        && !run_again(&suites, &results, (suite, sc), params.as_ref(), check, trace)?
    {
        return Ok(ExitCode::FAILURE);
    }
    if failing > 0 && !update {
        eprintln!(
            "meshsim: {failing} scenario(s) fail the gate: {}",
            rows.iter()
                .filter(|r| r.status.fails())
                .map(|r| format!("{}/{}", r.suite, r.scenario))
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(ExitCode::FAILURE);
    }
    if rows.iter().any(|r| r.status == regress::Status::Error) || shortcuts_differ > 0 {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The parameters every scenario takes (`--params`, `--link-gbps`; `None`: each its own) and
/// every suite's baseline.
fn params_and_baselines(
    model: &crate::cli::ParamsFile,
    suites: &[regress::Suite],
) -> anyhow::Result<(Option<scenario::ParamSource>, Vec<regress::Baseline>)> {
    let params = match !model.params.is_empty() || model.link_gbps.is_some() {
        true => Some(load_model(&model.params, model.link_gbps)?),
        false => None,
    };
    // A parameter file applies to its architecture's chips: one no scenario runs on is refused.
    if let Some(p) = &params {
        let mut archs = Vec::new();
        for s in suites {
            for sc in &s.scenarios {
                let spec = sc.cluster_spec(s.path.parent().unwrap_or(Path::new(".")));
                if let Ok(c) = scenario::load_cluster(&spec)
                    && !archs.contains(&c.arch())
                {
                    archs.push(c.arch());
                }
            }
        }
        p.check(&archs).map_err(|e| BadInput(e.to_string()))?;
    }
    let baselines = suites
        .iter()
        .map(|s| regress::read_baseline(&s.baseline_path()))
        .collect::<Result<_, _>>()
        .map_err(BadInput)?;
    Ok((params, baselines))
}

/// `regress --model flow`: every op and workload scenario on the flow model beside its
/// baseline (the packet model's time), a row each with the error; exit 1 when one is beyond
/// the flow model's bound or failed to run. `gate_flags`: whether the gate's own flags were
/// given (`--update`, `--check-determinism`, `--check-shortcuts`, `--trace`), which it refuses.
pub(crate) fn run_flow_errors(
    suite_path: &Path,
    (only, gate_flags): (Option<&str>, bool),
    model: crate::cli::ParamsFile,
    format: GateFormat,
) -> anyhow::Result<ExitCode> {
    if gate_flags {
        return Err(BadInput(
            "regress --model flow reports the flow model's error against the baselines: it takes no --update, --check-determinism, --check-shortcuts or --trace".into(),
        )
        .into());
    }
    let suites = regress::load_suites(suite_path).map_err(BadInput)?;
    if let Some(name) = only
        && !suites.iter().any(|s| s.scenarios.iter().any(|sc| sc.name == name))
    {
        return Err(BadInput(format!("{}: no scenario named '{name}'", suite_path.display())).into());
    }
    let (params, baselines) = params_and_baselines(&model, &suites)?;
    let total =
        suites.iter().flat_map(|s| &s.scenarios).filter(|sc| only.is_none_or(|n| sc.name == n)).count();
    let pb = progress(total as u64, "regress --model flow");
    let rows = regress::run_flow(&suites, &baselines, only, params.as_ref(), &|| pb.inc(1));
    pb.finish_and_clear();
    match format.table() {
        Some(f) => out!("{}", report::render(&rows, f.into()))?,
        None => {
            let cases = crate::junit::flow_cases(&rows);
            out!("{}", crate::junit::render("meshsim regress --model flow", &cases))?;
        }
    }
    let count = |st: &str| rows.iter().filter(|r| r.status == st).count();
    let errors: Vec<f64> = rows.iter().filter_map(|r| r.error_pct.map(f64::abs)).collect();
    let spread = match errors.len() {
        // (A sum of no f64 is -0.0: say there is nothing to average instead.)
        0 => "no scenario compared".to_owned(),
        n => {
            let worst = errors.iter().copied().fold(0.0, f64::max);
            format!("|error| mean {:.1} %, worst {worst:.1} %", errors.iter().sum::<f64>() / n as f64)
        }
    };
    eprintln!(
        "meshsim: flow model on {} scenario(s): {} within bound, {} beyond, {} skipped, {} failed to run; {spread}",
        rows.len(),
        count("ok"),
        count("over"),
        count("skipped"),
        count("error"),
    );
    for r in rows.iter().filter(|r| r.status == "error") {
        eprintln!("meshsim: {}/{} failed: {}", r.suite, r.scenario, r.note.as_deref().unwrap_or(""));
    }
    Ok(if count("over") + count("error") > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Compares every suite's results with its baseline (rewriting the baseline under `update`);
/// with `only`, leaves out the rows of scenarios that did not run.
fn compare_and_update(
    suites: &[regress::Suite],
    results: &[Vec<Option<Result<regress::Ran, String>>>],
    baselines: &[regress::Baseline],
    only: Option<&str>,
    (update, provenance): (bool, &str),
) -> anyhow::Result<Vec<regress::Row>> {
    let mut rows = Vec::new();
    for ((suite, res), base) in suites.iter().zip(results).zip(baselines) {
        let (mut r, new_base) = regress::compare(suite, res, base, update);
        let (written_by, mut notes) = regress::read_notes(&suite.baseline_path());
        if let Some(w) = written_by.filter(|w| w != provenance && !update) {
            eprintln!(
                "meshsim: {}: the baseline was written by {w}; this is {provenance}: a move may be meshsim's or the parameters', not your change",
                suite.name
            );
        }
        if only.is_some() {
            // A single scenario says nothing about the others: no missing entries.
            r.retain(|row| {
                res.iter().zip(&suite.scenarios).any(|(x, sc)| x.is_some() && sc.name == row.scenario)
            });
        }
        for (sc, x) in suite.scenarios.iter().zip(res) {
            if let Some(Ok(ran)) = x {
                match &ran.summary {
                    Some(s) => notes.insert(sc.name.clone(), s.clone()),
                    None => notes.remove(&sc.name),
                };
            }
        }
        let path = suite.baseline_path();
        let text = regress::render_baseline(&suite.name, &new_base, &notes, provenance);
        if update && std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&path, text)
                .map_err(|e| BadInput(format!("{}: cannot write the baseline: {e}", path.display())))?;
            eprintln!("meshsim: wrote {}", path.display());
        }
        rows.extend(r);
    }
    Ok(rows)
}

/// The suites `regress` runs: `--suite`'s, else the default ones ([`regress::default_suites`]);
/// `--update` rewrites files, so without `--suite` only suites under the working directory.
pub(crate) fn suite_path(
    suite: Option<std::path::PathBuf>,
    update: bool,
) -> anyhow::Result<std::path::PathBuf> {
    if let Some(s) = suite {
        return Ok(s);
    }
    let found = regress::default_suites().map_err(BadInput)?;
    let cwd = std::env::current_dir().unwrap_or_default();
    if update && !found.starts_with(&cwd) {
        return Err(BadInput(format!(
            "--update would rewrite the baselines of {}, outside the working directory: name them with --suite to do that",
            found.display()
        ))
        .into());
    }
    Ok(found)
}

/// Which meshsim and parameters a run is: its version and a digest of each architecture's
/// parameters in effect (`--params` files, else the built-in ones), as a baseline records it.
fn provenance(source: Option<&scenario::ParamSource>) -> String {
    let builtin = scenario::ParamSource::default();
    let source = source.unwrap_or(&builtin);
    let digest = |arch: meshsim_topology::Arch| {
        let p = source
            .files
            .iter()
            .find(|(_, p)| p.arch() == arch)
            .map(|(_, p)| p.clone())
            .or_else(|| meshsim_hw::Params::of(arch));
        let text = p.map(|p| serde_yaml::to_string(&p).unwrap_or_default()).unwrap_or_default()
            + &source.link_gbps.map_or(String::new(), |g| format!("link_gbps {g}"));
        // The event log's hash: a fingerprint stable across builds and platforms.
        let h = meshsim_engine::fnv1a(text.as_bytes());
        format!("{arch} {h:016x}")
    };
    format!(
        "meshsim {} with parameters {}, {}",
        env!("CARGO_PKG_VERSION"),
        digest(meshsim_topology::Arch::WormholeB0),
        digest(meshsim_topology::Arch::Blackhole)
    )
}

/// For every scenario that moved: what bound it when its baseline was written and what binds it
/// now, and the command that reproduces it (with a trace to look at).
fn explain_moves(
    suite_path: &Path,
    suites: &[regress::Suite],
    results: &[Vec<Option<Result<regress::Ran, String>>>],
    rows: &[regress::Row],
    model: &crate::cli::ParamsFile,
) {
    let params: String = model.params.iter().map(|p| format!(" --params {}", p.display())).collect();
    for row in rows.iter().filter(|r| r.status == regress::Status::Moved) {
        let Some((i, suite)) = suites.iter().enumerate().find(|(_, s)| s.name == row.suite) else { continue };
        let (_, notes) = regress::read_notes(&suite.baseline_path());
        let now = suite
            .scenarios
            .iter()
            .position(|sc| sc.name == row.scenario)
            .and_then(|j| results[i][j].as_ref())
            .and_then(|r| r.as_ref().ok())
            .and_then(|r| r.summary.clone());
        let was = notes.get(&row.scenario).cloned();
        eprintln!(
            "meshsim: {}/{} moved {:+.3} %: was {}; now {}",
            row.suite,
            row.scenario,
            row.change_pct.unwrap_or(0.0),
            was.as_deref().unwrap_or("(no note in the baseline)"),
            now.as_deref().unwrap_or("(no link crossed)")
        );
        eprintln!(
            "meshsim:   reproduce: meshsim regress --suite {} --scenario {}{params} --trace {}.json",
            suite_path.display(),
            row.scenario,
            row.scenario
        );
    }
}

/// Prints the gate's one-line count and each failed run; returns how many rows fail it.
fn summarise(rows: &[regress::Row], update: bool) -> usize {
    let count = |st: regress::Status| rows.iter().filter(|r| r.status == st).count();
    use regress::Status as S;
    let failing = rows.iter().filter(|r| r.status.fails()).count();
    eprintln!(
        "meshsim: {} scenario(s): {} ok, {} moved, {} new, {} missing, {} failed to run{}",
        rows.len(),
        count(S::Ok),
        count(S::Moved),
        count(S::New),
        count(S::Missing),
        count(S::Error),
        if update { format!(", {} baseline entries updated", count(S::Updated)) } else { String::new() }
    );
    for r in rows.iter().filter(|r| r.status == S::Error) {
        eprintln!("meshsim: {}/{} failed: {}", r.suite, r.scenario, r.error.as_deref().unwrap_or(""));
    }
    failing
}

/// Runs the picked scenario again: `check` fails (false) unless the second run gives the first
/// run's event-log hash; `trace` writes its trace.
fn run_again(
    suites: &[regress::Suite],
    results: &[Vec<Option<Result<regress::Ran, String>>>],
    (suite, sc): (&regress::Suite, &scenario::Scenario),
    params: Option<&crate::scenario::ParamSource>,
    check: bool,
    trace: Option<&Path>,
) -> anyhow::Result<bool> {
    let base = suite.path.parent().unwrap_or(Path::new("."));
    let again = sc.run(base, params, trace.is_some()).map_err(|e| BadInput(e.to_string()))?;
    if check {
        let i = suites.iter().position(|s| std::ptr::eq(s, suite)).expect("suite of the scenario");
        let j = suite.scenarios.iter().position(|x| std::ptr::eq(x, sc)).expect("scenario of the suite");
        if let Some(Ok(first)) = &results[i][j] {
            if let Err(e) = scenario::same_run((first.time, &first.stats), (again.time, &again.stats)) {
                eprintln!("meshsim: {}/{}: {e}", suite.name, sc.name);
                return Ok(false);
            }
            eprintln!(
                "meshsim: {}/{} deterministic: the parallel run and a second run gave {} events, event-log hash {:016x}",
                suite.name, sc.name, first.stats.events, first.stats.log_hash
            );
        }
    }
    if let (Some(path), Some(t)) = (trace, &again.trace) {
        write_trace(path, t, &again.cluster)?;
    }
    Ok(true)
}

/// Compares each scenario's run with shortcuts (`fast`) and without (`exact`); prints one line
/// per scenario — events both ways, events saved, same or how it differed — and returns how
/// many differed.
fn compare_shortcuts(
    suites: &[regress::Suite],
    fast: &[Vec<Option<Result<regress::Ran, String>>>],
    exact: &[Vec<Option<Result<regress::Ran, String>>>],
) -> usize {
    let mut differ = 0;
    for (suite, (f, e)) in suites.iter().zip(fast.iter().zip(exact)) {
        for (sc, (f, e)) in suite.scenarios.iter().zip(f.iter().zip(e)) {
            let (Some(f), Some(e)) = (f, e) else { continue };
            let name = format!("{}/{}", suite.name, sc.name);
            match (f, e) {
                (Ok(f), Ok(e)) if f.fingerprint == e.fingerprint => eprintln!(
                    "meshsim: shortcuts {name}: same; {} events, {} exact, {} elided",
                    f.stats.events, e.stats.events, f.stats.elided
                ),
                (Err(f), Err(e)) if f == e => eprintln!("meshsim: shortcuts {name}: same failure"),
                (f, e) => {
                    differ += 1;
                    let show = |r: &Result<regress::Ran, String>| match r {
                        Ok(r) => r.fingerprint.clone(),
                        Err(m) => format!("failed: {m}"),
                    };
                    eprintln!(
                        "meshsim: shortcuts {name}: DIFFER\n  with:    {}\n  without: {}",
                        show(f),
                        show(e)
                    );
                }
            }
        }
    }
    differ
}
