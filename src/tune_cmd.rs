//! `meshsim tune`: the fastest algorithm and knobs of one collective per size range, written as
//! a selection tree that `--select` then uses.

use std::path::PathBuf;
use std::process::ExitCode;

use meshsim_ccl::comm::Communicator;
use meshsim_ccl::op::{Stack, Topology};
use meshsim_ccl::select::Select;
use meshsim_ccl::tune::{self, TuneSpec};

use crate::cli::{Output, ParamsFile};
use crate::out::out;
use crate::scenario::{OpKind, load_select, parse_size};
use crate::{BadInput, load_cluster};
use meshsim_ccl::op::RedOp;
use meshsim_ccl::tensor::DType;

/// `meshsim tune`'s arguments.
#[derive(clap::Args)]
pub(crate) struct TuneArgs {
    /// The collective.
    #[arg(value_enum)]
    op: OpKind,
    /// A cluster description file or a built-in name.
    #[arg(long, default_value = "t3000")]
    cluster: String,
    /// Run on N chips forming the ring or line.
    #[arg(long)]
    chips: Option<usize>,
    /// Run on these chips, in order.
    #[arg(long, value_delimiter = ',', conflicts_with = "chips")]
    chip_ids: Option<Vec<u64>>,
    /// Ring or line [default: ring].
    #[arg(long)]
    topology: Option<Topology>,
    /// The transport: fabric or edm [default: fabric].
    #[arg(long)]
    stack: Option<Stack>,
    /// Element type.
    #[arg(long, default_value = "bfp8")]
    dtype: DType,
    /// Reduction of a reducing op [default: sum].
    #[arg(long)]
    redop: Option<RedOp>,
    /// Root rank of a rooted op [default: 0].
    #[arg(long, value_name = "R")]
    root: Option<usize>,
    /// Smallest size in bytes (K, M, G suffixes), nccl-tests' convention as `sweep`'s.
    #[arg(short = 'b', long = "minbytes", default_value = "16K", value_parser = parse_size)]
    min: u64,
    /// Largest size in bytes.
    #[arg(short = 'e', long = "maxbytes", default_value = "16M", value_parser = parse_size)]
    max: u64,
    /// Size factor between points.
    #[arg(short = 'f', long = "stepfactor", default_value_t = 4)]
    factor: u64,
    /// The tree to tune from [default: the embedded one]: its choices are candidates, and the
    /// other collectives keep it.
    #[arg(long, value_name = "FILE")]
    select: Option<PathBuf>,
    /// Write the tuned tree to FILE (and print what each size measured); without it the tree
    /// goes to stdout and the measurements to stderr.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    model: ParamsFile,
    /// The measurements' format.
    #[command(flatten)]
    output: Output,
}

pub(crate) fn run_tune(a: TuneArgs) -> anyhow::Result<ExitCode> {
    let bad = |m: String| anyhow::Error::new(BadInput(m));
    let kind = a.op;
    if a.redop.is_some() && !kind.reduces() {
        return Err(bad(format!("--redop applies to reducing ops, not {}", kind.name())));
    }
    if a.root.is_some() && !kind.rooted() {
        return Err(bad(format!("--root applies to rooted ops, not {}", kind.name())));
    }
    if let Some(o) = &a.out {
        meshsim_bench::plot::writable(o)
            .map_err(|e| bad(format!("{}: cannot write the tree: {e}", o.display())))?;
    }
    let collective = kind.collective(a.redop.unwrap_or(RedOp::Sum), a.root.unwrap_or(0));
    let stack = a.stack.unwrap_or(Stack::DEFAULT);
    let cluster = load_cluster(&a.cluster)?;
    let params = a.model.load()?;
    let topology = a.topology.unwrap_or(Topology::Ring);
    let comm =
        Communicator::choose(&cluster, topology, a.chips, a.chip_ids.as_deref()).map_err(|e| bad(e.0))?;
    let dtype = a.dtype;
    let base = match &a.select {
        Some(p) => load_select(p).map_err(bad)?,
        None => Select::default_tree(),
    };
    let sizes = meshsim_ccl::sweep::sizes(a.min, a.max, a.factor).map_err(|e| bad(e.0))?;
    let chunks = collective.sweep_chunks(comm.size()) as usize;
    let tiles = meshsim_ccl::sweep::points(&sizes, chunks, dtype);
    let spec = TuneSpec { collective, comm, dtype, stack, tiles, base };
    let (tree, points) = tune::tune(&cluster, &params, &spec)
        .map_err(|e| if e.is_bad_input() { bad(e.to_string()) } else { anyhow::anyhow!("{e}") })?;
    #[derive(serde::Serialize)]
    struct Row {
        size_bytes: u64,
        default_us: f64,
        default: String,
        best_us: f64,
        best: String,
        speedup: f64,
        candidates: usize,
    }
    let rows: Vec<Row> = points
        .iter()
        .map(|p| Row {
            size_bytes: p.size_bytes,
            default_us: p.base.1.as_us_f64(),
            default: p.base.0.to_string(),
            best_us: p.best.1.as_us_f64(),
            best: p.best.0.to_string(),
            speedup: p.base.1.0 as f64 / p.best.1.0.max(1) as f64,
            candidates: p.candidates,
        })
        .collect();
    let table = meshsim_bench::report::render(&rows, a.output.format.into());
    let header = format!(
        "# meshsim tune {} on {} ({} chips, {}), {dtype}, {stack} stack: -b {} -e {} -f {}\n",
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
