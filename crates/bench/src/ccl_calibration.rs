//! The CCL calibration set (`meshsim calibrate --ccl`): tt-metal's own CCL sweep on a Wormhole
//! 8-chip LoudBox run as tt-metal ran it, the ring fabric's bandwidth and latency goldens, and
//! the raw ERISC bandwidth forwarded to a worker. Sources and how each is measured:
//! docs/calibration.md, "CCL set".

use rayon::prelude::*;

use meshsim_ccl::comm::Communicator;
use meshsim_ccl::op::{Collective, Knobs, RedOp, Stack, Topology};
use meshsim_ccl::sweep::{self, SweepOp, SweepSpec};
use meshsim_ccl::tensor::DType;

use crate::bandwidth::{self, BandwidthSpec};
use crate::calibration::{CalibrationRow, row};
use crate::common::{BenchError, Setup};
use crate::fabric::{self, FabricLatencySpec, FabricSpec, FabricTest, LatencyTopology, NocSend};

/// The op of a CCL sweep point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SweepCollective {
    /// All-gather; the size is the gathered output.
    AllGather,
    /// Reduce-scatter (sum); the size is a rank's input.
    ReduceScatter,
}

impl SweepCollective {
    /// The library's collective.
    pub fn collective(self) -> Collective {
        match self {
            SweepCollective::AllGather => Collective::AllGather,
            SweepCollective::ReduceScatter => Collective::ReduceScatter(RedOp::Sum),
        }
    }
}

/// The router payload tt-metal's CCL sweep ran with, bytes.
pub const SWEEP_PACKET_BYTES: u64 = 6144;
/// Routing planes (`num_links`) of every point of the sweep.
pub const SWEEP_LINKS: usize = 1;

/// tt-metal's CCL sweep on a Wormhole LoudBox (`shared/calibration/ccl_sweep_wh_loudbox.csv`):
/// (op, ranks, topology, size bytes, device kernel µs). bf16, [1, 1, 32, X] along dim 3,
/// tensors in DRAM, 6144 B router payload, 1 link, the ops' own algorithm and worker choice.
pub const CCL_SWEEP: [(SweepCollective, usize, Topology, u64, f64); 48] = {
    use SweepCollective::*;
    use Topology::*;
    [
        (AllGather, 2, Line, 16384, 8.28),
        (AllGather, 2, Line, 65536, 12.20),
        (AllGather, 2, Line, 262144, 27.30),
        (AllGather, 2, Line, 1048576, 89.16),
        (AllGather, 2, Line, 4194304, 336.09),
        (AllGather, 2, Line, 16777216, 1326.64),
        (AllGather, 2, Line, 67108864, 5285.95),
        (AllGather, 2, Line, 268435456, 21124.23),
        (AllGather, 4, Line, 16384, 11.69),
        (AllGather, 4, Line, 65536, 14.16),
        (AllGather, 4, Line, 262144, 27.17),
        (AllGather, 4, Line, 1048576, 77.50),
        (AllGather, 4, Line, 4194304, 278.65),
        (AllGather, 4, Line, 16777216, 1081.98),
        (AllGather, 4, Line, 67108864, 4298.77),
        (AllGather, 4, Line, 268435456, 17158.09),
        (AllGather, 8, Ring, 16384, 17.61),
        (AllGather, 8, Ring, 65536, 20.36),
        (AllGather, 8, Ring, 262144, 31.51),
        (AllGather, 8, Ring, 1048576, 69.56),
        (AllGather, 8, Ring, 4194304, 199.16),
        (AllGather, 8, Ring, 16777216, 727.02),
        (AllGather, 8, Ring, 67108864, 2843.17),
        (AllGather, 8, Ring, 268435456, 11310.31),
        (ReduceScatter, 2, Line, 16384, 8.79),
        (ReduceScatter, 2, Line, 65536, 12.88),
        (ReduceScatter, 2, Line, 262144, 26.01),
        (ReduceScatter, 2, Line, 1048576, 75.16),
        (ReduceScatter, 2, Line, 4194304, 268.46),
        (ReduceScatter, 2, Line, 16777216, 958.92),
        (ReduceScatter, 2, Line, 67108864, 3798.40),
        (ReduceScatter, 2, Line, 268435456, 15057.83),
        (ReduceScatter, 4, Line, 16384, 16.47),
        (ReduceScatter, 4, Line, 65536, 22.33),
        (ReduceScatter, 4, Line, 262144, 38.15),
        (ReduceScatter, 4, Line, 1048576, 101.24),
        (ReduceScatter, 4, Line, 4194304, 334.89),
        (ReduceScatter, 4, Line, 16777216, 1272.37),
        (ReduceScatter, 4, Line, 67108864, 4833.48),
        (ReduceScatter, 4, Line, 268435456, 19205.85),
        (ReduceScatter, 8, Ring, 16384, 19.61),
        (ReduceScatter, 8, Ring, 65536, 24.70),
        (ReduceScatter, 8, Ring, 262144, 49.75),
        (ReduceScatter, 8, Ring, 1048576, 80.92),
        (ReduceScatter, 8, Ring, 4194304, 239.75),
        (ReduceScatter, 8, Ring, 16777216, 882.38),
        (ReduceScatter, 8, Ring, 67108864, 3572.99),
        (ReduceScatter, 8, Ring, 268435456, 14137.43),
    ]
};

/// Tolerance of a CCL sweep point, percent (the bound on every point).
pub const SWEEP_TOLERANCE_PCT: f64 = 20.0;

/// Published ring fabric bandwidth on a T3000 (`shared/calibration/fabric_ring_bandwidth_t3k.csv`):
/// (test, NoC command, packet bytes, GB/s per link). Router payload 4352 B, 1 link.
pub const RING_BANDWIDTH: [(FabricTest, NocSend, u64, f64); 12] = {
    use FabricTest::*;
    use NocSend::*;
    [
        (FullRingMulticast, Write, 2048, 4.278),
        (FullRingMulticast, FusedAtomicInc, 2048, 2.35),
        (FullRingMulticast, ScatterWrite, 2048, 3.77),
        (FullRingMulticast, Write, 4096, 8.546),
        (FullRingMulticast, FusedAtomicInc, 4096, 4.080),
        (FullRingMulticast, ScatterWrite, 4096, 7.529),
        (FullRingUnicast, Write, 4096, 9.252),
        (FullRingUnicast, FusedAtomicInc, 4096, 6.78),
        (FullRingUnicast, ScatterWrite, 4096, 9.08),
        (HalfRingMulticast, Write, 4096, 9.118),
        (HalfRingMulticast, FusedAtomicInc, 4096, 4.54),
        (HalfRingMulticast, ScatterWrite, 4096, 7.87),
    ]
};

/// Published one-hop round trip on a Wormhole Galaxy's ring fabric
/// (`shared/calibration/fabric_ring_latency_wh_galaxy.csv`): (payload bytes, mean net ns).
pub const RING_LATENCY: [(u64, f64); 2] = [(16, 1744.43), (4096, 3116.01)];

/// Published raw ERISC bandwidth forwarded to a worker (`shared/calibration/
/// erisc_to_worker_bandwidth.csv`; N300, one link, one direction, 16 slots): (payload bytes,
/// GB/s).
pub const TO_WORKER: [(u64, f64); 7] =
    [(16, 0.21), (128, 1.72), (256, 3.44), (512, 6.89), (1024, 11.73), (2048, 11.83), (4096, 12.04)];

/// The simulated sweep of one (op, ranks, topology) series of [`CCL_SWEEP`] on `t3000`: its
/// points' (size bytes, µs), as tt-metal ran them.
pub fn sweep_series(
    t3000: &Setup,
    op: SweepCollective,
    n: usize,
    topology: Topology,
    sizes: &[u64],
) -> Result<Vec<(u64, f64)>, BenchError> {
    let comm =
        Communicator::world(&t3000.cluster, topology, Some(n)).map_err(|e| BenchError::BadArgument(e.0))?;
    run_sweep(t3000, comm, op, (SWEEP_LINKS, SWEEP_PACKET_BYTES), sizes)
}

/// A sweep of `op` on `comm` as tt-metal's CCL sweeps run it — bf16, `[1, 1, 32, X]` along
/// dim 3, the fabric with `links` routing planes and `packet` byte payloads, the op's own
/// algorithm and workers — at `sizes`: each point's (bytes, µs).
pub fn run_sweep(
    setup: &Setup,
    comm: Communicator,
    op: SweepCollective,
    (links, packet): (usize, u64),
    sizes: &[u64],
) -> Result<Vec<(u64, f64)>, BenchError> {
    let spec = SweepSpec {
        op: SweepOp { collective: op.collective(), bidir: None },
        comms: vec![comm],
        links: Some(links),
        workers: None,
        dtype: DType::Bf16,
        stack: Stack::Fabric,
        model: setup.model,
        faults: Vec::new(),
        select: None,
        in_place: false,
        knobs: Knobs { packet_bytes: Some(packet), ..Knobs::default() },
        skew_ns: 0,
    };
    let rows = sweep::sweep(&setup.cluster, &setup.params, &spec, sizes, &|| {})
        .map_err(|e| BenchError::Sim(e.to_string()))?;
    rows.into_iter()
        .map(|r| match r.error {
            Some(e) => Err(BenchError::Sim(format!("{} at {} B: {e}", op.collective().name(), r.size_bytes))),
            None => Ok((r.size_bytes, r.time_us)),
        })
        .collect()
}

/// The series of [`CCL_SWEEP`], in order: (op, ranks, topology).
pub fn series() -> Vec<(SweepCollective, usize, Topology)> {
    let mut v: Vec<(SweepCollective, usize, Topology)> = Vec::new();
    for &(op, n, t, _, _) in &CCL_SWEEP {
        if !v.contains(&(op, n, t)) {
            v.push((op, n, t));
        }
    }
    v
}

/// The points of one series of [`CCL_SWEEP`]: (size bytes, published µs), in size order.
pub fn points_of(op: SweepCollective, n: usize, topology: Topology) -> impl Iterator<Item = (u64, f64)> {
    CCL_SWEEP.iter().filter(move |p| (p.0, p.1, p.2) == (op, n, topology)).map(|p| (p.3, p.4))
}

/// Runs the CCL set: the sweep on `t3000`, the ring goldens on `t3000` and `galaxy`, the
/// to-worker curve on `n300`, leaving out sweep points above `max_sweep_bytes`. Rows come back
/// in a fixed order. On the flow model (`t3000.model`) only the sweep runs: the goldens are
/// microbenchmarks of the packet model.
pub fn run_ccl(
    (n300, t3000, galaxy): (&Setup, &Setup, &Setup),
    max_sweep_bytes: u64,
) -> Result<Vec<CalibrationRow>, BenchError> {
    let mut rows = run_ccl_sweep(t3000, max_sweep_bytes)?;
    if t3000.model != meshsim_ccl::op::SimModel::Packet {
        return Ok(rows);
    }
    let ring_bw: Vec<Result<CalibrationRow, BenchError>> = RING_BANDWIDTH
        .par_iter()
        .map(|&(test, noc_send, size, gbps)| {
            let spec = FabricSpec {
                test,
                noc_send,
                packet_bytes: size,
                max_packet_bytes: None,
                num_links: 1,
                packets: None,
            };
            let r = fabric::fabric(t3000, spec)?.row;
            Ok(row(&format!("fabric {} {} GB/s", r.test, r.noc_send), size, gbps, r.gbps, 10.0))
        })
        .collect();
    let ring_lat: Vec<Result<CalibrationRow, BenchError>> = RING_LATENCY
        .par_iter()
        .map(|&(size, ns)| {
            let spec = FabricLatencySpec {
                topology: LatencyTopology::Ring,
                noc_send: NocSend::Write,
                payload_bytes: size,
                samples: 256,
            };
            let r = fabric::fabric_latency(galaxy, spec)?.row;
            Ok(row("fabric ring latency unicast_write net avg ns", size, ns, r.net_avg_ns, 10.0))
        })
        .collect();
    rows.extend(ring_bw.into_iter().chain(ring_lat).collect::<Result<Vec<_>, _>>()?);
    rows.extend(run_to_worker(n300)?);
    Ok(rows)
}

/// The CCL set's sweep alone: every published point up to `max_sweep_bytes`, simulated on
/// `t3000` (its model), in the set's order.
pub fn run_ccl_sweep(t3000: &Setup, max_sweep_bytes: u64) -> Result<Vec<CalibrationRow>, BenchError> {
    let series = series();
    let points_of = |op, n, t| points_of(op, n, t).filter(move |p| p.0 <= max_sweep_bytes);
    let simulated: Vec<Result<Vec<(u64, f64)>, BenchError>> = series
        .par_iter()
        .map(|&(op, n, t)| {
            let sizes: Vec<u64> = points_of(op, n, t).map(|p| p.0).collect();
            sweep_series(t3000, op, n, t, &sizes)
        })
        .collect();
    let mut rows = Vec::new();
    for (&(op, n, t), sim) in series.iter().zip(simulated) {
        let sim = sim?;
        for (size, us) in points_of(op, n, t) {
            let got = sim
                .iter()
                .find(|s| s.0 == size)
                .map(|s| s.1)
                .ok_or_else(|| BenchError::Sim(format!("the sweep ran no {size} B point")))?;
            let what = format!("ccl {} {}-{n} us", op.collective().name(), topology_name(t));
            rows.push(row(&what, size, us, got, SWEEP_TOLERANCE_PCT));
        }
    }
    Ok(rows)
}

/// The raw ERISC bandwidth forwarded to a worker ([`TO_WORKER`]) on `n300`: one row per
/// published size, ±10 % (±20 % at 16 B).
pub fn run_to_worker(n300: &Setup) -> Result<Vec<CalibrationRow>, BenchError> {
    let sizes: Vec<u64> = TO_WORKER.iter().map(|p| p.0).collect();
    let spec = BandwidthSpec { size_bytes: 0, slots: Some(16), packets: 256, bidir: false, to_worker: true };
    let to_worker = bandwidth::sweep(n300, &sizes, spec)?;
    Ok(to_worker
        .iter()
        .zip(&TO_WORKER)
        .map(|(r, &(size, gbps))| {
            let tolerance = if size < 128 { 20.0 } else { 10.0 };
            row("to-worker GB/s", size, gbps, r.gbps, tolerance)
        })
        .collect())
}

fn topology_name(t: Topology) -> &'static str {
    match t {
        Topology::Ring => "ring",
        Topology::Line => "line",
    }
}

/// The summary of the sweep's rows: (points, mean |error| %, within 10 %, within 20 %, worst
/// error %).
pub fn sweep_summary(rows: &[CalibrationRow]) -> Option<(usize, f64, usize, usize, f64)> {
    summary(rows, "ccl ", SWEEP_TOLERANCE_PCT)
}

/// The summary of a sweep's rows, those whose measure starts with `prefix`: (points, mean
/// |error| %, within 10 %, within `wide` %, worst error %), or `None` when there are none.
pub(crate) fn summary(
    rows: &[CalibrationRow],
    prefix: &str,
    wide: f64,
) -> Option<(usize, f64, usize, usize, f64)> {
    let e: Vec<f64> = rows.iter().filter(|r| r.measure.starts_with(prefix)).map(|r| r.error_pct).collect();
    if e.is_empty() {
        return None;
    }
    let mean = e.iter().map(|x| x.abs()).sum::<f64>() / e.len() as f64;
    let worst = e.iter().copied().fold(0.0, |w: f64, x| if x.abs() > w.abs() { x } else { w });
    let within = |t: f64| e.iter().filter(|x| x.abs() <= t).count();
    Some((e.len(), mean, within(10.0), within(wide), worst))
}

/// A sweep's plot: per `(label, measure)` of `lines`, the rows of that measure as a measured
/// and a simulated series of time against size, log-log.
pub(crate) fn sweep_plot(
    rows: &[CalibrationRow],
    title: String,
    lines: impl IntoIterator<Item = (String, String)>,
) -> crate::plot::Plot {
    use crate::plot::{Plot, Series};
    let mut series = Vec::new();
    for (label, measure) in lines {
        let mine: Vec<&CalibrationRow> = rows.iter().filter(|r| r.measure == measure).collect();
        let pts = |f: fn(&CalibrationRow) -> f64| mine.iter().map(|r| (r.size_bytes as f64, f(r))).collect();
        series.push(Series { label: format!("{label} measured"), points: pts(|r| r.published) });
        series.push(Series { label: format!("{label} meshsim"), points: pts(|r| r.simulated) });
    }
    Plot { title, x_desc: "size (bytes)".into(), y_desc: "time (us)".into(), series, log_y: true }
}

/// One plot per op of the sweep's rows (simulated and measured time against size, a line each
/// per topology, log-log), with its file name.
pub fn plots(rows: &[CalibrationRow]) -> Vec<(String, crate::plot::Plot)> {
    [SweepCollective::AllGather, SweepCollective::ReduceScatter]
        .into_iter()
        .map(|op| {
            let name = op.collective().name();
            let lines = self::series().into_iter().filter(|s| s.0 == op).map(|(_, n, t)| {
                let label = format!("{}-{n}", topology_name(t));
                (label.clone(), format!("ccl {name} {label} us"))
            });
            let title = format!("{name} on a Wormhole LoudBox: tt-metal's CCL sweep and meshsim");
            (format!("ccl_{}.svg", name.replace('-', "_")), sweep_plot(rows, title, lines))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(measure: &str, size: u64, published: f64, simulated: f64) -> CalibrationRow {
        row(measure, size, published, simulated, SWEEP_TOLERANCE_PCT)
    }

    #[test]
    fn the_sweep_has_six_series_of_eight_sizes() {
        let s = series();
        assert_eq!(s.len(), 6);
        for (op, n, t) in s {
            assert_eq!(points_of(op, n, t).count(), 8);
        }
    }

    #[test]
    fn the_summary_counts_only_sweep_points() {
        let rows = [
            r("ccl all-gather line-2 us", 16384, 10.0, 11.0),
            r("ccl all-gather line-2 us", 65536, 10.0, 7.0),
            r("to-worker GB/s", 16, 1.0, 5.0),
        ];
        let (points, mean, within10, within20, worst) = sweep_summary(&rows).unwrap();
        assert_eq!((points, within10, within20), (2, 1, 1));
        assert!((mean - 20.0).abs() < 1e-9 && (worst + 30.0).abs() < 1e-9, "{mean} {worst}");
        assert!(sweep_summary(&rows[2..]).is_none());
    }

    #[test]
    fn each_op_plots_measured_and_simulated_per_topology() {
        let rows = [
            r("ccl all-gather ring-8 us", 16384, 17.6, 10.5),
            r("ccl reduce-scatter line-4 us", 16384, 16.5, 15.1),
        ];
        let plots = plots(&rows);
        let names: Vec<&str> = plots.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(names, ["ccl_all_gather.svg", "ccl_reduce_scatter.svg"]);
        let ag = &plots[0].1;
        assert!(ag.log_y);
        let ring = ag.series.iter().find(|s| s.label == "ring-8 measured").unwrap();
        assert_eq!(ring.points, [(16384.0, 17.6)]);
        let sim = ag.series.iter().find(|s| s.label == "ring-8 meshsim").unwrap();
        assert_eq!(sim.points, [(16384.0, 10.5)]);
    }
}
