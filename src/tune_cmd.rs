//! `meshsim tune`: the fastest algorithm and knobs of one collective per size range, written as
//! a selection tree that `--select` then uses.

use std::process::ExitCode;

use meshsim_ccl::comm::Communicator;
use meshsim_ccl::op::SimModel;
use meshsim_ccl::op::Stack;
use meshsim_ccl::select::Select;
use meshsim_ccl::tune::{self, TuneSpec};

use crate::cli::TuneArgs;
use crate::out::out;
use crate::scenario::load_select;
use crate::{BadInput, load_cluster};

pub(crate) fn run_tune(a: TuneArgs) -> anyhow::Result<ExitCode> {
    let bad = |m: String| anyhow::Error::new(BadInput(m));
    let kind = a.op;
    a.knobs.one_each("tune")?;
    let collective = kind.collective_given(a.redop, a.root).map_err(bad)?;
    if let Some(o) = &a.out {
        meshsim_bench::plot::writable(o)
            .map_err(|e| bad(format!("{}: cannot write the tree: {e}", o.display())))?;
    }
    let stack = a.stack.unwrap_or(Stack::DEFAULT);
    let cluster = load_cluster(&a.cluster)?;
    let params = a.model.load()?.on_checked(&cluster).map_err(|e| crate::BadInput(e.to_string()))?;
    let comm = Communicator::choose_default(&cluster, a.topology, a.chips, a.chip_ids.as_deref())
        .map_err(|e| bad(e.0))?;
    let dtype = a.dtype;
    let base = match &a.select {
        Some(p) => load_select(p).map_err(bad)?,
        None => Select::default_tree(),
    };
    let sizes = meshsim_ccl::sweep::sizes(a.min, a.max, a.factor).map_err(|e| bad(e.0))?;
    let chunks = collective.sweep_chunks(comm.size()) as usize;
    let tiles = meshsim_ccl::sweep::points(&sizes, chunks, dtype);
    meshsim_ccl::stacks::check_given(stack, collective, &a.knobs.given()).map_err(bad)?;
    let knobs = a.knobs.knobs();
    let model = a.sim.sim_model;
    let screen = screen(&a, stack).map_err(bad)?;
    let skew_ns = a.knobs.skew_ns;
    let spec = TuneSpec { collective, comm, dtype, stack, tiles, base, knobs, skew_ns, model, screen };
    let (tree, points) = tune::tune(&cluster, &params, &spec)
        .map_err(|e| if e.is_bad_input() { bad(e.to_string()) } else { anyhow::anyhow!("{e}") })?;
    let table = meshsim_bench::report::render(&rows(&points), a.output.format.into());
    let screened = match spec.screen {
        Some(k) => format!(
            "; every candidate screened on the flow model, the best {k} at each size (and the default) run on the {model} model"
        ),
        None => format!("; every candidate run on the {model} model"),
    };
    let header = format!(
        "# meshsim tune {} on {} ({} chips, {}), {dtype}, {stack} stack: -b {} -e {} -f {}{screened}\n",
        kind.name(),
        cluster.origin(),
        spec.comm.size(),
        spec.comm.topology(),
        a.min,
        a.max,
        a.factor
    );
    let yaml = format!("{header}{}", tree.to_yaml());
    match &a.out {
        Some(path) => {
            std::fs::write(path, &yaml)
                .map_err(|e| bad(format!("{}: cannot write the tree: {e}", path.display())))?;
            out!("{table}")?;
        }
        None => {
            out!("{yaml}")?;
            eprint!("{table}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--screen`: how many candidates the flow model's screen keeps per size, if it screens; its
/// refusals with `--model flow` or another stack than the fabric.
fn screen(a: &TuneArgs, stack: Stack) -> Result<Option<usize>, String> {
    let model = a.sim.sim_model;
    let screen = match a.screen {
        None => None,
        Some(SimModel::Flow) if model == SimModel::Flow => {
            return Err(
                "--screen flow screens candidates for the packet model: leave out --model flow".into()
            );
        }
        Some(SimModel::Flow) => Some(a.confirm as usize),
        Some(SimModel::Packet) => return Err("--screen takes flow (the model that screens)".into()),
    };
    let flow = screen.is_some() || model == SimModel::Flow;
    if flow && !meshsim_ccl::stacks::capabilities(stack, SimModel::Flow).runs_ops {
        return Err(format!("the flow model carries the fabric stack, not the {stack} stack"));
    }
    Ok(screen)
}

/// A row of tune's table: per size, the default's time and choice, the best's, and how many
/// candidates ran.
#[derive(serde::Serialize)]
struct Row {
    size_bytes: u64,
    default_us: f64,
    default: String,
    best_us: f64,
    best: String,
    speedup: f64,
    candidates: usize,
    confirmed: usize,
}

fn rows(points: &[meshsim_ccl::tune::TunePoint]) -> Vec<Row> {
    points
        .iter()
        .map(|p| Row {
            size_bytes: p.size_bytes,
            default_us: p.base.1.as_us_f64(),
            default: p.base.0.to_string(),
            best_us: p.best.1.as_us_f64(),
            best: p.best.0.to_string(),
            speedup: p.base.1.0 as f64 / p.best.1.0.max(1) as f64,
            candidates: p.candidates,
            confirmed: p.confirmed,
        })
        .collect()
}
