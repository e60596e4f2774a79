//! What every op's construction shares: one program per chip, worker cores handed out in turn,
//! one EDM per link used, a worker pair (sender, receiver) with its semaphores and EDM channel
//! per lane, and the launch that measures the op on the last chip to start.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use meshsim_engine::{Stats, TaskResult, Time};
use meshsim_hw::{CoreRef, Kernel, Machine, Mode, Params, Program};
use meshsim_topology::soc::CoreCoord;
use meshsim_topology::{ChipIdx, Cluster, LinkId};

use crate::allgather::{OpError, OpRun};
use crate::edm::{ChannelInterface, EdmConfig, EdmLink, WorkerSlot};
use crate::tensor::Placement;

/// A check of an op's outputs after its run: `Err` names the first mismatch.
pub(crate) type Verify<'v> = &'v dyn Fn(&Machine) -> Result<(), String>;

/// A sender worker on one chip and a receiver worker on the next, joined by an EDM channel.
pub(crate) struct Lane {
    pub(crate) s_core: CoreRef,
    pub(crate) r_core: CoreRef,
    pub(crate) s_slot: WorkerSlot,
    pub(crate) r_slot: WorkerSlot,
    /// The sender's second semaphore, which its chip's receiver increments per packet to forward.
    pub(crate) fwd: (CoreCoord, u64),
    pub(crate) channel: (ChannelInterface, ChannelInterface),
}

/// An op being built.
pub(crate) struct OpBuild<'a> {
    cluster: &'a Cluster,
    pub(crate) m: Machine,
    pub(crate) programs: Vec<Program>,
    next_core: Vec<usize>,
    edms: BTreeMap<LinkId, EdmLink>,
    /// When each worker kernel finished, by chip.
    pub(crate) ends: Rc<RefCell<Vec<(ChipIdx, Time)>>>,
}

impl<'a> OpBuild<'a> {
    /// An empty op on `cluster`; functional when `verify`.
    pub(crate) fn new(cluster: &'a Cluster, params: &Params, verify: bool, trace: bool) -> OpBuild<'a> {
        let mode = if verify { Mode::Functional } else { Mode::Timing };
        let chips = cluster.chips().len();
        let mut m = Machine::new(cluster.clone(), params.clone(), mode);
        if trace {
            m.enable_trace();
        }
        OpBuild {
            cluster,
            m,
            programs: (0..chips).map(|c| Program::new(ChipIdx(c as u32))).collect(),
            next_core: vec![0; chips],
            edms: BTreeMap::new(),
            ends: Rc::new(RefCell::new(Vec::new())),
        }
    }

    /// One EDM per link, sized for its number of channels.
    pub(crate) fn edms(
        &mut self,
        params: &Params,
        uses: &BTreeMap<LinkId, usize>,
        buffers: u64,
        page: u64,
    ) -> Result<(), OpError> {
        for (&l, &channels) in uses {
            let link = self.cluster.link(l);
            let end = |e: meshsim_topology::Endpoint| {
                (e.chip, e.chan, self.m.device(e.chip).noc_coord(CoreRef::Eth(e.chan)))
            };
            let cfg = EdmConfig {
                channels,
                buffers_per_channel: buffers,
                page_bytes: page,
                ..EdmConfig::default()
            };
            let edm =
                EdmLink::new(cfg, params, end(link.a), end(link.b)).map_err(|e| OpError(e.to_string()))?;
            self.edms.insert(l, edm);
        }
        Ok(())
    }

    /// The smallest EDM buffer.
    pub(crate) fn min_buffer(&self) -> Option<u64> {
        self.edms.values().map(EdmLink::buffer_bytes).min()
    }

    fn core(&mut self, chip: ChipIdx) -> CoreRef {
        let k = self.next_core[chip.0 as usize];
        self.next_core[chip.0 as usize] += 1;
        CoreRef::Worker(CoreCoord { x: (k % 8) as u32, y: (k / 8) as u32 })
    }

    /// A lane from `a` to `b` over `link`, carrying one message per entry of `sizes`.
    pub(crate) fn lane(
        &mut self,
        a: ChipIdx,
        b: ChipIdx,
        link: LinkId,
        sizes: Vec<u64>,
    ) -> Result<Lane, OpError> {
        let (s_core, r_core) = (self.core(a), self.core(b));
        let (da, db) = (self.m.device(a), self.m.device(b));
        let s_sem = self.programs[a.0 as usize].create_semaphore(&[s_core], 0);
        let fwd_sem = self.programs[a.0 as usize].create_semaphore(&[s_core], 0);
        let r_sem = self.programs[b.0 as usize].create_semaphore(&[r_core], 0);
        let s_slot = WorkerSlot { core: da.noc_coord(s_core), semaphore: da.semaphore_addr(s_core, s_sem) };
        let r_slot = WorkerSlot { core: db.noc_coord(r_core), semaphore: db.semaphore_addr(r_core, r_sem) };
        let from_end = if self.cluster.link(link).a.chip == a { 0 } else { 1 };
        let edm = self.edms.get_mut(&link).expect("every used link has an EDM");
        let channel = edm
            .add_channel(from_end, vec![s_slot], vec![r_slot], sizes)
            .map_err(|e| OpError(e.to_string()))?;
        Ok(Lane {
            s_core,
            r_core,
            s_slot,
            r_slot,
            fwd: (s_slot.core, da.semaphore_addr(s_core, fwd_sem)),
            channel,
        })
    }

    /// Installs the EDMs, launches with chip `k` of `chips` starting `k * skew_ns` late, fails on
    /// a late packet (a teardown bug), and measures the op on the last chip to start.
    /// `verify` checks the outputs after the run.
    pub(crate) fn run(
        mut self,
        chips: &[ChipIdx],
        skew_ns: u64,
        verify: Option<Verify<'_>>,
    ) -> Result<OpRun, OpError> {
        for (_, edm) in std::mem::take(&mut self.edms) {
            edm.install(&mut self.programs);
        }
        let start_of = |c: ChipIdx| {
            chips.iter().position(|&x| x == c).map_or(Time::ZERO, |k| Time::from_ns(k as u64 * skew_ns))
        };
        let stats: Stats =
            self.m.launch(self.programs, start_of).map_err(|e| OpError(format!("simulation failed: {e}")))?;
        if let Some(late) = self.m.late_landings().first() {
            return Err(OpError(format!(
                "EDM protocol error: a packet landed on chip {} eth{} at {:#x} ({}) after its kernels finished",
                self.cluster.chip(late.chip).id,
                late.chan,
                late.addr,
                late.at
            )));
        }
        let ends = self.ends.borrow();
        let per_chip: Vec<(ChipIdx, Time, Time)> = chips
            .iter()
            .map(|&c| {
                (c, start_of(c), ends.iter().filter(|e| e.0 == c).map(|e| e.1).max().unwrap_or(start_of(c)))
            })
            .collect();
        let last = per_chip.iter().max_by_key(|p| (p.1, p.0)).expect("an op has chips");
        let time = last.2 - last.1;
        let verified = verify.map(|v| v(&self.m));
        let (links, marks, resources) = (self.m.link_use(), self.m.marks(), self.m.resource_use());
        let trace = self.m.take_trace();
        Ok(OpRun { time, per_chip, verified, stats, links, marks, resources, trace })
    }
}

/// Reads the given pages of an interleaved tensor into consecutive L1 pages at `at`.
pub(crate) async fn read_pages(
    k: &Kernel,
    place: &Placement,
    pages: impl Iterator<Item = u64>,
    at: u64,
) -> TaskResult {
    for (i, q) in pages.enumerate() {
        let (bank, addr) = place.page(q);
        let d = crate::allgather::endpoint(k, place, bank);
        k.noc_async_read(k.get_noc_addr(d.x, d.y, addr), at + i as u64 * place.page_bytes, place.page_bytes)
            .await?;
    }
    k.noc_async_read_barrier().await?;
    Ok(())
}

/// Writes consecutive L1 pages at `at` to the given pages of an interleaved tensor.
pub(crate) async fn write_pages(
    k: &Kernel,
    place: &Placement,
    pages: impl Iterator<Item = u64>,
    at: u64,
) -> TaskResult {
    for (i, q) in pages.enumerate() {
        let (bank, addr) = place.page(q);
        let d = crate::allgather::endpoint(k, place, bank);
        k.noc_async_write(at + i as u64 * place.page_bytes, k.get_noc_addr(d.x, d.y, addr), place.page_bytes)
            .await?;
    }
    Ok(())
}
