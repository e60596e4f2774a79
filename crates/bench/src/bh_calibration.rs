//! The Blackhole calibration set (`meshsim calibrate --blackhole`): tt-metal's fabric goldens on
//! Blackhole (one-hop line latency on a box of four P150 cards and on a Blackhole Galaxy; the
//! line and neighbour-exchange bandwidth tests on the Galaxy), one core's DRAM page reads by
//! queue depth ([`crate::dram`]), and its all-gather sweep on an 8-chip axis of the Galaxy. Sources and how each is measured: docs/calibration.md,
//! "Blackhole set".

use rayon::prelude::*;

use meshsim_ccl::comm::Communicator;
use meshsim_ccl::op::Topology;

use crate::calibration::{CalibrationRow, latency_tolerance_pct, row};
use crate::ccl_calibration::SweepCollective;
use crate::common::{BenchError, Setup};
use crate::fabric::{self, FabricLatencySpec, FabricSpec, FabricTest, LatencyTopology, NocSend};

/// One-hop line round trips (`shared/calibration/fabric_latency_bh.csv`): (on the Galaxy, else
/// the four-card box; NoC command; payload bytes; mean net round trip ns; 99th percentile ns).
pub const BH_LATENCY: [(bool, NocSend, u64, f64, f64); 8] = {
    use NocSend::*;
    [
        (false, Write, 16, 1361.91, 1481.48),
        (false, Write, 4096, 1638.43, 1788.15),
        (false, FusedAtomicInc, 16, 1421.66, 1580.74),
        (false, FusedAtomicInc, 4096, 1644.65, 1797.78),
        (true, Write, 16, 1457.88, 1597.04),
        (true, Write, 4096, 1913.35, 2085.93),
        (true, FusedAtomicInc, 16, 1582.90, 1667.41),
        (true, FusedAtomicInc, 4096, 1903.34, 2059.26),
    ]
};

/// Fabric bandwidth on the Blackhole Galaxy (`shared/calibration/fabric_bandwidth_bh_galaxy.csv`):
/// (test, NoC command, payload bytes, routing planes, per-link GB/s), two-ERISC routers, 4352 B
/// maximum payload.
pub const BH_BANDWIDTH: [(FabricTest, NocSend, u64, usize, f64); 54] = {
    use FabricTest::*;
    use NocSend::*;
    [
        (NeighborExchange, Write, 2048, 1, 17.796673),
        (NeighborExchange, Write, 2048, 2, 17.670062),
        (NeighborExchange, FusedAtomicInc, 2048, 1, 5.724225),
        (NeighborExchange, FusedAtomicInc, 2048, 2, 5.634064),
        (NeighborExchange, ScatterWrite, 2048, 1, 17.639518),
        (NeighborExchange, ScatterWrite, 2048, 2, 17.503092),
        (NeighborExchange, Write, 4096, 1, 19.239356),
        (NeighborExchange, Write, 4096, 2, 19.328777),
        (NeighborExchange, FusedAtomicInc, 4096, 1, 10.429093),
        (NeighborExchange, FusedAtomicInc, 4096, 2, 9.879662),
        (NeighborExchange, ScatterWrite, 4096, 1, 19.070591),
        (NeighborExchange, ScatterWrite, 4096, 2, 19.010670),
        (LinearMulticast, Write, 2048, 1, 12.541374),
        (LinearMulticast, Write, 2048, 2, 12.539469),
        (LinearMulticast, FusedAtomicInc, 2048, 1, 4.645672),
        (LinearMulticast, FusedAtomicInc, 2048, 2, 4.645335),
        (LinearMulticast, ScatterWrite, 2048, 1, 10.167347),
        (LinearMulticast, ScatterWrite, 2048, 2, 10.143372),
        (LinearMulticast, Write, 4096, 1, 22.691086),
        (LinearMulticast, Write, 4096, 2, 21.981450),
        (LinearMulticast, FusedAtomicInc, 4096, 1, 8.774903),
        (LinearMulticast, FusedAtomicInc, 4096, 2, 8.746331),
        (LinearMulticast, ScatterWrite, 4096, 1, 19.559571),
        (LinearMulticast, ScatterWrite, 4096, 2, 19.556085),
        (UnidirLinearMulticast, Write, 2048, 1, 11.194104),
        (UnidirLinearMulticast, Write, 2048, 2, 11.192732),
        (UnidirLinearMulticast, FusedAtomicInc, 2048, 1, 4.426197),
        (UnidirLinearMulticast, FusedAtomicInc, 2048, 2, 4.425264),
        (UnidirLinearMulticast, ScatterWrite, 2048, 1, 9.154551),
        (UnidirLinearMulticast, ScatterWrite, 2048, 2, 9.155241),
        (UnidirLinearMulticast, Write, 4096, 1, 22.313316),
        (UnidirLinearMulticast, Write, 4096, 2, 19.393511),
        (UnidirLinearMulticast, FusedAtomicInc, 4096, 1, 8.351975),
        (UnidirLinearMulticast, FusedAtomicInc, 4096, 2, 8.214927),
        (UnidirLinearMulticast, ScatterWrite, 4096, 1, 18.291477),
        (UnidirLinearMulticast, ScatterWrite, 4096, 2, 17.975632),
        (SingleSenderLinearUnicast, Write, 2048, 1, 14.127847),
        (SingleSenderLinearUnicast, Write, 2048, 2, 14.137485),
        (SingleSenderLinearUnicast, FusedAtomicInc, 2048, 1, 12.232936),
        (SingleSenderLinearUnicast, FusedAtomicInc, 2048, 2, 12.176712),
        (SingleSenderLinearUnicast, ScatterWrite, 2048, 1, 14.096026),
        (SingleSenderLinearUnicast, ScatterWrite, 2048, 2, 14.101352),
        (SingleSenderLinearUnicast, Write, 4096, 1, 23.564972),
        (SingleSenderLinearUnicast, Write, 4096, 2, 23.564969),
        (SingleSenderLinearUnicast, FusedAtomicInc, 4096, 1, 23.564933),
        (SingleSenderLinearUnicast, FusedAtomicInc, 4096, 2, 23.564838),
        (SingleSenderLinearUnicast, ScatterWrite, 4096, 1, 23.565054),
        (SingleSenderLinearUnicast, ScatterWrite, 4096, 2, 23.564931),
        (NeighborExchangeLinear, Write, 4096, 1, 19.473986),
        (NeighborExchangeLinear, Write, 4096, 2, 19.400732),
        (NeighborExchangeLinear, FusedAtomicInc, 4096, 1, 9.737253),
        (NeighborExchangeLinear, FusedAtomicInc, 4096, 2, 9.053392),
        (NeighborExchangeLinear, ScatterWrite, 4096, 1, 19.205326),
        (NeighborExchangeLinear, ScatterWrite, 4096, 2, 19.066294),
    ]
};

/// Packets per flow of the Blackhole bandwidth points: the published golden does not say. A
/// tenth of the Wormhole tests' 20 000, which a 32-chip Galaxy with up to 7 flows per link
/// needs minutes per point to simulate; 2 000 are well past the start-up (a 4 KiB linear
/// multicast on the Galaxy moves 16.84 GB/s per link over 2 000 packets).
pub const BH_BANDWIDTH_PACKETS: u64 = 2_000;

/// The router payload of tt-metal's Blackhole all-gather sweep, bytes.
pub const BH_SWEEP_PACKET_BYTES: u64 = 8192;
/// Its routing planes (`num_links`).
pub const BH_SWEEP_LINKS: usize = 2;
/// The 8-chip axis of the Galaxy the sweep runs on (file ids, in ring order): column 0 of
/// meshsim's Galaxy down through the four trays, wrapping from tray 3 back to tray 0. The lines
/// of 4 and 2 are its first chips.
pub const BH_SWEEP_AXIS: [u64; 8] = [0, 4, 12, 8, 16, 20, 28, 24];

/// tt-metal's all-gather sweep on a Blackhole Galaxy (`shared/calibration/
/// ccl_sweep_bh_galaxy_allgather.csv`): (ranks, topology, gathered bytes, device kernel µs).
/// bf16, [1, 1, 32, X] along dim 3, DRAM, 8192 B router payload, 2 links.
pub const BH_SWEEP: [(usize, Topology, u64, f64); 21] = {
    use Topology::*;
    [
        (8, Ring, 16384, 12.19),
        (8, Ring, 262144, 15.21),
        (8, Ring, 1048576, 23.41),
        (8, Ring, 4194304, 56.67),
        (8, Ring, 16777216, 183.09),
        (8, Ring, 67108864, 670.35),
        (8, Ring, 1073741824, 10015.13),
        (4, Line, 16384, 7.28),
        (4, Line, 262144, 11.86),
        (4, Line, 1048576, 24.9),
        (4, Line, 4194304, 84.04),
        (4, Line, 16777216, 285.53),
        (4, Line, 67108864, 1077.76),
        (4, Line, 1073741824, 16790.9),
        (2, Line, 16384, 5.02),
        (2, Line, 262144, 9.74),
        (2, Line, 1048576, 23.88),
        (2, Line, 4194304, 52.12),
        (2, Line, 16777216, 187.28),
        (2, Line, 67108864, 717.78),
        (2, Line, 1073741824, 11266.59),
    ]
};

/// Tolerance of a sweep point (issue 32's every point within 25 %).
pub const BH_SWEEP_TOLERANCE_PCT: f64 = 25.0;

/// The bandwidth tolerance: 10 % at 4 KiB packets, 15 % at 2 KiB.
fn bandwidth_tolerance(size: u64) -> f64 {
    if size >= 4096 { 10.0 } else { 15.0 }
}

/// The simulated all-gather sweep of one (ranks, topology) series on `galaxy`, on the first
/// `n` chips of [`BH_SWEEP_AXIS`]: (bytes, µs).
pub fn sweep_series(
    galaxy: &Setup,
    n: usize,
    topology: Topology,
    sizes: &[u64],
) -> Result<Vec<(u64, f64)>, BenchError> {
    let comm = Communicator::from_ids(&galaxy.cluster, &BH_SWEEP_AXIS[..n], topology)
        .map_err(|e| BenchError::BadArgument(e.0))?;
    let knobs = (BH_SWEEP_LINKS, BH_SWEEP_PACKET_BYTES);
    crate::ccl_calibration::run_sweep(galaxy, comm, SweepCollective::AllGather, knobs, sizes)
}

/// Runs the Blackhole set: latency on `quietbox` and `galaxy`, bandwidth and the all-gather
/// sweep on `galaxy`. Sweep points above `max_sweep_bytes` are left out. Rows come back in a
/// fixed order. On the flow model (`galaxy.model`) only the sweep runs: the latency and
/// bandwidth goldens are microbenchmarks of the packet model.
pub fn run_blackhole(
    quietbox: &Setup,
    galaxy: &Setup,
    max_sweep_bytes: u64,
) -> Result<Vec<CalibrationRow>, BenchError> {
    let micro = galaxy.model == meshsim_ccl::op::SimModel::Packet;
    let lat: Vec<Result<CalibrationRow, BenchError>> = BH_LATENCY
        .par_iter()
        .filter(|_| micro)
        .map(|&(on_galaxy, noc_send, size, ns, p99)| {
            let spec = FabricLatencySpec {
                topology: LatencyTopology::Line,
                noc_send,
                payload_bytes: size,
                samples: 256,
            };
            let (setup, machine) = if on_galaxy { (galaxy, "bh_galaxy") } else { (quietbox, "p150_x4") };
            let r = fabric::fabric_latency(setup, spec)?.row;
            let what = format!("bh fabric latency {machine} {} net avg ns", r.noc_send);
            Ok(row(&what, size, ns, r.net_avg_ns, latency_tolerance_pct(ns, p99).min(10.0)))
        })
        .collect();
    let bw: Vec<Result<CalibrationRow, BenchError>> = BH_BANDWIDTH
        .par_iter()
        .filter(|_| micro)
        .map(|&(test, noc_send, size, links, gbps)| {
            let spec = FabricSpec {
                test,
                noc_send,
                packet_bytes: size,
                max_packet_bytes: None,
                num_links: links,
                packets: Some(BH_BANDWIDTH_PACKETS),
            };
            let r = fabric::fabric(galaxy, spec)?.row;
            let what = format!("bh fabric {} {} {links}-link GB/s", r.test, r.noc_send);
            Ok(row(&what, size, gbps, r.gbps, bandwidth_tolerance(size)))
        })
        .collect();
    let mut rows: Vec<CalibrationRow> = lat.into_iter().chain(bw).collect::<Result<_, _>>()?;
    if micro {
        rows.extend(crate::calibration::dram_rows(galaxy, true)?);
    }
    rows.extend(run_blackhole_sweep(galaxy, max_sweep_bytes)?);
    Ok(rows)
}

/// The Blackhole set's all-gather sweep alone: every published point up to `max_sweep_bytes`,
/// simulated on `galaxy` (its model), in the set's order.
pub fn run_blackhole_sweep(galaxy: &Setup, max_sweep_bytes: u64) -> Result<Vec<CalibrationRow>, BenchError> {
    let mut series: Vec<(usize, Topology)> = Vec::new();
    for &(n, t, _, _) in &BH_SWEEP {
        if !series.contains(&(n, t)) {
            series.push((n, t));
        }
    }
    let points = |n: usize, t: Topology| {
        BH_SWEEP.iter().filter(move |p| (p.0, p.1) == (n, t) && p.2 <= max_sweep_bytes).map(|p| (p.2, p.3))
    };
    let simulated: Vec<Result<Vec<(u64, f64)>, BenchError>> = series
        .par_iter()
        .map(|&(n, t)| sweep_series(galaxy, n, t, &points(n, t).map(|p| p.0).collect::<Vec<_>>()))
        .collect();
    let mut rows = Vec::new();
    for (&(n, t), sim) in series.iter().zip(simulated) {
        let sim = sim?;
        for (size, us) in points(n, t) {
            let got = sim
                .iter()
                .find(|s| s.0 == size)
                .map(|s| s.1)
                .ok_or_else(|| BenchError::Sim(format!("the sweep ran no {size} B point")))?;
            let topo = if t == Topology::Ring { "ring" } else { "line" };
            rows.push(row(
                &format!("bh ccl all_gather {topo}-{n} us"),
                size,
                us,
                got,
                BH_SWEEP_TOLERANCE_PCT,
            ));
        }
    }
    Ok(rows)
}

/// The plot of a Blackhole run's all-gather sweep: per series (ring of 8, lines of 4 and 2)
/// the measured and the simulated time against size, as `bh_all_gather.svg`; `None` when the
/// rows hold no sweep point.
pub fn plot(rows: &[CalibrationRow]) -> Option<(String, crate::plot::Plot)> {
    let mut labels: Vec<&str> = Vec::new();
    for r in rows {
        if let Some(label) = r.measure.strip_prefix("bh ccl all_gather ").and_then(|m| m.strip_suffix(" us"))
            && !labels.contains(&label)
        {
            labels.push(label);
        }
    }
    if labels.is_empty() {
        return None;
    }
    let lines = labels.into_iter().map(|l| (l.to_owned(), format!("bh ccl all_gather {l} us")));
    let title = "all-gather on a Blackhole Galaxy axis: tt-metal's sweep and meshsim".to_owned();
    Some(("bh_all_gather.svg".into(), crate::ccl_calibration::sweep_plot(rows, title, lines)))
}

/// The all-gather sweep's rows of a Blackhole run: (points, mean |error| %, within 10 %,
/// within 25 %, worst error %), or `None` when there are none.
pub fn sweep_summary(rows: &[CalibrationRow]) -> Option<(usize, f64, usize, usize, f64)> {
    crate::ccl_calibration::summary(rows, "bh ccl ", BH_SWEEP_TOLERANCE_PCT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(measure: &str, size: u64, published: f64, simulated: f64) -> CalibrationRow {
        row(measure, size, published, simulated, BH_SWEEP_TOLERANCE_PCT)
    }

    #[test]
    fn the_plot_has_a_measured_and_a_simulated_series_per_topology() {
        let rows = vec![
            r("bh fabric latency p150_x4 unicast_write net avg ns", 16, 1362.0, 1362.0),
            r("bh ccl all_gather ring-8 us", 16384, 12.19, 7.0),
            r("bh ccl all_gather ring-8 us", 262144, 15.21, 11.5),
            r("bh ccl all_gather line-2 us", 16384, 5.02, 3.7),
        ];
        let (file, drawn) = plot(&rows).unwrap();
        assert_eq!(file, "bh_all_gather.svg");
        let labels: Vec<&str> = drawn.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["ring-8 measured", "ring-8 meshsim", "line-2 measured", "line-2 meshsim"]);
        assert_eq!(drawn.series[1].points, vec![(16384.0, 7.0), (262144.0, 11.5)]);
        assert!(plot(&rows[..1]).is_none(), "no sweep rows, no plot");
    }
}
