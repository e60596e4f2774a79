//! The calibration set: published measurements the model must reproduce, the benchmark that
//! measures each in simulation, and the tolerance it must meet.
//!
//! Sources (docs/calibration.md): the single-link bandwidth and round-trip curves (N300, one
//! link, 16 buffer slots, payload and 16 B sync sent as one packet), the same link driven both
//! ways at once (per direction), the CCL guide's one-way latency and ring-ping figures, and one
//! core's DRAM page reads by queue depth ([`crate::dram`]).

use rayon::prelude::*;
use serde::Serialize;

use crate::bandwidth::{self, BandwidthSpec};
use crate::common::{BenchError, Setup};
use crate::dram::{self, DramReadSpec};
use crate::latency::{self, LatencySpec};
use crate::ring::{self, RingSpec};

/// Published single-link points: (payload bytes, GB/s, round trip ns).
pub const SINGLE_LINK: [(u64, f64, f64); 8] = [
    (16, 0.28, 894.0),
    (128, 2.25, 911.0),
    (256, 4.39, 966.0),
    (512, 8.35, 984.0),
    (1024, 11.74, 1245.0),
    (2048, 11.84, 1479.0),
    (4096, 12.04, 1803.0),
    (8192, 12.07, 2451.0),
];

/// Published bidirectional points (N300, one link, both directions at once, 16 slots each, the
/// sender and the acknowledging receiver of each side on one ERISC): (payload bytes, GB/s per
/// direction). `shared/calibration/erisc_bidir_bandwidth.csv`.
pub const BIDIR_LINK: [(u64, f64); 7] =
    [(16, 0.19), (128, 1.59), (256, 3.19), (512, 6.39), (1024, 10.9), (2048, 11.4), (4096, 11.82)];

/// The guide's one-way link latency range in its own formulation, ns.
pub const GUIDE_ONE_WAY_NS: (f64, f64) = (530.0, 620.0);
/// The guide's ring ping per hop on an 8-chip T3000 ring (payload and signal merged), ns.
pub const GUIDE_RING_NS_PER_HOP: f64 = 650.0;

/// One calibration point, published next to simulated.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CalibrationRow {
    /// What is measured.
    pub measure: String,
    /// Payload bytes.
    pub size_bytes: u64,
    /// The published value (for a range, its midpoint).
    pub published: f64,
    /// The simulated value.
    pub simulated: f64,
    /// (simulated − published) / published, in percent.
    pub error_pct: f64,
    /// The tolerance, in percent (for a range, half its width around the midpoint).
    pub tolerance_pct: f64,
    /// Whether the point meets its tolerance (for a range: lies inside it).
    pub ok: bool,
}

/// Tolerance of single-link points: 20 % at 16 B, 10 % from 128 B up.
fn single_link_tolerance(size: u64) -> f64 {
    if size < 128 { 20.0 } else { 10.0 }
}

/// A row: the error and whether it is within `tolerance_pct`.
pub(crate) fn row(
    measure: &str,
    size_bytes: u64,
    published: f64,
    simulated: f64,
    tolerance_pct: f64,
) -> CalibrationRow {
    let error_pct = (simulated - published) / published * 100.0;
    CalibrationRow {
        measure: measure.to_owned(),
        size_bytes,
        published,
        simulated,
        error_pct,
        tolerance_pct,
        ok: error_pct.abs() <= tolerance_pct,
    }
}

/// Runs every calibration point on `n300` (single link) and `t3000` (ring) with the same
/// parameters; rows come back in a fixed order.
pub fn run(n300: &Setup, t3000: &Setup) -> Result<Vec<CalibrationRow>, BenchError> {
    let sizes: Vec<u64> = SINGLE_LINK.iter().map(|p| p.0).collect();
    let bw = BandwidthSpec { size_bytes: 0, slots: Some(16), packets: 256, bidir: false, to_worker: false };
    let lat = LatencySpec { size_bytes: 0, slots: 16, samples: 4, unmerged: false };
    let bidir_sizes: Vec<u64> = BIDIR_LINK.iter().map(|p| p.0).collect();
    let bidir = BandwidthSpec { bidir: true, ..bw };
    let ((bws, lats), bidirs) = rayon::join(
        || rayon::join(|| bandwidth::sweep(n300, &sizes, bw), || latency::sweep(n300, &sizes, lat)),
        || bandwidth::sweep(n300, &bidir_sizes, bidir),
    );
    let (bws, lats, bidirs) = (bws?, lats?, bidirs?);
    let mut rows = Vec::new();
    for (r, &(size, gbps, _)) in bws.iter().zip(&SINGLE_LINK) {
        rows.push(row("bandwidth GB/s", size, gbps, r.gbps, single_link_tolerance(size)));
    }
    for (r, &(size, gbps)) in bidirs.iter().zip(&BIDIR_LINK) {
        rows.push(row(
            "bidir GB/s per direction",
            size,
            gbps,
            r.gbps_per_direction,
            single_link_tolerance(size),
        ));
    }
    for (r, &(size, _, rtt)) in lats.iter().zip(&SINGLE_LINK) {
        rows.push(row("round trip ns", size, rtt, r.round_trip_ns, single_link_tolerance(size)));
    }
    let guide: Vec<Result<f64, BenchError>> = [0, 1]
        .par_iter()
        .map(|&which| match which {
            0 => {
                latency::latency(n300, LatencySpec { size_bytes: 16, slots: 16, samples: 4, unmerged: true })
                    .map(|m| m.row.one_way_ns)
            }
            _ => ring::ring(
                t3000,
                RingSpec { size_bytes: 16, hops: 8, samples: 4, unmerged: false, start_skew_ns: 0 },
            )
            .map(|m| m.row.ns_per_hop),
        })
        .collect();
    let mut guide = guide.into_iter();
    let one_way = guide.next().expect("two points")?;
    let (lo, hi) = GUIDE_ONE_WAY_NS;
    let mid = (lo + hi) / 2.0;
    let mut r = row("guide one-way ns", 16, mid, one_way, (hi - lo) / 2.0 / mid * 100.0);
    r.ok = (lo..=hi).contains(&one_way);
    rows.push(r);
    let per_hop = guide.next().expect("two points")?;
    rows.push(row("ring ping ns/hop (8 hops)", 16, GUIDE_RING_NS_PER_HOP, per_hop, 10.0));
    rows.extend(dram_rows(n300, false)?);
    Ok(rows)
}

/// One core's DRAM page reads ([`dram`]): every published point of the architecture `setup`
/// models (`blackhole`: the Blackhole column), measured on the first chip of `setup`'s
/// cluster; rows in table order.
pub fn dram_rows(setup: &Setup, blackhole: bool) -> Result<Vec<CalibrationRow>, BenchError> {
    dram::DRAM_READS
        .par_iter()
        .map(|&(page_bytes, depth, wh, bh)| {
            let r = dram::dram_read(setup, DramReadSpec { page_bytes, depth })?.row;
            let published = if blackhole { bh } else { wh };
            let what = format!("{}dram read x{depth} cycles", if blackhole { "bh " } else { "" });
            Ok(row(&what, page_bytes, published, r.cycles, dram::DRAM_TOLERANCE_PCT))
        })
        .collect()
}

/// Published TT-Fabric bandwidth points on a T3000 (`shared/calibration/
/// fabric_line_bandwidth_t3k.csv`): (test, NoC command, packet bytes, router max payload,
/// GB/s per link).
pub const FABRIC_BANDWIDTH: [(crate::fabric::FabricTest, crate::fabric::NocSend, u64, Option<u64>, f64); 30] = {
    use crate::fabric::FabricTest::*;
    use crate::fabric::NocSend::*;
    [
        (NeighborExchange, Write, 2048, None, 7.877),
        (NeighborExchange, FusedAtomicInc, 2048, None, 3.338),
        (NeighborExchange, ScatterWrite, 2048, None, 6.485),
        (NeighborExchange, Write, 4096, None, 9.578),
        (NeighborExchange, FusedAtomicInc, 4096, None, 5.934),
        (NeighborExchange, ScatterWrite, 4096, None, 9.858),
        (LinearMulticast, Write, 2048, None, 6.619),
        (LinearMulticast, FusedAtomicInc, 2048, None, 3.386),
        (LinearMulticast, ScatterWrite, 2048, None, 5.502),
        (LinearMulticast, Write, 4096, None, 10.893),
        (LinearMulticast, FusedAtomicInc, 4096, None, 5.723),
        (LinearMulticast, ScatterWrite, 4096, None, 10.315),
        (UnidirLinearMulticast, Write, 2048, None, 4.838),
        (UnidirLinearMulticast, FusedAtomicInc, 2048, None, 2.620),
        (UnidirLinearMulticast, ScatterWrite, 2048, None, 4.250),
        (UnidirLinearMulticast, Write, 4096, None, 9.615),
        (UnidirLinearMulticast, FusedAtomicInc, 4096, None, 4.326),
        (UnidirLinearMulticast, ScatterWrite, 4096, None, 8.509),
        (SingleSenderLinearUnicast, Write, 2048, None, 7.908),
        (SingleSenderLinearUnicast, FusedAtomicInc, 2048, None, 6.720),
        (SingleSenderLinearUnicast, ScatterWrite, 2048, None, 7.728),
        (SingleSenderLinearUnicast, Write, 4096, None, 11.736),
        (SingleSenderLinearUnicast, FusedAtomicInc, 4096, None, 11.718),
        (SingleSenderLinearUnicast, ScatterWrite, 4096, None, 11.736),
        (NeighborExchangeLinear, Write, 4096, None, 9.534),
        (NeighborExchangeLinear, FusedAtomicInc, 4096, None, 5.311),
        (NeighborExchangeLinear, ScatterWrite, 4096, None, 9.948),
        (LinearMulticast, Write, 3264, Some(3264), 9.798),
        (LinearMulticast, Write, 5440, Some(5440), 11.528),
        (LinearMulticast, Write, 7616, Some(7616), 10.623),
    ]
};

/// Published TT-Fabric one-hop latency on a Wormhole Galaxy (`shared/calibration/
/// fabric_line_latency_wh_galaxy.csv`): (NoC command, payload bytes, mean net round trip ns,
/// 99th-percentile net round trip ns).
pub const FABRIC_LATENCY: [(crate::fabric::NocSend, u64, f64, f64); 4] = [
    (crate::fabric::NocSend::Write, 16, 1787.83, 1971.00),
    (crate::fabric::NocSend::Write, 4096, 3026.71, 3240.00),
    (crate::fabric::NocSend::FusedAtomicInc, 16, 1718.54, 1974.00),
    (crate::fabric::NocSend::FusedAtomicInc, 4096, 2911.26, 3159.00),
];

/// A latency golden's tolerance, %: 10, or the golden's own spread from its mean to its 99th
/// percentile where that is wider — the run-to-run variation the mean carries (the 16 B fused
/// ping's 14.9 %; Wormhole's fused ping lies 69 ns below its write ping, Blackhole's 60-125 ns
/// above, `fabric_latency_bh.csv`).
pub fn latency_tolerance_pct(mean_ns: f64, p99_ns: f64) -> f64 {
    ((p99_ns - mean_ns) / mean_ns * 100.0).max(10.0)
}

/// Runs the fabric calibration set: bandwidth on `t3000`, latency on `galaxy`, every point
/// within 10 % to pass (a latency point within its golden's spread, where that is wider:
/// [`latency_tolerance_pct`]).
pub fn run_fabric(t3000: &Setup, galaxy: &Setup) -> Result<Vec<CalibrationRow>, BenchError> {
    use crate::fabric::{self, FabricLatencySpec, FabricSpec, LatencyTopology};
    let bw: Vec<Result<CalibrationRow, BenchError>> = FABRIC_BANDWIDTH
        .par_iter()
        .map(|&(test, noc_send, size, max, gbps)| {
            let spec = FabricSpec {
                test,
                noc_send,
                packet_bytes: size,
                max_packet_bytes: max,
                num_links: 1,
                // The published run's packets per flow (20 000 or 100 000): the figure is the
                // makespan of the slowest sender, and where links share a router unevenly the
                // rates change over the run, so a shorter run measures something else.
                packets: None,
            };
            let r = fabric::fabric(t3000, spec)?.row;
            let what = format!("fabric {} {} GB/s", r.test, r.noc_send);
            Ok(row(&what, size, gbps, r.gbps, 10.0))
        })
        .collect();
    let lat: Vec<Result<CalibrationRow, BenchError>> = FABRIC_LATENCY
        .par_iter()
        .map(|&(noc_send, size, ns, p99)| {
            let spec = FabricLatencySpec {
                topology: LatencyTopology::Line,
                noc_send,
                payload_bytes: size,
                samples: 256,
            };
            let r = fabric::fabric_latency(galaxy, spec)?.row;
            let tolerance = latency_tolerance_pct(ns, p99);
            Ok(row(&format!("fabric latency {} net avg ns", r.noc_send), size, ns, r.net_avg_ns, tolerance))
        })
        .collect();
    bw.into_iter().chain(lat).collect()
}
