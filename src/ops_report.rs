//! `--format tt-ops-report` (`op`, `run`, `replay`): meshsim's predictions in the layout of
//! tt-metal's ops perf report (`shared/ops-report.md`), one row per op per chip, the predicted
//! time (the chip's span) in `DEVICE KERNEL DURATION [ns]`, so tools that read tt-metal's reports
//! read meshsim's, and `meshsim replay` reads them back: replaying a report meshsim wrote gives
//! back its times (for ops on the machine's own rings and axes, whose chips the report's device
//! ids place; a report carries no chip order).

use meshsim_ccl::op::{Collective, Topology};
use meshsim_ccl::request::OpResult;
use meshsim_ccl::tensor::{DType, Memory};
use meshsim_topology::Cluster;

/// The columns written: tt-metal's leading columns up to the kernel duration, one input and
/// one output block, the trace columns and tt-metal's own estimate (left empty).
const HEAD: [&str; 19] = [
    "OP CODE",
    "OP TYPE",
    "GLOBAL CALL COUNT",
    "DEVICE ID",
    "DEVICE ARCH",
    "ATTRIBUTES",
    "MATH FIDELITY",
    "CORE COUNT",
    "AVAILABLE WORKER CORE COUNT",
    "PARALLELIZATION STRATEGY",
    "HOST START TS",
    "HOST END TS",
    "HOST DURATION [ns]",
    "DEVICE FW START CYCLE",
    "DEVICE FW END CYCLE",
    "OP TO OP LATENCY [ns]",
    "OP TO OP LATENCY BR/NRISC START [ns]",
    "DEVICE FW DURATION [ns]",
    "DEVICE KERNEL DURATION [ns]",
];
const TAIL: [&str; 3] = ["METAL TRACE ID", "METAL TRACE REPLAY SESSION ID", "PM IDEAL [ns]"];

/// One op of the report: its instances (one per communicator) and the packet size it was given.
pub(crate) struct Op<'a> {
    pub instances: Vec<&'a OpResult>,
    pub packet_size: Option<u64>,
}

/// tt-metal's op name for a collective (meshsim's own for those tt-metal has no op of).
fn op_code(c: Collective) -> &'static str {
    match c {
        Collective::AllGather => "AllGatherAsyncDeviceOperation",
        Collective::ReduceScatter(_) => "ReduceScatterMinimalAsyncDeviceOperation",
        Collective::AllReduce(_) => "AllReduceAsyncDeviceOperation",
        Collective::AllToAll => "AllToAllAsyncDeviceOperation",
        Collective::Broadcast { .. } => "BroadcastDeviceOperation",
        Collective::SendRecv => "PointToPointOp",
        Collective::Reduce { .. } => "meshsim::Reduce",
        Collective::Gather { .. } => "meshsim::Gather",
        Collective::Scatter { .. } => "meshsim::Scatter",
    }
}

fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::Bf16 => "BFLOAT16",
        DType::Bfp8 => "BFLOAT8_B",
        DType::Fp32 => "FLOAT32",
        DType::Uint32 => "UINT32",
    }
}

/// The per-chip input and output shapes of `r`: an all-gather's input is a slice of its
/// gathered tensor, a reduce-scatter's output a slice of its input.
fn shapes(r: &OpResult) -> ([u64; 4], [u64; 4]) {
    let whole = r.tensor.shape;
    let mut slice = whole;
    slice[r.dim] /= r.chips.len().max(1) as u64;
    match r.collective {
        Collective::AllGather | Collective::Gather { .. } => (slice, whole),
        Collective::ReduceScatter(_) | Collective::Scatter { .. } => (whole, slice),
        _ => (whole, whole),
    }
}

/// A tensor block's seven cells.
fn tensor_cells(shape: [u64; 4], r: &OpResult) -> Vec<String> {
    let mut v: Vec<String> = shape.iter().map(|d| format!("{d}[{d}]")).collect();
    v.push("TILE".into());
    v.push(dtype_name(r.tensor.dtype).into());
    let mem = if r.memory == Memory::L1 { "L1" } else { "DRAM" };
    v.push(format!("DEV_0_{mem}_INTERLEAVED"));
    v
}

/// The `ATTRIBUTES` cell: the keys `replay` reads, alphabetical, as tt-metal writes them.
fn attributes(r: &OpResult, packet_size: Option<u64>) -> String {
    let topology = match r.topology {
        Topology::Ring => "Topology::Ring",
        Topology::Line => "Topology::Linear",
    };
    let mut a = [
        ("cluster_axis", "std::nullopt".to_owned()),
        ("dim", r.dim.to_string()),
        ("num_links", r.links.to_string()),
        ("num_workers_per_link", "std::nullopt".to_owned()),
        ("packet_size", packet_size.map_or("std::nullopt".to_owned(), |p| p.to_string())),
        ("ring_size", r.chips.len().to_string()),
        ("topology", topology.to_owned()),
        ("using_persistent_buffers", r.persistent_buffers.to_string()),
    ];
    a.sort();
    let body: Vec<String> = a.iter().map(|(k, v)| format!("'{k}': '{v}'")).collect();
    format!("{{{}}}", body.join("; "))
}

/// The report of `ops` on `cluster`: op ids from 1 in order, one row per chip of every instance.
pub(crate) fn render(cluster: &Cluster, ops: &[Op]) -> Result<String, csv::Error> {
    let mut w = csv::WriterBuilder::new().terminator(csv::Terminator::CRLF).from_writer(Vec::new());
    let mut header: Vec<String> = HEAD.iter().map(|s| s.to_string()).collect();
    for kind in ["INPUT", "OUTPUT"] {
        for d in ["W", "Z", "Y", "X"] {
            header.push(format!("{kind}_0_{d}_PAD[LOGICAL]"));
        }
        header.extend(["LAYOUT", "DATATYPE", "MEMORY"].map(|c| format!("{kind}_0_{c}")));
    }
    header.extend(TAIL.iter().map(|s| s.to_string()));
    w.write_record(&header)?;
    for (i, op) in ops.iter().enumerate() {
        let id = i as u64 + 1;
        for r in &op.instances {
            let (input, output) = shapes(r);
            for &(chip, start, end) in &r.per_chip {
                let device = cluster.chip(chip).id;
                let mut row = vec![String::new(); HEAD.len()];
                row[0] = op_code(r.collective).into();
                row[1] = "tt_dnn_device".into();
                row[2] = ((id << 10) | device).to_string();
                row[3] = device.to_string();
                row[4] = cluster.arch().to_string();
                row[5] = attributes(r, op.packet_size);
                row[18] = format!("{:.3}", (end - start).as_ns_f64());
                row.extend(tensor_cells(input, r));
                row.extend(tensor_cells(output, r));
                row.extend([String::new(), String::new(), String::new()]);
                w.write_record(&row)?;
            }
        }
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8(bytes).expect("the report is text"))
}
