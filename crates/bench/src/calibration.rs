//! The calibration set: published measurements the model must reproduce, the benchmark that
//! measures each in simulation, and the tolerance it must meet.
//!
//! Sources (docs/calibration.md): the single-link bandwidth and round-trip curves (N300, one
//! link, 16 buffer slots, payload and 16 B sync sent as one packet), the same link driven both
//! ways at once (per direction), and the CCL guide's one-way latency and ring-ping figures.

use rayon::prelude::*;
use serde::Serialize;

use crate::bandwidth::{self, BandwidthSpec};
use crate::common::{BenchError, Setup};
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

fn row(measure: &str, size_bytes: u64, published: f64, simulated: f64, tolerance_pct: f64) -> CalibrationRow {
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
    Ok(rows)
}
