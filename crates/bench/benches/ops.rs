//! Whole collective ops, timed: a T3000 ring all-gather and a Galaxy 32-chip ring all-reduce on
//! both stacks, with tt-metal's default knobs, in timing mode. The figure reported (elements/s)
//! is engine events per second of wall time on one core; the events are the run's own count,
//! so fewer events for the same op (the engine's exact shortcuts) show as a shorter time, not
//! as more events per second.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use meshsim_ccl::comm::Communicator;
use meshsim_ccl::op::{Collective, RedOp, Stack, Topology};
use meshsim_ccl::session::{OpRequest, Session};
use meshsim_ccl::tensor::{DType, Layout, TensorSpec};
use meshsim_hw::Params;
use meshsim_topology::{Cluster, builtin};

/// Runs `collective` of `shape` (the op's output for gathers, each rank's buffer otherwise) on
/// the whole of `cluster` as a ring; returns the engine's event count.
fn run(cluster: &Cluster, stack: Stack, collective: Collective, shape: [u64; 4]) -> u64 {
    let comm = Communicator::world(cluster, Topology::Ring, None).unwrap();
    let tensor = TensorSpec::new(shape, DType::Bf16, Layout::Tile).unwrap();
    let mut s = Session::new(cluster, &Params::default());
    s.set_stack(stack);
    s.submit(OpRequest::new("op", comm, collective, tensor, 3)).unwrap();
    s.run().unwrap().stats.events
}

fn bench(c: &mut Criterion) {
    let t3000 = builtin::cluster("t3000").unwrap();
    let galaxy = builtin::cluster("galaxy_torus").unwrap();
    let mut g = c.benchmark_group("ops");
    g.sample_size(10);
    let cases = [
        ("t3000_all_gather_16MiB", &t3000, Collective::AllGather, [1, 1, 1024, 8192]),
        ("galaxy_all_reduce_8MiB", &galaxy, Collective::AllReduce(RedOp::Sum), [1, 1, 1024, 4096]),
    ];
    for (name, cluster, collective, shape) in cases {
        for stack in [Stack::Fabric, Stack::Edm] {
            g.throughput(Throughput::Elements(run(cluster, stack, collective, shape)));
            g.bench_function(format!("{name}_{stack}_events"), |b| {
                b.iter(|| run(cluster, stack, collective, shape))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
