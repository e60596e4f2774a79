//! The whole collective set end to end: every collective verifies byte for byte on both stacks,
//! on N300, T3000 rings and lines and Galaxy rows and columns, for every root; bad roots and
//! communicators are refused by name; and the rooted collectives cost what their traffic says.

use meshsim_ccl::comm::Communicator;
use meshsim_ccl::op::{Bidir, Collective, Knobs, RedOp, Stack, Topology};
use meshsim_ccl::session::{OpRequest, OpResult, Session};
use meshsim_ccl::tensor::{DType, Layout, TensorSpec};
use meshsim_hw::Params;
use meshsim_topology::{Cluster, builtin};

fn tensor(shape: [u64; 4], dtype: DType) -> TensorSpec {
    TensorSpec::new(shape, dtype, Layout::Tile).unwrap()
}

fn run_one(c: &Cluster, stack: Stack, verify: bool, req: OpRequest) -> OpResult {
    let mut s = Session::new(c, &Params::default());
    s.set_stack(stack);
    s.set_verify(verify);
    let what = format!("{} on {} ({stack})", req.name, c.origin());
    s.submit(req).unwrap_or_else(|e| panic!("{what}: {e}"));
    let out = s.run().unwrap_or_else(|e| panic!("{what}: {e}")).ops.remove(0);
    if verify {
        assert_eq!(out.verified, Some(Ok(())), "{what}");
    }
    out
}

/// Every rooted collective and send/receive, with every root.
fn rooted(n: usize) -> Vec<Collective> {
    let mut v = vec![Collective::SendRecv];
    for root in 0..n {
        v.extend([
            Collective::Broadcast { root },
            Collective::Reduce { red: RedOp::Sum, root },
            Collective::Gather { root },
            Collective::Scatter { root },
        ]);
    }
    v
}

fn verify_all(c: &Cluster, comm: &Communicator, dtype: DType) {
    let n = comm.size();
    for collective in rooted(n) {
        if collective == Collective::SendRecv && n != 2 {
            continue;
        }
        for stack in [Stack::Fabric, Stack::Edm] {
            let name = format!("{}{:?}", collective.name(), collective.root());
            let req =
                OpRequest::new(&name, comm.clone(), collective, tensor([1, 1, 64, 64 * n as u64], dtype), 3);
            run_one(c, stack, true, req);
        }
    }
}

#[test]
fn every_collective_verifies_on_n300_t3000_rings_and_lines_and_galaxy_rows_and_columns() {
    let n300 = builtin::cluster("n300").unwrap();
    verify_all(&n300, &Communicator::world(&n300, Topology::Line, None).unwrap(), DType::Bf16);
    let t = builtin::cluster("t3000").unwrap();
    verify_all(&t, &Communicator::world(&t, Topology::Ring, None).unwrap(), DType::Bf16);
    verify_all(&t, &Communicator::world(&t, Topology::Ring, None).unwrap(), DType::Bfp8);
    let ring = Communicator::world(&t, Topology::Ring, None).unwrap();
    for n in [2, 4] {
        let line = Communicator::new(&t, ring.chips()[..n].to_vec(), Topology::Line).unwrap();
        verify_all(&t, &line, DType::Bf16);
    }
    let g = builtin::cluster("galaxy").unwrap();
    for axis in [0, 1] {
        let comm = Communicator::axis(&g, axis, None).unwrap().remove(1);
        verify_all(&g, &comm, DType::Bf16);
    }
    // A Galaxy torus row is a ring with four links (routing planes) per hop.
    let torus = builtin::cluster("galaxy_torus").unwrap();
    verify_all(&torus, &Communicator::axis(&torus, 1, None).unwrap().remove(3), DType::Bf16);
    // Strided subsets (LPF's): five consecutive ranks of a Galaxy row from rank 2, and three of
    // the T3000 ring from rank 1, as lines.
    let row = Communicator::axis(&g, 1, None).unwrap().remove(2);
    verify_all(&g, &row.strided(&g, 2, 1, Some(5), Topology::Line).unwrap(), DType::Bf16);
    verify_all(&t, &ring.strided(&t, 1, 1, Some(3), Topology::Line).unwrap(), DType::Bfp8);
}

#[test]
fn every_reduction_verifies_in_reduce_reduce_scatter_and_all_reduce() {
    let t = builtin::cluster("t3000").unwrap();
    let ring = Communicator::world(&t, Topology::Ring, None).unwrap();
    for red in [RedOp::Sum, RedOp::Max, RedOp::Min, RedOp::Prod] {
        for stack in [Stack::Fabric, Stack::Edm] {
            for collective in [
                Collective::Reduce { red, root: 5 },
                Collective::ReduceScatter(red),
                Collective::AllReduce(red),
            ] {
                let req = OpRequest::new(
                    red.as_str(),
                    ring.clone(),
                    collective,
                    tensor([1, 1, 64, 512], DType::Bf16),
                    3,
                );
                run_one(&t, stack, true, req);
            }
        }
    }
}

/// A large fabric reduce reduce-scatters, then gathers to the root, and beats sending every
/// rank's whole tensor into the root's links; one that does not split over the ranks, or a
/// small one (16 KiB on the ring), goes direct. Both verify for every root.
#[test]
fn a_large_fabric_reduce_goes_by_halves_and_beats_the_direct_path() {
    let t = builtin::cluster("t3000").unwrap();
    let ring = Communicator::world(&t, Topology::Ring, None).unwrap();
    let reduce = |root, shape| {
        let req =
            OpRequest::new("reduce", ring.clone(), Collective::Reduce { red: RedOp::Sum, root }, shape, 3);
        run_one(&t, Stack::Fabric, true, req)
    };
    for root in [0, 3, 7] {
        assert_eq!(reduce(root, tensor([1, 1, 256, 4096], DType::Bf16)).algorithm, "ring + direct");
    }
    let odd = OpRequest::new(
        "odd",
        ring.clone(),
        Collective::Reduce { red: RedOp::Max, root: 1 },
        tensor([1, 1, 32, 32 * 1025], DType::Bf16),
        3,
    );
    let direct = run_one(&t, Stack::Fabric, true, odd);
    assert_eq!(direct.algorithm, "direct");
    let halves = reduce(1, tensor([1, 1, 32, 32 * 1024], DType::Bf16));
    assert!(
        halves.time.0 * 2 < direct.time.0,
        "by halves {} vs direct {} for about the same bytes",
        halves.time,
        direct.time
    );
    assert_eq!(reduce(1, tensor([1, 1, 32, 256], DType::Bf16)).algorithm, "direct");
}

#[test]
fn broadcasts_verify_in_every_bidirectional_mode() {
    let t = builtin::cluster("t3000").unwrap();
    let ring = Communicator::world(&t, Topology::Ring, None).unwrap();
    for bidir in [None, Some(Bidir::None), Some(Bidir::Split), Some(Bidir::Full)] {
        for stack in [Stack::Fabric, Stack::Edm] {
            let mut req = OpRequest::new(
                "bcast",
                ring.clone(),
                Collective::Broadcast { root: 3 },
                tensor([1, 1, 256, 2048], DType::Bf16),
                3,
            );
            req.knobs.bidir = bidir;
            let out = run_one(&t, stack, true, req);
            // A 1 MiB tensor is more than twice the ERISC L1: split by default.
            assert_eq!(out.bidir, bidir.unwrap_or(Bidir::Split), "{stack}");
        }
    }
}

#[test]
fn all_gather_without_myself_leaves_each_rank_its_own_slice_and_verifies() {
    let t = builtin::cluster("t3000").unwrap();
    for topology in [Topology::Ring, Topology::Line] {
        let comm = Communicator::world(&t, topology, None).unwrap();
        for stack in [Stack::Fabric, Stack::Edm] {
            let mut req = OpRequest::new(
                "ag",
                comm.clone(),
                Collective::AllGather,
                tensor([1, 1, 64, 2048], DType::Bf16),
                3,
            );
            req.exclude_myself = true;
            run_one(&t, stack, true, req);
        }
    }
}

#[test]
fn bad_roots_and_communicators_are_refused_by_name() {
    let t = builtin::cluster("t3000").unwrap();
    let ring = Communicator::world(&t, Topology::Ring, None).unwrap();
    let submit = |collective, comm: Communicator, exclude| {
        let mut s = Session::new(&t, &Params::default());
        let mut req = OpRequest::new("x", comm, collective, tensor([1, 1, 64, 2048], DType::Bf16), 3);
        req.exclude_myself = exclude;
        s.submit(req).unwrap_err().to_string()
    };
    assert_eq!(
        submit(Collective::Broadcast { root: 8 }, ring.clone(), false),
        "root 8 is not a rank of the 8-chip communicator (0..7)"
    );
    assert_eq!(
        submit(Collective::SendRecv, ring.clone(), false),
        "a send-recv runs on 2 chips (the sender, then the receiver), got 8"
    );
    assert_eq!(
        submit(Collective::Gather { root: 0 }, ring.clone(), true),
        "exclude-myself applies to all-gather, not gather"
    );
    let mut s = Session::new(&t, &Params::default());
    let mut req =
        OpRequest::new("x", ring, Collective::Scatter { root: 0 }, tensor([1, 1, 64, 2048], DType::Bf16), 3);
    req.knobs = Knobs { bidir: Some(Bidir::Split), ..Knobs::default() };
    assert_eq!(
        s.submit(req).unwrap_err().to_string(),
        "--bidir applies to all-gather, all-reduce and broadcast, not scatter"
    );
}

/// A broadcast puts the tensor on every link of the ring; a gather carries 1/n of it per rank,
/// the farthest ranks' slices over several hops. A broadcast from any root takes about as long
/// as from any other: the ring's links are alike, though not its chips' NoC paths (each chip's
/// ring links use Ethernet cores at different places on its grid; on the EDM root 5's
/// broadcast is 5.4 % slower than root 0's since NoC1 goes -y first).
#[test]
fn rooted_collectives_cost_what_their_traffic_says() {
    let t = builtin::cluster("t3000").unwrap();
    let ring = Communicator::world(&t, Topology::Ring, None).unwrap();
    let big = tensor([1, 1, 1024, 4096], DType::Bf16);
    let time = |collective, stack| {
        run_one(&t, stack, false, OpRequest::new("x", ring.clone(), collective, big, 3)).time.0 as f64
    };
    for stack in [Stack::Fabric, Stack::Edm] {
        let b0 = time(Collective::Broadcast { root: 0 }, stack);
        let b5 = time(Collective::Broadcast { root: 5 }, stack);
        assert!((b0 / b5 - 1.0).abs() < 0.08, "{stack}: broadcast from 0 {b0} vs from 5 {b5}");
        let g = time(Collective::Gather { root: 2 }, stack);
        let s = time(Collective::Scatter { root: 2 }, stack);
        // A gather's n - 1 senders run at once; a scatter's root sends every slice from one
        // core.
        assert!(g <= s * 1.01, "{stack}: gather {g} vs scatter {s}");
        // The root's two links carry 7/8 of the tensor between them in a gather; a broadcast
        // carries all of it over each link.
        assert!(g < b0, "{stack}: gather {g} vs broadcast {b0}");
        // All-gather moves n times a gather's data into n ranks at once, but on a ring each
        // link direction carries (n - 1) / 2 slices of it, as many as each of a gather's root's
        // two links: it is never much faster than the gather. The EDM's is 8.5 % faster (322.3
        // against 352.2 µs): the gather's root writes every slice through its own NoC and
        // banks, the all-gather's writes spread over the ring's chips.
        let ag = time(Collective::AllGather, stack);
        assert!(ag > 0.9 * g, "{stack}: all-gather {ag} vs gather {g}");
    }
}

/// A caller's reducer runs in the kernels of every reducing collective on both stacks and
/// verifies against the same reducer applied in rank order (xor and or give other bytes than
/// the sum on the test data, so a kernel that summed would not verify).
#[test]
fn user_reducers_run_in_every_reducing_collective() {
    use meshsim_ccl::op::Reducer;
    let t = builtin::cluster("t3000").unwrap();
    let ring = Communicator::world(&t, Topology::Ring, None).unwrap();
    let xor = Reducer::elementwise("xor", |a, b| a ^ b);
    let or = Reducer::arrays("or", |into, from| into.iter_mut().zip(from).for_each(|(a, b)| *a |= b));
    for r in [xor, or] {
        for stack in [Stack::Fabric, Stack::Edm] {
            for collective in [
                Collective::Reduce { red: RedOp::Sum, root: 6 },
                Collective::ReduceScatter(RedOp::Sum),
                Collective::AllReduce(RedOp::Sum),
            ] {
                for shape in [[1, 1, 64, 512], [1, 1, 256, 4096]] {
                    let mut req =
                        OpRequest::new(r.name(), ring.clone(), collective, tensor(shape, DType::Bf16), 3);
                    req.reducer = Some(r.clone());
                    run_one(&t, stack, true, req);
                }
            }
        }
    }
    // Only reducing collectives take one.
    let mut s = Session::new(&t, &Params::default());
    s.set_verify(true);
    let mut req =
        OpRequest::new("x", ring.clone(), Collective::AllGather, tensor([1, 1, 64, 512], DType::Bf16), 3);
    req.reducer = Some(Reducer::elementwise("xor", |a, b| a ^ b));
    assert_eq!(
        s.submit(req).unwrap_err().to_string(),
        "reducer 'xor' applies to reducing collectives, not all-gather"
    );
}

/// LPF's capacity limits: a context refuses a call beyond its count and a message beyond its
/// size, by name.
#[test]
fn a_collective_context_refuses_what_exceeds_its_limits() {
    use meshsim_ccl::session::Limits;
    let t = builtin::cluster("t3000").unwrap();
    let ring = Communicator::world(&t, Topology::Ring, None).unwrap();
    let op = |name: &str, x| {
        OpRequest::new(name, ring.clone(), Collective::AllGather, tensor([1, 1, 64, x], DType::Bf16), 3)
    };
    let mut s = Session::new(&t, &Params::default());
    s.set_limits(Limits { max_message_bytes: Some(64 << 10), max_calls: Some(2) }).unwrap();
    s.submit(op("a", 512)).unwrap();
    assert_eq!(
        s.submit(op("big", 1024)).unwrap_err().to_string(),
        "op 'big': its 131072 B message exceeds the collective context's 65536 B (max_message_bytes)"
    );
    s.submit(op("b", 256)).unwrap();
    assert_eq!(
        s.submit(op("c", 256)).unwrap_err().to_string(),
        "op 'c' is call 3 of a collective context that takes 2 (max_calls)"
    );
    // Limits set late still hold for what was submitted.
    assert!(s.set_limits(Limits { max_message_bytes: Some(1), max_calls: None }).is_err());
    s.set_limits(Limits::default()).unwrap();
    assert_eq!(s.run().unwrap().ops.len(), 2);
}

/// Ops on one stream run in order, ops on two streams overlap, and a host wait orders
/// everything submitted after it.
#[test]
fn streams_order_their_ops_and_a_host_wait_orders_what_follows() {
    let t = builtin::cluster("t3000").unwrap();
    let ring = Communicator::world(&t, Topology::Ring, None).unwrap();
    let op = |name: &str| {
        OpRequest::new(name, ring.clone(), Collective::AllGather, tensor([1, 1, 64, 2048], DType::Bf16), 3)
    };
    let mut s = Session::new(&t, &Params::default());
    let (a, b) = (s.new_stream(), s.new_stream());
    let mut h = Vec::new();
    for (name, st) in [("a1", a), ("b1", b), ("a2", a), ("b2", b)] {
        h.push(s.submit(OpRequest { stream: Some(st), ..op(name) }).unwrap());
    }
    s.wait(h[3]).unwrap();
    let last = s.submit(op("last")).unwrap();
    let run = s.run().unwrap();
    let r = |i: usize| run.result(h[i]);
    // Each stream in order; the two streams overlap.
    assert!(r(2).start >= r(0).end && r(3).start >= r(1).end);
    assert!(r(1).start < r(0).end, "b1 starts while a1 runs");
    assert!(run.result(last).start >= r(3).end);
    let mut s = Session::new(&t, &Params::default());
    let bad = OpRequest { stream: Some(meshsim_ccl::session::StreamId(3)), ..op("x") };
    assert_eq!(s.submit(bad).unwrap_err().to_string(), "op 'x' is on stream #3 which was not made");
}
