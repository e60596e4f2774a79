//! All-gather end to end: every mode verifies on N300, T3000 and Galaxy; timing obeys physics.

use meshsim_ccl::allgather::{AllGatherSpec, Bidir, OpRun, Topology, all_gather};
use meshsim_ccl::tensor::{DType, Layout, Memory, TensorSpec};
use meshsim_hw::Params;
use meshsim_topology::{ChipIdx, Cluster, builtin};

/// A verified, unidirectional, one-link all-gather of `shape` along `dim` over `chips`.
fn spec(chips: Vec<ChipIdx>, shape: [u64; 4], dim: usize, dtype: DType, topology: Topology) -> AllGatherSpec {
    let output = TensorSpec::new(shape, dtype, Layout::Tile).unwrap();
    AllGatherSpec { topology, verify: true, ..AllGatherSpec::new(output, dim, chips) }
}

fn ring(c: &Cluster) -> Vec<ChipIdx> {
    c.ring().unwrap().chips
}

fn run_ok(c: &Cluster, s: &AllGatherSpec) -> OpRun {
    let r = all_gather(c, &Params::default(), s).unwrap();
    if s.verify {
        assert_eq!(r.verified, Some(Ok(())), "{:?}", r.verified);
    }
    r
}

#[test]
fn n300_gathers_one_tile_per_chip_over_its_one_user_link() {
    let c = builtin::cluster("n300").unwrap();
    let r = run_ok(&c, &spec(ring(&c), [1, 1, 32, 64], 3, DType::Bf16, Topology::Ring));
    assert!(r.time > meshsim_engine::Time::from_us(1), "a one-tile gather costs microseconds: {}", r.time);
}

#[test]
fn t3000_ring_and_lines_verify_for_bf16_and_bfp8() {
    let c = builtin::cluster("t3000").unwrap();
    for dtype in [DType::Bf16, DType::Bfp8] {
        run_ok(&c, &spec(ring(&c), [1, 1, 64, 512], 3, dtype, Topology::Ring));
        for line in c.lines() {
            run_ok(
                &c,
                &spec(line.chips.clone(), [1, 1, 32 * line.chips.len() as u64, 64], 2, dtype, Topology::Line),
            );
        }
    }
}

#[test]
fn bidirectional_modes_verify_on_the_t3000_ring() {
    let c = builtin::cluster("t3000").unwrap();
    for bidir in [Bidir::Split, Bidir::Full] {
        run_ok(
            &c,
            &AllGatherSpec { bidir, ..spec(ring(&c), [1, 8, 64, 128], 1, DType::Bf16, Topology::Ring) },
        );
    }
}

#[test]
fn galaxy_gathers_around_the_32_chip_torus_ring_and_along_rows_and_columns() {
    let c = builtin::cluster("galaxy_torus").unwrap();
    run_ok(&c, &spec(ring(&c), [1, 1, 32, 32 * 32], 3, DType::Bfp8, Topology::Ring));
    let lines = builtin::cluster("galaxy").unwrap().lines();
    let g = builtin::cluster("galaxy").unwrap();
    let row = lines.iter().find(|l| l.chips.len() == 8).unwrap();
    let col = lines.iter().find(|l| l.chips.len() == 4).unwrap();
    run_ok(&g, &spec(row.chips.clone(), [1, 1, 32, 256], 3, DType::Bf16, Topology::Line));
    run_ok(&g, &spec(col.chips.clone(), [1, 4, 32, 64], 1, DType::Bf16, Topology::Line));
}

/// busbw never exceeds what the links used can carry (per-direction rate x links x directions),
/// large gathers come close to it once enough workers keep the links busy, and small ones are
/// dominated by per-hop latency.
#[test]
fn bus_bandwidth_is_bounded_by_the_links_and_approached_by_large_gathers() {
    let c = builtin::cluster("t3000").unwrap();
    let link_gbps = 12.5; // 100 Gb/s, one direction per hop
    let busbw = |rows: u64, workers: usize, links: usize, bidir: Bidir| {
        let s = AllGatherSpec {
            verify: false,
            workers,
            links,
            bidir,
            ..spec(ring(&c), [1, 1, rows, 4096], 3, DType::Bfp8, Topology::Ring)
        };
        let r = all_gather(&c, &Params::default(), &s).unwrap();
        (s.output.bytes() as f64 / r.time.as_ns_f64() * 7.0 / 8.0, r.time)
    };
    for workers in [1, 2, 4] {
        let (bw, _) = busbw(1024, workers, 1, Bidir::None);
        assert!(bw < link_gbps, "{workers} workers: busbw {bw:.2} GB/s exceeds one link");
    }
    let (bw, _) = busbw(1024, 4, 1, Bidir::None);
    assert!(bw > 0.9 * link_gbps, "busbw {bw:.2} GB/s with 4 workers");
    let (both, _) = busbw(1024, 4, 1, Bidir::Split);
    assert!(both < 2.0 * link_gbps && both > 1.3 * link_gbps, "split bidir uses both directions: {both:.2}");
    // One tile per chip on 4 chips: microseconds of per-hop latency, not nanoseconds.
    let four = select_ring(&c, 4);
    let s = AllGatherSpec { verify: false, ..spec(four, [1, 1, 32, 128], 3, DType::Bf16, Topology::Ring) };
    let r = all_gather(&c, &Params::default(), &s).unwrap();
    assert!(
        r.time > meshsim_engine::Time::from_us(3) && r.time < meshsim_engine::Time::from_us(30),
        "{}",
        r.time
    );
}

fn select_ring(c: &Cluster, n: usize) -> Vec<ChipIdx> {
    meshsim_ccl::group::select(c, Topology::Ring, Some(n), None).unwrap()
}

#[test]
fn workers_and_links_multiply_lanes_and_still_verify() {
    let g = builtin::cluster("galaxy_torus").unwrap();
    let eight = select_ring(&g, 8);
    let s = AllGatherSpec {
        links: 2,
        workers: 2,
        ..spec(eight, [1, 1, 64, 32 * 32], 3, DType::Bf16, Topology::Ring)
    };
    run_ok(&g, &s);
    let n300 = builtin::cluster("n300").unwrap();
    for bidir in [Bidir::Split, Bidir::Full] {
        run_ok(
            &n300,
            &AllGatherSpec {
                bidir,
                workers: 2,
                ..spec(ring(&n300), [1, 1, 64, 128], 3, DType::Bfp8, Topology::Ring)
            },
        );
    }
}

#[test]
fn impossible_arguments_are_refused_with_a_reason() {
    let c = builtin::cluster("t3000").unwrap();
    let mut s =
        AllGatherSpec { verify: false, ..spec(ring(&c), [1, 1, 32, 96], 3, DType::Bf16, Topology::Ring) };
    let err = all_gather(&c, &Params::default(), &s).unwrap_err().to_string();
    assert!(err.contains("does not divide into 8 slices"), "{err}");
    s.output = TensorSpec::new([1, 1, 32, 256], DType::Bf16, Layout::Tile).unwrap();
    s.links = 2;
    let err = all_gather(&c, &Params::default(), &s).unwrap_err().to_string();
    assert!(err.contains("2 links requested") && err.contains("1 usable (reserved links excluded)"), "{err}");
    s.links = 1;
    s.chips = vec![ChipIdx(0), ChipIdx(3)];
    let err = all_gather(&c, &Params::default(), &s).unwrap_err().to_string();
    assert!(err.contains("are not linked"), "{err}");
}

/// Many MiB per chip move and verify byte for byte: 8 MiB slices on the N300, 4 MiB slices
/// (32 MiB gathered) on the T3000 with two workers per link.
#[test]
fn large_gathers_verify_byte_for_byte() {
    let n300 = builtin::cluster("n300").unwrap();
    // [1,1,2048,4096] bf16 = 16 MiB gathered, 8 MiB per chip, each slice crossing the one user
    // link in its own direction: no faster than 8 MiB at 12.5 GB/s.
    let r = run_ok(&n300, &spec(ring(&n300), [1, 1, 2048, 4096], 3, DType::Bf16, Topology::Ring));
    let floor = meshsim_engine::Time::from_ns((8u64 << 20) * 1000 / 12_500);
    assert!(r.time > floor, "8 MiB over one 12.5 GB/s link direction: {} (floor {floor})", r.time);
    let t = builtin::cluster("t3000").unwrap();
    run_ok(
        &t,
        &AllGatherSpec {
            workers: 2,
            ..spec(ring(&t), [1, 1, 1024, 8 * 1024], 3, DType::Bfp8, Topology::Ring)
        },
    );
}

/// The op's time runs from the moment the last chip starts to the moment the last chip
/// finishes: skew makes the first chips run longer, and on a line the chips that finish last
/// are not the ones with the highest ids.
#[test]
fn op_time_runs_from_the_last_start_to_the_last_end() {
    let t = builtin::cluster("t3000").unwrap();
    let base =
        AllGatherSpec { verify: false, ..spec(ring(&t), [1, 1, 64, 512], 3, DType::Bf16, Topology::Ring) };
    let flat = all_gather(&t, &Params::default(), &base).unwrap();
    let skewed =
        all_gather(&t, &Params::default(), &AllGatherSpec { skew_ns: 5_000, ..base.clone() }).unwrap();
    let last_start = skewed.per_chip.iter().map(|p| p.1).max().unwrap();
    let last_end = skewed.per_chip.iter().map(|p| p.2).max().unwrap();
    assert_eq!(last_start, meshsim_engine::Time::from_ns(35_000));
    assert_eq!(skewed.time, last_end - last_start);
    let first = &skewed.per_chip[0];
    assert!(first.2 - first.1 > skewed.time, "the first chip waits for the others");
    assert!(flat.time < first.2 - first.1);
    // A line with no skew: every chip starts at 0, so the time is the last end, which the
    // highest-id chip does not set.
    let line = t.lines().into_iter().find(|l| l.chips.len() == 4).unwrap().chips;
    let run =
        all_gather(&t, &Params::default(), &AllGatherSpec { chips: line, topology: Topology::Line, ..base })
            .unwrap();
    let ends: Vec<_> = run.per_chip.iter().map(|p| p.2).collect();
    assert_eq!(run.time, *ends.iter().max().unwrap());
    let highest = run.per_chip.iter().max_by_key(|p| p.0).unwrap();
    assert!(highest.2 < run.time, "chip {:?} ends at {}, the op at {}", highest.0, highest.2, run.time);
}

#[test]
fn tensors_interleaved_in_worker_l1_gather_faster_than_from_dram() {
    let t = builtin::cluster("t3000").unwrap();
    let dram = run_ok(&t, &spec(ring(&t), [1, 1, 64, 1024], 3, DType::Bf16, Topology::Ring));
    let l1 = run_ok(
        &t,
        &AllGatherSpec {
            memory: Memory::L1,
            ..spec(ring(&t), [1, 1, 64, 1024], 3, DType::Bf16, Topology::Ring)
        },
    );
    assert!(l1.time < dram.time, "L1 {} vs DRAM {}", l1.time, dram.time);
    let n300 = builtin::cluster("n300").unwrap();
    run_ok(&n300, &spec(n300.lines()[0].chips.clone(), [1, 1, 64, 64], 2, DType::Bf16, Topology::Line));
}

/// On persistent buffers (ttnn's `using_persistent_buffers`) the multicast all-gather runs no
/// init barrier (`shared/fabric.md` §11.2): its kernels read at once instead of first waiting
/// for an increment from every other chip (half-way round the ring). The data still verify, and
/// on both models the op is faster by at least the barrier's few hops.
#[test]
fn an_all_gather_on_persistent_buffers_skips_its_init_barrier() {
    let t3000 = builtin::cluster("t3000").unwrap();
    let ring = meshsim_ccl::comm::Communicator::world(&t3000, meshsim_ccl::op::Topology::Ring, None).unwrap();
    let run = |persistent: bool, model: meshsim_ccl::op::SimModel| {
        let mut s = meshsim_ccl::session::Session::new(&t3000, &Params::default());
        s.set_stack(meshsim_ccl::op::Stack::Fabric);
        s.set_model(model);
        s.set_verify(model == meshsim_ccl::op::SimModel::Packet);
        let t = TensorSpec::new([1, 1, 32, 8 * 64], DType::Bf16, Layout::Tile).unwrap();
        let mut req = meshsim_ccl::session::OpRequest::new(
            "ag",
            ring.clone(),
            meshsim_ccl::op::Collective::AllGather,
            t,
            3,
        );
        req.knobs.persistent_buffers = persistent;
        s.submit(req).unwrap();
        s.run().unwrap()
    };
    for model in [meshsim_ccl::op::SimModel::Packet, meshsim_ccl::op::SimModel::Flow] {
        let (with, without) = (run(false, model), run(true, model));
        if model == meshsim_ccl::op::SimModel::Packet {
            assert_eq!(without.ops[0].verified, Some(Ok(())));
            let passed = |r: &meshsim_ccl::session::SessionRun| {
                r.marks.iter().filter(|m| m.label == meshsim_ccl::fabric::ENTRY_BARRIER).count()
            };
            assert_eq!((passed(&with), passed(&without)), (16, 0));
        }
        let (a, b) = (with.ops[0].time, without.ops[0].time);
        assert!(
            a > b + meshsim_engine::Time::from_ns(1_000),
            "{model}: {a:?} with the barrier, {b:?} without"
        );
    }
}
