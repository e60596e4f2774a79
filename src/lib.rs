//! The `meshsim` command line: the only place that parses arguments and picks exit codes.
//!
//! Exit codes: 0 success; 1 a check failed; 2 bad input (one line naming what and where).
//!
//! The binary is [`cli_main`]; [`api`] runs the same command line inside another program (the
//! Python package), its output returned instead of printed.

use std::process::ExitCode;

use std::path::{Path, PathBuf};

mod accuracy;
pub mod api;
mod bench_cmd;
mod cli;
mod cli_groups;
mod junit;
mod op_cmd;
mod ops_report;
mod out;
mod regress;
mod regress_cmd;
mod replay;
mod run_cmd;
mod scenario;
mod spec;
mod sweep_cmd;
mod sweep_series;
mod topo_cmd;
mod trust;
mod tune_cmd;
mod workload;

use bench_cmd::run_bench;
use cli::{Cli, Command, Output, TopoFormat};
use op_cmd::run_op;
use out::out;
use regress_cmd::run_regress;
use topo_cmd::{topo_dot, topo_json, topo_text};

use meshsim_bench::plot::{self, Plot, Series};
use meshsim_bench::{BenchError, Setup, calibration, report};
use meshsim_ccl::op::Stack;
use meshsim_hw::Params;
use meshsim_topology::Cluster;

/// An error that is the user's input, not a failure of meshsim: exit code 2.
#[derive(Debug)]
struct BadInput(String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// The `meshsim` command line, as the binary runs it: the arguments of the process, errors on
/// standard error after `meshsim: `, and Ctrl-C stopping a sweep.
pub fn cli_main() -> ExitCode {
    // A panic is a bug in meshsim: say so in one line, without a backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("meshsim: internal error (please report): {info}");
    }));
    CTRL_C_STOPS_SWEEPS.store(true, std::sync::atomic::Ordering::SeqCst);
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let ended = execute(&args);
    if let Some(f) = &ended.failure {
        eprintln!("meshsim: {}", f.message);
    }
    ExitCode::from(ended.code)
}

/// How one run of the command line ended: its exit code (0 success, 1 a check or the
/// simulation failed, 2 bad input, 130 interrupted) and, when it failed, why.
pub struct Ended {
    /// The exit code the binary returns.
    pub code: u8,
    /// Why it failed, when it failed with an error rather than a verdict.
    pub failure: Option<Failure>,
}

/// An error a command ended with, as the binary reports it.
pub struct Failure {
    /// The one line the binary prints after `meshsim: ` (with `--full-report`, the full report).
    pub message: String,
    /// The engine's full report: every stalled kernel and the word it waits for, for a
    /// simulation that deadlocked; the message otherwise.
    pub report: String,
    /// What kind of error it is.
    pub kind: FailureKind,
}

/// What kind of error ended a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The user's input (exit code 2): a flag, a file, an op's arguments.
    BadInput,
    /// The simulation deadlocked or broke a protocol, or a check of its output failed (exit 1).
    Simulation,
    /// Standard output could not be written (exit 1).
    Output,
}

/// Runs the command line `args` (the program's name first, as `std::env::args_os` gives it) and
/// says how it ended. Standard output goes where [`out::write`] sends it.
pub fn execute(args: &[std::ffi::OsString]) -> Ended {
    let cli = match parse_args(args) {
        Ok(cli) => cli,
        Err(e) => return clap_exit(&e, args),
    };
    let full_report = cli.full_report;
    match run(cli) {
        Ok(code) => Ended { code: code_of(code), failure: None },
        Err(e) => {
            if let Some(o) = e.downcast_ref::<out::OutputError>() {
                // A closed pipe has nobody left to tell; a full disk gets its one line.
                if o.is_closed_pipe() {
                    return Ended { code: 0, failure: None };
                }
                return failed(1, o.to_string(), None, FailureKind::Output);
            }
            let report = e.to_string();
            let message = match e.downcast_ref::<meshsim_ccl::op::CclError>().and_then(deadlock_summary) {
                Some(summary) if !full_report => summary,
                _ => report.clone(),
            };
            let code = exit_code(&e);
            let kind = if code == 2 { FailureKind::BadInput } else { FailureKind::Simulation };
            failed(code, message, Some(report), kind)
        }
    }
}

/// A failed run's [`Ended`].
fn failed(code: u8, message: String, report: Option<String>, kind: FailureKind) -> Ended {
    let report = report.unwrap_or_else(|| message.clone());
    Ended { code, failure: Some(Failure { message, report, kind }) }
}

/// The number behind a command's `ExitCode` (which has no accessor): the four meshsim uses.
fn code_of(code: ExitCode) -> u8 {
    [0, 1, 2, 130].into_iter().find(|&k| ExitCode::from(k) == code).unwrap_or(1)
}

/// A deadlock's report in one line: how many kernels stalled on which chips (the ERISC ones —
/// routers, EDMs — and the workers'), which kernels, the first stalled one and what it waits
/// for, the faults in force; `--full-report` prints every stalled kernel instead.
fn deadlock_summary(e: &meshsim_ccl::op::CclError) -> Option<String> {
    use meshsim_engine::SimError;
    let meshsim_ccl::op::CclError::Simulation { error: SimError::Deadlock { at, stalled }, faults } = e
    else {
        return None;
    };
    let first = stalled.first()?;
    let part = |t: &str, i: usize| t.split('/').nth(i).unwrap_or("").to_owned();
    let mut chips: Vec<String> = stalled.iter().map(|s| part(&s.task, 0)).collect();
    chips.sort();
    chips.dedup();
    let erisc = stalled.iter().filter(|s| part(&s.task, 1).starts_with("eth")).count();
    let mut kernels: Vec<String> = stalled
        .iter()
        .map(|s| {
            s.task.splitn(3, '/').nth(2).unwrap_or(&s.task).split(" plane").next().unwrap_or("").to_owned()
        })
        .collect();
    kernels.sort();
    kernels.dedup();
    let shown = kernels.iter().take(6).cloned().collect::<Vec<_>>().join(", ");
    let more = if kernels.len() > 6 { format!(" and {} more", kernels.len() - 6) } else { String::new() };
    let waits = match &first.waits_for {
        meshsim_engine::Stall::AnyOf(words) => format!("any of {} words", words.len()),
        other => other.to_string(),
    };
    let faults =
        if faults.is_empty() { String::new() } else { format!("; faults injected: {}", faults.join(", ")) };
    Some(format!(
        "simulation failed: deadlock at {at}: {} kernels stalled on {} ({erisc} on Ethernet cores, {} on workers): {shown}{more}; first '{}' waits for {waits}{faults} (every kernel and word: --full-report)",
        stalled.len(),
        chips.join(", "),
        stalled.len() - erisc,
        first.task,
    ))
}

/// The exit code an error's type says: 2 for bad input (the user's, or a request the library
/// refused), 1 for a simulation that failed or broke a protocol, and for anything else.
fn exit_code(e: &anyhow::Error) -> u8 {
    let bad = e.downcast_ref::<BadInput>().is_some()
        || e.downcast_ref::<meshsim_ccl::op::CclError>().is_some_and(|c| c.is_bad_input());
    if bad { 2 } else { 1 }
}

/// Parses the command line. Every command takes negative numbers as values, so `--dim -1` is
/// refused as a value of `--dim` rather than read as an unknown flag.
fn parse_args(args: &[std::ffi::OsString]) -> Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    fn negatives(c: clap::Command) -> clap::Command {
        let subs: Vec<String> = c.get_subcommands().map(|s| s.get_name().to_owned()).collect();
        let mut c = c.allow_negative_numbers(true);
        for name in subs {
            c = c.mut_subcommand(name, negatives);
        }
        c
    }
    let matches = negatives(Cli::command()).try_get_matches_from(args)?;
    Cli::from_arg_matches(&matches)
}

/// Help and version go to standard output (exit 0); every other parse error is bad input in
/// one line (exit 2).
fn clap_exit(e: &clap::Error, args: &[std::ffi::OsString]) -> Ended {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        return match out!("{}", e.render()) {
            Err(o) if !o.is_closed_pipe() => failed(1, o.to_string(), None, FailureKind::Output),
            _ => Ended { code: 0, failure: None },
        };
    }
    failed(2, one_line(&e.render().to_string(), args), None, FailureKind::BadInput)
}

/// clap's several-line message as one line: its first paragraph, with the command's `--help`
/// pointed to; a missing command lists the commands there are.
fn one_line(text: &str, args: &[std::ffi::OsString]) -> String {
    let path = command_path(args);
    let commands: Vec<&str> = text
        .lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|&c| c != "help")
        .collect();
    if !commands.is_empty() {
        return format!("`{path}` needs a command: {} (see `{path} --help`)", commands.join(", "));
    }
    let first: Vec<&str> = text.lines().map(str::trim).take_while(|l| !l.is_empty()).collect();
    let what = first.join(" ");
    let what = what.strip_prefix("error: ").unwrap_or(&what);
    // clap's "did you mean" for a misspelt flag or value, kept on the one line.
    let tip = text
        .lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("tip: "))
        .map_or(String::new(), |t| format!("; {t}"));
    format!("{what}{tip} (see `{path} --help`)")
}

/// The (sub)command the command line names: `meshsim op all-gather`.
fn command_path(args: &[std::ffi::OsString]) -> String {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut path = vec!["meshsim".to_owned()];
    for arg in args.iter().skip(1) {
        let Some(next) = arg.to_str().and_then(|a| cmd.find_subcommand(a)).cloned() else {
            break;
        };
        path.push(next.get_name().to_owned());
        cmd = next;
    }
    path.join(" ")
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    meshsim_engine::set_shortcuts_by_default(!cli.exact);
    match cli.command {
        Command::Topo { cluster, format } => topo(&cluster, format)?,
        Command::Tune(args) => return tune_cmd::run_tune(args),
        Command::Peers { cluster, stack, output } => peers(&cluster, stack, output)?,
        Command::Params { cluster, model, output } => print_params(
            &model.load()?.on_checked(&load_cluster(&cluster)?).map_err(|e| BadInput(e.to_string()))?,
            output,
        )?,
        Command::Bench(b) => run_bench(b)?,
        Command::Op(args) => return run_op(args),
        Command::Sweep(args) => return sweep_cmd::run(args),
        Command::Merge { files, output, plot } => return sweep_cmd::merge(&files, output, plot.as_deref()),
        Command::Replay(a) => return replay::run_replay(a),
        Command::Run { workload, output, link_report, trace, verify, sim, model, select, faults, knobs } => {
            return run_cmd::run_workload(
                &workload,
                output.format,
                link_report,
                trace.as_deref(),
                (verify, sim.sim_model),
                (model, select),
                (faults, knobs),
            );
        }
        Command::Regress {
            suite,
            update,
            scenario,
            trace,
            check_determinism,
            check_shortcuts,
            sim,
            model,
            output,
        } => {
            let suite = regress_cmd::suite_path(suite, update)?;
            if sim.sim_model == meshsim_ccl::op::SimModel::Flow {
                let gate_flags = update || check_determinism || check_shortcuts || trace.is_some();
                return regress_cmd::run_flow_errors(
                    &suite,
                    (scenario.as_deref(), gate_flags),
                    model,
                    output.format,
                );
            }
            return run_regress(
                &suite,
                update,
                scenario.as_deref(),
                trace.as_deref(),
                (check_determinism, check_shortcuts),
                model,
                output.format,
            );
        }
        Command::Calibrate {
            model,
            sim,
            fabric,
            blackhole,
            max_bytes,
            ccl,
            plot,
            update_accuracy,
            output,
        } => {
            if update_accuracy {
                return accuracy::update(&model, sim.sim_model).map(|()| ExitCode::SUCCESS);
            }
            let set = CalibrationSet::of((fabric, ccl, blackhole), max_bytes, plot);
            return calibrate((&model.load()?, sim.sim_model), set, output);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `meshsim topo`.
fn topo(spec: &str, format: TopoFormat) -> anyhow::Result<()> {
    let bad = |e: meshsim_topology::TopologyError| BadInput(e.to_string());
    let out = match format {
        TopoFormat::Yaml => meshsim_topology::builtin::descriptor(spec).map_err(bad)?,
        TopoFormat::Text => topo_text(&load_cluster(spec)?),
        TopoFormat::Json => serde_json::to_string_pretty(&topo_json(&load_cluster(spec)?))? + "\n",
        TopoFormat::Dot => topo_dot(&load_cluster(spec)?),
    };
    out!("{out}")?;
    Ok(())
}

/// `meshsim peers`: what each chip pair can do over the stack.
fn peers(spec: &str, stack: Option<Stack>, output: Output) -> anyhow::Result<()> {
    let cluster = load_cluster(spec)?;
    let rows = meshsim_ccl::peers::peers(&cluster, stack.unwrap_or(Stack::DEFAULT));
    out!("{}", report::render(&rows, output.format.into()))?;
    Ok(())
}

/// `meshsim params`: every parameter with its value and description.
fn print_params(p: &Params, output: Output) -> anyhow::Result<()> {
    #[derive(serde::Serialize)]
    struct Row {
        name: &'static str,
        value: u64,
        description: &'static str,
    }
    let rows: Vec<Row> =
        p.table().into_iter().map(|(name, value, description)| Row { name, value, description }).collect();
    out!("{}", report::render(&rows, output.format.into()))?;
    Ok(())
}

/// Which calibration set `meshsim calibrate` runs.
enum CalibrationSet {
    /// The single-link and ring-ping set.
    Link,
    /// The TT-Fabric set.
    Fabric,
    /// The CCL set, its sweep up to this many bytes, and where to draw its plots.
    Ccl { max_bytes: u64, plot: Option<std::path::PathBuf> },
    /// The Blackhole set, its sweep up to this many bytes, and where to draw its plot.
    Blackhole { max_bytes: u64, plot: Option<std::path::PathBuf> },
}

impl CalibrationSet {
    /// The set `calibrate`'s flags name: `--fabric`, `--ccl` or `--blackhole` (clap lets
    /// through one at most), else the link set.
    fn of(
        (fabric, ccl, blackhole): (bool, bool, bool),
        max_bytes: Option<u64>,
        plot: Option<PathBuf>,
    ) -> Self {
        let max_bytes = max_bytes.unwrap_or(u64::MAX);
        match (fabric, ccl, blackhole) {
            (true, _, _) => CalibrationSet::Fabric,
            (_, true, _) => CalibrationSet::Ccl { max_bytes, plot },
            (_, _, true) => CalibrationSet::Blackhole { max_bytes, plot },
            _ => CalibrationSet::Link,
        }
    }
}

/// `meshsim calibrate`: exit 1 when a point misses its tolerance.
fn calibrate(
    (model, sim): (&scenario::ParamSource, meshsim_ccl::op::SimModel),
    set: CalibrationSet,
    output: Output,
) -> anyhow::Result<ExitCode> {
    use meshsim_bench::ccl_calibration;
    let arch = if matches!(set, CalibrationSet::Blackhole { .. }) {
        meshsim_topology::Arch::Blackhole
    } else {
        meshsim_topology::Arch::WormholeB0
    };
    model.check(&[arch]).map_err(|e| BadInput(e.to_string()))?;
    let microbenchmarks =
        meshsim_ccl::stacks::capabilities(meshsim_ccl::op::Stack::DEFAULT, sim).microbenchmarks;
    if !microbenchmarks && matches!(set, CalibrationSet::Link | CalibrationSet::Fabric) {
        return Err(BadInput(format!(
            "calibrate --model {sim} runs the op sweeps (--ccl, --blackhole): the link and fabric sets are microbenchmarks of the packet model"
        ))
        .into());
    }
    let setup = |name: &str| -> anyhow::Result<Setup> {
        let c = load_cluster(name)?;
        let p = model.on(&c);
        Ok(Setup { model: sim, ..Setup::new(c, p) })
    };
    let (n300, galaxy, t3000) = (setup("n300")?, setup("galaxy")?, setup("t3000")?);
    if let CalibrationSet::Ccl { plot: Some(dir), .. } | CalibrationSet::Blackhole { plot: Some(dir), .. } =
        &set
    {
        if !dir.is_dir() {
            return Err(BadInput(format!("{}: not a directory (--plot takes one)", dir.display())).into());
        }
    }
    let rows = match &set {
        &CalibrationSet::Blackhole { max_bytes, .. } => {
            let (quietbox, bh_galaxy) = (setup("bh_quietbox")?, setup("bh_galaxy")?);
            meshsim_bench::bh_calibration::run_blackhole(&quietbox, &bh_galaxy, max_bytes)
                .map_err(bench_error)?
        }
        CalibrationSet::Fabric => calibration::run_fabric(&t3000, &galaxy).map_err(bench_error)?,
        CalibrationSet::Link => calibration::run(&n300, &t3000).map_err(bench_error)?,
        &CalibrationSet::Ccl { max_bytes, .. } => {
            ccl_calibration::run_ccl((&n300, &t3000, &galaxy), max_bytes).map_err(bench_error)?
        }
    };
    out!("{}", report::render(&rows, output.format.into()))?;
    if let Some((points, mean, within10, within25, worst)) =
        meshsim_bench::bh_calibration::sweep_summary(&rows)
    {
        eprintln!(
            "meshsim: Blackhole all-gather sweep: {points} points, mean |error| {mean:.1} %, {within10} within 10 %, {within25} within 25 %, worst {worst:+.1} %"
        );
    }
    if let Some((points, mean, within10, within20, worst)) = ccl_calibration::sweep_summary(&rows) {
        eprintln!(
            "meshsim: CCL sweep: {points} points, mean |error| {mean:.1} %, {within10} within 10 %, {within20} within 20 %, worst {worst:+.1} %"
        );
    }
    if let CalibrationSet::Blackhole { plot: Some(dir), .. } = &set {
        if let Some((file, plot)) = meshsim_bench::bh_calibration::plot(&rows) {
            plot::write(&dir.join(file), &plot).map_err(|e| BadInput(e.to_string()))?;
        }
    }
    if let CalibrationSet::Ccl { plot: Some(dir), .. } = &set {
        for (file, plot) in ccl_calibration::plots(&rows) {
            let path = dir.join(file);
            plot::write(&path, &plot).map_err(|e| BadInput(e.to_string()))?;
        }
    }
    if rows.iter().any(|r| !r.ok) {
        eprintln!(
            "meshsim: {} calibration point(s) miss their tolerance",
            rows.iter().filter(|r| !r.ok).count()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// A progress bar on stderr when it is a terminal; a hidden one otherwise.
fn progress(len: u64, what: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} {elapsed}") {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(what.to_owned());
    pb
}

/// The progress bar of the sweep running, so a second Ctrl-C can erase it before it exits.
pub(crate) static SWEEP_BAR: std::sync::OnceLock<indicatif::ProgressBar> = std::sync::OnceLock::new();

/// Whether Ctrl-C stops a sweep through a signal handler meshsim installs: the binary's way.
/// A host that owns the process's signals (the Python package) leaves it off and calls
/// [`api::interrupt`] instead.
static CTRL_C_STOPS_SWEEPS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The flag that stops a sweep: set, no new point starts (those running finish, and what
/// finished is printed, exit 130).
static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The flag Ctrl-C sets: the first press stops new points from starting (those running
/// finish, and what finished is printed); a second press erases the progress bar and exits
/// at once (130), keeping only what `--out` already holds. In the binary only: a host
/// program's own signal handling is left alone, and it sets [`STOP`] through [`api::interrupt`].
fn interrupt_on_ctrl_c() -> &'static std::sync::atomic::AtomicBool {
    use std::sync::atomic::Ordering;
    if CTRL_C_STOPS_SWEEPS.load(Ordering::SeqCst) {
        let _ = ctrlc::set_handler(|| {
            if STOP.swap(true, Ordering::SeqCst) {
                if let Some(pb) = SWEEP_BAR.get() {
                    pb.finish_and_clear();
                }
                std::process::exit(130);
            }
        });
    }
    &STOP
}

/// Checks, before anything is simulated, that the output files asked for can be written: a
/// plot's extension, a trace's and a plot's directory, and that each file opens for writing.
fn check_outputs(plot: Option<&Path>, trace: Option<&Path>) -> anyhow::Result<()> {
    if let Some(p) = plot {
        plot::check_path(p).map_err(|e| BadInput(e.to_string()))?;
    }
    if let Some(t) = trace
        && let Some(dir) = t.parent().filter(|d| !d.as_os_str().is_empty() && !d.is_dir())
    {
        return Err(BadInput(format!(
            "{}: cannot write the trace: directory {} does not exist",
            t.display(),
            dir.display()
        ))
        .into());
    }
    if let Some(t) = trace {
        plot::writable(t).map_err(|e| BadInput(format!("{}: cannot write the trace: {e}", t.display())))?;
    }
    Ok(())
}

/// Writes a Chrome / Perfetto trace.
fn write_trace(path: &Path, trace: &meshsim_hw::TraceData, cluster: &Cluster) -> anyhow::Result<()> {
    let file = std::fs::File::create(path)
        .map_err(|e| BadInput(format!("{}: cannot write the trace: {e}", path.display())))?;
    meshsim_hw::trace::write_chrome(trace, cluster, &mut std::io::BufWriter::new(file))
        .map_err(|e| BadInput(format!("{}: cannot write the trace: {e}", path.display())))?;
    eprintln!(
        "meshsim: trace of {} kernels and {} packets written to {}",
        trace.kernels.len(),
        trace.packets.len(),
        path.display()
    );
    Ok(())
}

/// A plot of one series of `(size, value)` points.
fn one_line_plot(title: String, x_desc: &str, y_desc: &str, label: String, points: Vec<(f64, f64)>) -> Plot {
    Plot {
        title,
        x_desc: x_desc.into(),
        y_desc: y_desc.into(),
        series: vec![Series { label, points }],
        log_y: false,
    }
}

fn load_model(paths: &[std::path::PathBuf], link_gbps: Option<u64>) -> anyhow::Result<scenario::ParamSource> {
    scenario::ParamSource::load(paths, link_gbps).map_err(|e| BadInput(e.to_string()).into())
}

fn bench_error(e: BenchError) -> anyhow::Error {
    if e.is_bad_input() { BadInput(e.to_string()).into() } else { anyhow::Error::new(e) }
}

fn load_cluster(spec: &str) -> anyhow::Result<Cluster> {
    scenario::load_cluster(spec).map_err(|e| BadInput(e.to_string()).into())
}

fn ids(cluster: &Cluster, chips: &[meshsim_topology::ChipIdx]) -> Vec<u64> {
    chips.iter().map(|&c| cluster.chip(c).id).collect()
}
