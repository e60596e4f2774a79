//! The command line: every command and its flags, declared once. Flags several commands
//! share are groups flattened into each (`cli_groups.rs`: `ParamsFile`, `Output`, `OpKnobs`;
//! [`FaultArgs`] here); values are parsed here into the library's types (an op is an
//! [`OpKind`], a dtype a [`DType`]) and passed down typed.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use meshsim_ccl::op::SimModel;
use meshsim_ccl::op::{Bidir, RedOp, Stack, Topology};
use meshsim_ccl::tensor::DType;

use crate::scenario::parse_size;
use crate::spec::OpKind;

pub(crate) use crate::cli_groups::{
    Format, GateFormat, GateOutput, OpFormat, OpKnobs, OpOutput, Output, ParamsFile, SimArg,
};

/// meshsim: a cycle-resolution simulator of Ethernet-linked Tenstorrent Wormhole meshes.
#[derive(Parser)]
#[command(name = "meshsim", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// Run every simulation without the engine's exact shortcuts (one event per deferred
    /// counter update): slower, and the same results — the shortcuts' check.
    #[arg(long, global = true)]
    pub(crate) exact: bool,
    /// When a simulation deadlocks, print every stalled kernel and what it waits for, not the
    /// one-line summary.
    #[arg(long, global = true)]
    pub(crate) full_report: bool,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Print every model parameter with its value, unit and description.
    Params {
        /// The machine whose parameters to print (its architecture's, at its link rate).
        #[arg(long, default_value = "n300")]
        cluster: String,
        #[command(flatten)]
        model: ParamsFile,
        #[command(flatten)]
        output: Output,
    },
    /// Compare the model with every published measurement of the calibration set; exit 1 if a
    /// point misses its tolerance.
    #[command(group(clap::ArgGroup::new("sweep_set").args(["ccl", "blackhole"])))]
    Calibrate {
        #[command(flatten)]
        model: ParamsFile,
        /// With --model flow: the op sweeps (--ccl, --blackhole) on the flow model, each point's
        /// error against hardware (their microbenchmark goldens stay the packet model's).
        #[command(flatten)]
        sim: SimArg,
        /// The TT-Fabric set instead: tt-metal's fabric bandwidth tests on a T3000 and its
        /// one-hop latency on a Galaxy.
        #[arg(long, conflicts_with_all = ["ccl", "blackhole"])]
        fabric: bool,
        /// The Blackhole set instead: tt-metal's Blackhole fabric goldens (one-hop latency on
        /// four P150 cards and on a Blackhole Galaxy, the line and neighbour-exchange bandwidth
        /// tests on the Galaxy) and its all-gather sweep on an 8-chip axis of the Galaxy.
        #[arg(long, conflicts_with = "ccl")]
        blackhole: bool,
        /// With --ccl or --blackhole: leave out sweep points above this many bytes (the 256 MiB
        /// and 1 GiB points take minutes each).
        #[arg(long, value_parser = parse_size, value_name = "BYTES", requires = "sweep_set")]
        max_bytes: Option<u64>,
        /// The CCL set instead: tt-metal's CCL sweep on a Wormhole LoudBox (all-gather and
        /// reduce-scatter, lines of 2 and 4 and the 8-ring, 16 KiB-256 MiB, run as it ran
        /// them), the ring fabric's bandwidth and latency goldens, and the raw ERISC bandwidth
        /// forwarded to a worker.
        #[arg(long)]
        ccl: bool,
        /// With --ccl: also write one plot per op of the sweep (simulated and measured time
        /// against size, per topology) into this directory, as ccl_all_gather.svg and
        /// ccl_reduce_scatter.svg; with --blackhole, the Blackhole all-gather sweep's as
        /// bh_all_gather.svg.
        #[arg(long, value_name = "DIR", requires = "sweep_set")]
        plot: Option<std::path::PathBuf>,
        /// Write the accuracy record instead: every set (link, fabric, CCL and Blackhole on the
        /// packet model; the CCL and Blackhole sweeps on the flow model; sweeps up to 16 MiB)
        /// with the built-in parameters, into configs/accuracy.csv and the accuracy table of
        /// docs/guide.md of the meshsim checkout the working directory is in (about 15 minutes
        /// on 2 cores).
        #[arg(long, conflicts_with_all = ["fabric", "ccl", "blackhole", "max_bytes", "plot"])]
        update_accuracy: bool,
        #[command(flatten)]
        output: Output,
    },
    /// Run an Ethernet microbenchmark as a simulated program.
    #[command(subcommand)]
    Bench(Bench),
    /// Run a CCL op (EDM and worker kernels) as a simulated program.
    #[command(override_usage = "meshsim op <OP> --shape W,Z,Y,X [OPTIONS]")]
    Op(OpArgs),
    /// Sweep a CCL op over sizes, nccl-tests style: size, count, type, redop, root, time,
    /// algbw, busbw.
    Sweep(SweepArgs),
    /// Rebuild a sweep's table, CSV, JSON or plot from the JSONL files of its runs (shards,
    /// resumed runs); a point found twice counts once.
    Merge {
        /// The JSONL files written by `sweep --out`.
        #[arg(required = true, value_name = "FILE.jsonl")]
        files: Vec<PathBuf>,
        #[command(flatten)]
        output: Output,
        /// Also draw busbw against size to FILE.svg or FILE.png, one line per series.
        #[arg(long, value_name = "FILE")]
        plot: Option<PathBuf>,
    },
    /// Run a workload: many ops on one machine, on communicators, with dependencies
    /// (see docs/cli.md for the file format).
    Run {
        /// The workload file (YAML).
        workload: PathBuf,
        #[command(flatten)]
        output: OpOutput,
        /// Also print the bytes and busy fraction of every link direction used, across all ops.
        #[arg(long = "links")]
        link_report: bool,
        /// Write a Chrome / Perfetto trace-event JSON of the run to FILE.
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// Move real bytes and check every op's output (exit 1 on a mismatch).
        #[arg(long)]
        verify: bool,
        #[command(flatten)]
        sim: SimArg,
        #[command(flatten)]
        model: ParamsFile,
        /// A selection tree instead of the workload's (`select:`) or the embedded one.
        #[arg(long, value_name = "FILE")]
        select: Option<PathBuf>,
        #[command(flatten)]
        faults: FaultArgs,
        #[command(flatten)]
        knobs: OpKnobs,
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
        /// With --model flow: run every op and workload scenario on the flow model instead and
        /// report its error against the baseline (the packet model's time); exit 1 when one is
        /// beyond the flow model's bound (3 % from 1 MiB per rank, 10 % below).
        #[command(flatten)]
        sim: SimArg,
        #[command(flatten)]
        model: ParamsFile,
        #[command(flatten)]
        output: GateOutput,
    },
    /// Replay the CCL ops of a tt-metal ops perf report (ops_perf_results_*.csv) on a machine
    /// and correlate: per collective what the chips measured, meshsim's prediction and its error.
    Replay(ReplayArgs),
    /// Describe a cluster: chips, links, PCIe chips, reserved links, shape, diameter, ring.
    Topo {
        /// A cluster description file (tt-umd YAML), a built-in name (n300, t3000, galaxy,
        /// galaxy_torus, p150, p300, bh_quietbox, bh_loudbox, bh_galaxy) or a generated cluster:
        /// ring:N, line:N, mesh:RxC or torus:RxC, each with optional :links=K (links per
        /// neighbouring pair, default 2) and :arch=wormhole_b0|blackhole.
        cluster: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = TopoFormat::Text)]
        format: TopoFormat,
    },
    /// Sweep the candidate algorithms and knobs of a collective over sizes and write the
    /// selection tree that picks the fastest per size range (for --select).
    Tune(TuneArgs),
    /// For every chip pair: whether one can access the other's memory directly over the stack
    /// (access), modify it atomically (atomics), the usable links between them and the hops.
    Peers {
        /// A cluster description file, a built-in name or a generated cluster (torus:8x16).
        cluster: String,
        /// The transport: fabric (routed: every connected chip) or edm (direct neighbours)
        /// [default: fabric].
        #[arg(long)]
        stack: Option<Stack>,
        #[command(flatten)]
        output: Output,
    },
}

/// The microbenchmarks.
#[derive(Subcommand)]
pub(crate) enum Bench {
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
    /// One core's DRAM page reads by queue depth, as tt-metal's data-movement test measures
    /// them: the core at logical (0,0) issues DEPTH reads of PAGE bytes from DRAM channel 0 on
    /// NoC 1, then one read barrier; cycles from the first issue to the barrier's return.
    Dram(DramArgs),
}

/// Arguments of `bench dram`.
#[derive(clap::Args)]
pub(crate) struct DramArgs {
    /// A cluster description file, a built-in name or a generated cluster: its architecture is
    /// what is measured (on its first chip).
    #[arg(long, default_value = "n300")]
    pub(crate) cluster: String,
    /// Bytes of each read (K suffix: 1024), one point per value.
    #[arg(long, value_parser = parse_size, value_delimiter = ',', value_name = "B", default_value = "64,2048,4096,8192")]
    pub(crate) page_size: Vec<u64>,
    /// Reads issued before the barrier, one point per value.
    #[arg(long, value_delimiter = ',', value_name = "N", default_value = "1,4,16,64")]
    pub(crate) depth: Vec<u64>,
    #[command(flatten)]
    pub(crate) model: ParamsFile,
    #[command(flatten)]
    pub(crate) output: Output,
}

/// Arguments of `bench fabric-latency`.
#[derive(clap::Args)]
pub(crate) struct FabricLatencyArgs {
    /// A cluster description file, a built-in name or a generated cluster; the ping goes from the mesh's first chip
    /// to the next one in its row.
    #[arg(long, default_value = "galaxy")]
    pub(crate) cluster: String,
    /// The fabric: line (every row and column a line) or ring (the mesh's perimeter).
    #[arg(long, value_enum, default_value_t = LatencyTopologyArg::Line)]
    pub(crate) topology: LatencyTopologyArg,
    /// How the receiving router writes each ping: write, or write then a semaphore increment.
    #[arg(long, value_enum, default_value_t = LatencyNocSendArg::Write)]
    pub(crate) noc_send: LatencyNocSendArg,
    /// Payload bytes of a ping (K suffix: 1024).
    #[arg(long, value_parser = parse_size, value_name = "B", default_value = "16")]
    pub(crate) payload: u64,
    /// Pings measured.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub(crate) samples: u64,
    #[command(flatten)]
    pub(crate) model: ParamsFile,
    #[command(flatten)]
    pub(crate) output: Output,
    /// Write a Chrome / Perfetto trace of the run to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Option<PathBuf>,
}

/// `bench fabric-latency --topology`.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum LatencyTopologyArg {
    /// The 1D line fabric.
    Line,
    /// The 1D ring fabric.
    Ring,
    /// The 2D mesh fabric.
    Mesh,
}

/// Arguments of `bench fabric`.
#[derive(clap::Args)]
pub(crate) struct FabricArgs {
    /// A cluster description file, a built-in name or a generated cluster; chips are named by their row-major
    /// position in its mesh.
    #[arg(long, default_value = "t3000")]
    pub(crate) cluster: String,
    /// The test: who sends what to whom.
    #[arg(long, value_enum)]
    pub(crate) test: FabricTestArg,
    /// How the receiving router writes each packet.
    #[arg(long, value_enum, default_value_t = NocSendArg::Write)]
    pub(crate) noc_send: NocSendArg,
    /// Payload bytes per packet (K suffix: 1024).
    #[arg(long, value_parser = parse_size, value_name = "B")]
    pub(crate) packet_size: u64,
    /// The router's maximum payload [default: 4352, or the packet size if larger].
    #[arg(long, value_parser = parse_size, value_name = "B")]
    pub(crate) max_packet_size: Option<u64>,
    /// Routing planes (links) every sender is cloned onto.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub(crate) num_links: usize,
    /// Packets per flow [default: the framework's, 20000 or 100000].
    #[arg(long, value_name = "N")]
    pub(crate) packets: Option<u64>,
    #[command(flatten)]
    pub(crate) model: ParamsFile,
    #[command(flatten)]
    pub(crate) output: Output,
    /// Write a Chrome / Perfetto trace of the run to FILE (give few --packets: every packet
    /// is recorded).
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Option<PathBuf>,
}

/// `bench fabric --test`.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum FabricTestArg {
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
pub(crate) enum NocSendArg {
    /// The payload to one address.
    Write,
    /// The write, then a semaphore increment on the same core.
    FusedAtomicInc,
    /// The payload in two chunks to adjacent addresses.
    ScatterWrite,
}

/// `bench fabric-latency --noc-send`: tt-metal's latency test sends no scatter writes.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum LatencyNocSendArg {
    /// The payload to one address.
    Write,
    /// The write, then a semaphore increment on the same core.
    FusedAtomicInc,
}

/// Arguments of `meshsim sweep`.
#[derive(clap::Args)]
pub(crate) struct SweepArgs {
    /// The op.
    #[arg(value_enum)]
    pub(crate) op: OpKind,
    /// Cluster description files or built-in names, comma-separated: one series each.
    #[arg(long, value_delimiter = ',', default_value = "t3000")]
    pub(crate) cluster: Vec<String>,
    /// Smallest total size in bytes (K, M, G suffixes).
    #[arg(short = 'b', long = "minbytes", default_value = "1K", value_parser = parse_size)]
    pub(crate) min: u64,
    /// Largest total size in bytes.
    #[arg(short = 'e', long = "maxbytes", default_value = "64M", value_parser = parse_size)]
    pub(crate) max: u64,
    /// Size factor between points.
    #[arg(short = 'f', long = "stepfactor", default_value_t = 2)]
    pub(crate) factor: u64,
    /// Element types, comma-separated: one series each.
    #[arg(long, value_delimiter = ',', default_value = "bf16")]
    pub(crate) dtype: Vec<DType>,
    /// Ring or line, comma-separated: one series each [default: ring; with --axis, ring on a
    /// torus and line on a mesh].
    #[arg(long, value_delimiter = ',')]
    pub(crate) topology: Vec<Topology>,
    /// Links per hop, comma-separated: one series each [default: tt-metal's: on the fabric
    /// the fewest usable links over the hops (all-to-all: 1), on the EDM 1].
    #[arg(long = "num-links", value_delimiter = ',')]
    pub(crate) num_links: Vec<usize>,
    /// Workers per link and direction, comma-separated: one series each. EDM: worker pairs,
    /// each with an EDM channel (1-4) [default: 4, shrunk to fit the link's 8 channels].
    /// Fabric reduce-scatter and all-reduce: workers behind a mux (1-8) [default: tt-metal's
    /// by size].
    #[arg(long, value_delimiter = ',')]
    pub(crate) workers: Option<Vec<usize>>,
    /// Bidirectional modes (all-gather on a ring), comma-separated: one series each
    /// [default: tt-metal's, split when a slice is larger than twice the ERISC L1, full
    /// otherwise].
    #[arg(long, value_delimiter = ',')]
    pub(crate) bidir: Vec<Bidir>,
    /// Reductions of a reducing op, comma-separated: sum, max, min or prod; one series each
    /// [default: sum].
    #[arg(long, value_delimiter = ',')]
    pub(crate) redop: Vec<RedOp>,
    /// Root ranks of a rooted op (broadcast, reduce, gather, scatter, combine),
    /// comma-separated: one series each [default: 0].
    #[arg(long, value_name = "R", value_delimiter = ',')]
    pub(crate) root: Vec<usize>,
    /// A selection tree (YAML) choosing algorithms and the knobs left unset [default: the
    /// embedded one].
    #[arg(long, value_name = "FILE")]
    pub(crate) select: Option<PathBuf>,
    /// All-gather: also run every point in place and fill nccl-tests' in-place columns.
    #[arg(long)]
    pub(crate) in_place: bool,
    /// Run on N chips forming the ring or line.
    #[arg(long)]
    pub(crate) chips: Option<usize>,
    /// Run on these chips, in order.
    #[arg(long, value_delimiter = ',', conflicts_with = "chips")]
    pub(crate) chip_ids: Option<Vec<u64>>,
    /// Run on every column (0) or every row (1) of the mesh at once; each point's time is
    /// the makespan.
    #[arg(long, conflicts_with_all = ["chips", "chip_ids"], value_parser = clap::value_parser!(u8).range(0..=1))]
    pub(crate) axis: Option<u8>,
    /// The transport: fabric or edm [default: fabric].
    #[arg(long)]
    pub(crate) stack: Option<Stack>,
    #[command(flatten)]
    pub(crate) sim: SimArg,
    #[command(flatten)]
    pub(crate) model: ParamsFile,
    #[command(flatten)]
    pub(crate) output: Output,
    /// Also draw busbw against size to FILE.svg or FILE.png, one line per series.
    #[arg(long, value_name = "FILE")]
    pub(crate) plot: Option<PathBuf>,
    /// Append each point to FILE as it finishes, one JSON object per line (the JSON row
    /// keys, and what `meshsim merge` needs).
    #[arg(long, value_name = "FILE.jsonl")]
    pub(crate) out: Option<PathBuf>,
    /// Run only the points missing from FILE (a sweep's --out), appending them to it unless
    /// --out names another file; the table shows every point.
    #[arg(long, value_name = "FILE.jsonl")]
    pub(crate) resume: Option<PathBuf>,
    /// Run only every N-th point, starting at point I (from 0), in the sweep's order: one
    /// shard of N; `meshsim merge` joins the shards' --out files.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    pub(crate) shard: Option<(usize, usize)>,
    #[command(flatten)]
    pub(crate) knobs: OpKnobs,
    #[command(flatten)]
    pub(crate) faults: FaultArgs,
}

/// Arguments of a CCL op.
#[derive(clap::Args)]
pub(crate) struct OpArgs {
    /// The op.
    #[arg(value_enum)]
    pub(crate) op: OpKind,
    /// A cluster description file, a built-in name or a generated cluster (torus:8x16).
    #[arg(long, default_value = "t3000")]
    pub(crate) cluster: String,
    /// The tensor's shape, w,z,y,x: the gathered output of an all-gather or gather, the
    /// reduced input of a reduce-scatter, all-reduce or reduce, the root's tensor of a
    /// broadcast or scatter, the tensor sent by a send/receive.
    #[arg(long, value_delimiter = ',', num_args = 1.., required = true)]
    pub(crate) shape: Vec<u64>,
    /// The reduction of a reducing op: sum, max, min or prod [default: sum].
    #[arg(long)]
    pub(crate) redop: Option<RedOp>,
    /// The root rank of a broadcast, reduce, gather, scatter or combine: a rank of the
    /// communicator (its position in --chip-ids, the ring or the line) [default: 0].
    #[arg(long, value_name = "R")]
    pub(crate) root: Option<usize>,
    /// All-gather: leave each rank's own slice out of its output (LPF's exclude_myself).
    #[arg(long)]
    pub(crate) exclude_myself: bool,
    /// All-gather: nccl-tests' in-place variant (each rank's slice already sits in its output).
    #[arg(long, conflicts_with = "exclude_myself")]
    pub(crate) in_place: bool,
    /// A selection tree (YAML, MPICH Csel style) choosing algorithms and the knobs left unset
    /// [default: the embedded configs/select/default.yaml].
    #[arg(long, value_name = "FILE")]
    pub(crate) select: Option<PathBuf>,
    /// The dimension gathered or scattered along: 0..3, or -4..-1 from the end as ttnn counts.
    #[arg(long, default_value = "3", value_parser = crate::spec::parse_dim, allow_negative_numbers = true)]
    pub(crate) dim: usize,
    /// Element type: bf16, bfp8, fp32, uint32.
    #[arg(long, default_value = "bf16")]
    pub(crate) dtype: DType,
    /// Ring or line [default: ring; with --axis, ring on a torus and line on a mesh].
    #[arg(long)]
    pub(crate) topology: Option<Topology>,
    /// Links per hop (reserved links are never used); tt-metal's num_links [default: tt-metal's:
    /// on the fabric the fewest usable links over the hops (all-to-all: 1), on the EDM 1].
    #[arg(long = "num-links")]
    pub(crate) num_links: Option<usize>,
    /// Workers per link and direction. EDM: worker pairs, each with an EDM channel (1-4)
    /// [default: 4, shrunk to fit the link's 8 channels]. Fabric reduce-scatter and all-reduce:
    /// workers behind a mux on each router (1-8) [default: tt-metal's by size].
    #[arg(long)]
    pub(crate) workers: Option<usize>,
    /// Bidirectional mode on a ring [default: tt-metal's, split when a slice is larger than
    /// twice the ERISC L1, full otherwise].
    #[arg(long)]
    pub(crate) bidir: Option<Bidir>,
    /// Run on N chips forming the ring or line (a mesh row or column first).
    #[arg(long)]
    pub(crate) chips: Option<usize>,
    /// Run on these chips, in order.
    #[arg(long, value_delimiter = ',', conflicts_with = "chips")]
    pub(crate) chip_ids: Option<Vec<u64>>,
    /// Run on every column (0: groups of R chips of topo's R x C) or every row (1: groups of C
    /// chips) of the mesh at once, as ttnn's cluster_axis.
    #[arg(long, conflicts_with_all = ["chips", "chip_ids"], value_parser = clap::value_parser!(u8).range(0..=1))]
    pub(crate) axis: Option<u8>,
    #[command(flatten)]
    pub(crate) knobs: OpKnobs,
    /// Move real bytes and check every chip's output (exit 1 on a mismatch).
    #[arg(long)]
    pub(crate) verify: bool,
    /// The output buffers persist from an earlier call (ttnn's using_persistent_buffers): the
    /// all-gather runs no init barrier before its first read (fabric stack).
    #[arg(long)]
    pub(crate) persistent_buffers: bool,
    /// The transport: fabric (persistent TT-Fabric routers, what tt-metal runs) or edm (the
    /// ERISC Data Mover launched per op) [default: fabric].
    #[arg(long)]
    pub(crate) stack: Option<Stack>,
    #[command(flatten)]
    pub(crate) sim: SimArg,
    #[command(flatten)]
    pub(crate) faults: FaultArgs,
    #[command(flatten)]
    pub(crate) model: ParamsFile,
    #[command(flatten)]
    pub(crate) output: OpOutput,
    /// Also print the bytes and busy fraction of every link direction used, the bottleneck
    /// link and the critical path's stages.
    #[arg(long = "links")]
    pub(crate) link_report: bool,
    /// Write a Chrome / Perfetto trace-event JSON of the run to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Option<PathBuf>,
    /// Run twice and fail (exit 1) unless both runs give the same event-log hash.
    #[arg(long)]
    pub(crate) check_determinism: bool,
    /// Print what each worker kernel of the op would do — the fabric's schedule, which both
    /// models read: per kernel its rank, plane, direction, what it sends where, copies and
    /// waits for — instead of running it (`--format json` for JSON).
    #[arg(long, conflicts_with_all = ["trace", "check_determinism", "verify", "link_report"])]
    pub(crate) schedule: bool,
}

/// `meshsim replay`'s arguments.
#[derive(clap::Args)]
pub(crate) struct ReplayArgs {
    /// The ops perf report (tt-metal's device profiler CSV, 2026 or 2025 layout).
    #[arg(value_name = "REPORT.csv")]
    pub(crate) report: PathBuf,
    /// The machine to run on: a built-in name, a generated cluster or a cluster description
    /// [default: the one the report implies from its DEVICE ARCH and chip count: t3000, galaxy,
    /// n300, p150, p300, bh_quietbox, bh_loudbox, bh_galaxy].
    #[arg(long)]
    pub(crate) cluster: Option<String>,
    /// The mesh the report's chips sit in, R x C, with --chip-ids: the machine's chips
    /// row-major; cluster_axis 0 runs on its columns, 1 on its rows [default: the machine's
    /// own mesh].
    #[arg(long, value_name = "RxC", requires = "chip_ids")]
    pub(crate) mesh: Option<String>,
    /// With --mesh: the machine's chip ids, row-major.
    #[arg(long, value_delimiter = ',', requires = "mesh")]
    pub(crate) chip_ids: Option<Vec<u64>>,
    /// Links per hop for every op, over the report's num_links.
    #[arg(long = "num-links")]
    pub(crate) num_links: Option<usize>,
    /// Ring or line for every op, over the report's topology.
    #[arg(long)]
    pub(crate) topology: Option<Topology>,
    /// Element type for every op, over the report's.
    #[arg(long)]
    pub(crate) dtype: Option<DType>,
    /// Reduce-scatter and all-reduce workers per link, over the report's num_workers_per_link.
    #[arg(long)]
    pub(crate) workers: Option<usize>,
    /// Also write the replayed ops as a workload file (`meshsim run`'s YAML), in file order.
    #[arg(long, value_name = "FILE.yaml")]
    pub(crate) emit_workload: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) knobs: OpKnobs,
    #[command(flatten)]
    pub(crate) sim: SimArg,
    #[command(flatten)]
    pub(crate) model: ParamsFile,
    #[command(flatten)]
    pub(crate) output: OpOutput,
}

/// `meshsim tune`'s arguments.
#[derive(clap::Args)]
pub(crate) struct TuneArgs {
    /// The collective.
    #[arg(value_enum)]
    pub(crate) op: OpKind,
    /// A cluster description file, a built-in name or a generated cluster (torus:8x16).
    #[arg(long, default_value = "t3000")]
    pub(crate) cluster: String,
    /// Run on N chips forming the ring or line.
    #[arg(long)]
    pub(crate) chips: Option<usize>,
    /// Run on these chips, in order.
    #[arg(long, value_delimiter = ',', conflicts_with = "chips")]
    pub(crate) chip_ids: Option<Vec<u64>>,
    /// Ring or line [default: ring].
    #[arg(long)]
    pub(crate) topology: Option<Topology>,
    /// The transport: fabric or edm [default: fabric].
    #[arg(long)]
    pub(crate) stack: Option<Stack>,
    /// Element type.
    #[arg(long, default_value = "bf16")]
    pub(crate) dtype: DType,
    /// Reduction of a reducing op [default: sum].
    #[arg(long)]
    pub(crate) redop: Option<RedOp>,
    /// Root rank of a rooted op [default: 0].
    #[arg(long, value_name = "R")]
    pub(crate) root: Option<usize>,
    /// Smallest size in bytes (K, M, G suffixes), nccl-tests' convention as `sweep`'s.
    #[arg(short = 'b', long = "minbytes", default_value = "16K", value_parser = parse_size)]
    pub(crate) min: u64,
    /// Largest size in bytes.
    #[arg(short = 'e', long = "maxbytes", default_value = "16M", value_parser = parse_size)]
    pub(crate) max: u64,
    /// Size factor between points.
    #[arg(short = 'f', long = "stepfactor", default_value_t = 4)]
    pub(crate) factor: u64,
    /// Screen every candidate on this model first (flow), and run only the --confirm fastest
    /// at each size, and the default, on --model (the packet model's times decide).
    #[arg(long, value_name = "MODEL")]
    pub(crate) screen: Option<SimModel>,
    /// With --screen: candidates confirmed at each size.
    #[arg(long, default_value_t = meshsim_ccl::tune::SCREEN_CONFIRMS as u64, requires = "screen", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) confirm: u64,
    #[command(flatten)]
    pub(crate) sim: SimArg,
    /// The tree to tune from [default: the embedded one]: its choices are candidates, and the
    /// other collectives keep it.
    #[arg(long, value_name = "FILE")]
    pub(crate) select: Option<PathBuf>,
    /// Write the tuned tree to FILE (and print what each size measured); without it the tree
    /// goes to stdout and the measurements to stderr.
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) knobs: OpKnobs,
    #[command(flatten)]
    pub(crate) model: ParamsFile,
    /// The measurements' format.
    #[command(flatten)]
    pub(crate) output: Output,
}

/// Arguments every benchmark takes.
#[derive(clap::Args)]
pub(crate) struct BenchArgs {
    /// A cluster description file, a built-in name (see `meshsim topo --help`) or a generated
    /// cluster (ring:N, line:N, mesh:RxC, torus:RxC)
    /// [default: n300; t3000 for ring, whose ping needs a link per hop].
    #[arg(long)]
    pub(crate) cluster: Option<String>,
    /// Payload sizes in bytes, comma-separated; K and M suffixes are powers of 1024.
    #[arg(long, value_delimiter = ',', default_value = "16,128,256,512,1K,2K,4K,8K", value_parser = parse_size)]
    pub(crate) sizes: Vec<u64>,
    #[command(flatten)]
    pub(crate) model: ParamsFile,
    #[command(flatten)]
    pub(crate) output: Output,
    /// Also draw the sweep to FILE.svg or FILE.png.
    #[arg(long, value_name = "FILE")]
    pub(crate) plot: Option<PathBuf>,
    /// Write a Chrome / Perfetto trace of the run to FILE (needs exactly one --sizes value).
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Option<PathBuf>,
}

/// Output formats of `meshsim topo`.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum TopoFormat {
    /// A human summary.
    Text,
    /// One JSON object.
    Json,
    /// A Graphviz graph, one edge per chip pair labelled with its link count.
    Dot,
    /// The tt-umd cluster descriptor itself: a file's text, a built-in's, or the one a
    /// generated cluster (torus:8x16) is read from.
    Yaml,
}

/// Fault injection flags of `op`, `sweep` and `run`.
#[derive(clap::Args, Clone, Debug, Default)]
pub(crate) struct FaultArgs {
    /// Inject a fault (repeatable): link-down:CHIP:CHAN@TIME_US,
    /// link-degrade:CHIP:CHAN:RATE_FACTOR[:EXTRA_LATENCY_NS], link-flap:CHIP:CHAN@TIME_US:DOWN_US,
    /// straggler:CHIP:DELAY_US, erisc-stall:CHIP:CHAN@TIME_US:STALL_US (CHIP as in the cluster
    /// description; times from the run's start).
    #[arg(long = "fault", value_name = "SPEC")]
    pub(crate) faults: Vec<String>,
    /// Also inject K faults drawn deterministically from --fault-seed.
    #[arg(long, value_name = "K")]
    pub(crate) random_faults: Option<usize>,
    /// The seed of --random-faults [default: 0].
    #[arg(long, value_name = "N")]
    pub(crate) fault_seed: Option<u64>,
}

impl FaultArgs {
    /// As scenarios and workloads hold them.
    pub(crate) fn knobs(&self) -> crate::spec::FaultKnobs {
        crate::spec::FaultKnobs {
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
