//! The flow model through the session: the same op on the packet and the flow model, where the
//! flow model's costs are the packet model's own (a worker-bound line, a ring reduce-scatter),
//! what it costs in events, and what it refuses.

use meshsim_ccl::comm::Communicator;
use meshsim_ccl::op::SimModel;
use meshsim_ccl::op::{CclError, Collective, RedOp, Stack, Topology};
use meshsim_ccl::request::OpRequest;
use meshsim_ccl::session::{Session, SessionRun};
use meshsim_ccl::tensor::{DType, Layout, TensorSpec};
use meshsim_hw::Params;
use meshsim_topology::{Cluster, builtin};

fn run(cluster: &Cluster, topology: Topology, collective: Collective, x: u64, model: SimModel) -> SessionRun {
    run_with(cluster, &Params::of(cluster.arch()).unwrap().on(cluster), (topology, collective, x, model))
}

fn run_with(
    cluster: &Cluster,
    params: &Params,
    (topology, collective, x, model): (Topology, Collective, u64, SimModel),
) -> SessionRun {
    let mut s = Session::new(cluster, params);
    s.set_model(model);
    let comm = Communicator::world(cluster, topology, None).unwrap();
    let tensor = TensorSpec::new([1, 1, 32, x], DType::Bf16, Layout::Tile).unwrap();
    s.submit(OpRequest::new("op", comm, collective, tensor, 3)).unwrap();
    s.run().unwrap()
}

fn error_pct(cluster: &str, topology: Topology, collective: Collective, x: u64) -> (f64, SessionRun) {
    error_pct_noc(cluster, (topology, collective, x), true)
}

/// The flow model's error with the chips' NoC ports as flow resources (`noc`, the default on a
/// machine this small) or without.
fn error_pct_noc(
    cluster: &str,
    (topology, collective, x): (Topology, Collective, u64),
    noc: bool,
) -> (f64, SessionRun) {
    let c = builtin::cluster(cluster).unwrap();
    let mut params = Params::of(c.arch()).unwrap().on(&c);
    params.flow_noc_ports = u64::from(noc);
    let packet = run(&c, topology, collective, x, SimModel::Packet);
    let flow = run_with(&c, &params, (topology, collective, x, SimModel::Flow));
    let (p, f) = (packet.ops[0].time.0 as f64, flow.ops[0].time.0 as f64);
    assert_eq!(packet.ops[0].algorithm, flow.ops[0].algorithm, "the same algorithm");
    assert_eq!((flow.ops[0].model, packet.ops[0].model), (SimModel::Flow, SimModel::Packet));
    (100.0 * (f - p) / p, flow)
}

/// A 2-chip line's multicast all-gather is bound by each worker's serial read-and-send path,
/// which the flow model computes from the same parameters and NoC routes: within 1 % from
/// 1 MiB per rank.
#[test]
fn the_flow_model_meets_the_packet_model_where_a_worker_binds() {
    for x in [32 * 1024, 256 * 1024] {
        let (e, _) = error_pct("line:2:links=1", Topology::Line, Collective::AllGather, x);
        assert!(e.abs() < 1.0, "line of 2, all-gather x {x}: flow off by {e:.2} %");
    }
}

/// A ring's reduce-scatter, bound by its workers' waves of reads, sums and sends: within 5 %
/// without the NoC's ports as flow resources. With them (the default) the flow model is a few
/// per cent slow here, one of the grid's points "not traced yet" (docs/model.md, "The flow
/// model's grid"): held within the regression suites' 10 % until it is.
#[test]
fn the_flow_model_tracks_a_ring_reduce_scatter() {
    let op = (Topology::Ring, Collective::ReduceScatter(RedOp::Sum), 256 * 1024);
    let (e, _) = error_pct_noc("ring:8:links=1", op, false);
    assert!(e.abs() < 5.0, "ring of 8, reduce-scatter without the NoC: flow off by {e:.2} %");
    let (e, _) = error_pct_noc("ring:8:links=1", op, true);
    assert!(e.abs() < 10.0, "ring of 8, reduce-scatter with the NoC: flow off by {e:.2} %");
}

/// The flow model's engine events are a few per chip and phase, whatever the bytes: a 128 MiB
/// all-gather costs it as few events as a 1 MiB one.
#[test]
fn the_flow_model_costs_events_per_phase_not_per_packet() {
    let c = builtin::cluster("ring:8:links=1").unwrap();
    let small = run(&c, Topology::Ring, Collective::AllGather, 16 * 1024, SimModel::Flow);
    let large = run(&c, Topology::Ring, Collective::AllGather, 2048 * 1024, SimModel::Flow);
    assert_eq!(small.stats.events, large.stats.events);
    assert!(large.stats.events < 100, "{} events", large.stats.events);
    assert!(large.ops[0].time.0 > 50 * small.ops[0].time.0);
}

/// What the flow model does not model it refuses in one line: verifying outputs (it moves no
/// bytes), faults, and the EDM stack.
#[test]
fn the_flow_model_refuses_what_it_does_not_model() {
    let c = builtin::cluster("t3000").unwrap();
    let comm = Communicator::world(&c, Topology::Ring, None).unwrap();
    let tensor = TensorSpec::new([1, 1, 32, 8192], DType::Bf16, Layout::Tile).unwrap();
    let session = |setup: &dyn Fn(&mut Session)| {
        let mut s = Session::new(&c, &Params::default());
        s.set_model(SimModel::Flow);
        setup(&mut s);
        s.submit(OpRequest::new("ag", comm.clone(), Collective::AllGather, tensor, 3)).unwrap();
        s.run().unwrap_err()
    };
    let verify = session(&|s| s.set_verify(true));
    assert!(matches!(&verify, CclError::Invalid(m) if m.contains("cannot verify")), "{verify}");
    let edm = session(&|s| s.set_stack(Stack::Edm));
    assert_eq!(
        edm,
        CclError::Invalid(
            "op 'ag': the flow model carries the fabric stack; run the edm stack with --model packet".into()
        )
    );
}

/// What each model can do is one query on its transport, the same before a session
/// (`stacks::capabilities`) as inside one: packets do everything; flows carry the fabric's ops
/// only, move no bytes, model no faults and serve no microbenchmark.
#[test]
fn each_model_says_what_it_can_do() {
    use meshsim_ccl::stacks::capabilities;
    use meshsim_ccl::transport::Capabilities;
    for stack in [Stack::Fabric, Stack::Edm] {
        assert_eq!(capabilities(stack, SimModel::Packet), Capabilities::ALL, "{stack}");
        let flow = capabilities(stack, SimModel::Flow);
        assert_eq!((flow.verifies, flow.faults, flow.microbenchmarks), (false, false, false), "{stack}");
        assert_eq!(flow.runs_ops, stack == Stack::Fabric, "{stack}");
    }
}
