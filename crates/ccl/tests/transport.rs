//! The transport seam from outside the library: a toy transport, built only from the public
//! `Transport` contract and the hardware's host API, carries an all-gather through an ordinary
//! session — selection, placement, dependencies, one launch, results — without the session or
//! either built-in stack knowing of it.

use meshsim_ccl::comm::Communicator;
use meshsim_ccl::op::Algorithm;
use meshsim_ccl::op::{CclError, Collective, Topology};
use meshsim_ccl::request::OpRequest;
use meshsim_ccl::routers::RouterUse;
use meshsim_ccl::session::{OpHandle, Session};
use meshsim_ccl::tensor::{DType, Layout, TensorSpec};
use meshsim_ccl::transport::{LowerCx, Lowered, PhaseRun, Transport};
use meshsim_engine::Time;
use meshsim_hw::{CoreRef, Machine, Params, Program};
use meshsim_topology::soc::CoreCoord;
use meshsim_topology::{ChipIdx, Cluster, builtin};

/// An ideal ring all-gather: every rank receives the other ranks' slices at `ps_per_byte`,
/// with no latency and no contention — one kernel per rank that waits out the transfer.
struct Ideal {
    ps_per_byte: u64,
}

impl Transport for Ideal {
    fn name(&self) -> &'static str {
        "ideal"
    }

    fn algorithms(&self, _collective: Collective) -> &'static [Algorithm] {
        &[Algorithm::Auto]
    }

    fn accepts(&self, req: &OpRequest, _params: &Params) -> Result<(), CclError> {
        if req.collective != Collective::AllGather {
            return Err(CclError::Invalid(format!("op '{}': the ideal transport only gathers", req.name)));
        }
        Ok(())
    }

    fn default_links(&self, _cluster: &Cluster, ops: &[OpRequest]) -> Result<Vec<usize>, CclError> {
        Ok(vec![1; ops.len()])
    }

    fn lower(&self, cx: &LowerCx, _m: &mut Machine) -> Result<Lowered, CclError> {
        let mut programs: Vec<Program> =
            (0..cx.cluster.chips().len()).map(|c| Program::new(ChipIdx(c as u32))).collect();
        for (pi, p) in cx.phases.iter().enumerate() {
            let req = &cx.ops[p.op];
            let n = req.comm.size() as u64;
            let wait = Time(self.ps_per_byte * (n - 1) * p.tensors.slice.bytes());
            let gate = cx.gate(pi, req.comm.size());
            // Each op on its own core, so that ops in the session may overlap.
            let core = CoreRef::Worker(CoreCoord { x: p.op as u32, y: 0 });
            for &chip in req.comm.chips() {
                let g = gate.clone();
                let name = format!("{}ideal rank", cx.kernel_prefix(p.op));
                programs[chip.0 as usize].create_kernel(core, &name, 0, vec![], move |k| async move {
                    let start = g.enter(&k).await;
                    k.delay(wait).await;
                    g.leave(&k, start);
                    Ok(())
                });
            }
        }
        let phases = cx
            .phases
            .iter()
            .map(|_| PhaseRun { pages_per_packet: 1, packet_bytes: 0, algorithm: "ideal ring" })
            .collect();
        let report: Box<dyn FnOnce() -> Vec<RouterUse>> = Box::new(Vec::new);
        Ok(Lowered {
            programs,
            phases,
            workers: vec![1; cx.ops.len()],
            report,
            links: None,
            late_credits: Vec::new(),
        })
    }
}

fn all_gather(t3000: &Cluster, name: &str, after: Vec<OpHandle>) -> OpRequest {
    let comm = Communicator::new(t3000, t3000.ring().unwrap().chips, Topology::Ring).unwrap();
    let tensor = TensorSpec::new([1, 1, 32, 8 * 1024], DType::Bf16, Layout::Tile).unwrap();
    let mut req = OpRequest::new(name, comm, Collective::AllGather, tensor, 3);
    req.after = after;
    req
}

#[test]
fn a_toy_transport_runs_an_all_gather_through_the_public_seam() {
    let t3000 = builtin::cluster("t3000").unwrap();
    let mut s = Session::new(&t3000, &Params::default());
    s.set_transport(Box::new(Ideal { ps_per_byte: 100 }));
    let first = s.submit(all_gather(&t3000, "first", Vec::new())).unwrap();
    s.submit(all_gather(&t3000, "second", vec![first])).unwrap();
    let run = s.run().unwrap();
    // 7 slices of 32 x 1024 bf16 (64 KiB) at 100 ps a byte, one op after the other.
    let one = Time(100 * 7 * 64 * 1024);
    for (i, o) in run.ops.iter().enumerate() {
        assert_eq!((o.transport, o.algorithm.as_str(), o.time), ("ideal", "ideal ring", one), "{}", o.name);
        assert_eq!(o.start, Time(one.0 * i as u64), "{} starts after its dependency", o.name);
        assert_eq!(o.per_chip.len(), 8);
    }
    assert_eq!(run.makespan, Time(2 * one.0));
    assert!(run.routers.is_empty() && run.links.is_empty(), "nothing crossed a link");
}

#[test]
fn a_toy_transport_refuses_what_it_does_not_carry_through_the_session() {
    let t3000 = builtin::cluster("t3000").unwrap();
    let mut s = Session::new(&t3000, &Params::default());
    s.set_transport(Box::new(Ideal { ps_per_byte: 100 }));
    let mut req = all_gather(&t3000, "rs", Vec::new());
    req.collective = Collective::ReduceScatter(meshsim_ccl::op::RedOp::Sum);
    s.submit(req).unwrap();
    let err = s.run().unwrap_err();
    assert_eq!(err, CclError::Invalid("op 'rs': the ideal transport only gathers".into()));
}

#[test]
fn the_session_names_no_stack_only_the_registry_does() {
    let session = include_str!("../src/session.rs");
    for stack in ["crate::edm", "crate::fabric", "Stack::Edm", "Stack::Fabric"] {
        assert!(!session.contains(stack), "session.rs names {stack}");
    }
    let registry = include_str!("../src/stacks.rs");
    assert!(
        registry.contains("crate::edm::EdmTransport") && registry.contains("crate::fabric::FabricTransport")
    );
}

/// Which knobs a stack takes is one rule: the session refuses a request's knobs of another
/// stack with the very line the CLI, suites and workloads get from `stacks::check_given`.
#[test]
fn a_stack_refuses_another_stacks_knobs_by_one_rule_everywhere() {
    use meshsim_ccl::op::{Given, Knobs, RedOp, Stack};
    let t = builtin::cluster("t3000").unwrap();
    let comm = Communicator::world(&t, Topology::Ring, None).unwrap();
    let tensor = TensorSpec::new([1, 1, 64, 1024], DType::Bf16, Layout::Tile).unwrap();
    let cases = [
        (
            Stack::Fabric,
            Knobs { workers: Some(2), ..Knobs::default() },
            Given { workers: true, ..Given::default() },
        ),
        (
            Stack::Fabric,
            Knobs { pages_per_packet: Some(1), ..Knobs::default() },
            Given { pages_per_packet: true, ..Given::default() },
        ),
        (
            Stack::Edm,
            Knobs { packet_bytes: Some(2048), ..Knobs::default() },
            Given { packet_size: true, ..Given::default() },
        ),
    ];
    for (stack, knobs, given) in cases {
        let want = meshsim_ccl::stacks::check_given(stack, Collective::AllGather, &given).unwrap_err();
        let mut s = Session::new(&t, &Params::default());
        s.set_stack(stack);
        let mut req = OpRequest::new("ag", comm.clone(), Collective::AllGather, tensor, 3);
        req.knobs = knobs;
        s.submit(req).unwrap();
        match s.run() {
            Err(CclError::Invalid(m)) => assert_eq!(m, format!("op 'ag': {want}"), "{stack}"),
            other => panic!("{stack}: expected the knob refused, got {other:?}"),
        }
    }
    // A reduction takes the fabric's workers.
    let reduce = Given { workers: true, ..Given::default() };
    assert!(
        meshsim_ccl::stacks::check_given(Stack::Fabric, Collective::ReduceScatter(RedOp::Sum), &reduce)
            .is_ok()
    );
}
