//! The host API: a [`Machine`] holding the cluster's hardware, a [`Device`] per chip to ask
//! about its Ethernet cores, one [`Program`] per chip with kernels and semaphores, and a launch
//! with a configurable start skew per chip.
//!
//! ```text
//!  Machine::new(cluster, params, mode)
//!    ├─ device(chip).active_ethernet_cores(true) / connected_ethernet_core(core)
//!    ├─ Program::new(chip).create_kernel(core, name, noc, args, |k| async move { … })
//!    └─ launch(programs, skew) ──► Sim::run ──► Stats | Deadlock | TimeLimit | kernel error
//! ```

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use meshsim_engine::{Ctx, Sim, SimError, Stats, TaskResult, Time};
use meshsim_topology::soc::{CoreCoord, SocDescriptor};
use meshsim_topology::{ChipIdx, Cluster, ETH_CHANNELS, Endpoint};

use crate::kernel::Kernel;
use crate::params::Params;
use crate::world::{CoreKind, Hw, Mode};
use crate::world::{MAX_SEMAPHORES, semaphore_area};

/// A core named the way host code names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoreRef {
    /// The Ethernet core of a channel (tt-metal's logical `CoreCoord(0, channel)`).
    Eth(u8),
    /// A Tensix worker by logical coordinates (`x` in 0..8, `y` in 0..10 on Wormhole).
    Worker(CoreCoord),
}

type KernelFn = Box<dyn FnOnce(Kernel) -> Pin<Box<dyn Future<Output = TaskResult>>>>;

struct KernelSpec {
    core: CoreRef,
    name: String,
    noc: usize,
    args: Vec<u32>,
    body: KernelFn,
}

/// The kernels and semaphores of one chip.
pub struct Program {
    chip: ChipIdx,
    kernels: Vec<KernelSpec>,
    semaphores: Vec<(Vec<CoreRef>, u64, u32)>,
    /// Semaphores taken on each core so far.
    used: Vec<(CoreRef, u64)>,
}

impl Program {
    /// An empty program for `chip`.
    pub fn new(chip: ChipIdx) -> Program {
        Program { chip, kernels: Vec::new(), semaphores: Vec::new(), used: Vec::new() }
    }

    /// The chip it runs on.
    pub fn chip(&self) -> ChipIdx {
        self.chip
    }

    /// Places a kernel named `name` on `core`, issuing NoC commands on `noc` (0 or 1), with
    /// runtime arguments `args`. `body` builds the kernel's future from its [`Kernel`] handle.
    pub fn create_kernel<F, Fut>(&mut self, core: CoreRef, name: &str, noc: usize, args: Vec<u32>, body: F)
    where
        F: FnOnce(Kernel) -> Fut + 'static,
        Fut: Future<Output = TaskResult> + 'static,
    {
        assert!(noc < 2, "a chip has NoC 0 and NoC 1");
        let body: KernelFn = Box::new(move |k| Box::pin(body(k)));
        self.kernels.push(KernelSpec { core, name: name.to_owned(), noc, args, body });
    }

    /// Creates a semaphore with `initial` value on each of `cores`, at the same index (so the
    /// same L1 address) on every one; returns the index. Panics past 16 semaphores on a core:
    /// host code that does that is wrong.
    pub fn create_semaphore(&mut self, cores: &[CoreRef], initial: u32) -> u64 {
        let taken = |c: &CoreRef| self.used.iter().find(|u| u.0 == *c).map_or(0, |u| u.1);
        let index = cores.iter().map(taken).max().unwrap_or(0);
        assert!(index < MAX_SEMAPHORES, "at most {MAX_SEMAPHORES} semaphores per core");
        for &c in cores {
            match self.used.iter_mut().find(|u| u.0 == c) {
                Some(u) => u.1 = index + 1,
                None => self.used.push((c, index + 1)),
            }
        }
        self.semaphores.push((cores.to_vec(), index, initial));
        index
    }
}

/// A chip, as host code asks about it.
pub struct Device {
    chip: ChipIdx,
    cluster: Rc<Cluster>,
    soc: SocDescriptor,
    params: Params,
}

impl Device {
    /// The chip.
    pub fn chip(&self) -> ChipIdx {
        self.chip
    }

    /// `get_active_ethernet_cores(skip_dispatch)`: the Ethernet cores with a link, as logical
    /// `CoreCoord(0, channel)`; with `skip_dispatch`, those reserved for fast dispatch are left
    /// out, as user kernels must.
    pub fn active_ethernet_cores(&self, skip_dispatch: bool) -> Vec<CoreCoord> {
        self.cluster
            .active_channels(self.chip, skip_dispatch)
            .into_iter()
            .map(|c| CoreCoord { x: 0, y: c as u32 })
            .collect()
    }

    /// `get_connected_ethernet_core(core)`: the chip and logical Ethernet core at the other end
    /// of the link of a logical Ethernet core.
    pub fn connected_ethernet_core(&self, core: CoreCoord) -> Option<(ChipIdx, CoreCoord)> {
        let far = self.cluster.connected(Endpoint { chip: self.chip, chan: core.y as u8 })?;
        Some((far.chip, CoreCoord { x: 0, y: far.chan as u32 }))
    }

    /// NoC0 coordinates of a core (`ethernet_core_from_logical_core`, `worker_core_from_logical_core`).
    pub fn noc_coord(&self, core: CoreRef) -> CoreCoord {
        noc_coord(&self.soc, core)
    }

    /// NoC0 coordinates of the first endpoint of DRAM bank `bank`.
    pub fn dram_noc_coord(&self, bank: usize) -> CoreCoord {
        self.soc.dram[bank][0]
    }

    /// The L1 semaphore address of semaphore `index` on `core`.
    pub fn semaphore_addr(&self, core: CoreRef, index: u64) -> u64 {
        semaphore_area(&self.params, kind_of(core)).0 + 4 * index
    }
}

fn kind_of(core: CoreRef) -> CoreKind {
    match core {
        CoreRef::Eth(c) => CoreKind::Eth(c),
        CoreRef::Worker(_) => CoreKind::Worker,
    }
}

fn noc_coord(soc: &SocDescriptor, core: CoreRef) -> CoreCoord {
    match core {
        CoreRef::Eth(c) => soc.eth_cores[c as usize],
        CoreRef::Worker(l) => soc.worker(l),
    }
}

/// The cluster's hardware, ready to run programs.
pub struct Machine {
    sim: Sim<Hw>,
    /// Every kernel launched, when tracing.
    kernels: Option<Vec<crate::trace::KernelTrack>>,
}

impl Machine {
    /// Idle hardware for `cluster` with `params`, in `mode`.
    pub fn new(cluster: Cluster, params: Params, mode: Mode) -> Machine {
        Machine::build(cluster, params, mode, None)
    }

    /// Idle hardware for the chips `used` of `cluster` alone: the others have no cores, ports
    /// or memories, so a run on a few chips of a large machine costs what those chips cost.
    /// Nothing may run on the others or send to them. A run logs the same events as on
    /// [`Machine::new`]'s.
    pub fn for_chips(cluster: Cluster, params: Params, mode: Mode, used: &[ChipIdx]) -> Machine {
        let mut active = vec![false; cluster.chips().len()];
        for c in used {
            active[c.0 as usize] = true;
        }
        Machine::build(cluster, params, mode, Some(&active))
    }

    fn build(cluster: Cluster, params: Params, mode: Mode, active: Option<&[bool]>) -> Machine {
        let sim = Sim::new_with(|sched| {
            let soc = cluster.soc().clone();
            Hw::new(Rc::new(cluster), soc, params, mode, (sched, active))
        });
        Machine { sim, kernels: None }
    }

    /// Stalls the ERISC core on `ep` from `from` to `to` in the next launches: its kernels run
    /// nothing in the window (an injected ERISC stall).
    pub fn set_erisc_stall(&mut self, ep: meshsim_topology::Endpoint, from: Time, to: Time) {
        self.sim.ctx().with(|hw, _| {
            hw.erisc_stalls[ep.chip.0 as usize * meshsim_topology::ETH_CHANNELS as usize + ep.chan as usize]
                .push((from, to));
        });
    }

    /// Injects `fault` into the link on `ep` (both its directions) for the next launches.
    /// Returns false when no link joins `ep` to another chip.
    pub fn set_link_fault(&mut self, ep: meshsim_topology::Endpoint, fault: crate::eth::LinkFault) -> bool {
        let Some(far) = self.cluster().connected(ep) else {
            return false;
        };
        self.sim.ctx().with(|hw, _| {
            for end in [ep, far] {
                hw.chips[end.chip.0 as usize].eth[end.chan as usize].fault = Some(fault.clone());
            }
        });
        true
    }

    /// Records a full trace of the next launch: kernel spans, waits, every Ethernet packet.
    /// Costs memory in proportion to the run's events; off by default.
    pub fn enable_trace(&mut self) {
        let ctx = self.sim.ctx();
        ctx.sched().enable_task_trace();
        ctx.with(|hw, _| {
            hw.packet_log.get_or_insert_with(Vec::new).clear();
            hw.counter_log.get_or_insert_with(Vec::new).clear();
        });
        self.kernels.get_or_insert_with(Vec::new);
    }

    /// The trace recorded since [`Machine::enable_trace`], or `None` if tracing is off.
    pub fn take_trace(&mut self) -> Option<crate::trace::TraceData> {
        let kernels = self.kernels.take()?;
        let ctx = self.sim.ctx();
        let tasks = ctx.sched().take_task_trace();
        let end = ctx.now();
        ctx.with(|hw, _| {
            Some(crate::trace::TraceData {
                kernels,
                tasks,
                packets: hw.packet_log.take().unwrap_or_default(),
                marks: hw.marks.clone(),
                counters: hw.counter_log.take().unwrap_or_default(),
                end,
            })
        })
    }

    /// Use of every Ethernet link direction that carried a packet.
    pub fn link_use(&self) -> Vec<crate::trace::LinkUse> {
        self.sim.ctx().world().link_use()
    }

    /// The busiest NoC link or port and DRAM bank of the run.
    pub fn resource_use(&self) -> crate::trace::ResourceUse {
        self.sim.ctx().world().resource_use()
    }

    /// Kernel marks, in time order.
    pub fn marks(&self) -> Vec<crate::trace::Mark> {
        self.sim.ctx().world().marks().to_vec()
    }

    /// A new host event named `name` (say, "op ag_rows done"): kernels wait for it with
    /// [`crate::Kernel::wait_event`] and raise it with [`crate::Kernel::raise_event`]. Deadlock
    /// reports name it.
    pub fn new_event(&mut self, name: &str) -> meshsim_engine::SignalId {
        self.sim.ctx().sched().new_signal(name)
    }

    /// The simulation context (for inspecting memory after a run).
    pub fn ctx(&self) -> Ctx<Hw> {
        self.sim.ctx()
    }

    /// The host's view of a chip.
    pub fn device(&self, chip: ChipIdx) -> Device {
        let ctx = self.sim.ctx();
        let hw = ctx.world();
        Device { chip, cluster: hw.cluster.clone(), soc: hw.soc.clone(), params: (*hw.params).clone() }
    }

    /// The cluster.
    pub fn cluster(&self) -> Rc<Cluster> {
        self.sim.ctx().world().cluster.clone()
    }

    /// Stops a launch with `SimError::TimeLimit` past `limit` of simulated time.
    pub fn set_time_limit(&mut self, limit: Time) {
        self.sim.set_time_limit(limit);
    }

    /// Host write into the L1 of a core (before launch, like writing a buffer).
    pub fn write_l1(
        &self,
        chip: ChipIdx,
        core: CoreRef,
        addr: u64,
        data: &[u8],
    ) -> Result<(), meshsim_engine::MemError> {
        let ctx = self.sim.ctx();
        ctx.with(|hw, s| {
            let at = noc_coord(&hw.soc, core);
            let mem = hw.core(chip, at).expect("core exists").mem;
            s.write_bytes(mem, addr, data)
        })
    }

    /// Host write into DRAM bank `bank` of a chip.
    pub fn write_dram(
        &self,
        chip: ChipIdx,
        bank: usize,
        addr: u64,
        data: &[u8],
    ) -> Result<(), meshsim_engine::MemError> {
        let ctx = self.sim.ctx();
        ctx.with(|hw, s| {
            let at = hw.soc.dram[bank][0];
            let mem = hw.core(chip, at).expect("DRAM endpoint exists").mem;
            s.write_bytes(mem, addr, data)
        })
    }

    /// Host read of DRAM bank `bank` of a chip (after a run).
    pub fn read_dram(
        &self,
        chip: ChipIdx,
        bank: usize,
        addr: u64,
        len: u64,
    ) -> Result<Vec<u8>, meshsim_engine::MemError> {
        let ctx = self.sim.ctx();
        ctx.with(|hw, s| {
            let mem = hw.core(chip, hw.soc.dram[bank][0]).expect("DRAM endpoint exists").mem;
            let mut buf = vec![0; len as usize];
            s.memory().read(mem, addr, &mut buf)?;
            Ok(buf)
        })
    }

    /// Host read of the L1 of a core (after a run).
    pub fn read_l1(
        &self,
        chip: ChipIdx,
        core: CoreRef,
        addr: u64,
        len: u64,
    ) -> Result<Vec<u8>, meshsim_engine::MemError> {
        let ctx = self.sim.ctx();
        ctx.with(|hw, s| {
            let at = noc_coord(&hw.soc, core);
            let mem = hw.core(chip, at).expect("core exists").mem;
            let mut buf = vec![0; len as usize];
            s.memory().read(mem, addr, &mut buf)?;
            Ok(buf)
        })
    }

    /// Initialises semaphores and spawns every program's kernels; chip `c`'s kernels start at
    /// `skew(c)`. Then runs to completion.
    pub fn launch(
        &mut self,
        programs: Vec<Program>,
        skew: impl Fn(ChipIdx) -> Time,
    ) -> Result<Stats, SimError> {
        let ctx = self.sim.ctx();
        for prog in programs {
            let start = skew(prog.chip);
            let chip_id = ctx.world().cluster.chip(prog.chip).id;
            init_semaphores(&ctx, &prog);
            for spec in prog.kernels {
                let (k, name, core_name) = kernel_for(&ctx, prog.chip, chip_id, &spec);
                let body = (spec.body)(k);
                let erisc =
                    match ctx.world().core(prog.chip, noc_coord(&ctx.world().soc, spec.core)).map(|c| c.kind)
                    {
                        Some(CoreKind::Eth(ch)) => {
                            Some(prog.chip.0 as usize * ETH_CHANNELS as usize + ch as usize)
                        }
                        _ => None,
                    };
                let c2 = ctx.clone();
                // ERISC kernels are counted running and finished, so packets that land on a core
                // after all its kernels have left can be reported.
                let task = ctx.spawn(name, start, async move {
                    if let Some(i) = erisc {
                        c2.with(|hw, _| hw.erisc_kernels[i].running += 1);
                    }
                    let r = body.await;
                    if let Some(i) = erisc {
                        c2.with(|hw, _| {
                            hw.erisc_kernels[i].running -= 1;
                            hw.erisc_kernels[i].finished += 1;
                        });
                    }
                    r
                });
                if let Some(kernels) = self.kernels.as_mut() {
                    kernels.push(crate::trace::KernelTrack {
                        task,
                        chip: prog.chip,
                        core: core_name,
                        kernel: spec.name.clone(),
                    });
                }
            }
        }
        self.sim.run()
    }

    /// Ethernet packets that landed on ERISC cores after all their kernels had finished: each is
    /// a teardown bug of an earlier kernel (it left before its acknowledgements came back).
    pub fn late_landings(&self) -> Vec<crate::world::LateLanding> {
        self.sim.ctx().world().late_landings().to_vec()
    }

    /// Semaphores an atomic decrement took below zero during the last launch (the first 16).
    pub fn negative_semaphores(&self) -> Vec<crate::world::NegativeSemaphore> {
        self.sim.ctx().world().negative_semaphores().to_vec()
    }
}

/// Writes a program's semaphores' initial values into their cores' semaphore areas.
fn init_semaphores(ctx: &Ctx<Hw>, prog: &Program) {
    for (cores, index, initial) in &prog.semaphores {
        for &core in cores {
            ctx.with(|hw, s| {
                let addr = semaphore_area(&hw.params, kind_of(core)).0 + 4 * index;
                let mem = hw.core(prog.chip, noc_coord(&hw.soc, core)).expect("core exists").mem;
                s.write_u32(mem, addr, *initial).expect("semaphore area lies in L1");
            });
        }
    }
}

/// The device handle a kernel of `spec` runs with on `chip` (file id `chip_id`), its task name
/// (`chip0/eth8/edm`) and its core's name.
fn kernel_for(ctx: &Ctx<Hw>, chip: ChipIdx, chip_id: u64, spec: &KernelSpec) -> (Kernel, String, String) {
    ctx.with(|hw, _| {
        let at = noc_coord(&hw.soc, spec.core);
        let slot = hw.core(chip, at).expect("core exists");
        let core_name = match slot.kind {
            CoreKind::Eth(c) => format!("eth{c}"),
            _ => format!("worker{at}"),
        };
        let name = format!("chip{chip_id}/{core_name}/{}", spec.name);
        let k = Kernel {
            ctx: ctx.clone(),
            chip,
            at,
            kind: slot.kind,
            mem: slot.mem,
            regs: slot.regs.expect("kernels run on cores with registers"),
            noc: spec.noc,
            args: spec.args.clone().into(),
            name: name.clone().into(),
            local: crate::kernel::LocalWindow::of(&hw.params, slot.kind),
            flushed: Default::default(),
            tagged: Default::default(),
            sent: Default::default(),
            atomics_acked: Default::default(),
            issue_cycles: Default::default(),
            stalls: match slot.kind {
                CoreKind::Eth(c) => {
                    hw.erisc_stalls[chip.0 as usize * ETH_CHANNELS as usize + c as usize].clone().into()
                }
                _ => Rc::from([]),
            },
            traced: hw.counter_log.is_some(),
        };
        (k, name, core_name)
    })
}
