//! Reduce-scatter end to end: sum and max verify exactly on N300, T3000 and Galaxy.

use meshsim_ccl::reducescatter::{RedOp, ReduceScatterSpec, reduce_scatter, validate};
use meshsim_ccl::tensor::{DType, Layout, TensorSpec};
use meshsim_hw::Params;
use meshsim_topology::{Cluster, builtin};

fn spec(c: &Cluster, shape: [u64; 4], dim: usize, dtype: DType, op: RedOp) -> ReduceScatterSpec {
    let input = TensorSpec::new(shape, dtype, Layout::Tile).unwrap();
    ReduceScatterSpec { verify: true, ..ReduceScatterSpec::new(input, dim, c.ring().unwrap().chips, op) }
}

fn check(c: &Cluster, s: &ReduceScatterSpec) -> meshsim_engine::Time {
    let r = reduce_scatter(c, &Params::default(), s).unwrap();
    assert_eq!(r.verified, Some(Ok(())));
    r.time
}

#[test]
fn sum_and_max_verify_on_n300_t3000_and_galaxy() {
    let n300 = builtin::cluster("n300").unwrap();
    check(&n300, &spec(&n300, [1, 1, 32, 64], 3, DType::Bf16, RedOp::Sum));
    let t = builtin::cluster("t3000").unwrap();
    for (dtype, op) in [(DType::Bf16, RedOp::Sum), (DType::Bfp8, RedOp::Max)] {
        check(&t, &spec(&t, [1, 1, 64, 32 * 16], 3, dtype, op));
    }
    check(&t, &spec(&t, [1, 8, 64, 64], 1, DType::Bf16, RedOp::Sum));
    let g = builtin::cluster("galaxy_torus").unwrap();
    check(&g, &spec(&g, [1, 1, 32, 32 * 32], 3, DType::Bfp8, RedOp::Sum));
}

#[test]
fn a_configuration_that_exceeds_the_buffering_is_refused_before_it_runs() {
    let t = builtin::cluster("t3000").unwrap();
    let mut s = spec(&t, [1, 1, 64, 32 * 512], 3, DType::Bf16, RedOp::Sum);
    s.pages_per_packet = Some(400);
    let err = validate(&t, &Params::default(), &s).unwrap_err().to_string();
    assert!(err.contains("exceed the workers' buffering"), "{err}");
    // 32 KiB packets fit the workers' double buffers but not the EDM buffers of 4 channels.
    s.pages_per_packet = Some(16);
    s.workers = 4;
    let err = reduce_scatter(&t, &Params::default(), &s).unwrap_err().to_string();
    assert!(err.contains("do not fit the EDM buffers"), "{err}");
}
