//! The flag groups several commands take alike, each flattened into every command that takes
//! it (docs/ARCHITECTURE.md): the model and its parameters ([`SimArg`], [`ParamsFile`]), how
//! an op's data moves ([`OpKnobs`]), and the output formats ([`Output`], [`OpOutput`],
//! [`GateOutput`]).

use std::path::PathBuf;

use clap::ValueEnum;
use meshsim_bench::report;
use meshsim_ccl::op::SimModel;
use meshsim_ccl::tensor::Memory;

use crate::scenario::parse_size;

/// `--model`: which model simulates the collectives.
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub(crate) struct SimArg {
    /// The model: packet (every packet through the hardware model, the reference) or flow
    /// (each transfer as a fluid flow: far faster, its error against packet in
    /// docs/performance.md; fabric stack only).
    #[arg(long = "model", default_value_t = SimModel::Packet, value_name = "MODEL")]
    pub(crate) sim_model: SimModel,
}

/// `--params FILE` and `--link-gbps`: the model's parameters.
#[derive(clap::Args, Clone, Debug, Default)]
pub(crate) struct ParamsFile {
    /// A parameter file to use instead of its architecture's built-in one
    /// (configs/wormhole_b0.yaml, configs/blackhole.yaml) on the chips of that architecture (the
    /// file's `arch`), and instead of a workload's or a suite scenario's own; repeat it for
    /// several architectures.
    #[arg(long, value_name = "FILE")]
    pub(crate) params: Vec<PathBuf>,
    /// The Ethernet line rate of every link, Gb/s per direction [default: the machine's:
    /// Wormhole 100; Blackhole 400, a Blackhole Galaxy 200].
    #[arg(long, value_name = "GBPS")]
    pub(crate) link_gbps: Option<u64>,
}

impl ParamsFile {
    /// The model as given: the file's parameters (or each cluster's architecture's) and the
    /// link rate.
    pub(crate) fn load(&self) -> anyhow::Result<crate::scenario::ParamSource> {
        crate::scenario::ParamSource::load(&self.params, self.link_gbps)
            .map_err(|e| crate::BadInput(e.to_string()).into())
    }
}

/// The knobs of how an op's data moves that every command running ops takes alike (`op`,
/// `sweep`, `tune`, and `run`, where they override every workload op's), declared once.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct OpKnobs {
    /// The fabric routers' packet payload in bytes [default: the architecture's, 4352 on
    /// Wormhole, tt-metal's] (fabric stack; at most 7616 on Wormhole); on `sweep` a
    /// comma-separated list, one series each.
    #[arg(long, value_parser = parse_size, value_name = "B", value_delimiter = ',')]
    pub(crate) packet_size: Vec<u64>,
    /// Pages per EDM packet [default: as many as the EDM buffer holds] (edm stack); on `sweep`
    /// a comma-separated list, one series each.
    #[arg(long, value_delimiter = ',')]
    pub(crate) pages_per_packet: Vec<u64>,
    /// EDM buffers per channel [default: 2] (edm stack); on `sweep` a comma-separated list,
    /// one series each.
    #[arg(long, value_delimiter = ',')]
    pub(crate) buffers: Vec<u64>,
    /// Where tensors are interleaved: dram (the chip's banks) or l1 (the workers' L1)
    /// [default: dram]; on `sweep` a comma-separated list, one series each.
    #[arg(long, value_delimiter = ',')]
    pub(crate) memory: Vec<Memory>,
    /// Program start skew: the k-th chip starts k x this many ns after the first.
    #[arg(long, default_value_t = 0, value_name = "NS")]
    pub(crate) skew_ns: u64,
}

impl OpKnobs {
    /// The packet size given (the first of a list, which only a sweep takes).
    pub(crate) fn packet_size(&self) -> Option<u64> {
        self.packet_size.first().copied()
    }

    /// The pages per packet given (the first of a list, which only a sweep takes).
    pub(crate) fn pages_per_packet(&self) -> Option<u64> {
        self.pages_per_packet.first().copied()
    }

    /// The buffers per channel given (the first of a list, which only a sweep takes).
    pub(crate) fn buffers(&self) -> Option<u64> {
        self.buffers.first().copied()
    }

    /// The memory given (the first of a list, which only a sweep takes).
    pub(crate) fn memory(&self) -> Option<Memory> {
        self.memory.first().copied()
    }

    /// Refuses a list of values on `command`, which runs one op or workload.
    pub(crate) fn one_each(&self, command: &str) -> Result<(), crate::BadInput> {
        let lists = [
            ("--packet-size", self.packet_size.len()),
            ("--pages-per-packet", self.pages_per_packet.len()),
            ("--buffers", self.buffers.len()),
            ("--memory", self.memory.len()),
        ];
        if let Some((flag, _)) = lists.iter().find(|(_, n)| *n > 1) {
            return Err(crate::BadInput(format!(
                "{flag} takes one value on {command}: a list makes one series each on sweep"
            )));
        }
        Ok(())
    }

    /// As the library's knobs (the others at their defaults).
    pub(crate) fn knobs(&self) -> meshsim_ccl::op::Knobs {
        let d = meshsim_ccl::op::Knobs::default();
        meshsim_ccl::op::Knobs {
            packet_bytes: self.packet_size(),
            pages_per_packet: self.pages_per_packet(),
            buffers_per_channel: self.buffers().unwrap_or(d.buffers_per_channel),
            memory: self.memory().unwrap_or(d.memory),
            ..d
        }
    }

    /// As overrides of every op of a workload (`meshsim run`).
    pub(crate) fn overrides(&self) -> crate::workload::Overrides {
        crate::workload::Overrides {
            packet_size: self.packet_size(),
            pages_per_packet: self.pages_per_packet(),
            buffers: self.buffers(),
            memory: self.memory(),
            skew_ns: self.skew_ns,
        }
    }

    /// The stack-specific knobs among these that were given.
    pub(crate) fn given(&self) -> meshsim_ccl::op::Given {
        meshsim_ccl::op::Given {
            pages_per_packet: !self.pages_per_packet.is_empty(),
            buffers: !self.buffers.is_empty(),
            packet_size: !self.packet_size.is_empty(),
            ..Default::default()
        }
    }
}

/// `--format`: how a table is printed.
#[derive(clap::Args, Clone, Copy, Debug)]
pub(crate) struct Output {
    /// Output format: text (an aligned table; nccl-tests' for sweep and merge), csv or json.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
}

/// `--format` of the commands whose results tt-metal's own tools can read too (`op`, `run`,
/// `replay`).
#[derive(clap::Args, Clone, Copy, Debug)]
pub(crate) struct OpOutput {
    /// Output format: text (an aligned table), csv, json, or tt-ops-report (tt-metal's ops perf
    /// report CSV: one row per op per chip, meshsim's time in DEVICE KERNEL DURATION [ns]).
    #[arg(long, value_enum, default_value_t = OpFormat::Text)]
    pub(crate) format: OpFormat,
}

/// Output formats of `op`, `run` and `replay`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum OpFormat {
    /// An aligned text table.
    Text,
    /// Comma-separated values.
    Csv,
    /// JSON.
    Json,
    /// tt-metal's ops perf report layout.
    TtOpsReport,
}

impl OpFormat {
    /// The table format the command prints in when it does not write a report.
    pub(crate) fn table(self) -> Format {
        match self {
            OpFormat::Text => Format::Text,
            OpFormat::Csv | OpFormat::TtOpsReport => Format::Csv,
            OpFormat::Json => Format::Json,
        }
    }
}

/// `--format` of `regress`: a table, or JUnit XML for CI dashboards.
#[derive(clap::Args, Clone, Copy, Debug)]
pub(crate) struct GateOutput {
    /// Output format: text (an aligned table), csv, json, or junit (JUnit XML: a test case per
    /// scenario, a failure naming what moved and by how much).
    #[arg(long, value_enum, default_value_t = GateFormat::Text)]
    pub(crate) format: GateFormat,
}

/// Output formats of `regress`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum GateFormat {
    /// An aligned text table.
    Text,
    /// Comma-separated values.
    Csv,
    /// JSON.
    Json,
    /// JUnit XML.
    Junit,
}

impl GateFormat {
    /// The table format, when it is not JUnit.
    pub(crate) fn table(self) -> Option<Format> {
        match self {
            GateFormat::Text => Some(Format::Text),
            GateFormat::Csv => Some(Format::Csv),
            GateFormat::Json => Some(Format::Json),
            GateFormat::Junit => None,
        }
    }
}

/// Output formats of tables.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Format {
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
