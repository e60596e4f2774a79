//! The hardware of a whole cluster as one engine [`World`]: chips, their cores' memories, NoCs
//! and Ethernet ports, and the events they schedule for themselves.
//!
//! Order of work within one event, written once: a tx latch reads the command's source bytes,
//! books the Ethernet pipeline, schedules one landing per packet and only then raises the
//! queue's free signal, so a kernel woken by that signal sees the queue empty and the bytes
//! already captured (it may overwrite its buffer). A landing or NoC arrival writes memory first
//! and then decrements the issuer's outstanding-transfer counter, so a barrier never completes
//! before the data is visible.

use std::rc::Rc;

use meshsim_engine::{MemError, MemSpace, Scheduler, Time, World};
use meshsim_topology::soc::{CoreCoord, SocDescriptor};
use meshsim_topology::{ChipIdx, Cluster, ETH_CHANNELS, Endpoint};

use crate::eth::{EthPort, transmit};
use crate::noc::Noc;
use crate::params::Params;
use crate::trace::{DramUse, LinkUse, Mark, PacketRec, ResourceUse, SYNC_SEND_BYTES};

/// Whether memories hold real bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every write moves its bytes, so results can be checked.
    Functional,
    /// Writes move only their last 16 bytes — where sync records and flags sit — so large
    /// sweeps cost no memory; payload contents are meaningless.
    Timing,
}

/// Bytes of one `erisc_info` channel sync record (`bytes_sent`, `receiver_ack`, `src_id`, reserved).
pub const CHANNEL_SYNC_BYTES: u64 = 16;

/// Channel sync records in `erisc_info`.
pub const ERISC_INFO_CHANNELS: u8 = 8;

/// Semaphores a core can hold.
pub const MAX_SEMAPHORES: u64 = 16;

/// NoC transaction ids a kernel can tag its writes with (`noc_async_write_one_packet_with_trid`).
pub const NOC_TRIDS: usize = 16;

/// `[start, end)` of the semaphore area of a core.
pub(crate) fn semaphore_area(p: &Params, kind: CoreKind) -> (u64, u64) {
    let base = match kind {
        CoreKind::Eth(_) => p.erisc_info_base + 0x100,
        _ => 0x100,
    };
    (base, base + 4 * MAX_SEMAPHORES)
}

/// Bytes of the per-core register block (outstanding NoC write and read counters per NoC, the
/// tx command queues' busy flags).
const REGS_BYTES: u64 = 64 + 2 * 4 * NOC_TRIDS as u64;
/// Offset of NoC `noc`'s outstanding writes counter in the register block. Each RISC-V of a
/// core issues on its own NoC (a reader on one, a writer on the other), and tt-metal keeps
/// these counters per NoC, so one kernel's barrier does not wait for the other's traffic.
pub(crate) fn reg_writes(noc: usize) -> u64 {
    8 * noc as u64
}
/// Offset of NoC `noc`'s outstanding reads counter in the register block.
pub(crate) fn reg_reads(noc: usize) -> u64 {
    8 * noc as u64 + 4
}
/// Offset of the count of flushed writes tagged `trid` on NoC `noc` (each raised when the
/// write's last flit has left the issuer's L1).
pub(crate) fn reg_trid_flushed(noc: usize, trid: usize) -> u64 {
    64 + 4 * (noc * NOC_TRIDS + trid) as u64
}
/// Offset of tx command queue `q`'s busy flag (1 while a command waits to be latched).
pub(crate) fn reg_txq_busy(q: usize) -> u64 {
    32 + 4 * q as u64
}

/// What sits at a NoC grid position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoreKind {
    /// An Ethernet core (ERISC) on a channel.
    Eth(u8),
    /// A Tensix worker core.
    Worker,
    /// A NoC endpoint of a DRAM bank.
    Dram(u8),
}

/// One addressable core of a chip.
#[derive(Clone, Copy, Debug)]
pub struct CoreSlot {
    /// What it is.
    pub kind: CoreKind,
    /// Its memory (L1, or the DRAM bank).
    pub mem: MemSpace,
    /// Its register block (NoC counters); cores that run kernels only.
    pub regs: Option<MemSpace>,
}

/// The hardware of one chip.
pub struct ChipHw {
    /// The two NoCs.
    pub noc: Noc,
    /// `[y * grid_x + x]`: the core at each grid position.
    pub cores: Vec<Option<CoreSlot>>,
    /// Ethernet ports by channel.
    pub eth: Vec<EthPort>,
    /// When each DRAM bank can start its next access.
    pub dram_free: Vec<Time>,
    /// `[bank * 2 + noc]`: when each NoC's endpoint of each bank can start streaming its next
    /// read.
    pub dram_endpoint_free: Vec<Time>,
    /// Time each DRAM bank spent streaming, and the bytes it moved.
    pub dram_busy: Vec<(Time, u64)>,
}

/// A write in flight to a memory.
#[derive(Debug)]
pub(crate) struct Delivery {
    pub(crate) mem: MemSpace,
    pub(crate) addr: u64,
    pub(crate) what: Payload,
    /// A counter to decrement once the write is visible (issuer's register block).
    pub(crate) done: Option<(MemSpace, u64)>,
    /// The receiving Ethernet core `(chip, channel)`, for an Ethernet packet landing.
    pub(crate) eth_to: Option<(u32, u8)>,
}

#[derive(Debug)]
pub(crate) enum Payload {
    Bytes(Vec<u8>),
    /// Up to 16 bytes held inline: sync records, flags, and every write in timing mode.
    Small([u8; 16], u8),
    Add(u32),
    /// An atomic increment by a negative amount (`by` is its magnitude) of a semaphore on
    /// core `at` of `chip`: checked on arrival, since a semaphore below zero is a broken
    /// protocol.
    Dec {
        by: u32,
        chip: ChipIdx,
        at: CoreCoord,
    },
}

impl Payload {
    /// `len` bytes of `mem` at `addr` as a payload.
    pub(crate) fn read(
        mem: &meshsim_engine::Memory,
        space: MemSpace,
        addr: u64,
        len: u64,
    ) -> Result<Payload, MemError> {
        if len <= 16 {
            let mut b = [0u8; 16];
            mem.read(space, addr, &mut b[..len as usize])?;
            Ok(Payload::Small(b, len as u8))
        } else {
            let mut d = vec![0; len as usize];
            mem.read(space, addr, &mut d)?;
            Ok(Payload::Bytes(d))
        }
    }
}

/// The cluster's hardware.
pub struct Hw {
    pub(crate) params: Rc<Params>,
    pub(crate) cluster: Rc<Cluster>,
    pub(crate) soc: SocDescriptor,
    pub(crate) mode: Mode,
    pub(crate) chips: Vec<ChipHw>,
    in_flight: Vec<Option<Delivery>>,
    free_slots: Vec<u32>,
    /// Scratch list of packet landings (kept to avoid an allocation per send).
    landings: Vec<crate::eth::Landing>,
    /// Kernels running and finished on each ERISC core, `[chip * 16 + channel]`.
    pub(crate) erisc_kernels: Vec<KernelCount>,
    /// Ethernet packets that landed on an ERISC core after all its kernels had finished.
    pub(crate) late_landings: Vec<LateLanding>,
    /// Semaphores an atomic decrement took below zero.
    pub(crate) negative_semaphores: Vec<NegativeSemaphore>,
    /// Injected stall windows of each ERISC core, `[chip * 16 + channel]`.
    pub(crate) erisc_stalls: Vec<Vec<(Time, Time)>>,
    /// Landing times per port `[chip * 16 + channel]`: first packet, first and last payload.
    pub(crate) lands: Vec<PortLands>,
    /// Every packet put on the wire, when tracing.
    pub(crate) packet_log: Option<Vec<PacketRec>>,
    /// Every kernel counter change, when tracing.
    pub(crate) counter_log: Option<Vec<crate::trace::CounterRec>>,
    /// Kernel marks.
    pub(crate) marks: Vec<Mark>,
}

/// When packets sent from one port landed.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PortLands {
    pub(crate) first: Option<Time>,
    pub(crate) first_payload: Option<Time>,
    pub(crate) last_payload: Option<Time>,
}

/// Kernels of one ERISC core.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KernelCount {
    pub(crate) running: u32,
    pub(crate) finished: u32,
}

/// An Ethernet packet that reached an ERISC core whose kernels had all finished: an earlier
/// kernel left without waiting for its outstanding acknowledgements, and a later kernel on the
/// core could take the packet for its own (the guide's asynchronous completion problem).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LateLanding {
    /// The chip.
    pub chip: ChipIdx,
    /// The Ethernet channel.
    pub chan: u8,
    /// Where it landed.
    pub addr: u64,
    /// When.
    pub at: Time,
}

/// A semaphore an atomic decrement took below zero: a protocol hazard (a credit or count
/// returned more often than it was taken).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NegativeSemaphore {
    /// The chip.
    pub chip: ChipIdx,
    /// The core holding the semaphore.
    pub core: CoreCoord,
    /// Its address.
    pub addr: u64,
    /// The value it would have had.
    pub value: i64,
    /// When the decrement arrived.
    pub at: Time,
}

/// The events hardware schedules for itself.
#[derive(Debug, Hash)]
pub enum HwEvent {
    /// A tx command queue latches its command.
    TxLatch {
        /// Chip index.
        chip: u32,
        /// Ethernet channel.
        chan: u8,
        /// Queue.
        q: u8,
    },
    /// A write (Ethernet packet landing, NoC packet arriving) becomes visible.
    Deliver {
        /// Slot of the in-flight write.
        slot: u32,
    },
}

impl Hw {
    /// Builds idle hardware for `cluster` and creates its memories in `sched`: every chip's, or
    /// only those of the chips `active` marks (the others have no cores, ports or memories,
    /// and nothing may run on or send to them). Each memory's event-log key is its id in the
    /// build of every chip, so a run logs the same events either way.
    pub(crate) fn new(
        cluster: Rc<Cluster>,
        soc: SocDescriptor,
        params: Params,
        mode: Mode,
        (sched, active): (&mut Scheduler<HwEvent>, Option<&[bool]>),
    ) -> Hw {
        sched.set_poll_latency(params.cycles(params.core_poll_cycles));
        let stall_slots = cluster.chips().len() * ETH_CHANNELS as usize;
        let mut labelled = Labelled::default();
        let chips: Vec<ChipHw> = (0..cluster.chips().len())
            .map(|c| match active.is_none_or(|a| a[c]) {
                true => build_chip(&cluster, &soc, &params, c, (sched, &mut labelled)),
                false => ChipHw::absent(),
            })
            .collect();
        let erisc_kernels = vec![KernelCount::default(); chips.len() * ETH_CHANNELS as usize];
        Hw {
            params: Rc::new(params),
            cluster,
            soc,
            mode,
            chips,
            in_flight: Vec::new(),
            free_slots: Vec::new(),
            landings: Vec::new(),
            lands: vec![PortLands::default(); erisc_kernels.len()],
            erisc_kernels,
            late_landings: Vec::new(),
            negative_semaphores: Vec::new(),
            erisc_stalls: vec![Vec::new(); stall_slots],
            packet_log: None,
            counter_log: None,
            marks: Vec::new(),
        }
    }

    /// Ethernet packets that landed on ERISC cores after all their kernels had finished.
    pub fn late_landings(&self) -> &[LateLanding] {
        &self.late_landings
    }

    /// Semaphores an atomic decrement took below zero (the first 16).
    pub fn negative_semaphores(&self) -> &[NegativeSemaphore] {
        &self.negative_semaphores
    }

    /// The model parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The SoC descriptor every chip follows.
    pub fn soc(&self) -> &SocDescriptor {
        &self.soc
    }

    /// Functional or timing mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The core at NoC position `at` of `chip`.
    pub fn core(&self, chip: ChipIdx, at: CoreCoord) -> Option<CoreSlot> {
        let gx = self.soc.grid_x;
        if at.x >= gx || at.y >= self.soc.grid_y {
            return None;
        }
        self.chips[chip.0 as usize].cores.get((at.y * gx + at.x) as usize).copied().flatten()
    }

    /// The register block of the Ethernet core on `chan` of `chip`.
    pub(crate) fn eth_regs(&self, chip: ChipIdx, chan: u8) -> MemSpace {
        let at = self.soc.eth_cores[chan as usize];
        self.core(chip, at).and_then(|c| c.regs).expect("every channel has an Ethernet core")
    }

    /// The L1 of the Ethernet core on `chan` of `chip`.
    pub fn eth_l1(&self, chip: ChipIdx, chan: u8) -> MemSpace {
        let at = self.soc.eth_cores[chan as usize];
        self.core(chip, at).expect("every channel has an Ethernet core").mem
    }

    /// Use of every Ethernet link direction that sent at least one packet, by chip and channel.
    pub fn link_use(&self) -> Vec<LinkUse> {
        let mut out = Vec::new();
        for (c, chip) in self.chips.iter().enumerate() {
            for (chan, port) in chip.eth.iter().enumerate() {
                if port.packets_sent == 0 {
                    continue;
                }
                let from = Endpoint { chip: ChipIdx(c as u32), chan: chan as u8 };
                let to = self.cluster.connected(from).expect("only connected ports send");
                let l = self.lands[c * ETH_CHANNELS as usize + chan];
                out.push(LinkUse {
                    from,
                    to,
                    bytes: port.bytes_sent,
                    packets: port.packets_sent,
                    busy: port.wire_busy,
                    first_land: l.first,
                    first_payload: l.first_payload,
                    last_payload: l.last_payload,
                });
            }
        }
        out
    }

    /// The busiest NoC link or port and the busiest DRAM bank of the run, over every chip.
    pub fn resource_use(&self) -> ResourceUse {
        let mut out = ResourceUse::default();
        for (c, chip) in self.chips.iter().enumerate() {
            let chip_idx = ChipIdx(c as u32);
            if let Some(n) = chip.noc.busiest()
                && out.noc.is_none_or(|(_, best)| n.busy > best.busy)
            {
                out.noc = Some((chip_idx, n));
            }
            for (bank, &(busy, bytes)) in chip.dram_busy.iter().enumerate() {
                if busy > Time::ZERO && out.dram.is_none_or(|d| busy > d.busy) {
                    out.dram = Some(DramUse { chip: chip_idx, bank: bank as u8, busy, bytes });
                }
            }
        }
        out
    }

    /// Kernel marks so far, in time order.
    pub fn marks(&self) -> &[Mark] {
        &self.marks
    }

    /// Parks a write until its event fires; returns its slot.
    pub(crate) fn park(&mut self, d: Delivery) -> u32 {
        match self.free_slots.pop() {
            Some(s) => {
                self.in_flight[s as usize] = Some(d);
                s
            }
            None => {
                self.in_flight.push(Some(d));
                u32::try_from(self.in_flight.len() - 1).expect("fewer than 2^32 writes in flight")
            }
        }
    }

    /// Puts a transfer in flight to land at `at`, counting it in the issuer's counter if any.
    pub(crate) fn post(&mut self, s: &mut Scheduler<HwEvent>, at: Time, d: Delivery) -> Result<(), MemError> {
        if let Some((regs, counter)) = d.done {
            // A write that carries nothing (timing mode, into or out of DRAM) only counts
            // down its issuer's counter when it lands: a deferred add, an event only if a
            // barrier needs it.
            if d.eth_to.is_none() && matches!(d.what, Payload::Small(_, 0)) {
                return s.add_u32_until(regs, counter, 1, at);
            }
            let pending = s.read_u32(regs, counter)?;
            s.write_u32(regs, counter, pending + 1)?;
        }
        let slot = self.park(d);
        s.schedule(at, HwEvent::Deliver { slot });
        Ok(())
    }

    /// The part of a write of `len` bytes at `offset..offset + n` that this mode carries:
    /// everything when functional, only the overlap with the last 16 bytes when timing.
    /// Writes into DRAM carry nothing in timing mode: nothing polls DRAM.
    pub(crate) fn carried(&self, len: u64, offset: u64, n: u64, dst: CoreKind) -> Option<(u64, u64)> {
        let (lo, hi) = match (self.mode, dst) {
            (Mode::Functional, _) => (offset, offset + n),
            (Mode::Timing, CoreKind::Dram(_)) => return None,
            (Mode::Timing, _) => (offset.max(len.saturating_sub(16)), offset + n),
        };
        (lo < hi).then(|| (lo, hi - lo))
    }

    /// A DRAM bank serves an access of `bytes` that reaches it at `at`: it waits for the bank,
    /// streams at `dram_bank_bytes_per_cycle` and adds the access latency. Reads and writes
    /// share the bank. A read (`read_on` names its NoC) also streams through that NoC's
    /// endpoint of the bank, at `dram_endpoint_bytes_per_cycle` (one core's reads of one bank
    /// on one NoC: `shared/fabric.md` §12). Returns when the data is out of (or into) the bank.
    pub(crate) fn dram_access(
        &mut self,
        chip: ChipIdx,
        bank: u8,
        read_on: Option<usize>,
        bytes: u64,
        at: Time,
    ) -> Time {
        let p = &self.params;
        let c = &mut self.chips[chip.0 as usize];
        let busy = &mut c.dram_busy[bank as usize];
        *busy = (busy.0 + p.cycles(bytes.div_ceil(p.dram_bank_bytes_per_cycle)), busy.1 + bytes);
        let endpoint = read_on.map(|noc| &mut c.dram_endpoint_free[2 * bank as usize + noc]);
        dram_serve(p, (&mut c.dram_free[bank as usize], endpoint), bytes, at)
    }

    fn latch(
        &mut self,
        chip: usize,
        chan: u8,
        q: usize,
        sched: &mut Scheduler<HwEvent>,
    ) -> Result<(), MemError> {
        let now = sched.now();
        let port = &mut self.chips[chip].eth[chan as usize];
        let cmd = port.txq[q].pending.take().expect("a latch event has a pending command");
        let free = port.txq[q].free;
        let regs = self.eth_regs(ChipIdx(chip as u32), chan);
        sched.write_u32(regs, reg_txq_busy(q), 0)?;
        let src_mem = self.eth_l1(ChipIdx(chip as u32), chan);
        let far = self
            .cluster
            .connected(Endpoint { chip: ChipIdx(chip as u32), chan })
            .expect("sends are only accepted on connected channels");
        let dst_mem = self.eth_l1(far.chip, far.chan);
        let mut rx_free = self.chips[far.chip.0 as usize].eth[far.chan as usize].rx_dma_free;
        let mut landings = std::mem::take(&mut self.landings);
        transmit(
            &self.params,
            &mut self.chips[chip].eth[chan as usize],
            &mut rx_free,
            cmd.bytes,
            now,
            &mut landings,
        );
        self.chips[far.chip.0 as usize].eth[far.chan as usize].rx_dma_free = rx_free;
        if let Some(tail) = landings.last() {
            let lands = &mut self.lands[chip * ETH_CHANNELS as usize + chan as usize];
            lands.first.get_or_insert(landings[0].at);
            if cmd.bytes > SYNC_SEND_BYTES {
                lands.first_payload.get_or_insert(tail.at);
                lands.last_payload = Some(tail.at);
            }
        }
        if let Some(log) = self.packet_log.as_mut() {
            log.extend(landings.iter().map(|l| PacketRec {
                chip: ChipIdx(chip as u32),
                chan,
                bytes: l.bytes,
                wire_start: l.wire_start,
                wire_end: l.wire_end,
                land: l.at,
            }));
        }
        for l in landings.drain(..) {
            let Some((off, n)) = self.carried(cmd.bytes, l.offset, l.bytes, CoreKind::Eth(far.chan)) else {
                continue;
            };
            let what = Payload::read(sched.memory(), src_mem, cmd.src + off, n)?;
            let eth_to = Some((far.chip.0, far.chan));
            let slot = self.park(Delivery { mem: dst_mem, addr: cmd.dst + off, what, done: None, eth_to });
            sched.schedule(l.at, HwEvent::Deliver { slot });
        }
        self.landings = landings;
        sched.notify(free);
        Ok(())
    }

    fn deliver(&mut self, slot: u32, sched: &mut Scheduler<HwEvent>) -> Result<(), MemError> {
        let d = self.in_flight[slot as usize].take().expect("a delivery event has its write");
        self.free_slots.push(slot);
        if let Some((chip, chan)) = d.eth_to {
            let k = &self.erisc_kernels[chip as usize * ETH_CHANNELS as usize + chan as usize];
            if k.finished > 0 && k.running == 0 && self.late_landings.len() < 16 {
                self.late_landings.push(LateLanding {
                    chip: ChipIdx(chip),
                    chan,
                    addr: d.addr,
                    at: sched.now(),
                });
            }
        }
        match d.what {
            Payload::Bytes(data) => sched.write_bytes(d.mem, d.addr, &data)?,
            Payload::Small(b, n) => sched.write_bytes(d.mem, d.addr, &b[..n as usize])?,
            Payload::Add(inc) => {
                sched.add_u32(d.mem, d.addr, inc)?;
            }
            Payload::Dec { by, chip, at } => {
                let old = sched.read_u32(d.mem, d.addr)?;
                if old < by && self.negative_semaphores.len() < 16 {
                    self.negative_semaphores.push(NegativeSemaphore {
                        chip,
                        core: at,
                        addr: d.addr,
                        value: i64::from(old) - i64::from(by),
                        at: sched.now(),
                    });
                }
                sched.add_u32(d.mem, d.addr, by.wrapping_neg())?;
            }
        }
        if let Some((regs, counter)) = d.done {
            let left = sched.read_u32(regs, counter)?;
            assert!(left > 0, "an outstanding-transfer counter went negative");
            sched.write_u32(regs, counter, left - 1)?;
        }
        Ok(())
    }
}

impl World for Hw {
    type Event = HwEvent;

    fn handle(&mut self, event: HwEvent, sched: &mut Scheduler<HwEvent>) {
        // Addresses were checked when the transfer was issued, so a memory error here can only
        // be a bug in the model.
        let r = match event {
            HwEvent::TxLatch { chip, chan, q } => self.latch(chip as usize, chan, q as usize, sched),
            HwEvent::Deliver { slot } => self.deliver(slot, sched),
        };
        r.expect("transfers are validated when issued");
    }
}

/// The first Ethernet and worker core named ([`label_core`]): every other core of the kind is
/// laid out alike and shares their names (a 8,192-chip machine would otherwise hold a copy per
/// core).
/// Chip `c`'s idle hardware, its memories created in `sched`, keyed by their ids in the build
/// of every chip (chip `c`'s come after those of the chips before it).
fn build_chip(
    cluster: &Cluster,
    soc: &SocDescriptor,
    params: &Params,
    c: usize,
    (sched, labelled): (&mut Scheduler<HwEvent>, &mut Labelled),
) -> ChipHw {
    let (gx, gy) = (soc.grid_x, soc.grid_y);
    let id = cluster.chips()[c].id;
    let per_chip = 2 * (soc.eth_cores.len() + soc.workers.len()) + soc.dram.len();
    let mut key = u32::try_from(c * per_chip).expect("too many memory spaces");
    let mut space = |sched: &mut Scheduler<HwEvent>, name: String, size: u64| {
        key += 1;
        sched.add_space_keyed(name, size, key - 1)
    };
    let mut cores = vec![None; (gx * gy) as usize];
    let mut put = |at: CoreCoord, slot: CoreSlot| cores[(at.y * gx + at.x) as usize] = Some(slot);
    for (chan, &at) in soc.eth_cores.iter().enumerate() {
        let mem = space(sched, format!("chip{id}/eth{chan}/l1"), params.erisc_l1_bytes);
        let regs = space(sched, format!("chip{id}/eth{chan}/regs"), REGS_BYTES);
        let kind = CoreKind::Eth(chan as u8);
        labelled.name(sched, (params, kind), mem, regs);
        put(at, CoreSlot { kind, mem, regs: Some(regs) });
    }
    for &at in &soc.workers {
        let mem = space(sched, format!("chip{id}/worker{at}/l1"), params.worker_l1_bytes);
        let regs = space(sched, format!("chip{id}/worker{at}/regs"), REGS_BYTES);
        labelled.name(sched, (params, CoreKind::Worker), mem, regs);
        put(at, CoreSlot { kind: CoreKind::Worker, mem, regs: Some(regs) });
    }
    for (bank, ends) in soc.dram.iter().enumerate() {
        let mem = space(sched, format!("chip{id}/dram{bank}"), params.dram_bank_bytes);
        for &at in ends {
            put(at, CoreSlot { kind: CoreKind::Dram(bank as u8), mem, regs: None });
        }
    }
    let eth = (0..ETH_CHANNELS)
        .map(|chan| {
            let free = [0, 1].map(|q| sched.new_signal(format!("chip{id}/eth{chan}/txq{q} free")));
            EthPort::new(free)
        })
        .collect();
    ChipHw {
        noc: Noc::new(gx, gy),
        cores,
        eth,
        dram_free: vec![Time::ZERO; soc.dram.len()],
        dram_endpoint_free: vec![Time::ZERO; 2 * soc.dram.len()],
        dram_busy: vec![(Time::ZERO, 0); soc.dram.len()],
    }
}

impl ChipHw {
    /// A chip the run does not use: no cores, ports, NoC state or memories.
    fn absent() -> ChipHw {
        ChipHw {
            noc: Noc::new(0, 0),
            cores: Vec::new(),
            eth: Vec::new(),
            dram_free: Vec::new(),
            dram_endpoint_free: Vec::new(),
            dram_busy: Vec::new(),
        }
    }
}

#[derive(Default)]
struct Labelled {
    eth: Option<(MemSpace, MemSpace)>,
    worker: Option<(MemSpace, MemSpace)>,
}

impl Labelled {
    /// Names the words of the core whose spaces are `mem` and `regs`, or shares the names of
    /// the first core of its kind.
    fn name(
        &mut self,
        sched: &mut Scheduler<HwEvent>,
        (p, kind): (&Params, CoreKind),
        mem: MemSpace,
        regs: MemSpace,
    ) {
        let first = if matches!(kind, CoreKind::Eth(_)) { &mut self.eth } else { &mut self.worker };
        match *first {
            Some((m, r)) => {
                sched.share_labels(m, mem);
                sched.share_labels(r, regs);
            }
            None => {
                label_core(sched, p, kind, mem, regs);
                *first = Some((mem, regs));
            }
        }
    }
}

/// Names the words of a core that kernels wait on, for traces and deadlock reports: its NoC
/// counters, its semaphores and (ERISC) its `erisc_info` channel records.
fn label_core(sched: &mut Scheduler<HwEvent>, p: &Params, kind: CoreKind, mem: MemSpace, regs: MemSpace) {
    const SEMAPHORES: [&str; MAX_SEMAPHORES as usize] = [
        "semaphore 0",
        "semaphore 1",
        "semaphore 2",
        "semaphore 3",
        "semaphore 4",
        "semaphore 5",
        "semaphore 6",
        "semaphore 7",
        "semaphore 8",
        "semaphore 9",
        "semaphore 10",
        "semaphore 11",
        "semaphore 12",
        "semaphore 13",
        "semaphore 14",
        "semaphore 15",
    ];
    const CHANNELS: [&str; ERISC_INFO_CHANNELS as usize] = [
        "erisc_info channel 0",
        "erisc_info channel 1",
        "erisc_info channel 2",
        "erisc_info channel 3",
        "erisc_info channel 4",
        "erisc_info channel 5",
        "erisc_info channel 6",
        "erisc_info channel 7",
    ];
    const WRITES: [&str; 2] = ["NoC0 writes outstanding", "NoC1 writes outstanding"];
    const READS: [&str; 2] = ["NoC0 reads outstanding", "NoC1 reads outstanding"];
    const TXQ_BUSY: [&str; 2] = ["tx queue 0 busy", "tx queue 1 busy"];
    for noc in 0..2 {
        sched.label_word(regs, reg_writes(noc), WRITES[noc]);
        sched.label_word(regs, reg_reads(noc), READS[noc]);
    }
    if let CoreKind::Eth(_) = kind {
        for (q, label) in TXQ_BUSY.iter().enumerate() {
            sched.label_word(regs, reg_txq_busy(q), *label);
        }
    }
    let (base, _) = semaphore_area(p, kind);
    for (i, label) in SEMAPHORES.iter().enumerate() {
        sched.label_word(mem, base + 4 * i as u64, *label);
    }
    if let CoreKind::Eth(_) = kind {
        for (ch, label) in CHANNELS.iter().enumerate() {
            sched.label_word(mem, p.erisc_info_base + ch as u64 * CHANNEL_SYNC_BYTES, *label);
        }
    }
}

/// Time of the latch of a command submitted at `now` on a port whose tx DMA started on its
/// newest command at `dma_start`: `eth_txq_latch_cycles` later, but not before the DMA has
/// taken the previous command (one command waits behind the one being moved).
pub(crate) fn latch_time(p: &Params, now: Time, dma_start: Time) -> Time {
    (now + p.cycles(p.eth_txq_latch_cycles)).max(dma_start)
}

/// A DRAM bank's service of an access of `bytes` that reaches it at `at`, given when the bank
/// is next free (`bank`) and, for a read, when the NoC endpoint it streams through is
/// (`endpoint`): it waits for the bank, streams at `dram_bank_bytes_per_cycle`, a read also
/// through the endpoint at `dram_endpoint_bytes_per_cycle`, and adds the access latency. Moves
/// both on; returns when the data is out of (or into) the bank. The packet model's banks
/// ([`Hw`]) and the flow model's step of workers in step share it.
pub fn dram_serve(
    p: &Params,
    (bank, endpoint): (&mut Time, Option<&mut Time>),
    bytes: u64,
    at: Time,
) -> Time {
    *bank = at.max(*bank) + p.cycles(bytes.div_ceil(p.dram_bank_bytes_per_cycle));
    let mut out = *bank;
    if let Some(ep) = endpoint {
        *ep = at.max(*ep) + p.cycles(bytes.div_ceil(p.dram_endpoint_bytes_per_cycle));
        out = out.max(*ep);
    }
    out + p.cycles(p.dram_latency_cycles)
}
