//! Monotone where the hardware is (issue 47's item 7): more links never make an op slower, on
//! either architecture, across the collectives that spread over routing planes and the
//! topologies users run them on.

use meshsim_ccl::comm::Communicator;
use meshsim_ccl::op::{Collective, Knobs, RedOp, Stack, Topology};
use meshsim_ccl::session::{OpRequest, Session};
use meshsim_ccl::tensor::{DType, Layout, TensorSpec};
use meshsim_engine::Time;
use meshsim_hw::Params;
use meshsim_topology::{Cluster, builtin};

/// The op's time on the packet model with `links` routing planes.
fn time(c: &Cluster, comm: &Communicator, coll: Collective, links: usize) -> Time {
    let params = Params::of(c.arch()).unwrap().on(c);
    // 256 KiB per rank of bf16: 1024 rows, the columns split over the ranks in whole tiles.
    let cols = (256 << 10) * comm.size() as u64 / 2048;
    let tensor = TensorSpec::new([1, 1, 1024, cols], DType::Bf16, Layout::Tile).unwrap();
    let mut req = OpRequest::new("op", comm.clone(), coll, tensor, 3);
    req.knobs = Knobs { links: Some(links), ..Knobs::default() };
    let mut s = Session::new(c, &params);
    s.set_stack(Stack::Fabric);
    s.submit(req).unwrap();
    s.run().unwrap_or_else(|e| panic!("{} on {links} links: {e}", coll.name())).makespan
}

/// Every collective that runs on every routing plane (all-to-all runs on link 0 alone), rooted
/// ones at rank 0, reductions summing.
fn collectives() -> [Collective; 7] {
    let red = RedOp::Sum;
    [
        Collective::AllGather,
        Collective::ReduceScatter(red),
        Collective::AllReduce(red),
        Collective::Broadcast { root: 0 },
        Collective::Reduce { red, root: 0 },
        Collective::Gather { root: 0 },
        Collective::Scatter { root: 0 },
    ]
}

#[test]
fn more_links_never_make_an_op_slower_on_either_architecture() {
    let galaxy = builtin::cluster("galaxy").unwrap();
    let loudbox = builtin::cluster("bh_loudbox").unwrap();
    let bh_galaxy = builtin::cluster("bh_galaxy").unwrap();
    let axis = |ids: &[u64], t| Communicator::from_ids(&bh_galaxy, ids, t).unwrap();
    // (machine, communicator, link counts): a Wormhole Galaxy row (an 8-chip line on 4
    // links), the Blackhole LoudBox ring, the BH Galaxy's 8-chip axis ring and its 2-chip line.
    let cases: [(&Cluster, Communicator, &[usize]); 4] = [
        (&galaxy, Communicator::choose(&galaxy, Topology::Line, Some(8), None).unwrap(), &[1, 2, 4]),
        (&loudbox, Communicator::world(&loudbox, Topology::Ring, None).unwrap(), &[1, 2]),
        (&bh_galaxy, axis(&[0, 4, 12, 8, 16, 20, 28, 24], Topology::Ring), &[1, 2]),
        (&bh_galaxy, axis(&[0, 4], Topology::Line), &[1, 2]),
    ];
    for (c, comm, links) in &cases {
        for coll in collectives() {
            let times: Vec<Time> = links.iter().map(|&l| time(c, comm, coll, l)).collect();
            for (w, t) in links.windows(2).zip(times.windows(2)) {
                assert!(
                    t[1] <= t[0],
                    "{} on {} chips ({:?}, {:?}): {} links {} > {} links {}",
                    coll.name(),
                    comm.size(),
                    comm.topology(),
                    c.arch(),
                    w[1],
                    t[1],
                    w[0],
                    t[0]
                );
            }
        }
    }
}
