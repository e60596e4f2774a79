//! Engine throughput with real hardware events: the microbenchmarks' own simulations, timed.
//! The figure reported (elements/s) is engine events per second of wall time on one core.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use meshsim_bench::Setup;
use meshsim_bench::bandwidth::{self, BandwidthSpec};
use meshsim_bench::ring::{self, RingSpec};
use meshsim_hw::Params;
use meshsim_topology::builtin;

fn bench(c: &mut Criterion) {
    let n300 = Setup::new(builtin::cluster("n300").unwrap(), Params::default());
    let t3000 = Setup::new(builtin::cluster("t3000").unwrap(), Params::default());
    let mut g = c.benchmark_group("hw");
    g.sample_size(20);

    let bw = BandwidthSpec { size_bytes: 8192, slots: Some(8), packets: 4096, bidir: true, to_worker: false };
    g.throughput(Throughput::Elements(bandwidth::bandwidth(&n300, bw).unwrap().stats.events));
    g.bench_function("bandwidth_bidir_8KiB_x4096_events", |b| {
        b.iter(|| bandwidth::bandwidth(&n300, bw).unwrap())
    });

    let small =
        BandwidthSpec { size_bytes: 256, slots: Some(16), packets: 8192, bidir: false, to_worker: true };
    g.throughput(Throughput::Elements(bandwidth::bandwidth(&n300, small).unwrap().stats.events));
    g.bench_function("bandwidth_to_worker_256B_x8192_events", |b| {
        b.iter(|| bandwidth::bandwidth(&n300, small).unwrap())
    });

    let rs = RingSpec { size_bytes: 1024, hops: 8, samples: 2000, unmerged: true, start_skew_ns: 0 };
    g.throughput(Throughput::Elements(ring::ring(&t3000, rs).unwrap().stats.events));
    g.bench_function("ring8_unmerged_1KiB_x2000_events", |b| b.iter(|| ring::ring(&t3000, rs).unwrap()));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
