//! Calibration: the model against the published measurements listed in docs/calibration.md.
//! One global parameter set (configs/wormhole_b0.yaml) must meet every point; nothing here is
//! tuned per size.

use meshsim_bench::Setup;
use meshsim_bench::bandwidth::{self, BandwidthSpec};
use meshsim_bench::calibration::{self, CalibrationRow};
use meshsim_bench::latency::{self, LatencySpec};
use meshsim_bench::ring::{self, RingSpec};
use meshsim_hw::Params;
use meshsim_topology::builtin;

fn setup(name: &str) -> Setup {
    Setup::new(builtin::cluster(name).unwrap(), Params::default())
}

/// The rows outside their tolerance, one line each: what, where, simulated against published.
fn misses(rows: &[CalibrationRow]) -> Vec<String> {
    rows.iter()
        .filter(|r| !r.ok)
        .map(|r| {
            format!(
                "{} at {} B: simulated {:.3}, published {}, error {:+.1}% (tolerance {:.0}%)",
                r.measure, r.size_bytes, r.simulated, r.published, r.error_pct, r.tolerance_pct
            )
        })
        .collect()
}

/// Every point of the calibration set meets its tolerance with the one parameter set.
#[test]
fn every_calibration_point_meets_its_tolerance() {
    let rows = calibration::run(&setup("n300"), &setup("t3000")).unwrap();
    assert_eq!(rows.len(), 41);
    let misses = misses(&rows);
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}

#[test]
fn the_guides_formulation_round_trip_is_about_1100_ns() {
    let spec = LatencySpec { size_bytes: 16, slots: 16, samples: 4, unmerged: true };
    let row = latency::latency(&setup("n300"), spec).unwrap().row;
    assert!(row.round_trip_ns > 1000.0 && row.round_trip_ns < 1200.0, "{:.1}", row.round_trip_ns);
}

/// The walkthrough's program (host set-up plus receiver and sender kernels as written) runs on
/// a 4-hop and an 8-hop ring of the T3000, near the guide's ~690 ns per hop for that formulation.
#[test]
fn guide_walkthrough_round_trip_ping_runs_on_4_and_8_hop_rings() {
    for hops in [4, 8] {
        let row = ring::ring(
            &setup("t3000"),
            RingSpec { size_bytes: 16, hops, samples: 3, unmerged: true, start_skew_ns: 0 },
        )
        .unwrap()
        .row;
        assert_eq!(row.hops, hops as u64);
        assert!((600.0..780.0).contains(&row.ns_per_hop), "{hops} hops: {:.1} ns per hop", row.ns_per_hop);
    }
}

#[test]
fn larger_pings_cost_more_per_hop_and_bandwidth_saturates_near_the_line_rate() {
    let t = setup("t3000");
    let small =
        ring::ring(&t, RingSpec { size_bytes: 16, hops: 8, samples: 2, unmerged: false, start_skew_ns: 0 })
            .unwrap()
            .row;
    let kib =
        ring::ring(&t, RingSpec { size_bytes: 1024, hops: 8, samples: 2, unmerged: false, start_skew_ns: 0 })
            .unwrap()
            .row;
    assert!(kib.ns_per_hop > small.ns_per_hop + 150.0);
    let spec =
        BandwidthSpec { size_bytes: 16384, slots: Some(8), packets: 128, bidir: false, to_worker: false };
    let big = bandwidth::bandwidth(&setup("n300"), spec).unwrap().row;
    assert!(big.gbps < 12.5 && big.gbps > 11.9, "{}", big.gbps);
}

#[test]
fn bidirectional_bandwidth_is_two_directions_and_forwarding_to_a_worker_costs_little_for_large_packets() {
    let s = setup("n300");
    // 16 slots, as the published bidirectional curve was measured: with fewer, each direction's
    // acknowledgements wait behind the other's 4 KiB transfers long enough to cost slots.
    let uni =
        BandwidthSpec { size_bytes: 4096, slots: Some(16), packets: 128, bidir: false, to_worker: false };
    let one = bandwidth::bandwidth(&s, uni).unwrap().row;
    let both = bandwidth::bandwidth(&s, BandwidthSpec { bidir: true, ..uni }).unwrap().row;
    assert_eq!(both.directions, 2);
    assert!(both.gbps > 1.9 * one.gbps, "bidir {} vs uni {}", both.gbps, one.gbps);
    let fwd = bandwidth::bandwidth(&s, BandwidthSpec { to_worker: true, ..uni }).unwrap().row;
    assert!(fwd.gbps <= one.gbps && fwd.gbps > 0.9 * one.gbps, "to worker {} vs {}", fwd.gbps, one.gbps);
    let small =
        BandwidthSpec { size_bytes: 256, slots: Some(16), packets: 256, bidir: false, to_worker: false };
    let direct = bandwidth::bandwidth(&s, small).unwrap().row;
    let fwd_small = bandwidth::bandwidth(&s, BandwidthSpec { to_worker: true, ..small }).unwrap().row;
    assert!(fwd_small.gbps < direct.gbps, "the NoC hop lengthens the slot turnaround");
    // Forwarded with transaction ids, a slot is acknowledged once its write has left the
    // ERISC, not once it has landed: per packet the ERISC adds its NoC command and nothing
    // waits for the write to travel.
    let per_packet = |gbps: f64| 256.0 / gbps;
    let added = per_packet(fwd_small.gbps) - per_packet(direct.gbps);
    let issue = s.params.noc_trid_write_cycles as f64 * 1000.0 / s.params.aiclk_mhz as f64;
    assert!(added <= issue, "to worker adds {added:.1} ns per packet, its NoC write {issue:.1} ns");
}

/// The raw ERISC bandwidth forwarded to a worker meets every published point (±10 %, ±20 % at
/// 16 B): per packet the forwarding ERISC adds one one-packet write with a transaction id, and
/// from 1 KiB the link binds.
#[test]
fn the_to_worker_curve_holds() {
    let rows = meshsim_bench::ccl_calibration::run_to_worker(&setup("n300")).unwrap();
    assert_eq!(rows.len(), 7);
    let misses = misses(&rows);
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}

/// One ERISC sends and acknowledges at once: its RISC-V issues both streams' commands, but the
/// tx queue is busy only from a command's submission to its latch, so the two streams interleave
/// and each direction keeps about 70 % of its one-way small-packet rate (hardware: 0.19 of 0.28
/// GB/s at 16 B), while large packets fill both directions.
#[test]
fn a_core_that_sends_and_receives_at_once_interleaves_its_commands() {
    let s = setup("n300");
    for (size, lo, hi) in [(16, 0.6, 0.8), (128, 0.6, 0.8), (4096, 0.95, 1.0)] {
        let uni =
            BandwidthSpec { size_bytes: size, slots: None, packets: 256, bidir: false, to_worker: false };
        let one = bandwidth::bandwidth(&s, uni).unwrap().row;
        let both = bandwidth::bandwidth(&s, BandwidthSpec { bidir: true, ..uni }).unwrap().row;
        let ratio = both.gbps_per_direction / one.gbps;
        assert!(
            (lo..=hi).contains(&ratio),
            "{size} B: per direction {} vs one way {}",
            both.gbps_per_direction,
            one.gbps
        );
        assert!((both.gbps - 2.0 * both.gbps_per_direction).abs() < 1e-9);
    }
}

/// Without `--slots`, a bidirectional point keeps 16 slots per direction where the ERISC window
/// holds them and as many as fit where it does not.
#[test]
fn default_slots_fit_the_erisc_window() {
    let s = setup("n300");
    let spec =
        |size_bytes| BandwidthSpec { size_bytes, slots: None, packets: 64, bidir: true, to_worker: false };
    assert_eq!(bandwidth::bandwidth(&s, spec(4096)).unwrap().row.slots, 16);
    let big = bandwidth::bandwidth(&s, spec(8192)).unwrap().row;
    assert!(big.slots < 16 && big.slots >= 8, "{}", big.slots);
    let asked = BandwidthSpec { slots: Some(16), ..spec(8192) };
    assert!(bandwidth::bandwidth(&s, asked).is_err(), "asked-for slots that do not fit are refused");
}

#[test]
fn sweeps_are_deterministic_and_in_input_order() {
    let s = setup("n300");
    let spec = LatencySpec { size_bytes: 0, slots: 4, samples: 2, unmerged: false };
    let a = latency::sweep(&s, &[4096, 16, 512], spec).unwrap();
    let b = latency::sweep(&s, &[4096, 16, 512], spec).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.iter().map(|r| r.size_bytes).collect::<Vec<_>>(), [4096, 16, 512]);
}

/// Programs start at different times on different chips; the unmeasured first trip absorbs
/// the skew, so the measured ring time does not change, while the run as a whole ends later.
#[test]
fn start_skew_is_absorbed_by_the_unmeasured_first_trip() {
    let t = setup("t3000");
    let spec = RingSpec { size_bytes: 16, hops: 8, samples: 3, unmerged: true, start_skew_ns: 0 };
    let flat = ring::ring(&t, spec).unwrap();
    let skewed = ring::ring(&t, RingSpec { start_skew_ns: 3_000, ..spec }).unwrap();
    assert_eq!(flat.row.round_trip_ns, skewed.row.round_trip_ns);
    assert!(skewed.stats.end_time > flat.stats.end_time);
    assert_ne!(skewed.stats.log_hash, flat.stats.log_hash);
}

/// The same inputs give the same event log, whatever the number of threads a sweep runs on.
#[test]
fn event_logs_do_not_depend_on_the_number_of_threads() {
    let s = setup("n300");
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            use rayon::prelude::*;
            [16u64, 1024, 8192]
                .par_iter()
                .map(|&size_bytes| {
                    let spec = BandwidthSpec {
                        size_bytes,
                        slots: Some(8),
                        packets: 64,
                        bidir: true,
                        to_worker: true,
                    };
                    bandwidth::bandwidth(&s, spec).unwrap().stats.log_hash
                })
                .collect::<Vec<u64>>()
        })
    };
    let one = run(1);
    assert_eq!(one, run(2));
    assert_eq!(one, run(4));
    assert_eq!(one.len(), 3);
}

/// The fabric points that miss their tolerance today, each with the mechanism that moved it
/// out and what would bring it back (docs/calibration.md, "Mechanisms from tt-metal"). A point
/// that comes back within its tolerance must leave this list.
const FABRIC_MISSES: &[(&str, u64, &str)] = &[
    ("fabric NeighborExchangeUnicast unicast_write GB/s", 4096, RECEIVERS),
    ("fabric NeighborExchangeUnicast unicast_scatter_write GB/s", 4096, RECEIVERS),
    ("fabric LinearMulticast fused_atomic_inc GB/s", 2048, RECEIVERS),
    ("fabric LinearMulticast fused_atomic_inc GB/s", 4096, RECEIVERS),
    ("fabric SingleSenderLinearUnicastAllDevices fused_atomic_inc GB/s", 2048, RECEIVERS),
];

/// Why the points above miss: tt-metal's receiver placement spreads the flows (two to a core),
/// so a receiving core's NoC port no longer binds them, and the router's costs, fitted when
/// every flow landed on one core per chip, are too low for them; the credits as the firmware
/// sends them (`shared/fabric.md` §11.1) are what is missing (docs/calibration.md).
const RECEIVERS: &str = "router costs fitted on one receiving core per chip";

/// The fabric set, each bandwidth test at its published packets per flow: every point meets
/// its tolerance — ±10 % for every bandwidth point, and for a latency point ±10 % or its
/// golden's own spread from mean to p99 where that is wider (the 16 B fused ping's 14.9 %) —
/// but those listed in [`FABRIC_MISSES`]; a change of physics that loses another fails here.
#[test]
fn the_fabric_points_hold() {
    let rows = calibration::run_fabric(&setup("t3000"), &setup("galaxy")).unwrap();
    assert_eq!(rows.len(), 34);
    let fused_ping = rows
        .iter()
        .find(|r| r.measure.contains("latency") && r.measure.contains("fused") && r.size_bytes == 16)
        .unwrap();
    assert!(
        (fused_ping.tolerance_pct - 14.87).abs() < 0.01,
        "the golden's spread: {}",
        fused_ping.tolerance_pct
    );
    assert!(rows.iter().filter(|r| !r.measure.contains("latency")).all(|r| r.tolerance_pct == 10.0));
    let listed = |r: &CalibrationRow| FABRIC_MISSES.iter().any(|m| m.0 == r.measure && m.1 == r.size_bytes);
    for r in rows.iter().filter(|r| listed(r)) {
        assert!(
            !r.ok,
            "{} at {} B is within its tolerance now: take it off FABRIC_MISSES",
            r.measure, r.size_bytes
        );
    }
    let unlisted: Vec<CalibrationRow> = rows.iter().filter(|r| !listed(r)).cloned().collect();
    let misses = misses(&unlisted);
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}

/// The ring and 2D mesh tests have no published figures: they run, every link stays under its
/// wire rate for the packet (header and Ethernet framing included), and a one-hop ping on the
/// mesh takes at least the two link crossings.
#[test]
fn ring_and_mesh_fabric_tests_run_under_the_wire() {
    use meshsim_bench::fabric::{FabricSpec, FabricTest, LatencyTopology, NocSend, fabric, fabric_latency};
    let t3000 = setup("t3000");
    let p = &t3000.params;
    for test in [
        FabricTest::FullRingMulticast,
        FabricTest::FullRingUnicast,
        FabricTest::HalfRingMulticast,
        FabricTest::MeshMulticast,
        FabricTest::SingleSenderMeshUnicast,
    ] {
        for size in [2048u64, 4096] {
            let spec = FabricSpec {
                test,
                noc_send: NocSend::Write,
                packet_bytes: size,
                max_packet_bytes: None,
                num_links: 1,
                packets: Some(200),
            };
            let row = fabric(&t3000, spec).unwrap().row;
            // 96 B is the larger (2D) header.
            let wire = wire_payload_gbps(p, size, meshsim_ccl::fabric::HEADER_2D_BYTES);
            assert!(
                row.gbps > 0.5 && row.gbps < wire,
                "{test:?} {size} B: {} GB/s (wire {wire:.2})",
                row.gbps
            );
        }
    }
    let galaxy = setup("galaxy");
    let row = fabric_latency(&galaxy, ping(LatencyTopology::Mesh)).unwrap().row;
    assert_eq!(row.test, "LatencyMeshUnicast");
    assert!(row.net_min_ns > 2.0 * galaxy.params.eth_link_latency_ns as f64, "{row:?}");
}

/// The payload share of one link direction's line rate for packets of `size` payload bytes
/// behind a `header`-byte fabric header, split into Ethernet frames with their overhead.
fn wire_payload_gbps(p: &Params, size: u64, header: u64) -> f64 {
    let frames = (size + header).div_ceil(p.eth_mtu_bytes);
    p.eth_link_gbps as f64 / 8.0 * size as f64 / (size + header + frames * p.eth_packet_overhead_bytes) as f64
}

/// Neighbour exchange on one plane with `packets` packets of `packet_bytes` per flow.
fn neighbour_exchange(
    noc_send: meshsim_bench::fabric::NocSend,
    packet_bytes: u64,
    packets: u64,
) -> meshsim_bench::fabric::FabricSpec {
    meshsim_bench::fabric::FabricSpec {
        test: meshsim_bench::fabric::FabricTest::NeighborExchange,
        noc_send,
        packet_bytes,
        max_packet_bytes: None,
        num_links: 1,
        packets: Some(packets),
    }
}

/// No sender core rings packets faster than its link carries them (header and Ethernet framing
/// included) beyond the slots its router buffers: in neighbour exchange every core holds one
/// flow over its own link (T = 1). (Its lower bound, the makespan's rate, holds by
/// construction there — a core's own span lies inside the makespan — so it is not asserted.)
#[test]
fn no_neighbour_exchange_sender_outruns_its_wire() {
    use meshsim_bench::fabric::{NocSend, fabric};
    let t3000 = setup("t3000");
    let p = &t3000.params;
    let packets = 2000;
    for noc_send in [NocSend::Write, NocSend::FusedAtomicInc] {
        let row = fabric(&t3000, neighbour_exchange(noc_send, 4096, packets)).unwrap().row;
        assert_eq!(row.flows_per_link, 1);
        // A worker may ring up to its channel's 16 slots ahead of the wire.
        let wire = wire_payload_gbps(p, 4096, meshsim_ccl::fabric::HEADER_1D_BYTES.0)
            * (1.0 + 16.0 / packets as f64);
        assert!(row.sender_gbps_max < wire, "{row:?} wire {wire:.2}");
    }
}

/// In neighbour exchange every sender holds one flow over its own link, and every router both
/// sends and receives, so with fused packets, where each received packet holds the router for
/// the atomic's response, no direction of a link starves: the slowest sender runs within 25 %
/// of the fastest. A router loop whose sender step can come straight after its own completion
/// send, while that command is still latching, starves one direction of a pair (the slowest
/// ran at 4.41 GB/s against the fastest's 8.30 at 4 KiB before the loop kept the firmware's
/// order). Senders are not all alike: a flow that shares its receiving core with another (two
/// to a core, tt-metal's placement, on a chip with three neighbours) runs slower than one alone
/// on its core (3.32 against 4.05 GB/s at 2 KiB).
#[test]
fn neighbour_exchange_senders_share_the_links_evenly() {
    use meshsim_bench::fabric::{NocSend, fabric};
    let t3000 = setup("t3000");
    for packet_bytes in [2048, 4096] {
        let row =
            fabric(&t3000, neighbour_exchange(NocSend::FusedAtomicInc, packet_bytes, 2000)).unwrap().row;
        assert!(row.sender_gbps_min >= 0.75 * row.sender_gbps_max, "{row:?}");
    }
}

/// A fused write + increment holds the receiving router until the atomic's response is back,
/// which is what makes hardware's fused rates about half its write rates (neighbour exchange:
/// 3.34 against 7.88 GB/s at 2 KiB, 5.93 against 9.58 at 4 KiB). A router that moved on after
/// issuing the increment (a posted atomic, or the response counted only against the slot's
/// transaction id) ran fused packets at 0.84 and 0.99 of the write rates.
#[test]
fn a_fused_packet_holds_its_router_for_the_atomics_response() {
    use meshsim_bench::fabric::{NocSend, fabric};
    let t3000 = setup("t3000");
    for packet_bytes in [2048, 4096] {
        let rate =
            |noc_send| fabric(&t3000, neighbour_exchange(noc_send, packet_bytes, 2000)).unwrap().row.gbps;
        let (write, fused) = (rate(NocSend::Write), rate(NocSend::FusedAtomicInc));
        assert!(fused < 0.75 * write, "{packet_bytes} B: fused {fused:.2} against write {write:.2} GB/s");
    }
}

/// An N300's two chips are a line, which the fabric benchmarks take as a mesh of one row: the
/// line tests and the one-hop latency run there. Each of its chips has one neighbour, so its
/// receiving core takes one router's writes, and a T3000's cores take at most two (tt-metal's
/// placement): neighbour exchange runs as fast as on the T3000 (within 1 %), and below the
/// wire's rate.
#[test]
fn an_n300_runs_the_line_fabric_benchmarks_as_a_one_row_mesh() {
    use meshsim_bench::fabric::{LatencyTopology, NocSend, fabric, fabric_latency};
    let n300 = setup("n300");
    let p = &n300.params;
    let spec = neighbour_exchange(NocSend::Write, 4096, 2000);
    let two = fabric(&n300, spec).unwrap().row;
    let eight = fabric(&setup("t3000"), spec).unwrap().row;
    let wire = wire_payload_gbps(p, 4096, meshsim_ccl::fabric::HEADER_1D_BYTES.0) * (1.0 + 16.0 / 2000.0);
    assert!(
        two.gbps >= 0.99 * eight.gbps && two.gbps < wire,
        "N300 {two:?}, T3000 {eight:?}, wire {wire:.2}"
    );
    let row = fabric_latency(&n300, ping(LatencyTopology::Line)).unwrap().row;
    assert!(row.net_min_ns > 2.0 * p.eth_link_latency_ns as f64, "{row:?}");
    // A ring fabric needs a 2x2 mesh at least: a clear refusal, not a panic.
    assert!(fabric_latency(&n300, ping(LatencyTopology::Ring)).is_err());
}

/// A 16-sample, 16 B write ping on `topology`.
fn ping(topology: meshsim_bench::fabric::LatencyTopology) -> meshsim_bench::fabric::FabricLatencySpec {
    meshsim_bench::fabric::FabricLatencySpec {
        topology,
        noc_send: meshsim_bench::fabric::NocSend::Write,
        payload_bytes: 16,
        samples: 16,
    }
}

/// tt-metal's CCL sweep (docs/calibration.md, "CCL set"), run as tt-metal ran it: the model's
/// accuracy on its 48 points may not fall below what was recorded last. The bounds move down
/// as the model improves (the fidelity issue's target: mean |error| 8 %, every point within
/// 20 %); a change that makes the model worse on the sweep fails here.
#[test]
fn the_ccl_sweep_holds_its_recorded_accuracy() {
    use meshsim_bench::ccl_calibration;
    let t3000 = setup("t3000");
    let mut errors = Vec::new();
    for (op, n, topology) in ccl_calibration::series() {
        let points: Vec<(u64, f64)> = ccl_calibration::points_of(op, n, topology).collect();
        let sizes: Vec<u64> = points.iter().map(|p| p.0).collect();
        let simulated = ccl_calibration::sweep_series(&t3000, op, n, topology, &sizes).unwrap();
        assert_eq!(simulated.len(), points.len(), "{op:?} {topology:?} {n}: a point per size");
        for (p, (size, us)) in points.iter().zip(&simulated) {
            assert_eq!(p.0, *size, "sizes run as asked");
            errors.push(((us - p.1) / p.1 * 100.0, format!("{op:?} {topology:?}-{n} {size} B")));
        }
    }
    assert_eq!(errors.len(), 48);
    let mean = errors.iter().map(|e| e.0.abs()).sum::<f64>() / errors.len() as f64;
    let worst = errors.iter().max_by(|a, b| a.0.abs().total_cmp(&b.0.abs())).unwrap();
    // Recorded 2026-11-27, DRAM reads from tt-metal's single-core table and the all-gather's
    // completion barrier: mean 12.5 % (13.2 % before the barrier, 11.4 % with the 200-cycle
    // DRAM latency fitted on this sweep, 10.6 % before NoC1 went -y first), worst -43.2 % (the
    // 8-ring all-gather at 16 KiB, too fast by a fixed cost the model lacks: docs/record.md,
    // "Small ops").
    assert!(mean <= 12.6, "mean |error| {mean:.1} %");
    assert!(worst.0.abs() <= 43.5, "worst {:+.1} % at {}", worst.0, worst.1);
}

/// Blackhole's one-hop line latency goldens (a box of four P150 cards and the Galaxy) hold
/// with Blackhole's parameters: its faster clock and 400 or 200 Gb/s links on the same firmware
/// costs in cycles as Wormhole's.
#[test]
fn blackhole_line_latency_goldens_hold() {
    use meshsim_bench::bh_calibration::BH_LATENCY;
    use meshsim_bench::fabric::{self, FabricLatencySpec, LatencyTopology};
    let bh = |name: &str| {
        let c = builtin::cluster(name).unwrap();
        let p = Params::of(meshsim_topology::Arch::Blackhole).unwrap().on(&c);
        Setup::new(c, p)
    };
    let (quietbox, galaxy) = (bh("bh_quietbox"), bh("bh_galaxy"));
    for (on_galaxy, noc_send, size, ns, _) in BH_LATENCY {
        let spec =
            FabricLatencySpec { topology: LatencyTopology::Line, noc_send, payload_bytes: size, samples: 16 };
        let got =
            fabric::fabric_latency(if on_galaxy { &galaxy } else { &quietbox }, spec).unwrap().row.net_avg_ns;
        let err = (got - ns) / ns * 100.0;
        assert!(
            err.abs() <= 10.0,
            "galaxy {on_galaxy} {noc_send:?} {size} B: {got:.0} ns against {ns} ({err:+.1} %)"
        );
    }
}

/// Blackhole's fabric on one ERISC moves a constant number of packets per second whatever
/// their size (fabric.md §8: 4.21 M/s at 16 B, 2 KiB and 4 KiB), and two ERISCs carry a line
/// neighbour exchange of 4 KiB packets on 400 Gb/s links well above one (about 16 against
/// about 30 GB/s per direction on hardware).
#[test]
fn blackhole_single_erisc_rate_is_constant_and_two_eriscs_outrun_it() {
    use meshsim_bench::fabric::{self, FabricSpec, FabricTest, NocSend};
    let c = builtin::cluster("bh_loudbox").unwrap();
    let two = Params::of(meshsim_topology::Arch::Blackhole).unwrap().on(&c);
    let one = Params { fabric_router_eriscs: 1, ..two.clone() };
    let ne = |p: &Params, size: u64| {
        let spec = FabricSpec {
            test: FabricTest::NeighborExchange,
            noc_send: NocSend::Write,
            packet_bytes: size,
            max_packet_bytes: None,
            num_links: 1,
            packets: Some(500),
        };
        fabric::fabric(&Setup::new(c.clone(), p.clone()), spec).unwrap().row
    };
    let rates: Vec<f64> = [16, 2048, 4096].iter().map(|&s| ne(&one, s).packets_per_s).collect();
    for r in &rates {
        assert!((r / rates[0] - 1.0).abs() < 0.05, "one ERISC: {rates:?} packets/s");
        assert!((r / 4.21e6 - 1.0).abs() < 0.10, "one ERISC: {rates:?} packets/s against 4.21 M");
    }
    let (g1, g2) = (ne(&one, 4096).gbps, ne(&two, 4096).gbps);
    assert!(g2 > 1.3 * g1, "two ERISCs {g2:.1} GB/s against one {g1:.1}");
}

/// One core's DRAM reads on both architectures come within the table's tolerance.
#[test]
fn both_architectures_read_dram_as_tt_metal_measured() {
    let p150 = Setup::new(
        meshsim_topology::builtin::cluster("p150").unwrap(),
        Params::of(meshsim_topology::Arch::Blackhole).unwrap(),
    );
    for (setup, blackhole) in [(setup("n300"), false), (p150, true)] {
        let rows = calibration::dram_rows(&setup, blackhole).unwrap();
        assert_eq!(rows.len(), 16);
        let misses = misses(&rows);
        assert!(misses.is_empty(), "{}", misses.join("\n"));
    }
}
