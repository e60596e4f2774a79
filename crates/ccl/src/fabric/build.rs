//! What every fabric lowering shares: the lowering context, worker cores (the same on every
//! chip of an op), pages and payloads, and the device-side steps every op's kernels take — the
//! entry barrier, page reads, a rank's sync kernel.

use std::rc::Rc;

use meshsim_engine::Cond;
use meshsim_hw::{CoreRef, Kernel, Program};
use meshsim_topology::ChipIdx;
use meshsim_topology::Cluster;
use meshsim_topology::soc::CoreCoord;

use super::mux::Ports;
use super::worker::Connection;
use super::{Fabric, Header, NocCmd, Route};
use crate::op::{CclError, Topology};
use crate::request::OpRequest;
use crate::tensor::{Memory, Placement, STAGING};
use crate::transport::{Gate, LowerCx};

/// A kernel's injection point: the router, and which of its phase's workers on it.
pub(super) type Inject = (usize, usize);

/// The fabric line an op rides on, and whether it runs as a ring on it (a ring communicator
/// covering a closed line).
pub(super) fn line_for(fabric: &Fabric, req: &OpRequest) -> (usize, bool) {
    let (line, closed) = fabric.line_of(req.comm.chips()).expect("the fabric carries every communicator");
    (line, closed && req.comm.topology() == Topology::Ring)
}

/// A session's lowering onto the fabric as it is built: what every phase's lowering reads, and
/// what they all add to — the programs, the worker cores handed out, the DRAM taken by
/// reductions' intermediate buffers.
pub(super) struct Lowering<'a, 'c> {
    pub(super) s: &'a LowerCx<'c>,
    pub(super) fabric: &'a Rc<Fabric>,
    /// Where each phase's kernels inject (a router, or a mux in front of it).
    pub(super) ports: &'a Rc<Ports>,
    /// A program per chip.
    pub(super) programs: Vec<Program>,
    /// Per chip, the next worker core free.
    next_core: Vec<usize>,
    /// Where the next intermediate buffer goes in DRAM (above every tensor).
    scratch_base: u64,
}

impl<'a, 'c> Lowering<'a, 'c> {
    /// An empty lowering of `s` on `fabric`, its routers installed; intermediate buffers from
    /// `scratch_base`.
    pub(super) fn new(
        s: &'a LowerCx<'c>,
        fabric: &'a Rc<Fabric>,
        ports: &'a Rc<Ports>,
        scratch_base: u64,
    ) -> Self {
        let chips = s.cluster.chips().len();
        let mut programs: Vec<Program> = (0..chips).map(|c| Program::new(ChipIdx(c as u32))).collect();
        fabric.install(&mut programs);
        Lowering { s, fabric, ports, programs, next_core: vec![0; chips], scratch_base }
    }

    /// The next worker core free on every one of `chips`: an op's ranks all use the same core,
    /// so one NoC address (a multicast increment's, say) names it on every chip.
    pub(super) fn take_core(&mut self, chips: &[ChipIdx]) -> Result<CoreRef, CclError> {
        let k = chips.iter().map(|c| self.next_core[c.0 as usize]).max().unwrap_or(0);
        let soc = self.s.cluster.soc();
        if k >= soc.workers.len() {
            let ids: Vec<u64> = chips.iter().map(|&c| self.s.cluster.chip(c).id).collect();
            return Err(CclError::Invalid(format!(
                "chips {ids:?} have no worker core left in common: the ops need more than {}",
                soc.workers.len()
            )));
        }
        for c in chips {
            self.next_core[c.0 as usize] = k + 1;
        }
        Ok(CoreRef::Worker(soc.logical_worker(k as u64)))
    }

    /// DRAM for an intermediate buffer of `pages` pages of `page` bytes, above the last one.
    pub(super) fn scratch(&mut self, page: u64, pages: u64) -> Placement {
        let at = Placement {
            base: self.scratch_base,
            ..Placement::first(Memory::Dram, page, self.s.cluster.soc(), self.s.params)
        };
        self.scratch_base = at.after(pages).base;
        at
    }

    /// The program of `chip`.
    pub(super) fn program(&mut self, chip: ChipIdx) -> &mut Program {
        &mut self.programs[chip.0 as usize]
    }
}

/// NoC coordinates of a core (the same on every chip of `cluster`).
pub(super) fn noc_of(cluster: &Cluster, core: CoreRef) -> CoreCoord {
    let soc = cluster.soc();
    match core {
        CoreRef::Worker(l) => soc.worker(l),
        CoreRef::Eth(ch) => soc.eth_cores[ch as usize],
    }
}

/// NoC address of page `q` of `place` (the same on every chip).
pub(super) fn page_addr(k: &Kernel, place: &Placement, q: u64) -> u64 {
    let (bank, addr) = place.page(q);
    let at = match place.memory {
        Memory::Dram => k.dram_endpoint(bank as usize),
        Memory::L1 => k.worker_noc_coord(bank as usize),
    };
    k.get_noc_addr(at.x, at.y, addr)
}

/// The entry-barrier semaphore on an op instance's core (the same core and address on every
/// chip of the op).
pub(super) const BARRIER_SEM: u64 = STAGING + 64;

/// tt-metal's entry barrier (`shared/fabric.md` §7): a zero-payload multicast increment of the
/// barrier semaphore of every rank this direction reaches, then a wait until all `ranks - 1`
/// others have arrived. Both direction kernels of a rank send their half and wait.
pub(super) async fn entry_barrier(
    k: &Kernel,
    conn: Option<&Connection>,
    reach: u32,
    ranks: usize,
) -> Result<(), meshsim_hw::HwError> {
    if let Some(conn) = conn.filter(|_| reach > 0) {
        let me = k.my_core();
        let cmd = NocCmd::AtomicInc { sem: k.get_noc_addr(me.x, me.y, BARRIER_SEM), inc: 1, flush: false };
        conn.send(k, Header { cmd, payload: 0, route: Route::multicast(1, reach), src_ch: 0 }, 0).await?;
    }
    k.wait_until(BARRIER_SEM, Cond::Ge(ranks as u32 - 1)).await?;
    k.mark(ENTRY_BARRIER);
    Ok(())
}

/// The mark a fabric op's direction kernel leaves once its entry barrier has passed.
pub const ENTRY_BARRIER: &str = "entry barrier passed";

/// Issues NoC reads of `pages` of `place` into consecutive L1 pages at `at` (no barrier).
pub(super) async fn issue_reads(
    k: &Kernel,
    place: &Placement,
    pages: impl IntoIterator<Item = u64>,
    at: u64,
    page: u64,
) -> meshsim_engine::TaskResult {
    for (i, q) in pages.into_iter().enumerate() {
        k.noc_async_read(page_addr(k, place, q), at + i as u64 * page, page).await?;
    }
    Ok(())
}

/// A rank's sync kernel on `core`: once the phase's gate lets it in, it waits until each
/// semaphore of `waits` reaches its count, which says every packet meant for the rank landed,
/// and then leaves the gate (the rank's end of the op).
pub(super) fn sync_kernel(
    program: &mut Program,
    core: CoreRef,
    name: &str,
    gate: &Gate,
    waits: Vec<(u64, u32)>,
) {
    let g = gate.clone();
    program.create_kernel(core, name, 0, vec![], move |kn| async move {
        let start = g.enter(&kn).await;
        for (sem, want) in waits {
            kn.wait_until(sem, Cond::Ge(want)).await?;
        }
        g.leave(&kn, start);
        Ok(())
    });
}
