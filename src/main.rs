//! The `meshsim` command line: the only place that parses arguments and picks exit codes.
//!
//! Exit codes: 0 success; 1 a check failed; 2 bad input (one line naming what and where).

use std::process::ExitCode;

use std::path::{Path, PathBuf};

mod bench_cmd;
mod op_cmd;
mod out;
mod regress;
mod regress_cmd;
mod run_cmd;
mod scenario;
mod spec;
mod sweep_cmd;
mod topo_cmd;
mod tune_cmd;
mod workload;

use bench_cmd::run_bench;
use op_cmd::run_op;
use out::out;
use regress_cmd::run_regress;
use scenario::{Kind, parse_size};
use sweep_cmd::{SweepKnobs, busbw_plot, render_sweep, run_sweep};
use topo_cmd::{topo_dot, topo_json, topo_text};

use clap::{Parser, Subcommand, ValueEnum};
use meshsim_bench::plot::{self, Plot, Series};
use meshsim_bench::{BenchError, Setup, calibration, report};
use meshsim_hw::Params;
use meshsim_topology::Cluster;

/// meshsim: a cycle-resolution simulator of Ethernet-linked Tenstorrent Wormhole meshes.
#[derive(Parser)]
#[command(name = "meshsim", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Run every simulation without the engine's exact shortcuts (one event per deferred
    /// counter update): slower, and the same results — the shortcuts' check.
    #[arg(long, global = true)]
    exact: bool,
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
        /// The TT-Fabric set instead: tt-metal's fabric bandwidth tests on a T3000 and its
        /// one-hop latency on a Galaxy.
        #[arg(long)]
        fabric: bool,
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
        /// Ring or line [default: ring; with --axis, ring on a torus and line on a mesh].
        #[arg(long, value_enum)]
        topology: Option<TopologyArg>,
        /// Links per hop, comma-separated: one series each [default: tt-metal's: on the fabric
        /// the fewest usable links over the hops (all-to-all: 1), on the EDM 1].
        #[arg(long = "num-links", value_delimiter = ',')]
        num_links: Vec<usize>,
        /// Workers per link and direction, comma-separated: one series each. EDM: worker pairs,
        /// each with an EDM channel (1-4) [default: 4, shrunk to fit the link's 8 channels].
        /// Fabric reduce-scatter and all-reduce: workers behind a mux (1-8) [default: tt-metal's
        /// by size].
        #[arg(long, value_delimiter = ',')]
        workers: Option<Vec<usize>>,
        /// Bidirectional mode (all-gather on a ring) [default: tt-metal's, split when a slice
        /// is larger than twice the ERISC L1, full otherwise].
        #[arg(long, value_enum)]
        bidir: Option<BidirArg>,
        /// Reduction of a reducing op: sum, max, min or prod [default: sum].
        #[arg(long)]
        redop: Option<String>,
        /// The root rank of a rooted op (broadcast, reduce, gather, scatter, combine)
        /// [default: 0].
        #[arg(long, value_name = "R")]
        root: Option<usize>,
        /// A selection tree (YAML) choosing algorithms and the knobs left unset [default: the
        /// embedded one].
        #[arg(long, value_name = "FILE")]
        select: Option<PathBuf>,
        /// All-gather: also run every point in place and fill nccl-tests' in-place columns.
        #[arg(long)]
        in_place: bool,
        /// Run on N chips forming the ring or line.
        #[arg(long)]
        chips: Option<usize>,
        /// Run on these chips, in order.
        #[arg(long, value_delimiter = ',', conflicts_with = "chips")]
        chip_ids: Option<Vec<u64>>,
        /// Run on every column (0) or every row (1) of the mesh at once; each point's time is
        /// the makespan.
        #[arg(long, conflicts_with_all = ["chips", "chip_ids"], value_parser = clap::value_parser!(u8).range(0..=1))]
        axis: Option<u8>,
        /// The transport: fabric or edm [default: fabric].
        #[arg(long)]
        stack: Option<String>,
        /// A parameter file to use instead of the built-in configs/wormhole_b0.yaml.
        #[arg(long, value_name = "FILE")]
        params: Option<PathBuf>,
        /// Output format: text is nccl-tests' table (one block per series).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Also draw busbw against size to FILE.svg or FILE.png, one line per series.
        #[arg(long, value_name = "FILE")]
        plot: Option<PathBuf>,
        /// Append each point to FILE as it finishes, one JSON object per line (the JSON row
        /// keys, and what `meshsim merge` needs).
        #[arg(long, value_name = "FILE.jsonl")]
        out: Option<PathBuf>,
        /// Run only the points missing from FILE (a sweep's --out), appending them to it unless
        /// --out names another file; the table shows every point.
        #[arg(long, value_name = "FILE.jsonl")]
        resume: Option<PathBuf>,
        /// Run only every N-th point, starting at point I (from 0), in the sweep's order: one
        /// shard of N; `meshsim merge` joins the shards' --out files.
        #[arg(long, value_name = "I/N", value_parser = parse_shard)]
        shard: Option<(usize, usize)>,
        #[command(flatten)]
        faults: FaultArgs,
    },
    /// Rebuild a sweep's table, CSV, JSON or plot from the JSONL files of its runs (shards,
    /// resumed runs); a point found twice counts once.
    Merge {
        /// The JSONL files written by `sweep --out`.
        #[arg(required = true, value_name = "FILE.jsonl")]
        files: Vec<PathBuf>,
        /// Output format: text is nccl-tests' table (one block per series).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Also draw busbw against size to FILE.svg or FILE.png, one line per series.
        #[arg(long, value_name = "FILE")]
        plot: Option<PathBuf>,
    },
    /// Run a workload: many ops on one machine, on communicators, with dependencies
    /// (see docs/cli.md for the file format).
    Run {
        /// The workload file (YAML).
        workload: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Also print the bytes and busy fraction of every link direction used, across all ops.
        #[arg(long = "links")]
        link_report: bool,
        /// Write a Chrome / Perfetto trace-event JSON of the run to FILE.
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// Move real bytes and check every op's output (exit 1 on a mismatch).
        #[arg(long)]
        verify: bool,
        /// A parameter file to use instead of the workload's or the built-in one.
        #[arg(long, value_name = "FILE")]
        params: Option<PathBuf>,
        /// A selection tree instead of the workload's (`select:`) or the embedded one.
        #[arg(long, value_name = "FILE")]
        select: Option<PathBuf>,
        #[command(flatten)]
        faults: FaultArgs,
    },
    /// Run the op-timing regression suites and compare every scenario's simulated time with its
    /// committed baseline; exit 1 when one moved beyond its tolerance, has no baseline, or a
    /// baseline has no scenario.
    Regress {
        /// A suite file, or a directory whose *.yaml files are suites. Baselines sit next to
        /// them as <suite>.baseline [default: configs/regress of the working directory or its
        /// nearest parent with one, else of the checkout meshsim was built from].
        #[arg(long, value_name = "PATH")]
        suite: Option<PathBuf>,
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
        /// Run every scenario a second time without the engine's shortcuts and fail unless
        /// each gives the same times, per-chip times, link use and busiest resources to the
        /// picosecond; prints how many events the shortcuts saved in each.
        #[arg(long, conflicts_with = "exact")]
        check_shortcuts: bool,
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
    /// Sweep the candidate algorithms and knobs of a collective over sizes and write the
    /// selection tree that picks the fastest per size range (for --select).
    Tune(tune_cmd::TuneArgs),
    /// For every chip pair: whether one can access the other's memory directly over the stack
    /// (access), modify it atomically (atomics), the usable links between them and the hops.
    Peers {
        /// A cluster description file or a built-in name.
        cluster: String,
        /// The transport: fabric (routed: every connected chip) or edm (direct neighbours)
        /// [default: fabric].
        #[arg(long)]
        stack: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
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
        /// Buffer slots (channels) per direction [default: 16, or as many as fit the ERISC
        /// kernel window at each size].
        #[arg(long)]
        slots: Option<u64>,
        /// Packets sent per direction and point.
        #[arg(long, default_value_t = 256)]
        packets: u64,
        /// Both directions at once (`gbps` is their sum, `gbps_per_direction` their mean).
        #[arg(long)]
        bidir: bool,
        /// The receiver forwards every slot to a Tensix core over the NoC (a write tagged with a
        /// transaction id) and acknowledges it once the write has left its L1.
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
    /// TT-Fabric bandwidth, as tt-metal's fabric test framework measures it (per link).
    Fabric(FabricArgs),
    /// TT-Fabric round-trip latency over one hop, as tt-metal's fabric latency test measures it.
    FabricLatency(FabricLatencyArgs),
}

/// Arguments of `bench fabric-latency`.
#[derive(clap::Args)]
struct FabricLatencyArgs {
    /// A cluster description file or a built-in name; the ping goes from the mesh's first chip
    /// to the next one in its row.
    #[arg(long, default_value = "galaxy")]
    cluster: String,
    /// The fabric: line (every row and column a line) or ring (the mesh's perimeter).
    #[arg(long, value_enum, default_value_t = LatencyTopologyArg::Line)]
    topology: LatencyTopologyArg,
    /// How the receiving router writes each ping: write, or write then a semaphore increment.
    #[arg(long, value_enum, default_value_t = NocSendArg::Write)]
    noc_send: NocSendArg,
    /// Payload bytes of a ping (K suffix: 1024).
    #[arg(long, value_parser = parse_size, value_name = "B", default_value = "16")]
    payload: u64,
    /// Pings measured.
    #[arg(long, default_value_t = 256, value_name = "N")]
    samples: u64,
    /// A parameter file to use instead of the built-in configs/wormhole_b0.yaml.
    #[arg(long, value_name = "FILE")]
    params: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Write a Chrome / Perfetto trace of the run to FILE.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
}

/// `bench fabric-latency --topology`.
#[derive(Clone, Copy, ValueEnum)]
enum LatencyTopologyArg {
    /// The 1D line fabric.
    Line,
    /// The 1D ring fabric.
    Ring,
    /// The 2D mesh fabric.
    Mesh,
}

/// Arguments of `bench fabric`.
#[derive(clap::Args)]
struct FabricArgs {
    /// A cluster description file or a built-in name; chips are named by their row-major
    /// position in its mesh.
    #[arg(long, default_value = "t3000")]
    cluster: String,
    /// The test: who sends what to whom.
    #[arg(long, value_enum)]
    test: FabricTestArg,
    /// How the receiving router writes each packet.
    #[arg(long, value_enum, default_value_t = NocSendArg::Write)]
    noc_send: NocSendArg,
    /// Payload bytes per packet (K suffix: 1024).
    #[arg(long, value_parser = parse_size, value_name = "B")]
    packet_size: u64,
    /// The router's maximum payload [default: 4352, or the packet size if larger].
    #[arg(long, value_parser = parse_size, value_name = "B")]
    max_packet_size: Option<u64>,
    /// Routing planes (links) every sender is cloned onto.
    #[arg(long, default_value_t = 1, value_name = "N")]
    num_links: usize,
    /// Packets per flow [default: the framework's, 20000 or 100000].
    #[arg(long, value_name = "N")]
    packets: Option<u64>,
    /// A parameter file to use instead of the built-in configs/wormhole_b0.yaml.
    #[arg(long, value_name = "FILE")]
    params: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Write a Chrome / Perfetto trace of the run to FILE (give few --packets: every packet
    /// is recorded).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
}

/// `bench fabric --test`.
#[derive(Clone, Copy, ValueEnum)]
enum FabricTestArg {
    /// Every chip unicasts one hop to each neighbour (1D neighbour-exchange fabric).
    NeighborExchange,
    /// The same on the 1D line fabric.
    NeighborExchangeLinear,
    /// Every chip multicasts to both ends of its row and its column.
    LinearMulticast,
    /// Every chip multicasts one way along its row and its column.
    UnidirLinearMulticast,
    /// Chip 0 alone unicasts to every chip of its row and to its column neighbour.
    SingleSenderLinearUnicast,
    /// Ring fabric: every chip multicasts round the perimeter ring both ways.
    FullRingMulticast,
    /// Ring fabric: every chip unicasts n - 1 hops both ways.
    FullRingUnicast,
    /// Ring fabric: every chip multicasts half the ring each way.
    HalfRingMulticast,
    /// 2D fabric: every chip multicasts along its row both ways, and down N/S trunks whose chips branch along their rows.
    MeshMulticast,
    /// 2D fabric: chip 0 alone unicasts to every other chip (N/S first, then E/W).
    SingleSenderMeshUnicast,
}

/// `bench fabric --noc-send`.
#[derive(Clone, Copy, ValueEnum)]
enum NocSendArg {
    /// The payload to one address.
    Write,
    /// The write, then a semaphore increment on the same core.
    FusedAtomicInc,
    /// The payload in two chunks to adjacent addresses.
    ScatterWrite,
}

/// The CCL ops.
#[derive(Subcommand)]
enum Op {
    /// All-gather: every chip ends with the concatenation of all chips' slices along --dim.
    AllGather(OpArgs),
    /// Reduce-scatter: every chip ends with its slice of the reduction of all chips' tensors.
    ReduceScatter(OpArgs),
    /// All-reduce: every chip ends with the reduction of all chips' tensors (reduce-scatter,
    /// then all-gather).
    AllReduce(OpArgs),
    /// All-to-all: every rank sends chunk j of its tensor (split along --dim) to rank j, which
    /// keeps it as chunk i of its output (i the sender); fabric stack only.
    AllToAll(OpArgs),
    /// Broadcast: every chip ends with the --root's tensor.
    Broadcast(OpArgs),
    /// Reduce: the --root ends with the reduction of all chips' tensors.
    Reduce(OpArgs),
    /// Gather: the --root ends with the concatenation of all chips' slices along --dim.
    Gather(OpArgs),
    /// Scatter: chip j ends with slice j (along --dim) of the --root's tensor.
    Scatter(OpArgs),
    /// Send/receive: the first of --chip-ids A,B sends its tensor to the second (a linked pair).
    SendRecv(OpArgs),
    /// Combine (LPF's name): the --root ends with the element-wise --redop of all chips'
    /// tensors; runs as reduce.
    Combine(OpArgs),
    /// All-combine (LPF's name): every chip ends with the element-wise --redop of all chips'
    /// tensors; runs as all-reduce.
    AllCombine(OpArgs),
}

/// Arguments of a CCL op.
#[derive(clap::Args)]
struct OpArgs {
    /// A cluster description file or a built-in name.
    #[arg(long, default_value = "t3000")]
    cluster: String,
    /// The tensor's shape, w,z,y,x: the gathered output of an all-gather or gather, the
    /// reduced input of a reduce-scatter, all-reduce or reduce, the root's tensor of a
    /// broadcast or scatter, the tensor sent by a send/receive.
    #[arg(long, value_delimiter = ',', num_args = 1.., required = true)]
    shape: Vec<u64>,
    /// The reduction of a reducing op: sum, max, min or prod [default: sum].
    #[arg(long)]
    redop: Option<String>,
    /// The root rank of a broadcast, reduce, gather, scatter or combine: a rank of the
    /// communicator (its position in --chip-ids, the ring or the line) [default: 0].
    #[arg(long, value_name = "R")]
    root: Option<usize>,
    /// All-gather: leave each rank's own slice out of its output (LPF's exclude_myself).
    #[arg(long)]
    exclude_myself: bool,
    /// All-gather: nccl-tests' in-place variant (each rank's slice already sits in its output).
    #[arg(long, conflicts_with = "exclude_myself")]
    in_place: bool,
    /// A selection tree (YAML, MPICH Csel style) choosing algorithms and the knobs left unset
    /// [default: the embedded configs/select/default.yaml].
    #[arg(long, value_name = "FILE")]
    select: Option<PathBuf>,
    /// The dimension gathered or scattered along (0..3).
    #[arg(long, default_value_t = 3)]
    dim: usize,
    /// Element type: bf16, bfp8, fp32, uint32.
    #[arg(long, default_value = "bf16")]
    dtype: String,
    /// Ring or line [default: ring; with --axis, ring on a torus and line on a mesh].
    #[arg(long, value_enum)]
    topology: Option<TopologyArg>,
    /// Links per hop (reserved links are never used); tt-metal's num_links [default: tt-metal's:
    /// on the fabric the fewest usable links over the hops (all-to-all: 1), on the EDM 1].
    #[arg(long = "num-links")]
    num_links: Option<usize>,
    /// Workers per link and direction. EDM: worker pairs, each with an EDM channel (1-4)
    /// [default: 4, shrunk to fit the link's 8 channels]. Fabric reduce-scatter and all-reduce:
    /// workers behind a mux on each router (1-8) [default: tt-metal's by size].
    #[arg(long)]
    workers: Option<usize>,
    /// Bidirectional mode on a ring [default: tt-metal's, split when a slice is larger than
    /// twice the ERISC L1, full otherwise].
    #[arg(long, value_enum)]
    bidir: Option<BidirArg>,
    /// Run on N chips forming the ring or line (a mesh row or column first).
    #[arg(long)]
    chips: Option<usize>,
    /// Run on these chips, in order.
    #[arg(long, value_delimiter = ',', conflicts_with = "chips")]
    chip_ids: Option<Vec<u64>>,
    /// Run on every column (0: groups of R chips of topo's R x C) or every row (1: groups of C
    /// chips) of the mesh at once, as ttnn's cluster_axis.
    #[arg(long, conflicts_with_all = ["chips", "chip_ids"], value_parser = clap::value_parser!(u8).range(0..=1))]
    axis: Option<u8>,
    /// Pages per EDM packet [default: as many as the EDM buffer holds].
    #[arg(long)]
    pages_per_packet: Option<u64>,
    /// EDM buffers per channel [default: 2] (edm stack).
    #[arg(long)]
    buffers: Option<u64>,
    /// Where tensors are interleaved: dram (the chip's banks) or l1 (the workers' L1).
    #[arg(long, default_value = "dram")]
    memory: String,
    /// Move real bytes and check every chip's output (exit 1 on a mismatch).
    #[arg(long)]
    verify: bool,
    /// The transport: fabric (persistent TT-Fabric routers, what tt-metal runs) or edm (the
    /// ERISC Data Mover launched per op) [default: fabric].
    #[arg(long)]
    stack: Option<String>,
    /// The fabric routers' packet payload in bytes [default: 4352, tt-metal's] (fabric stack;
    /// at most 7616 on Wormhole).
    #[arg(long, value_parser = parse_size, value_name = "B")]
    packet_size: Option<u64>,
    /// Program start skew: the k-th chip starts k x this many ns after the first.
    #[arg(long, default_value_t = 0, value_name = "NS")]
    skew_ns: u64,
    #[command(flatten)]
    faults: FaultArgs,
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
    /// All-reduce.
    AllReduce,
    /// All-to-all (fabric stack).
    AllToAll,
    /// Broadcast from --root.
    Broadcast,
    /// Reduce to --root.
    Reduce,
    /// Gather to --root.
    Gather,
    /// Scatter from --root.
    Scatter,
    /// Send/receive from the first of two chips to the second.
    SendRecv,
    /// Combine (reduce) to --root.
    Combine,
    /// All-combine (all-reduce).
    AllCombine,
}

impl SweepOpArg {
    /// The op it sweeps.
    fn kind(self) -> Kind {
        match self {
            SweepOpArg::AllGather => Kind::AllGather,
            SweepOpArg::ReduceScatter => Kind::ReduceScatter,
            SweepOpArg::AllReduce => Kind::AllReduce,
            SweepOpArg::AllToAll => Kind::AllToAll,
            SweepOpArg::Broadcast => Kind::Broadcast,
            SweepOpArg::Reduce => Kind::Reduce,
            SweepOpArg::Gather => Kind::Gather,
            SweepOpArg::Scatter => Kind::Scatter,
            SweepOpArg::SendRecv => Kind::SendRecv,
            SweepOpArg::Combine => Kind::Combine,
            SweepOpArg::AllCombine => Kind::AllCombine,
        }
    }
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
    /// A cluster description file or a built-in name (n300, t3000, galaxy, galaxy_torus)
    /// [default: n300; t3000 for ring, whose ping needs a link per hop].
    #[arg(long)]
    cluster: Option<String>,
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
    let cli = match parse_args() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(&e),
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            if let Some(o) = e.downcast_ref::<out::OutputError>() {
                // A closed pipe has nobody left to tell; a full disk gets its one line.
                if o.is_closed_pipe() {
                    return ExitCode::SUCCESS;
                }
                eprintln!("meshsim: {o}");
                return ExitCode::FAILURE;
            }
            eprintln!("meshsim: {e}");
            if e.downcast_ref::<BadInput>().is_some() { ExitCode::from(2) } else { ExitCode::FAILURE }
        }
    }
}

/// Parses the command line. Every command takes negative numbers as values, so `--dim -1` is
/// refused as a value of `--dim` rather than read as an unknown flag.
fn parse_args() -> Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    fn negatives(c: clap::Command) -> clap::Command {
        let subs: Vec<String> = c.get_subcommands().map(|s| s.get_name().to_owned()).collect();
        let mut c = c.allow_negative_numbers(true);
        for name in subs {
            c = c.mut_subcommand(name, negatives);
        }
        c
    }
    let matches = negatives(Cli::command()).try_get_matches()?;
    Cli::from_arg_matches(&matches)
}

/// Help and version go to standard output (exit 0); every other parse error is bad input in
/// one line (exit 2).
fn clap_exit(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        return match out!("{}", e.render()) {
            Err(o) if !o.is_closed_pipe() => {
                eprintln!("meshsim: {o}");
                ExitCode::FAILURE
            }
            _ => ExitCode::SUCCESS,
        };
    }
    eprintln!("meshsim: {}", one_line(&e.render().to_string()));
    ExitCode::from(2)
}

/// clap's several-line message as one line: its first paragraph, with the command's `--help`
/// pointed to; a missing command lists the commands there are.
fn one_line(text: &str) -> String {
    let path = command_path();
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
    format!("{what} (see `{path} --help`)")
}

/// The (sub)command the command line names: `meshsim op all-gather`.
fn command_path() -> String {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut path = vec!["meshsim".to_owned()];
    for arg in std::env::args_os().skip(1) {
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
        Command::Topo { cluster, format } => {
            let cluster = load_cluster(&cluster)?;
            let out = match format {
                TopoFormat::Text => topo_text(&cluster),
                TopoFormat::Json => serde_json::to_string_pretty(&topo_json(&cluster))? + "\n",
                TopoFormat::Dot => topo_dot(&cluster),
            };
            out!("{out}")?;
        }
        Command::Tune(args) => return tune_cmd::run_tune(args),
        Command::Peers { cluster, stack, format } => {
            let cluster = load_cluster(&cluster)?;
            let stack = match stack {
                Some(s) => s.parse().map_err(BadInput)?,
                None => meshsim_ccl::op::Stack::DEFAULT,
            };
            let rows = meshsim_ccl::peers::peers(&cluster, stack);
            out!("{}", report::render(&rows, format.into()))?;
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
            out!("{}", report::render(&rows, format.into()))?;
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
            root,
            select,
            in_place,
            chips,
            chip_ids,
            axis,
            stack,
            params,
            format,
            plot: plot_path,
            out: out_path,
            resume,
            shard,
            faults,
        } => {
            check_outputs(plot_path.as_deref(), None)?;
            if let Some(o) = &out_path {
                plot::writable(o).map_err(|e| {
                    BadInput(format!("{}: cannot write the sweep's points: {e}", o.display()))
                })?;
            }
            let stack = match stack {
                Some(s) => s.parse().map_err(BadInput)?,
                None => meshsim_ccl::op::Stack::DEFAULT,
            };
            let knobs = SweepKnobs {
                op,
                topology,
                axis,
                bidir,
                stack,
                redop,
                root,
                select: select.as_deref().map(scenario::load_select).transpose().map_err(|e| match e {
                    scenario::RunError::Bad(m) | scenario::RunError::Failed(m) => BadInput(m),
                })?,
                in_place,
                chips,
                chip_ids,
                min,
                max,
                factor,
                faults: faults.knobs(),
            };
            let p = load_params(params.as_deref())?;
            let workers: Vec<Option<usize>> = match workers {
                Some(w) => w.into_iter().map(Some).collect(),
                None => vec![None],
            };
            let num_links: Vec<Option<usize>> = match num_links.is_empty() {
                true => vec![None],
                false => num_links.into_iter().map(Some).collect(),
            };
            let io = sweep_cmd::SweepIo { out: out_path, resume, shard, stop: interrupt_on_ctrl_c() };
            let run = run_sweep(&knobs, &cluster, &dtype, &num_links, &workers, &p, &io)?;
            let header = knobs.header();
            out!("{}", render_sweep(&run.series, &header, format))?;
            if let Some(path) = plot_path {
                plot::write(&path, &busbw_plot(&header.op, &run.series))
                    .map_err(|e| BadInput(e.to_string()))?;
            }
            if run.interrupted {
                let saved = io.out.as_ref().or(io.resume.as_ref());
                eprintln!(
                    "meshsim: interrupted: {} of {} points ran{}",
                    run.ran,
                    run.planned,
                    saved.map_or(String::new(), |f| format!("; --resume {} runs the rest", f.display()))
                );
                return Ok(ExitCode::from(130));
            }
            if let Some(e) = sweep_cmd::first_error(&run.series) {
                eprintln!("meshsim: {e}");
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Merge { files, format, plot: plot_path } => {
            check_outputs(plot_path.as_deref(), None)?;
            let mut points = Vec::new();
            for f in &files {
                points.extend(sweep_cmd::read_points(f).map_err(BadInput)?);
            }
            let from = files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ");
            let (series, header) = sweep_cmd::series_of(points, &from).map_err(BadInput)?;
            out!("{}", render_sweep(&series, &header, format))?;
            if let Some(path) = plot_path {
                plot::write(&path, &busbw_plot(&header.op, &series)).map_err(|e| BadInput(e.to_string()))?;
            }
            if let Some(e) = sweep_cmd::first_error(&series) {
                eprintln!("meshsim: {e}");
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Op(Op::ReduceScatter(args)) => return run_op(Kind::ReduceScatter, args),
        Command::Op(Op::AllReduce(args)) => return run_op(Kind::AllReduce, args),
        Command::Op(Op::AllToAll(args)) => return run_op(Kind::AllToAll, args),
        Command::Op(Op::Broadcast(args)) => return run_op(Kind::Broadcast, args),
        Command::Op(Op::Reduce(args)) => return run_op(Kind::Reduce, args),
        Command::Op(Op::Gather(args)) => return run_op(Kind::Gather, args),
        Command::Op(Op::Scatter(args)) => return run_op(Kind::Scatter, args),
        Command::Op(Op::SendRecv(args)) => return run_op(Kind::SendRecv, args),
        Command::Op(Op::Combine(args)) => return run_op(Kind::Combine, args),
        Command::Op(Op::AllCombine(args)) => return run_op(Kind::AllCombine, args),
        Command::Run { workload, format, link_report, trace, verify, params, select, faults } => {
            return run_cmd::run_workload(
                &workload,
                format,
                link_report,
                trace.as_deref(),
                verify,
                (params, select),
                faults,
            );
        }
        Command::Regress {
            suite,
            update,
            scenario,
            trace,
            check_determinism,
            check_shortcuts,
            params,
            format,
        } => {
            let suite = match suite {
                Some(s) => s,
                None => regress::default_suites().map_err(BadInput)?,
            };
            return run_regress(
                &suite,
                update,
                scenario.as_deref(),
                trace.as_deref(),
                (check_determinism, check_shortcuts),
                params,
                format,
            );
        }
        Command::Calibrate { params, fabric, format } => {
            let params = load_params(params.as_deref())?;
            let n300 = Setup::new(load_cluster("n300")?, params.clone());
            let galaxy = Setup::new(load_cluster("galaxy")?, params.clone());
            let t3000 = Setup::new(load_cluster("t3000")?, params);
            let rows = if fabric {
                calibration::run_fabric(&t3000, &galaxy).map_err(bench_error)?
            } else {
                calibration::run(&n300, &t3000).map_err(bench_error)?
            };
            out!("{}", report::render(&rows, format.into()))?;
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

/// The flag Ctrl-C sets: the first press stops new points from starting (those running
/// finish, and what finished is printed); a second press erases the progress bar and exits
/// at once (130), keeping only what `--out` already holds.
fn interrupt_on_ctrl_c() -> &'static std::sync::atomic::AtomicBool {
    use std::sync::atomic::{AtomicBool, Ordering};
    static STOP: AtomicBool = AtomicBool::new(false);
    let _ = ctrlc::set_handler(|| {
        if STOP.swap(true, Ordering::SeqCst) {
            if let Some(pb) = SWEEP_BAR.get() {
                pb.finish_and_clear();
            }
            std::process::exit(130);
        }
    });
    &STOP
}

/// Fault injection flags of `op`, `sweep` and `run`.
#[derive(clap::Args, Clone, Debug, Default)]
struct FaultArgs {
    /// Inject a fault (repeatable): link-down:CHIP:CHAN@TIME_US,
    /// link-degrade:CHIP:CHAN:RATE_FACTOR[:EXTRA_LATENCY_NS], link-flap:CHIP:CHAN@TIME_US:DOWN_US,
    /// straggler:CHIP:DELAY_US (CHIP as in the cluster description; times from the run's start).
    #[arg(long = "fault", value_name = "SPEC")]
    faults: Vec<String>,
    /// Also inject K faults drawn deterministically from --fault-seed.
    #[arg(long, value_name = "K")]
    random_faults: Option<usize>,
    /// The seed of --random-faults [default: 0].
    #[arg(long, value_name = "N")]
    fault_seed: Option<u64>,
}

impl FaultArgs {
    /// As scenarios and workloads hold them.
    fn knobs(&self) -> scenario::FaultKnobs {
        scenario::FaultKnobs {
            faults: self.faults.clone(),
            random_faults: self.random_faults,
            fault_seed: self.fault_seed,
        }
    }
}

/// `--shard I/N`: shard I (from 0) of N.
fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let (i, n) = s.split_once('/').ok_or_else(|| format!("'{s}' is not I/N (such as 0/4)"))?;
    let (i, n): (usize, usize) = (
        i.trim().parse().map_err(|_| format!("'{s}': shard '{i}' is not a number"))?,
        n.trim().parse().map_err(|_| format!("'{s}': shard count '{n}' is not a number"))?,
    );
    if n == 0 || i >= n {
        return Err(format!("'{s}': the shard must be 0 to N-1 of N >= 1"));
    }
    Ok((i, n))
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
    Plot { title, x_desc: x_desc.into(), y_desc: y_desc.into(), series: vec![Series { label, points }] }
}

fn load_params(path: Option<&Path>) -> anyhow::Result<Params> {
    scenario::load_params(path).map_err(|e| BadInput(e.to_string()).into())
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
