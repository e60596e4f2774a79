//! The collective library on Blackhole: every op on every Blackhole machine and topology runs
//! without a protocol hazard and verifies, on the two-ERISC routers and on one ERISC.

use meshsim_ccl::comm::Communicator;
use meshsim_ccl::op::{Collective, Knobs, RedOp, Stack, Topology};
use meshsim_ccl::session::{OpRequest, Session, SessionRun};
use meshsim_ccl::tensor::{DType, Layout, TensorSpec};
use meshsim_hw::Params;
use meshsim_topology::{Arch, Cluster, builtin};

fn run(c: &Cluster, p: &Params, stack: Stack, req: OpRequest) -> SessionRun {
    let what = format!("{} on {} chips ({:?})", req.collective.name(), req.comm.size(), req.comm.topology());
    let mut s = Session::new(c, p);
    s.set_stack(stack);
    s.set_verify(true);
    s.submit(req).unwrap_or_else(|e| panic!("{what}: {e}"));
    let run = s.run().unwrap_or_else(|e| panic!("{what}: {e}"));
    for o in &run.ops {
        assert_eq!(o.verified, Some(Ok(())), "{what}");
    }
    run
}

/// Every collective, rooted ones at rank 1, reductions summing.
fn every_collective() -> [Collective; 9] {
    let red = RedOp::Sum;
    [
        Collective::AllGather,
        Collective::ReduceScatter(red),
        Collective::AllReduce(red),
        Collective::AllToAll,
        Collective::Broadcast { root: 1 },
        Collective::Reduce { red, root: 1 },
        Collective::Gather { root: 1 },
        Collective::Scatter { root: 1 },
        Collective::SendRecv,
    ]
}

/// The communicators each machine has: its rings and lines (the Galaxy's on its 8-chip axis).
fn topologies(name: &str, c: &Cluster) -> Vec<Communicator> {
    let ids = |ids: &[u64], t| Communicator::from_ids(c, ids, t).unwrap();
    match name {
        "p300" => vec![Communicator::world(c, Topology::Line, None).unwrap()],
        "bh_galaxy" => vec![
            ids(&[0, 4, 12, 8, 16, 20, 28, 24], Topology::Ring),
            ids(&[0, 1, 2, 3], Topology::Line),
            ids(&[0, 4], Topology::Line),
        ],
        _ => vec![
            Communicator::world(c, Topology::Ring, None).unwrap(),
            Communicator::choose(c, Topology::Line, Some(2), None).unwrap(),
        ],
    }
}

#[test]
fn every_collective_on_every_blackhole_machine_runs_clean_on_two_eriscs_and_one() {
    let tensor = TensorSpec::new([1, 1, 64, 2048], DType::Bf16, Layout::Tile).unwrap();
    let mut ran = 0;
    for name in ["p300", "bh_quietbox", "bh_loudbox", "bh_galaxy"] {
        let c = builtin::cluster(name).unwrap();
        assert_eq!(c.arch(), Arch::Blackhole);
        let two = Params::of(Arch::Blackhole).unwrap().on(&c);
        assert_eq!(two.fabric_router_eriscs, 2);
        let one = Params { fabric_router_eriscs: 1, ..two.clone() };
        for comm in topologies(name, &c) {
            for coll in
                every_collective().into_iter().filter(|&k| k != Collective::SendRecv || comm.size() == 2)
            {
                for p in [&two, &one] {
                    let mut req = OpRequest::new("op", comm.clone(), coll, tensor, 3);
                    req.knobs = Knobs { packet_bytes: Some(8192), ..Knobs::default() };
                    run(&c, p, Stack::Fabric, req);
                    ran += 1;
                }
            }
        }
    }
    assert!(ran >= 100, "{ran}");
}

/// Link rates are the machine's: 400 Gb/s on P150 and P300 cards, 200 on a Galaxy. (Two ERISCs
/// against one is pinned on the fabric benchmark, where the router binds:
/// `crates/bench/tests/calibration.rs`.)
#[test]
fn link_rates_are_the_machines() {
    let rate = |name: &str| {
        let c = builtin::cluster(name).unwrap();
        Params::of(Arch::Blackhole).unwrap().on(&c).eth_link_gbps
    };
    assert_eq!(
        [rate("p300"), rate("bh_quietbox"), rate("bh_loudbox"), rate("bh_galaxy")],
        [400, 400, 400, 200]
    );
}

/// The legacy EDM stack runs on Blackhole's ERISCs too.
#[test]
fn the_edm_stack_runs_on_blackhole() {
    let c = builtin::cluster("p300").unwrap();
    let p = Params::of(Arch::Blackhole).unwrap().on(&c);
    let tensor = TensorSpec::new([1, 1, 32, 4096], DType::Bf16, Layout::Tile).unwrap();
    let comm = Communicator::world(&c, Topology::Line, None).unwrap();
    run(&c, &p, Stack::Edm, OpRequest::new("ag", comm, Collective::AllGather, tensor, 3));
}
