//! The `meshsim` command line: the only place that parses arguments and picks exit codes.
//!
//! Exit codes: 0 success; 1 a check failed; 2 bad input (one line naming what and where).

use std::fmt::Write as _;
use std::process::ExitCode;

use std::path::{Path, PathBuf};

mod regress;
mod scenario;

use scenario::{BidirValue, Kind, RunError, Scenario, parse_size};

use clap::{Parser, Subcommand, ValueEnum};
use meshsim_bench::plot::{self, Plot, Series};
use meshsim_bench::{BenchError, Setup, bandwidth, calibration, latency, report, ring};
use meshsim_hw::Params;
use meshsim_topology::Cluster;

/// meshsim: a cycle-resolution simulator of Ethernet-linked Tenstorrent Wormhole meshes.
#[derive(Parser)]
#[command(name = "meshsim", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every model parameter with its value, unit and description.
    Params {
        /// A parameter file to read instead of the built-in configs/wormhole_b0.yaml.
        #[arg(long, value_name = "FILE")]
        params: Option<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Compare the model with every published measurement of the calibration set; exit 1 if a
    /// point misses its tolerance.
    Calibrate {
        /// A parameter file to use instead of the built-in configs/wormhole_b0.yaml.
        #[arg(long, value_name = "FILE")]
        params: Option<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Run an Ethernet microbenchmark as a simulated program.
    #[command(subcommand)]
    Bench(Bench),
    /// Run a CCL op (EDM and worker kernels) as a simulated program.
    #[command(subcommand)]
    Op(Op),
    /// Sweep a CCL op over sizes, nccl-tests style: size, count, type, redop, root, time,
    /// algbw, busbw.
    Sweep {
        /// The op.
        #[arg(value_enum)]
        op: SweepOpArg,
        /// Cluster description files or built-in names, comma-separated: one series each.
        #[arg(long, value_delimiter = ',', default_value = "t3000")]
        cluster: Vec<String>,
        /// Smallest total size in bytes (K, M, G suffixes).
        #[arg(short = 'b', long = "minbytes", default_value = "1K", value_parser = parse_size)]
        min: u64,
        /// Largest total size in bytes.
        #[arg(short = 'e', long = "maxbytes", default_value = "64M", value_parser = parse_size)]
        max: u64,
        /// Size factor between points.
        #[arg(short = 'f', long = "stepfactor", default_value_t = 2)]
        factor: u64,
        /// Element types, comma-separated: one series each.
        #[arg(long, value_delimiter = ',', default_value = "bfp8")]
        dtype: Vec<String>,
        /// Ring or line (all-gather).
        #[arg(long, value_enum, default_value_t = TopologyArg::Ring)]
        topology: TopologyArg,
        /// Links per hop, comma-separated: one series each.
        #[arg(long = "num-links", value_delimiter = ',', default_value = "1")]
        num_links: Vec<usize>,
        /// Worker pairs (EDM channels) per link, comma-separated: one series each.
        #[arg(long, value_delimiter = ',', default_value = "1")]
        workers: Vec<usize>,
        /// Bidirectional mode (all-gather on a ring).
        #[arg(long, value_enum, default_value_t = BidirArg::None)]
        bidir: BidirArg,
        /// Reduction (reduce-scatter).
        #[arg(long, default_value = "sum")]
        redop: String,
        /// Run on N chips forming the ring or line.
        #[arg(long)]
        chips: Option<usize>,
        /// Run on these chips, in order.
        #[arg(long, value_delimiter = ',', conflicts_with = "chips")]
        chip_ids: Option<Vec<u64>>,
        /// A parameter file to use instead of the built-in configs/wormhole_b0.yaml.
        #[arg(long, value_name = "FILE")]
        params: Option<PathBuf>,
        /// Output format: text is nccl-tests' table (one block per series).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Also draw busbw against size to FILE.svg or FILE.png, one line per series.
        #[arg(long, value_name = "FILE")]
        plot: Option<PathBuf>,
    },
    /// Run the op-timing regression suites and compare every scenario's simulated time with its
    /// committed baseline; exit 1 when one moved beyond its tolerance, has no baseline, or a
    /// baseline has no scenario.
    Regress {
        /// A suite file, or a directory whose *.yaml files are suites. Baselines sit next to
        /// them as <suite>.baseline.
        #[arg(long, default_value = "configs/regress", value_name = "PATH")]
        suite: PathBuf,
        /// Rewrite the baselines with the times measured now (exit 0 unless a run failed).
        #[arg(long)]
        update: bool,
        /// Run only the scenario named NAME.
        #[arg(long, value_name = "NAME")]
        scenario: Option<String>,
        /// Write a Chrome / Perfetto trace of the --scenario run to FILE.
        #[arg(long, value_name = "FILE", requires = "scenario")]
        trace: Option<PathBuf>,
        /// Run one scenario (--scenario, or the first) a second time and fail unless both runs
        /// give the same event-log hash.
        #[arg(long)]
        check_determinism: bool,
        /// A parameter file every scenario uses instead of its own (what would this model
        /// change move?).
        #[arg(long, value_name = "FILE")]
        params: Option<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Describe a cluster: chips, links, PCIe chips, reserved links, shape, diameter, ring.
    Topo {
        /// A cluster description file (tt-umd YAML) or a built-in name: n300, t3000, galaxy,
        /// galaxy_torus.
        cluster: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = TopoFormat::Text)]
        format: TopoFormat,
    },
}

/// The microbenchmarks.
#[derive(Subcommand)]
enum Bench {
    /// Single-link round trip: send and echo over one link, payload and sync in one packet.
    Latency {
        #[command(flatten)]
        common: BenchArgs,
        /// Buffer slots the pings rotate over.
        #[arg(long, default_value_t = 16)]
        slots: u64,
        /// Measured pings per point (after one unmeasured).
        #[arg(long, default_value_t = 4)]
        samples: u64,
        /// Send payload and sync record separately, with the guide's ack/done flow control.
        #[arg(long)]
        unmerged: bool,
    },
    /// Raw ERISC bandwidth over one link, by packet size and slot count.
    Bandwidth {
        #[command(flatten)]
        common: BenchArgs,
        /// Buffer slots (channels) per direction.
        #[arg(long, default_value_t = 16)]
        slots: u64,
        /// Packets sent per direction and point.
        #[arg(long, default_value_t = 256)]
        packets: u64,
        /// Both directions at once (the figure is their sum).
        #[arg(long)]
        bidir: bool,
        /// The receiver forwards every slot to a Tensix core over the NoC before acknowledging.
        #[arg(long)]
        to_worker: bool,
    },
    /// The CCL guide's ring ping: receiver -> NoC -> sender -> next chip, first trip unmeasured.
    Ring {
        #[command(flatten)]
        common: BenchArgs,
        /// Hops around the ring (more hops than chips revisit chips over unused links).
        #[arg(long, default_value_t = 8)]
        hops: usize,
        /// Measured trips per point (after one unmeasured).
        #[arg(long, default_value_t = 4)]
        samples: u64,
        /// The walkthrough's kernels as written: payload and sync sent separately.
        #[arg(long)]
        unmerged: bool,
        /// Program start skew: chip i starts i x this many ns after chip 0.
        #[arg(long, default_value_t = 0, value_name = "NS")]
        skew_ns: u64,
    },
}

/// The CCL ops.
#[derive(Subcommand)]
enum Op {
    /// All-gather: every chip ends with the concatenation of all chips' slices along --dim.
    AllGather(OpArgs),
    /// Reduce-scatter (ring): every chip ends with its slice of the reduction of all chips' tensors.
    ReduceScatter(OpArgs),
}

/// Arguments of a CCL op.
#[derive(clap::Args)]
struct OpArgs {
    /// A cluster description file or a built-in name.
    #[arg(long, default_value = "t3000")]
    cluster: String,
    /// The tensor's shape, w,z,y,x: the gathered output of an all-gather, the reduced input of
    /// a reduce-scatter.
    #[arg(long, value_delimiter = ',', num_args = 1.., required = true)]
    shape: Vec<u64>,
    /// The reduction of a reduce-scatter: sum or max.
    #[arg(long, default_value = "sum")]
    redop: String,
    /// The dimension gathered or scattered along (0..3).
    #[arg(long, default_value_t = 3)]
    dim: usize,
    /// Element type: bf16, bfp8, fp32, uint32.
    #[arg(long, default_value = "bf16")]
    dtype: String,
    /// Ring or line.
    #[arg(long, value_enum, default_value_t = TopologyArg::Ring)]
    topology: TopologyArg,
    /// Links per hop (reserved links are never used); tt-metal's num_links.
    #[arg(long = "num-links", default_value_t = 1)]
    num_links: usize,
    /// Worker pairs (EDM channels) per link.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Bidirectional mode on a ring.
    #[arg(long, value_enum, default_value_t = BidirArg::None)]
    bidir: BidirArg,
    /// Run on N chips forming the ring or line (a mesh row or column first).
    #[arg(long)]
    chips: Option<usize>,
    /// Run on these chips, in order.
    #[arg(long, value_delimiter = ',', conflicts_with = "chips")]
    chip_ids: Option<Vec<u64>>,
    /// Pages per EDM packet (default: 16 KiB worth).
    #[arg(long)]
    pages_per_packet: Option<u64>,
    /// EDM buffers per channel.
    #[arg(long, default_value_t = 2)]
    buffers: u64,
    /// Where tensors are interleaved: dram (the chip's banks) or l1 (the workers' L1).
    #[arg(long, default_value = "dram")]
    memory: String,
    /// Move real bytes and check every chip's output (exit 1 on a mismatch).
    #[arg(long)]
    verify: bool,
    /// Program start skew: the k-th chip starts k x this many ns after the first.
    #[arg(long, default_value_t = 0, value_name = "NS")]
    skew_ns: u64,
    /// A parameter file to use instead of the built-in configs/wormhole_b0.yaml.
    #[arg(long, value_name = "FILE")]
    params: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Also print the bytes and busy fraction of every link direction used, the bottleneck
    /// link and the critical path's stages.
    #[arg(long = "links")]
    link_report: bool,
    /// Write a Chrome / Perfetto trace-event JSON of the run to FILE.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Run twice and fail (exit 1) unless both runs give the same event-log hash.
    #[arg(long)]
    check_determinism: bool,
}

/// Ops a sweep can run.
#[derive(Clone, Copy, ValueEnum)]
enum SweepOpArg {
    /// All-gather.
    AllGather,
    /// Reduce-scatter.
    ReduceScatter,
}

/// Op topologies.
#[derive(Clone, Copy, ValueEnum)]
enum TopologyArg {
    /// A closed ring.
    Ring,
    /// An open line.
    Line,
}

impl TopologyArg {
    fn name(self) -> &'static str {
        match self {
            TopologyArg::Ring => "ring",
            TopologyArg::Line => "line",
        }
    }
}

impl BidirArg {
    fn name(self) -> &'static str {
        match self {
            BidirArg::None => "none",
            BidirArg::Split => "split",
            BidirArg::Full => "full",
        }
    }
}

impl From<TopologyArg> for meshsim_ccl::allgather::Topology {
    fn from(t: TopologyArg) -> Self {
        match t {
            TopologyArg::Ring => Self::Ring,
            TopologyArg::Line => Self::Line,
        }
    }
}

impl From<BidirArg> for meshsim_ccl::allgather::Bidir {
    fn from(b: BidirArg) -> Self {
        match b {
            BidirArg::None => Self::None,
            BidirArg::Split => Self::Split,
            BidirArg::Full => Self::Full,
        }
    }
}

/// Bidirectional modes.
#[derive(Clone, Copy, ValueEnum)]
enum BidirArg {
    /// One direction.
    None,
    /// Half of each slice each way round.
    Split,
    /// The whole slice half-way round each way.
    Full,
}

/// Arguments every benchmark takes.
#[derive(clap::Args)]
struct BenchArgs {
    /// A cluster description file or a built-in name (n300, t3000, galaxy, galaxy_torus).
    #[arg(long, default_value = "n300")]
    cluster: String,
    /// Payload sizes in bytes, comma-separated; K and M suffixes are powers of 1024.
    #[arg(long, value_delimiter = ',', default_value = "16,128,256,512,1K,2K,4K,8K", value_parser = parse_size)]
    sizes: Vec<u64>,
    /// A parameter file to use instead of the built-in configs/wormhole_b0.yaml.
    #[arg(long, value_name = "FILE")]
    params: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Also draw the sweep to FILE.svg or FILE.png.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Write a Chrome / Perfetto trace of the run to FILE (needs exactly one --sizes value).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
}

/// Output formats of tables.
#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// An aligned text table.
    Text,
    /// Comma-separated values.
    Csv,
    /// JSON.
    Json,
}

impl From<Format> for report::Format {
    fn from(f: Format) -> Self {
        match f {
            Format::Text => report::Format::Text,
            Format::Csv => report::Format::Csv,
            Format::Json => report::Format::Json,
        }
    }
}

/// Output formats of `meshsim topo`.
#[derive(Clone, Copy, ValueEnum)]
enum TopoFormat {
    /// A human summary.
    Text,
    /// One JSON object.
    Json,
    /// A Graphviz graph, one edge per chip pair labelled with its link count.
    Dot,
}

/// An error that is the user's input, not a failure of meshsim: exit code 2.
#[derive(Debug)]
struct BadInput(String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

fn main() -> ExitCode {
    // A panic is a bug in meshsim: say so in one line, without a backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("meshsim: internal error (please report): {info}");
    }));
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("meshsim: {e}");
            if e.downcast_ref::<BadInput>().is_some() { ExitCode::from(2) } else { ExitCode::FAILURE }
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Topo { cluster, format } => {
            let cluster = load_cluster(&cluster)?;
            let out = match format {
                TopoFormat::Text => topo_text(&cluster),
                TopoFormat::Json => serde_json::to_string_pretty(&topo_json(&cluster))? + "\n",
                TopoFormat::Dot => topo_dot(&cluster),
            };
            print!("{out}");
        }
        Command::Params { params, format } => {
            let p = load_params(params.as_deref())?;
            #[derive(serde::Serialize)]
            struct Row {
                name: &'static str,
                value: u64,
                description: &'static str,
            }
            let rows: Vec<Row> = p
                .table()
                .into_iter()
                .map(|(name, value, description)| Row { name, value, description })
                .collect();
            print!("{}", report::render(&rows, format.into()));
        }
        Command::Bench(b) => run_bench(b)?,
        Command::Op(Op::AllGather(args)) => return run_op(Kind::AllGather, args),
        Command::Sweep {
            op,
            cluster,
            min,
            max,
            factor,
            dtype,
            topology,
            num_links,
            workers,
            bidir,
            redop,
            chips,
            chip_ids,
            params,
            format,
            plot: plot_path,
        } => {
            let knobs = SweepKnobs { op, topology, bidir, redop, chips, chip_ids, min, max, factor };
            let p = load_params(params.as_deref())?;
            let series = run_sweep(&knobs, &cluster, &dtype, &num_links, &workers, &p)?;
            print!("{}", render_sweep(&series, &knobs, format));
            if let Some(path) = plot_path {
                plot::write(&path, &busbw_plot(knobs.op_name(), &series))
                    .map_err(|e| BadInput(e.to_string()))?;
            }
        }
        Command::Op(Op::ReduceScatter(args)) => return run_op(Kind::ReduceScatter, args),
        Command::Regress { suite, update, scenario, trace, check_determinism, params, format } => {
            return run_regress(
                &suite,
                update,
                scenario.as_deref(),
                trace.as_deref(),
                check_determinism,
                params,
                format,
            );
        }
        Command::Calibrate { params, format } => {
            let params = load_params(params.as_deref())?;
            let n300 = Setup::new(load_cluster("n300")?, params.clone());
            let t3000 = Setup::new(load_cluster("t3000")?, params);
            let rows = calibration::run(&n300, &t3000).map_err(bench_error)?;
            print!("{}", report::render(&rows, format.into()));
            if rows.iter().any(|r| !r.ok) {
                eprintln!(
                    "meshsim: {} calibration point(s) miss their tolerance",
                    rows.iter().filter(|r| !r.ok).count()
                );
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run_op(kind: Kind, a: OpArgs) -> anyhow::Result<ExitCode> {
    if a.shape.len() != 4 {
        return Err(BadInput(format!("--shape needs 4 values w,z,y,x, got {}", a.shape.len())).into());
    }
    let sc = Scenario {
        name: kind.name().into(),
        op: kind,
        cluster: a.cluster.clone(),
        params: None,
        tolerance_pct: 0.0,
        shape: Some(a.shape.clone()),
        dim: Some(a.dim),
        dtype: Some(a.dtype.clone()),
        topology: Some(a.topology.name().into()),
        links: Some(a.num_links),
        workers: Some(a.workers),
        bidir: (kind == Kind::AllGather).then(|| BidirValue::Mode(a.bidir.name().into())),
        redop: (kind == Kind::ReduceScatter).then(|| a.redop.clone()),
        chips: a.chips,
        chip_ids: a.chip_ids.clone(),
        pages_per_packet: a.pages_per_packet,
        buffers: Some(a.buffers),
        memory: Some(a.memory.clone()),
        skew_ns: Some(a.skew_ns),
        verify: Some(a.verify),
        size: None,
        slots: None,
        samples: None,
        packets: None,
        to_worker: None,
        hops: None,
        unmerged: None,
    };
    let params = load_params(a.params.as_deref())?;
    let out = run_scenario(&sc, &params, a.trace.is_some())?;
    if a.check_determinism {
        check_determinism(&sc, &params, &out)?;
    }
    if let (Some(path), Some(trace)) = (&a.trace, &out.trace) {
        write_trace(path, trace, &load_cluster(&a.cluster)?)?;
    }
    let cluster = load_cluster(&a.cluster)?;
    let done = out.op.as_ref().expect("an op scenario runs an op");
    let run = &done.run;
    let n = done.chips.len() as f64;
    let size = done.tensor.bytes();
    let algbw = size as f64 / run.time.as_ns_f64();
    let name = if kind == Kind::AllGather { "all_gather" } else { "reduce_scatter" };
    let per_chip: Vec<serde_json::Value> = run
        .per_chip
        .iter()
        .map(|&(c, start, end)| {
            serde_json::json!({"chip": cluster.chip(c).id, "start_us": start.as_us_f64(), "end_us": end.as_us_f64()})
        })
        .collect();
    let verified = run.verified.as_ref().map(|v| v.is_ok());
    let critical = meshsim_ccl::critical::critical_path(run);
    match a.format {
        Format::Json => {
            let mut json = serde_json::json!({
                "op": name,
                "cluster": cluster.origin(),
                "chips": done.chips.len(),
                "chip_ids": ids(&cluster, &done.chips),
                "topology": format!("{:?}", done.topology).to_lowercase(),
                "bidir": format!("{:?}", done.bidir).to_lowercase(),
                "redop": if kind == Kind::ReduceScatter { serde_json::json!(a.redop) } else { serde_json::Value::Null },
                "links": a.num_links,
                "workers": a.workers,
                "shape": done.tensor.shape,
                "dim": a.dim,
                "dtype": done.tensor.dtype.to_string(),
                "size_bytes": size,
                "time_us": run.time.as_us_f64(),
                "algbw_gbps": algbw,
                "busbw_gbps": algbw * (n - 1.0) / n,
                "per_chip": per_chip,
                "verified": verified,
                "events": run.stats.events,
                "event_log_hash": format!("{:016x}", run.stats.log_hash),
            });
            if a.link_report {
                let rows = link_rows(&cluster, &out.links, run.time);
                json["link_use"] = serde_json::to_value(&rows)?;
                json["critical_path"] = critical_json(&cluster, critical.as_ref());
            }
            println!("{}", serde_json::to_string_pretty(&json)?);
        }
        Format::Csv | Format::Text => {
            #[derive(serde::Serialize)]
            struct Row {
                op: &'static str,
                chips: usize,
                size_bytes: u64,
                time_us: f64,
                algbw_gbps: f64,
                busbw_gbps: f64,
                verified: String,
            }
            let row = Row {
                op: name,
                chips: done.chips.len(),
                size_bytes: size,
                time_us: run.time.as_us_f64(),
                algbw_gbps: algbw,
                busbw_gbps: algbw * (n - 1.0) / n,
                verified: verified.map_or("-".into(), |v| v.to_string()),
            };
            print!("{}", report::render(&[row], a.format.into()));
            if matches!(a.format, Format::Text) {
                #[derive(serde::Serialize)]
                struct Chip {
                    chip: u64,
                    start_us: f64,
                    end_us: f64,
                }
                let chips: Vec<Chip> = run
                    .per_chip
                    .iter()
                    .map(|&(c, s, e)| Chip {
                        chip: cluster.chip(c).id,
                        start_us: s.as_us_f64(),
                        end_us: e.as_us_f64(),
                    })
                    .collect();
                print!("\n{}", report::render(&chips, report::Format::Text));
            }
            if a.link_report {
                let rows = link_rows(&cluster, &out.links, run.time);
                print!("\n{}", report::render(&rows, a.format.into()));
                if matches!(a.format, Format::Text) {
                    print!("{}", critical_text(&cluster, critical.as_ref()));
                }
            }
        }
    }
    if let Some(Err(mismatch)) = &run.verified {
        eprintln!("meshsim: verification failed: {mismatch}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The knobs of a sweep that every series shares.
struct SweepKnobs {
    op: SweepOpArg,
    topology: TopologyArg,
    bidir: BidirArg,
    redop: String,
    chips: Option<usize>,
    chip_ids: Option<Vec<u64>>,
    min: u64,
    max: u64,
    factor: u64,
}

impl SweepKnobs {
    fn op_name(&self) -> &'static str {
        match self.op {
            SweepOpArg::AllGather => "all_gather",
            SweepOpArg::ReduceScatter => "reduce_scatter",
        }
    }
}

/// One series of a sweep: its knob values and its rows.
struct SweepSeries {
    label: String,
    cluster: String,
    chips: usize,
    dtype: String,
    num_links: usize,
    workers: usize,
    rows: Vec<meshsim_ccl::sweep::SweepRow>,
}

/// A sweep row with the series it belongs to, for CSV and JSON.
#[derive(serde::Serialize)]
struct SeriesRow<'a> {
    series: &'a str,
    cluster: &'a str,
    chips: usize,
    num_links: usize,
    workers: usize,
    #[serde(flatten)]
    row: &'a meshsim_ccl::sweep::SweepRow,
}

/// Runs every combination of clusters, dtypes, link counts and worker counts as a series.
fn run_sweep(
    k: &SweepKnobs,
    clusters: &[String],
    dtypes: &[String],
    num_links: &[usize],
    workers: &[usize],
    p: &Params,
) -> anyhow::Result<Vec<SweepSeries>> {
    use meshsim_ccl::allgather::Topology;
    use meshsim_ccl::sweep::{self, SweepOp, SweepSpec};
    let bad = |m: String| anyhow::Error::new(BadInput(m));
    let topology = Topology::from(k.topology);
    let op = match k.op {
        SweepOpArg::AllGather => SweepOp::AllGather(k.bidir.into()),
        SweepOpArg::ReduceScatter => SweepOp::ReduceScatter(k.redop.parse().map_err(bad)?),
    };
    if matches!(op, SweepOp::ReduceScatter(_)) && topology != Topology::Ring {
        return Err(bad("reduce-scatter runs on a ring".into()));
    }
    let sizes = sweep::sizes(k.min, k.max, k.factor).map_err(|e| bad(e.0))?;
    // Resolve everything first so bad input is reported before any simulation runs.
    let mut jobs = Vec::new();
    for name in clusters {
        let c = load_cluster(name)?;
        let group =
            meshsim_ccl::group::select(&c, topology, k.chips, k.chip_ids.as_deref()).map_err(|e| bad(e.0))?;
        for d in dtypes {
            let dtype: meshsim_ccl::tensor::DType = d.parse().map_err(bad)?;
            for &links in num_links {
                for &w in workers {
                    let spec = SweepSpec { op, chips: group.clone(), topology, links, workers: w, dtype };
                    let mut label = vec![];
                    if clusters.len() > 1 || (dtypes.len() == 1 && num_links.len() == 1 && workers.len() == 1)
                    {
                        label.push(name.clone());
                    }
                    if dtypes.len() > 1 || label.len() == 1 && num_links.len() == 1 && workers.len() == 1 {
                        label.push(dtype.to_string());
                    }
                    if num_links.len() > 1 {
                        label.push(format!("{links} link{}", if links == 1 { "" } else { "s" }));
                    }
                    if workers.len() > 1 {
                        label.push(format!("{w} worker{}", if w == 1 { "" } else { "s" }));
                    }
                    jobs.push((name.clone(), c.clone(), spec, label.join(" ")));
                }
            }
        }
    }
    let total: usize = jobs.iter().map(|j| sweep::points(&sizes, j.2.chips.len(), j.2.dtype).len()).sum();
    let pb = progress(total as u64, k.op_name());
    let mut out = Vec::new();
    for (name, c, spec, label) in jobs {
        let rows = sweep::sweep(&c, p, &spec, &sizes, &|| pb.inc(1)).map_err(|e| bad(e.0))?;
        out.push(SweepSeries {
            label,
            cluster: name,
            chips: spec.chips.len(),
            dtype: spec.dtype.to_string(),
            num_links: spec.links,
            workers: spec.workers,
            rows,
        });
    }
    pb.finish_and_clear();
    Ok(out)
}

/// nccl-tests' time column: fewer decimals as the number grows, seven characters wide.
fn nccl_time(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{us:7.0}")
    } else if us >= 100.0 {
        format!("{us:7.1}")
    } else {
        format!("{us:7.2}")
    }
}

/// Renders a sweep: nccl-tests' table per series as text; one flat table with series columns
/// as CSV or JSON.
fn render_sweep(series: &[SweepSeries], k: &SweepKnobs, format: Format) -> String {
    if !matches!(format, Format::Text) {
        let rows: Vec<SeriesRow> = series
            .iter()
            .flat_map(|s| {
                s.rows.iter().map(move |row| SeriesRow {
                    series: &s.label,
                    cluster: &s.cluster,
                    chips: s.chips,
                    num_links: s.num_links,
                    workers: s.workers,
                    row,
                })
            })
            .collect();
        return report::render(&rows, format.into());
    }
    let mut s = String::new();
    for se in series {
        let _ = writeln!(
            s,
            "# meshsim {} on {} ({} chips, {}), {}, num_links {}, workers {}\n\
             # minBytes {} maxBytes {} step: {}(factor) simulated: 1 run per size, timing mode, no data check\n#",
            k.op_name(),
            se.cluster,
            se.chips,
            k.topology.name(),
            se.dtype,
            se.num_links,
            se.workers,
            k.min,
            k.max,
            k.factor
        );
        s.push_str("#                                                              out-of-place                       in-place          
");
        s.push_str("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
");
        s.push_str("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
");
        for r in &se.rows {
            let _ = writeln!(
                s,
                "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {}  {:6.2}  {:6.2}  {:>5}  {:>7}  {:>6}  {:>6}  {:>5}",
                r.size_bytes,
                r.count,
                r.dtype,
                r.redop,
                r.root,
                nccl_time(r.time_us),
                r.algbw_gbps,
                r.busbw_gbps,
                "N/A",
                "N/A",
                "N/A",
                "N/A",
                "N/A"
            );
        }
        let avg = se.rows.iter().map(|r| r.busbw_gbps).sum::<f64>() / se.rows.len().max(1) as f64;
        let _ = writeln!(
            s,
            "# Avg bus bandwidth    : {avg:.4} 
#"
        );
    }
    s
}

/// busbw against size, one line per series.
fn busbw_plot(op: &str, series: &[SweepSeries]) -> Plot {
    let systems: Vec<String> = {
        let mut v: Vec<String> =
            series.iter().map(|s| format!("{} ({} chips)", s.cluster, s.chips)).collect();
        v.dedup();
        v
    };
    Plot {
        title: format!("{} busbw, {}", op.replace('_', "-"), systems.join(", ")),
        x_desc: "size (bytes)".into(),
        y_desc: "busbw (GB/s)".into(),
        series: series
            .iter()
            .map(|s| Series {
                label: s.label.clone(),
                points: s.rows.iter().map(|r| (r.size_bytes as f64, r.busbw_gbps)).collect(),
            })
            .collect(),
    }
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

fn run_regress(
    suite_path: &Path,
    update: bool,
    only: Option<&str>,
    trace: Option<&Path>,
    check: bool,
    params: Option<PathBuf>,
    format: Format,
) -> anyhow::Result<ExitCode> {
    let suites = regress::load_suites(suite_path).map_err(BadInput)?;
    let find = |name: &str| {
        suites.iter().find_map(|s| s.scenarios.iter().find(|sc| sc.name == name).map(|sc| (s, sc)))
    };
    if let Some(name) = only
        && find(name).is_none()
    {
        return Err(BadInput(format!("{}: no scenario named '{name}'", suite_path.display())).into());
    }
    let params = match &params {
        Some(p) => Some(load_params(Some(p))?),
        None => None,
    };
    let baselines: Vec<regress::Baseline> = suites
        .iter()
        .map(|s| regress::read_baseline(&s.baseline_path()))
        .collect::<Result<_, _>>()
        .map_err(BadInput)?;
    let total =
        suites.iter().flat_map(|s| &s.scenarios).filter(|sc| only.is_none_or(|n| sc.name == n)).count();
    let pb = progress(total as u64, "regress");
    let results = regress::run_all(&suites, only, params.as_ref(), &|| pb.inc(1)).map_err(BadInput)?;
    pb.finish_and_clear();
    let mut rows = Vec::new();
    for ((suite, res), base) in suites.iter().zip(&results).zip(&baselines) {
        let (mut r, new_base) = regress::compare(suite, res, base, update);
        if only.is_some() {
            // A single scenario says nothing about the others: no missing entries.
            r.retain(|row| {
                res.iter().zip(&suite.scenarios).any(|(x, sc)| x.is_some() && sc.name == row.scenario)
            });
        }
        if update && (new_base != *base || !suite.baseline_path().exists()) {
            let path = suite.baseline_path();
            std::fs::write(&path, regress::render_baseline(&suite.name, &new_base))
                .map_err(|e| BadInput(format!("{}: cannot write the baseline: {e}", path.display())))?;
        }
        rows.extend(r);
    }
    print!("{}", report::render(&rows, format.into()));
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
    // One scenario again, for determinism and traces.
    let picked =
        only.and_then(find).or_else(|| suites.iter().find_map(|s| s.scenarios.first().map(|sc| (s, sc))));
    if let Some((suite, sc)) = picked.filter(|_| check || trace.is_some()) {
        let base = suite.path.parent().unwrap_or(Path::new("."));
        let again = sc.run(base, params.as_ref(), trace.is_some()).map_err(|e| BadInput(e.to_string()))?;
        if check {
            let i = suites.iter().position(|s| std::ptr::eq(s, suite)).expect("suite of the scenario");
            let j = suite.scenarios.iter().position(|x| std::ptr::eq(x, sc)).expect("scenario of the suite");
            if let Some(Ok(first)) = &results[i][j] {
                let (a, b) = (&first.stats, &again.stats);
                if a.log_hash != b.log_hash || first.time != again.time {
                    eprintln!(
                        "meshsim: {}/{} is not deterministic: event-log hash {:016x} then {:016x}",
                        suite.name, sc.name, a.log_hash, b.log_hash
                    );
                    return Ok(ExitCode::FAILURE);
                }
                eprintln!(
                    "meshsim: {}/{} deterministic: the parallel run and a second run gave {} events, event-log hash {:016x}",
                    suite.name, sc.name, a.events, a.log_hash
                );
            }
        }
        if let (Some(path), Some(t)) = (trace, &again.trace) {
            write_trace(path, t, &load_cluster(&sc.cluster_spec(base))?)?;
        }
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
    if count(S::Error) > 0 {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs a scenario with `params`, mapping its errors to exit codes.
fn run_scenario(sc: &Scenario, params: &Params, trace: bool) -> anyhow::Result<scenario::Outcome> {
    sc.run(Path::new("."), Some(params), trace).map_err(|e| match e {
        RunError::Bad(m) => BadInput(m).into(),
        RunError::Failed(m) => anyhow::anyhow!(m),
    })
}

/// Runs `sc` again and fails (exit 1) unless the event log hashes and times are equal.
fn check_determinism(sc: &Scenario, params: &Params, first: &scenario::Outcome) -> anyhow::Result<()> {
    let again = run_scenario(sc, params, false)?;
    let (a, b) = (&first.stats, &again.stats);
    if a.log_hash != b.log_hash || first.time != again.time || a.events != b.events {
        anyhow::bail!(
            "not deterministic: run 1 gave {} events, hash {:016x}, {}; run 2 gave {} events, hash {:016x}, {}",
            a.events,
            a.log_hash,
            first.time,
            b.events,
            b.log_hash,
            again.time
        );
    }
    eprintln!(
        "meshsim: deterministic: two runs gave {} events, event-log hash {:016x}",
        a.events, a.log_hash
    );
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

/// One link direction's use, as the `--links` table shows it.
#[derive(serde::Serialize)]
struct LinkRow {
    from_chip: u64,
    from_chan: u8,
    to_chip: u64,
    to_chan: u8,
    bytes: u64,
    packets: u64,
    busy_us: f64,
    busy_pct: f64,
}

fn link_rows(cluster: &Cluster, links: &[meshsim_hw::LinkUse], time: meshsim_engine::Time) -> Vec<LinkRow> {
    links
        .iter()
        .map(|l| LinkRow {
            from_chip: cluster.chip(l.from.chip).id,
            from_chan: l.from.chan,
            to_chip: cluster.chip(l.to.chip).id,
            to_chan: l.to.chan,
            bytes: l.bytes,
            packets: l.packets,
            busy_us: l.busy.as_us_f64(),
            busy_pct: 100.0 * l.busy.as_ns_f64() / time.as_ns_f64().max(1e-9),
        })
        .collect()
}

fn link_name(cluster: &Cluster, l: &meshsim_hw::LinkUse) -> String {
    format!(
        "chip {} eth{} -> chip {} eth{}",
        cluster.chip(l.from.chip).id,
        l.from.chan,
        cluster.chip(l.to.chip).id,
        l.to.chan
    )
}

fn critical_text(cluster: &Cluster, cp: Option<&meshsim_ccl::critical::CriticalPath>) -> String {
    let Some(cp) = cp else {
        return "\nbottleneck: none (nothing crossed a link)\n".into();
    };
    let mut s = format!(
        "\nbottleneck: {} ({} B, busy {:.3} us)\ncritical path:\n",
        link_name(cluster, &cp.link),
        cp.link.bytes,
        cp.link.busy.as_us_f64()
    );
    for st in &cp.stages {
        let _ = writeln!(
            s,
            "  {:<13} {:>12.3} us  ({:.3} .. {:.3} us)",
            st.name,
            (st.end - st.start).as_us_f64(),
            st.start.as_us_f64(),
            st.end.as_us_f64()
        );
    }
    s
}

fn critical_json(cluster: &Cluster, cp: Option<&meshsim_ccl::critical::CriticalPath>) -> serde_json::Value {
    let Some(cp) = cp else { return serde_json::Value::Null };
    serde_json::json!({
        "bottleneck": link_name(cluster, &cp.link),
        "bottleneck_busy_us": cp.link.busy.as_us_f64(),
        "stages": cp.stages.iter().map(|st| serde_json::json!({
            "stage": st.name,
            "start_us": st.start.as_us_f64(),
            "end_us": st.end.as_us_f64(),
            "duration_us": (st.end - st.start).as_us_f64(),
        })).collect::<Vec<_>>(),
    })
}

/// A plot of one series of `(size, value)` points.
fn one_line_plot(title: String, x_desc: &str, y_desc: &str, label: String, points: Vec<(f64, f64)>) -> Plot {
    Plot { title, x_desc: x_desc.into(), y_desc: y_desc.into(), series: vec![Series { label, points }] }
}

fn load_params(path: Option<&Path>) -> anyhow::Result<Params> {
    scenario::load_params(path).map_err(|e| BadInput(e.to_string()).into())
}

fn bench_error(e: BenchError) -> anyhow::Error {
    if e.is_bad_input() { BadInput(e.to_string()).into() } else { anyhow::Error::new(e) }
}

fn run_bench(b: Bench) -> anyhow::Result<()> {
    let common = match &b {
        Bench::Latency { common, .. } | Bench::Bandwidth { common, .. } | Bench::Ring { common, .. } => {
            common
        }
    };
    if common.trace.is_some() && common.sizes.len() != 1 {
        return Err(BadInput("--trace records one run: give exactly one --sizes value".into()).into());
    }
    let mut setup = Setup::new(load_cluster(&common.cluster)?, load_params(common.params.as_deref())?);
    let format = common.format.into();
    let label = common.cluster.clone();
    // With --trace the single point runs traced (the sweep of one point is that run).
    setup.trace = common.trace.is_some();
    let traced = setup.clone();
    let mut trace = None;
    let (table, plot) = match &b {
        Bench::Latency { common, slots, samples, unmerged } => {
            let spec =
                latency::LatencySpec { size_bytes: 0, slots: *slots, samples: *samples, unmerged: *unmerged };
            let rows = if setup.trace {
                let m =
                    latency::latency(&traced, latency::LatencySpec { size_bytes: common.sizes[0], ..spec })
                        .map_err(bench_error)?;
                trace = m.trace;
                vec![m.row]
            } else {
                latency::sweep(&setup, &common.sizes, spec).map_err(bench_error)?
            };
            let points = rows.iter().map(|r| (r.size_bytes as f64, r.round_trip_ns)).collect();
            let plot = one_line_plot(
                format!("Ethernet round trip, {label}"),
                "payload (bytes)",
                "round trip (ns)",
                label,
                points,
            );
            (report::render(&rows, format), plot)
        }
        Bench::Bandwidth { common, slots, packets, bidir, to_worker } => {
            let spec = bandwidth::BandwidthSpec {
                size_bytes: 0,
                slots: *slots,
                packets: *packets,
                bidir: *bidir,
                to_worker: *to_worker,
            };
            let rows = if setup.trace {
                let m = bandwidth::bandwidth(
                    &traced,
                    bandwidth::BandwidthSpec { size_bytes: common.sizes[0], ..spec },
                )
                .map_err(bench_error)?;
                trace = m.trace;
                vec![m.row]
            } else {
                bandwidth::sweep(&setup, &common.sizes, spec).map_err(bench_error)?
            };
            let points = rows.iter().map(|r| (r.size_bytes as f64, r.gbps)).collect();
            let what = if *bidir { "bidirectional" } else { "unidirectional" };
            let plot = one_line_plot(
                format!("ERISC {what} bandwidth, {slots} slots, {label}"),
                "packet payload (bytes)",
                "GB/s",
                label,
                points,
            );
            (report::render(&rows, format), plot)
        }
        Bench::Ring { common, hops, samples, unmerged, skew_ns } => {
            let spec = ring::RingSpec {
                size_bytes: 0,
                hops: *hops,
                samples: *samples,
                unmerged: *unmerged,
                start_skew_ns: *skew_ns,
            };
            let rows = if setup.trace {
                let m = ring::ring(&traced, ring::RingSpec { size_bytes: common.sizes[0], ..spec })
                    .map_err(bench_error)?;
                trace = m.trace;
                vec![m.row]
            } else {
                ring::sweep(&setup, &common.sizes, spec).map_err(bench_error)?
            };
            let points = rows.iter().map(|r| (r.size_bytes as f64, r.ns_per_hop)).collect();
            let plot = one_line_plot(
                format!("Ring ping, {hops} hops, {label}"),
                "payload (bytes)",
                "ns per hop",
                label,
                points,
            );
            (report::render(&rows, format), plot)
        }
    };
    print!("{table}");
    if let Some(path) = &common.plot {
        plot::write(path, &plot).map_err(|e| BadInput(e.to_string()))?;
    }
    if let (Some(path), Some(t)) = (&common.trace, &trace) {
        write_trace(path, t, &setup.cluster)?;
    }
    Ok(())
}

fn load_cluster(spec: &str) -> anyhow::Result<Cluster> {
    scenario::load_cluster(spec).map_err(|e| BadInput(e.to_string()).into())
}

fn ids(cluster: &Cluster, chips: &[meshsim_topology::ChipIdx]) -> Vec<u64> {
    chips.iter().map(|&c| cluster.chip(c).id).collect()
}

fn topo_json(c: &Cluster) -> serde_json::Value {
    let pairs: Vec<_> = c
        .links_per_pair()
        .into_iter()
        .map(|(a, b, links)| serde_json::json!({"a": c.chip(a).id, "b": c.chip(b).id, "links": links.len()}))
        .collect();
    let ring = c.ring().map(|r| ids(c, &r.chips));
    serde_json::json!({
        "cluster": c.origin(),
        "chips": c.chips().len(),
        "links": c.links().len(),
        "remote_links": c.remote_links().len(),
        "mmio_chips": ids(c, &c.mmio_chips()),
        "links_per_pair": pairs,
        "reserved_links": c.reserved_links().len(),
        "shape": c.shape().to_string(),
        "diameter": c.diameter(),
        "ring": ring,
    })
}

fn topo_text(c: &Cluster) -> String {
    let mut s = String::new();
    let chip_list = |v: Vec<u64>| v.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
    let _ = writeln!(s, "cluster   {}", c.origin());
    let _ = writeln!(s, "chips     {}", c.chips().len());
    let _ = writeln!(
        s,
        "links     {} ({} reserved for dispatch, {} to remote hosts)",
        c.links().len(),
        c.reserved_links().len(),
        c.remote_links().len()
    );
    let _ = writeln!(s, "pcie      {}", chip_list(ids(c, &c.mmio_chips())));
    let _ = writeln!(s, "shape     {}", c.shape());
    let _ = writeln!(s, "diameter  {}", c.diameter().map_or("disconnected".into(), |d| d.to_string()));
    match c.ring() {
        Some(r) => {
            let _ = writeln!(s, "ring      {}", chip_list(ids(c, &r.chips)));
        }
        None => {
            let _ = writeln!(s, "ring      none found");
        }
    }
    let _ = writeln!(s, "\nlinks per pair (usable = not reserved):");
    for (a, b, links) in c.links_per_pair() {
        let usable = links.iter().filter(|&&l| !c.link(l).reserved).count();
        let chans: Vec<String> = links
            .iter()
            .map(|&l| {
                let (near, far) = c.link(l).ends_from(a).expect("pair link");
                let mark = if c.link(l).reserved { "*" } else { "" };
                format!("{}:{}{mark}", near.chan, far.chan)
            })
            .collect();
        let _ = writeln!(
            s,
            "  {:>4} - {:<4} {} links, {} usable   chan {}",
            c.chip(a).id,
            c.chip(b).id,
            links.len(),
            usable,
            chans.join(" ")
        );
    }
    if !c.reserved_links().is_empty() {
        let _ = writeln!(s, "  (* reserved)");
    }
    s
}

fn topo_dot(c: &Cluster) -> String {
    let mut s = String::from("graph cluster {\n  node [shape=box];\n");
    for chip in c.chips() {
        let pcie = if chip.pcie.is_some() { ", style=bold" } else { "" };
        let _ = writeln!(s, "  chip{} [label=\"{}\"{pcie}];", chip.id, chip.id);
    }
    for (a, b, links) in c.links_per_pair() {
        let _ = writeln!(s, "  chip{} -- chip{} [label=\"{}\"];", c.chip(a).id, c.chip(b).id, links.len());
    }
    s.push_str("}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshsim_ccl::sweep::SweepRow;

    fn series(label: &str, busbw: &[f64]) -> SweepSeries {
        let rows = busbw
            .iter()
            .enumerate()
            .map(|(i, &b)| SweepRow {
                size_bytes: 1024 << (2 * i),
                count: 1024 << (2 * i),
                dtype: "bfp8".into(),
                redop: "none".into(),
                root: -1,
                time_us: 12.5 * (i + 1) as f64,
                algbw_gbps: b * 8.0 / 7.0,
                busbw_gbps: b,
            })
            .collect();
        SweepSeries {
            label: label.into(),
            cluster: "t3000".into(),
            chips: 8,
            dtype: "bfp8".into(),
            num_links: 1,
            workers: 1,
            rows,
        }
    }

    fn knobs() -> SweepKnobs {
        SweepKnobs {
            op: SweepOpArg::AllGather,
            topology: TopologyArg::Ring,
            bidir: BidirArg::None,
            redop: "sum".into(),
            chips: None,
            chip_ids: None,
            min: 1024,
            max: 16384,
            factor: 4,
        }
    }

    #[test]
    fn the_plot_has_one_line_per_series_with_the_rows_sizes_and_busbw() {
        let s = [series("1 worker", &[0.5, 2.0, 7.0]), series("4 workers", &[0.5, 3.0, 11.5])];
        let plot = busbw_plot("all_gather", &s);
        assert_eq!(plot.title, "all-gather busbw, t3000 (8 chips)");
        assert_eq!(plot.y_desc, "busbw (GB/s)");
        let labels: Vec<&str> = plot.series.iter().map(|x| x.label.as_str()).collect();
        assert_eq!(labels, ["1 worker", "4 workers"]);
        assert_eq!(plot.series[1].points, [(1024.0, 0.5), (4096.0, 3.0), (16384.0, 11.5)]);
    }

    /// What the common nccl-tests parsers do: skip `#` lines, split data lines on whitespace,
    /// read size, count, type, redop, root, time, algbw, busbw from columns 0..8, and take the
    /// average from the `# Avg bus bandwidth` line.
    #[test]
    fn the_text_table_parses_the_way_nccl_tests_output_does() {
        let text = render_sweep(&[series("t3000", &[0.5, 2.0, 7.25])], &knobs(), Format::Text);
        let data: Vec<Vec<&str>> =
            text.lines().filter(|l| !l.starts_with('#')).map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(data.len(), 3);
        for (i, cols) in data.iter().enumerate() {
            assert_eq!(cols.len(), 13, "{cols:?}");
            assert_eq!(cols[0].parse::<u64>().unwrap(), 1024 << (2 * i));
            assert_eq!(&cols[2..5], ["bfp8", "none", "-1"]);
            assert_eq!(cols[5].parse::<f64>().unwrap(), 12.5 * (i + 1) as f64);
            assert_eq!(cols[8], "N/A");
        }
        assert_eq!(data[2][7], "7.25");
        let header = text.lines().find(|l| l.contains("busbw #wrong")).unwrap();
        let names: Vec<&str> = header.trim_start_matches('#').split_whitespace().collect();
        assert_eq!(
            &names[..9],
            ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"]
        );
        let avg = text.lines().find_map(|l| l.strip_prefix("# Avg bus bandwidth    : ")).unwrap();
        assert_eq!(avg.trim().parse::<f64>().unwrap(), (0.5 + 2.0 + 7.25) / 3.0);
        // nccl-tests' time column: two decimals below 100 us, one below 10 ms, none above.
        assert_eq!(
            [nccl_time(12.345), nccl_time(123.45), nccl_time(12345.6)],
            ["  12.35", "  123.5", "  12346"]
        );
    }
}
