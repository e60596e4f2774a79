//! `meshsim bench`: microbenchmark sweeps, their plots and single-point traces.

use std::path::Path;

use crate::out::out;
use meshsim_bench::plot::{self, Plot};
use meshsim_bench::{BenchError, Measured, Setup, bandwidth, dram, fabric, latency, report, ring};

use crate::cli::{
    Bench, BenchArgs, DramArgs, FabricArgs, FabricLatencyArgs, FabricTestArg, Format, LatencyNocSendArg,
    LatencyTopologyArg, NocSendArg,
};
use crate::{BadInput, bench_error, check_outputs, load_cluster, one_line_plot, write_trace};

pub(crate) fn run_bench(b: Bench) -> anyhow::Result<()> {
    let common = match &b {
        Bench::Latency { common, .. } | Bench::Bandwidth { common, .. } | Bench::Ring { common, .. } => {
            common
        }
        Bench::Fabric(args) => return run_fabric(args),
        Bench::FabricLatency(args) => return run_fabric_latency(args),
        Bench::Dram(args) => return run_dram(args),
    };
    check_outputs(common.plot.as_deref(), common.trace.as_deref())?;
    if common.trace.is_some() && common.sizes.len() != 1 {
        return Err(BadInput("--trace records one run: give exactly one --sizes value".into()).into());
    }
    let cluster = common.cluster.clone().unwrap_or_else(|| {
        // An N300 has one usable link: no ring of hops with a link each.
        if matches!(b, Bench::Ring { .. }) { "t3000" } else { "n300" }.to_owned()
    });
    let c = load_cluster(&cluster)?;
    let params = common.model.load()?.on_checked(&c).map_err(|e| crate::BadInput(e.to_string()))?;
    let mut setup = Setup::new(c, params);
    let format = common.output.format.into();
    let label = cluster;
    // With --trace the single point runs traced (the sweep of one point is that run).
    setup.trace = common.trace.is_some();
    let mut trace = None;
    let (table, plot) = match &b {
        Bench::Latency { common, slots, samples, unmerged } => {
            latency_points(&setup, common, (*slots, *samples, *unmerged), &mut trace, label, format)?
        }
        Bench::Bandwidth { common, slots, packets, bidir, to_worker } => bandwidth_points(
            &setup,
            common,
            (*slots, *packets, *bidir, *to_worker),
            &mut trace,
            label,
            format,
        )?,
        Bench::Ring { common, hops, samples, unmerged, skew_ns } => {
            ring_points(&setup, common, (*hops, *samples, *unmerged, *skew_ns), &mut trace, label, format)?
        }
        Bench::Fabric(_) | Bench::FabricLatency(_) | Bench::Dram(_) => unreachable!("handled above"),
    };
    out!("{table}")?;
    if let Some(path) = &common.plot {
        plot::write(path, &plot).map_err(|e| BadInput(e.to_string()))?;
    }
    if let (Some(path), Some(t)) = (&common.trace, &trace) {
        write_trace(path, t, &setup.cluster)?;
    }
    Ok(())
}

/// `bench latency`: the round trip per size, or one traced point.
fn latency_points(
    setup: &Setup,
    common: &BenchArgs,
    knobs: (u64, u64, bool),
    trace: &mut Option<meshsim_hw::TraceData>,
    label: String,
    format: report::Format,
) -> anyhow::Result<(String, Plot)> {
    let (slots, samples, unmerged) = knobs;
    let spec = latency::LatencySpec { size_bytes: 0, slots, samples, unmerged };
    let rows = rows_or_trace(
        trace,
        setup
            .trace
            .then(|| latency::latency(setup, latency::LatencySpec { size_bytes: common.sizes[0], ..spec })),
        || latency::sweep(setup, &common.sizes, spec),
    )?;
    let points = rows.iter().map(|r| (r.size_bytes as f64, r.round_trip_ns)).collect();
    let plot = one_line_plot(
        format!("Ethernet round trip, {label}"),
        "payload (bytes)",
        "round trip (ns)",
        label,
        points,
    );
    Ok((report::render(&rows, format), plot))
}

/// `bench bandwidth`: GB/s per direction per size, or one traced point.
fn bandwidth_points(
    setup: &Setup,
    common: &BenchArgs,
    knobs: (Option<u64>, u64, bool, bool),
    trace: &mut Option<meshsim_hw::TraceData>,
    label: String,
    format: report::Format,
) -> anyhow::Result<(String, Plot)> {
    let (slots, packets, bidir, to_worker) = knobs;
    let spec = bandwidth::BandwidthSpec { size_bytes: 0, slots, packets, bidir, to_worker };
    let rows = rows_or_trace(
        trace,
        setup.trace.then(|| {
            bandwidth::bandwidth(setup, bandwidth::BandwidthSpec { size_bytes: common.sizes[0], ..spec })
        }),
        || bandwidth::sweep(setup, &common.sizes, spec),
    )?;
    let points = rows.iter().map(|r| (r.size_bytes as f64, r.gbps_per_direction)).collect();
    let what = if bidir { "bidirectional" } else { "unidirectional" };
    let slots = slots.map_or("default".to_string(), |n| n.to_string());
    let plot = one_line_plot(
        format!("ERISC {what} bandwidth, {slots} slots, {label}"),
        "packet payload (bytes)",
        "GB/s per direction",
        label,
        points,
    );
    Ok((report::render(&rows, format), plot))
}

/// `bench ring`: ns per hop per size, or one traced point.
fn ring_points(
    setup: &Setup,
    common: &BenchArgs,
    knobs: (usize, u64, bool, u64),
    trace: &mut Option<meshsim_hw::TraceData>,
    label: String,
    format: report::Format,
) -> anyhow::Result<(String, Plot)> {
    let (hops, samples, unmerged, skew_ns) = knobs;
    let spec = ring::RingSpec { size_bytes: 0, hops, samples, unmerged, start_skew_ns: skew_ns };
    let rows = rows_or_trace(
        trace,
        setup.trace.then(|| ring::ring(setup, ring::RingSpec { size_bytes: common.sizes[0], ..spec })),
        || ring::sweep(setup, &common.sizes, spec),
    )?;
    let points = rows.iter().map(|r| (r.size_bytes as f64, r.ns_per_hop)).collect();
    let plot = one_line_plot(
        format!("Ring ping, {hops} hops, {label}"),
        "payload (bytes)",
        "ns per hop",
        label,
        points,
    );
    Ok((report::render(&rows, format), plot))
}

/// `bench fabric`: one point of tt-metal's fabric bandwidth tests.
fn run_fabric(a: &FabricArgs) -> anyhow::Result<()> {
    let setup = traced_setup(&a.cluster, &a.model, a.trace.as_deref())?;
    let test = match a.test {
        FabricTestArg::NeighborExchange => fabric::FabricTest::NeighborExchange,
        FabricTestArg::NeighborExchangeLinear => fabric::FabricTest::NeighborExchangeLinear,
        FabricTestArg::LinearMulticast => fabric::FabricTest::LinearMulticast,
        FabricTestArg::UnidirLinearMulticast => fabric::FabricTest::UnidirLinearMulticast,
        FabricTestArg::SingleSenderLinearUnicast => fabric::FabricTest::SingleSenderLinearUnicast,
        FabricTestArg::FullRingMulticast => fabric::FabricTest::FullRingMulticast,
        FabricTestArg::FullRingUnicast => fabric::FabricTest::FullRingUnicast,
        FabricTestArg::HalfRingMulticast => fabric::FabricTest::HalfRingMulticast,
        FabricTestArg::MeshMulticast => fabric::FabricTest::MeshMulticast,
        FabricTestArg::SingleSenderMeshUnicast => fabric::FabricTest::SingleSenderMeshUnicast,
    };
    let noc_send = match a.noc_send {
        NocSendArg::Write => fabric::NocSend::Write,
        NocSendArg::FusedAtomicInc => fabric::NocSend::FusedAtomicInc,
        NocSendArg::ScatterWrite => fabric::NocSend::ScatterWrite,
    };
    let spec = fabric::FabricSpec {
        test,
        noc_send,
        packet_bytes: a.packet_size,
        max_packet_bytes: a.max_packet_size,
        num_links: a.num_links,
        packets: a.packets,
    };
    let m = fabric::fabric(&setup, spec).map_err(bench_error)?;
    print_one(m, &setup, a.trace.as_deref(), a.output.format)
}

/// `bench fabric-latency`: tt-metal's one-hop fabric ping.
fn run_fabric_latency(a: &FabricLatencyArgs) -> anyhow::Result<()> {
    let topology = match a.topology {
        LatencyTopologyArg::Line => fabric::LatencyTopology::Line,
        LatencyTopologyArg::Ring => fabric::LatencyTopology::Ring,
        LatencyTopologyArg::Mesh => fabric::LatencyTopology::Mesh,
    };
    let noc_send = match a.noc_send {
        LatencyNocSendArg::Write => fabric::NocSend::Write,
        LatencyNocSendArg::FusedAtomicInc => fabric::NocSend::FusedAtomicInc,
    };
    let setup = traced_setup(&a.cluster, &a.model, a.trace.as_deref())?;
    let spec = fabric::FabricLatencySpec { topology, noc_send, payload_bytes: a.payload, samples: a.samples };
    let m = fabric::fabric_latency(&setup, spec).map_err(bench_error)?;
    print_one(m, &setup, a.trace.as_deref(), a.output.format)
}

/// `bench dram`: one point per page size and depth, in that order.
fn run_dram(a: &DramArgs) -> anyhow::Result<()> {
    use rayon::prelude::*;
    let setup = traced_setup(&a.cluster, &a.model, None)?;
    let specs: Vec<dram::DramReadSpec> = a
        .page_size
        .iter()
        .flat_map(|&page_bytes| a.depth.iter().map(move |&depth| dram::DramReadSpec { page_bytes, depth }))
        .collect();
    let rows = specs
        .par_iter()
        .map(|&spec| dram::dram_read(&setup, spec).map(|m| m.row))
        .collect::<Result<Vec<_>, _>>()
        .map_err(bench_error)?;
    out!("{}", report::render(&rows, a.output.format.into()))?;
    Ok(())
}

/// The set-up of a one-point benchmark on `cluster`, recording a trace when `trace` names a
/// file (checked for writing first).
fn traced_setup(
    cluster: &str,
    model: &crate::cli::ParamsFile,
    trace: Option<&Path>,
) -> anyhow::Result<Setup> {
    check_outputs(None, trace)?;
    let c = load_cluster(cluster)?;
    let params = model.load()?.on_checked(&c).map_err(|e| crate::BadInput(e.to_string()))?;
    let mut setup = Setup::new(c, params);
    setup.trace = trace.is_some();
    Ok(setup)
}

/// Prints a one-point benchmark's row, after writing its trace to `trace` if asked.
fn print_one<R: serde::Serialize>(
    m: Measured<R>,
    setup: &Setup,
    trace: Option<&Path>,
    format: Format,
) -> anyhow::Result<()> {
    if let (Some(path), Some(t)) = (trace, &m.trace) {
        write_trace(path, t, &setup.cluster)?;
    }
    out!("{}", report::render(&[m.row], format.into()))?;
    Ok(())
}

/// The rows of a benchmark: the one traced point's (keeping its trace) when `traced` holds its
/// run, else the sweep's.
fn rows_or_trace<R>(
    trace: &mut Option<meshsim_hw::TraceData>,
    traced: Option<Result<Measured<R>, BenchError>>,
    sweep: impl FnOnce() -> Result<Vec<R>, BenchError>,
) -> anyhow::Result<Vec<R>> {
    match traced {
        Some(point) => {
            let m = point.map_err(bench_error)?;
            *trace = m.trace;
            Ok(vec![m.row])
        }
        None => sweep().map_err(bench_error),
    }
}
