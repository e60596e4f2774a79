//! Sessions end to end: many ops on one machine contend for what they share and nothing else,
//! dependencies order them, all-reduce verifies on every system, resources are refused by name.
//! They run on the EDM stack, whose channels and workers they exercise.

use meshsim_ccl::comm::Communicator;
use meshsim_ccl::op::{Bidir, CclError, Collective, Knobs, RedOp, Stack, Topology};
use meshsim_ccl::session::{OpRequest, Session, SessionRun};
use meshsim_ccl::tensor::{DType, Layout, Memory, TensorSpec};
use meshsim_engine::Time;
use meshsim_hw::Params;
use meshsim_topology::{Cluster, builtin};

fn tensor(shape: [u64; 4], dtype: DType) -> TensorSpec {
    TensorSpec::new(shape, dtype, Layout::Tile).unwrap()
}

fn run(c: &Cluster, verify: bool, reqs: Vec<OpRequest>) -> SessionRun {
    let mut s = Session::new(c, &Params::default());
    s.set_stack(Stack::Edm);
    s.set_verify(verify);
    for r in reqs {
        s.submit(r).unwrap();
    }
    let out = s.run().unwrap();
    if verify {
        for o in &out.ops {
            assert_eq!(o.verified, Some(Ok(())), "op {}", o.name);
        }
    }
    out
}

fn ring_ag(c: &Cluster, name: &str, knobs: Knobs) -> OpRequest {
    let comm = Communicator::world(c, Topology::Ring, None).unwrap();
    let mut r = OpRequest::new(name, comm, Collective::AllGather, tensor([1, 1, 256, 8192], DType::Bf16), 3);
    r.knobs = knobs;
    r
}

/// With the tensors in L1 and two workers per link, the link is the bottleneck: two
/// all-gathers on the same ring share it and take about twice as long as one.
#[test]
fn two_all_gathers_on_one_ring_take_about_twice_as_long_as_one() {
    let t = builtin::cluster("t3000").unwrap();
    let knobs = Knobs { workers: Some(2), bidir: Some(Bidir::None), memory: Memory::L1, ..Knobs::default() };
    let one = run(&t, false, vec![ring_ag(&t, "a", knobs)]);
    let busy = one.links.iter().map(|l| l.busy).max().unwrap();
    assert!(busy.0 * 10 > one.makespan.0 * 7, "the link is busy {busy} of {}", one.makespan);
    let two = run(&t, false, vec![ring_ag(&t, "a", knobs), ring_ag(&t, "b", knobs)]);
    let ratio = two.makespan.0 as f64 / one.makespan.0 as f64;
    assert!(
        (1.7..=2.3).contains(&ratio),
        "two at once: {} vs one {} ({ratio:.2}x)",
        two.makespan,
        one.makespan
    );
    // Both run from the start, neither waits for the other.
    assert!(two.ops.iter().all(|o| o.start == Time::ZERO));
}

/// The rows of a Galaxy share no link, so all four at once take as long as one alone.
#[test]
fn all_gathers_on_every_galaxy_row_take_as_long_as_one_row() {
    let g = builtin::cluster("galaxy").unwrap();
    let rows = Communicator::axis(&g, 1, None).unwrap();
    let req = |i: usize, comm: &Communicator| {
        OpRequest::new(
            &format!("row{i}"),
            comm.clone(),
            Collective::AllGather,
            tensor([1, 1, 64, 8192], DType::Bfp8),
            3,
        )
    };
    let alone = run(&g, false, vec![req(0, &rows[0])]);
    let all = run(&g, false, rows.iter().enumerate().map(|(i, c)| req(i, c)).collect());
    let ratio = all.makespan.0 as f64 / alone.makespan.0 as f64;
    assert!(
        (0.98..=1.05).contains(&ratio),
        "four rows {} vs one {} ({ratio:.3}x)",
        all.makespan,
        alone.makespan
    );
}

/// An op with `after` starts on every chip no earlier than its dependency's end; an op without
/// starts at once.
#[test]
fn an_op_with_after_starts_when_its_dependency_ends() {
    let t = builtin::cluster("t3000").unwrap();
    let mut s = Session::new(&t, &Params::default());
    s.set_stack(Stack::Edm);
    s.set_verify(true);
    let first = s.submit(ring_ag(&t, "first", Knobs::default())).unwrap();
    let comm = Communicator::world(&t, Topology::Ring, None).unwrap();
    let mut second = OpRequest::new(
        "second",
        comm,
        Collective::ReduceScatter(RedOp::Sum),
        tensor([1, 1, 64, 1024], DType::Bf16),
        3,
    );
    second.after = vec![first];
    s.submit(second).unwrap();
    let out = s.run().unwrap();
    let (a, b) = (&out.ops[0], &out.ops[1]);
    assert_eq!(a.verified, Some(Ok(())));
    assert_eq!(b.verified, Some(Ok(())));
    assert!(b.per_chip.iter().all(|p| p.1 >= a.end), "{:?} starts before {}", b.per_chip, a.end);
    assert_eq!(b.start, a.end, "nothing else delays it");
    assert_eq!(out.makespan, b.end);
}

#[test]
fn all_reduce_verifies_on_n300_t3000_and_galaxy_rows_and_columns() {
    let ar = |comm: Communicator, i: usize, red: RedOp| {
        OpRequest::new(
            &format!("ar{i}"),
            comm,
            Collective::AllReduce(red),
            tensor([1, 1, 64, 512], DType::Bf16),
            3,
        )
    };
    let n300 = builtin::cluster("n300").unwrap();
    run(&n300, true, vec![ar(Communicator::world(&n300, Topology::Ring, None).unwrap(), 0, RedOp::Sum)]);
    let t = builtin::cluster("t3000").unwrap();
    for red in [RedOp::Sum, RedOp::Max] {
        run(&t, true, vec![ar(Communicator::world(&t, Topology::Ring, None).unwrap(), 0, red)]);
    }
    let g = builtin::cluster("galaxy").unwrap();
    for (c, axis) in [(&t, 0), (&t, 1), (&g, 0), (&g, 1)] {
        let comms = Communicator::axis(c, axis, None).unwrap();
        assert!(comms.iter().all(|x| x.topology() == Topology::Line));
        run(c, true, comms.into_iter().enumerate().map(|(i, x)| ar(x, i, RedOp::Sum)).collect());
    }
    // On lines, reduce-scatter alone verifies too, for every length.
    for n in [2, 3, 5, 8] {
        let line = Communicator::new(
            &g,
            Communicator::axis(&g, 1, None).unwrap()[1].chips()[..n].to_vec(),
            Topology::Line,
        )
        .unwrap();
        let rs = OpRequest::new(
            "rs",
            line,
            Collective::ReduceScatter(RedOp::Max),
            tensor([1, 1, 32, 32 * 8 * n as u64], DType::Bf16),
            3,
        );
        run(&g, true, vec![rs]);
    }
}

#[test]
fn all_reduce_costs_about_a_reduce_scatter_plus_an_all_gather() {
    let t = builtin::cluster("t3000").unwrap();
    let comm = Communicator::world(&t, Topology::Ring, None).unwrap();
    let x = tensor([1, 1, 256, 4096], DType::Bf16);
    let one = |c: Collective| {
        let mut r = OpRequest::new("x", comm.clone(), c, x, 3);
        r.knobs = Knobs { workers: Some(1), bidir: Some(Bidir::None), ..Knobs::default() };
        run(&t, false, vec![r]).makespan
    };
    let (rs, ag, ar) = (
        one(Collective::ReduceScatter(RedOp::Sum)),
        one(Collective::AllGather),
        one(Collective::AllReduce(RedOp::Sum)),
    );
    let sum = rs.0 + ag.0;
    assert!(ar.0 >= sum * 95 / 100 && ar.0 <= sum * 105 / 100, "all-reduce {ar} vs rs {rs} + ag {ag}");
}

#[test]
fn resources_that_do_not_fit_are_refused_by_name() {
    let t = builtin::cluster("t3000").unwrap();
    // Three ring all-gathers of 4 workers want 12 channels on every link.
    let k = Knobs { workers: Some(4), bidir: Some(Bidir::None), ..Knobs::default() };
    let mut s = Session::new(&t, &Params::default());
    s.set_stack(Stack::Edm);
    for name in ["a", "b", "c"] {
        s.submit(ring_ag(&t, name, k)).unwrap();
    }
    let err = s.run().unwrap_err();
    assert!(err.is_bad_input());
    let msg = err.to_string();
    assert!(msg.contains("needs 12 EDM channels for ops a, b, c; an EDM has 8"), "{msg}");
    // Two ops with one name, and a dependency that was never submitted.
    let mut s = Session::new(&t, &Params::default());
    s.set_stack(Stack::Edm);
    let h = s.submit(ring_ag(&t, "a", Knobs::default())).unwrap();
    assert!(
        matches!(s.submit(ring_ag(&t, "a", Knobs::default())), Err(CclError::Invalid(m)) if m.contains("two ops are named 'a'"))
    );
    let mut late = ring_ag(&t, "b", Knobs::default());
    late.after = vec![meshsim_ccl::session::OpHandle(h.0 + 5)];
    assert!(s.submit(late).is_err());
    // Two ops whose tensors each fit in worker L1 alone but not together: the second is named.
    let l1 = Knobs { memory: Memory::L1, ..Knobs::default() };
    let mut big = ring_ag(&t, "big", l1);
    big.tensor = tensor([1, 1, 4096, 8192], DType::Bf16);
    let mut small = ring_ag(&t, "small", l1);
    small.tensor = tensor([1, 1, 1024, 8192], DType::Bf16);
    let mut s = Session::new(&t, &Params::default());
    s.set_stack(Stack::Edm);
    s.submit(small).unwrap();
    s.submit(big).unwrap();
    let msg = s.run().unwrap_err().to_string();
    assert!(msg.starts_with("op 'big': input and output"), "{msg}");
}

/// A reduction whose lanes carry many more packets than a relay buffer holds runs window by
/// window (the slicer) and still verifies on a ring, where injecting them all at once would
/// fill every relay buffer around the ring and deadlock.
#[test]
fn reductions_with_many_packets_per_lane_run_window_by_window_and_verify() {
    let t = builtin::cluster("t3000").unwrap();
    let ring = Communicator::world(&t, Topology::Ring, None).unwrap();
    // 8 chips x 96 tiles per slice = 12 packets of 8 tiles per lane: three windows of four.
    let x = tensor([1, 1, 64, 32 * 384], DType::Bf16);
    for (c, workers) in [(Collective::ReduceScatter(RedOp::Sum), 1), (Collective::AllReduce(RedOp::Max), 2)] {
        let mut r = OpRequest::new("r", ring.clone(), c, x, 3);
        r.knobs = Knobs { workers: Some(workers), ..Knobs::default() };
        run(&t, true, vec![r]);
    }
}

/// Given only a shape, an op runs what tt-metal's EDM all-gather would: bidirectional on a
/// ring (split-tensor for slices larger than twice the ERISC L1, full-tensor otherwise), 4
/// workers per direction (8 EDM channels per link), packets filling the EDM buffers. Ops that
/// share a link share its 8 channels, so two default ops on one ring both run, with 2 workers.
#[test]
fn defaults_are_tt_metals_and_shrink_to_share_a_link() {
    let t = builtin::cluster("t3000").unwrap();
    let ring = || Communicator::world(&t, Topology::Ring, None).unwrap();
    let op = |name: &str, shape: [u64; 4], c: Collective| {
        OpRequest::new(name, ring(), c, tensor(shape, DType::Bf16), 3)
    };
    let erisc_l1 = Params::default().erisc_l1_bytes;
    // A 64 KiB slice and a 1 MiB one.
    let small = run(&t, false, vec![op("s", [1, 1, 32, 8192], Collective::AllGather)]);
    let big = run(&t, false, vec![op("b", [1, 1, 512, 8192], Collective::AllGather)]);
    assert!(64 << 10 <= 2 * erisc_l1 && 1 << 20 > 2 * erisc_l1);
    assert_eq!((small.ops[0].bidir, small.ops[0].workers), (Bidir::Full, 4));
    assert_eq!((big.ops[0].bidir, big.ops[0].workers), (Bidir::Split, 4));
    // 8 channels on a link, 2 buffers each: packets fill what the ERISC window leaves.
    let ppp = big.ops[0].pages_per_packet;
    assert!(ppp >= 4, "{ppp} pages of 2 KiB");
    // The defaults beat the explicit one-worker, one-direction configuration.
    let mut old = op("o", [1, 1, 512, 8192], Collective::AllGather);
    old.knobs = Knobs { workers: Some(1), bidir: Some(Bidir::None), ..Knobs::default() };
    let old = run(&t, false, vec![old]);
    assert!(
        big.makespan.0 * 3 < old.makespan.0 * 2,
        "defaults {} vs one worker {}",
        big.makespan,
        old.makespan
    );
    // Two default all-gathers on the same ring: 2 workers per direction each, concurrently.
    let two = run(
        &t,
        false,
        vec![
            op("a", [1, 1, 512, 8192], Collective::AllGather),
            op("b", [1, 1, 512, 8192], Collective::AllGather),
        ],
    );
    assert!(two.ops.iter().all(|o| o.workers == 2 && o.start == Time::ZERO));
    // An all-reduce's halves run one after the other, so its all-gather reuses the channels its
    // reduce-scatter used: 4 workers each way, and it verifies. Next to an op with 4 explicit
    // workers per direction, no channel is left.
    let ar = run(&t, true, vec![op("ar", [1, 1, 64, 4096], Collective::AllReduce(RedOp::Sum))]);
    assert_eq!(ar.ops[0].workers, 4);
    let mut s = Session::new(&t, &Params::default());
    s.set_stack(Stack::Edm);
    let mut greedy = op("greedy", [1, 1, 512, 8192], Collective::AllGather);
    greedy.knobs.workers = Some(4);
    greedy.knobs.bidir = Some(Bidir::Split);
    s.submit(greedy).unwrap();
    s.submit(op("late", [1, 1, 64, 4096], Collective::AllGather)).unwrap();
    let err = s.run().unwrap_err().to_string();
    assert!(err.starts_with("op 'late': no EDM channel is free on the link"), "{err}");
}

/// Channels return to the link when an op ends: ops that run one after another on the same
/// ring each get tt-metal's full 4 workers per direction (8 channels per link, reused), their
/// EDM channels serve one op's workers and then the next's, and every op verifies.
#[test]
fn ops_that_follow_each_other_reuse_the_links_channels() {
    let t = builtin::cluster("t3000").unwrap();
    let ring = Communicator::world(&t, Topology::Ring, None).unwrap();
    let mut s = Session::new(&t, &Params::default());
    s.set_stack(Stack::Edm);
    s.set_verify(true);
    let a = s
        .submit(OpRequest::new(
            "a",
            ring.clone(),
            Collective::AllGather,
            tensor([1, 1, 64, 4096], DType::Bf16),
            3,
        ))
        .unwrap();
    let mut b = OpRequest::new(
        "b",
        ring.clone(),
        Collective::AllReduce(RedOp::Max),
        tensor([1, 1, 64, 4096], DType::Bfp8),
        3,
    );
    b.after = vec![a];
    let b = s.submit(b).unwrap();
    let mut c = OpRequest::new(
        "c",
        ring.clone(),
        Collective::ReduceScatter(RedOp::Sum),
        tensor([1, 1, 32, 4096], DType::Bf16),
        3,
    );
    c.after = vec![b];
    s.submit(c).unwrap();
    let out = s.run().unwrap();
    for o in &out.ops {
        assert_eq!((o.workers, o.verified.clone()), (4, Some(Ok(()))), "op {}", o.name);
    }
    assert_eq!(out.ops[1].start, out.ops[0].end);
    assert_eq!(out.ops[2].start, out.ops[1].end);
    // Two ops that may overlap still share: 2 workers each.
    let mut s = Session::new(&t, &Params::default());
    s.set_stack(Stack::Edm);
    s.submit(OpRequest::new(
        "x",
        ring.clone(),
        Collective::AllGather,
        tensor([1, 1, 64, 4096], DType::Bf16),
        3,
    ))
    .unwrap();
    s.submit(OpRequest::new("y", ring, Collective::AllGather, tensor([1, 1, 64, 4096], DType::Bf16), 3))
        .unwrap();
    assert!(s.run().unwrap().ops.iter().all(|o| o.workers == 2));
}

/// A link that goes down for good mid-run deadlocks both stacks: the library returns the
/// engine's report as a value (the stalled kernels, each named by chip and core) with the
/// fault in force, not a message to search.
#[test]
fn a_link_down_for_good_is_a_deadlock_value_naming_the_stalled_kernels_and_the_fault() {
    let t = builtin::cluster("t3000").unwrap();
    for stack in [Stack::Edm, Stack::Fabric] {
        let mut s = Session::new(&t, &Params::default());
        s.set_stack(stack);
        s.add_fault("link-down:0:6@20".parse().unwrap()).unwrap();
        let comm = Communicator::world(&t, Topology::Ring, None).unwrap();
        let req =
            OpRequest::new("ag", comm, Collective::AllGather, tensor([1, 1, 256, 4096], DType::Bf16), 3);
        s.submit(req).unwrap();
        match s.run() {
            Err(CclError::Simulation {
                error: meshsim_engine::SimError::Deadlock { at, stalled },
                faults,
            }) => {
                assert!(at > Time::from_ns(20_000), "{stack}: deadlocked at {at}, before the fault");
                assert!(!stalled.is_empty(), "{stack}");
                assert!(stalled.iter().all(|k| k.task.starts_with("chip")), "{stack}: {stalled:?}");
                assert_eq!(faults, ["link-down:0:6@20"], "{stack}");
            }
            other => panic!("{stack}: expected a deadlock, got {other:?}"),
        }
    }
}
