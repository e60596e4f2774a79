//! The device API: what a kernel running on a core can do, named as in tt-metal so the CCL
//! guide's kernels transcribe line by line.
//!
//! Every call that takes simulated time is `async`. Polling loops of the C++ kernels become a
//! single wait (`while (!eth_bytes_are_available_on_channel(i)) {}` is
//! `k.eth_wait_for_bytes_on_channel(i).await`): the kernel is woken by the write that ends the
//! loop, plus `core_poll_cycles`, and costs no events while it waits. Non-blocking checks
//! (`eth_txq_is_busy`, `eth_bytes_are_available_on_channel`, ...) are plain functions.
//!
//! Addresses are checked: an ERISC kernel may touch its kernel L1 window, `erisc_info` and its
//! semaphores, nothing else; an access outside is an [`HwError`], not silent corruption.

use std::rc::Rc;

use meshsim_engine::{Cond, Ctx, MemError, MemSpace, Time};
use meshsim_topology::soc::CoreCoord;
use meshsim_topology::{ChipIdx, Endpoint};

use crate::eth::{EthCmd, TXQ_COUNT};
pub use crate::world::{CHANNEL_SYNC_BYTES, ERISC_INFO_CHANNELS, MAX_SEMAPHORES, NOC_TRIDS};
use crate::world::{
    CoreKind, Delivery, Hw, HwEvent, Mode, Payload, latch_time, reg_reads, reg_trid_flushed, reg_txq_busy,
    reg_writes, semaphore_area,
};

/// A hardware-model error raised by a kernel's call.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum HwError {
    /// An access outside the memory a kernel may use.
    #[error("{core}: access of {len} bytes at {addr:#x} is outside the kernel L1 window [{lo:#x}, {hi:#x})")]
    OutsideWindow {
        /// The core (`chip0/eth8`).
        core: String,
        /// First byte.
        addr: u64,
        /// Bytes.
        len: u64,
        /// Window start.
        lo: u64,
        /// Window end.
        hi: u64,
    },
    /// An Ethernet call on a channel with no link.
    #[error("{core}: Ethernet channel {chan} has no link")]
    NoLink {
        /// The core.
        core: String,
        /// Its channel.
        chan: u8,
    },
    /// An Ethernet call from a Tensix core.
    #[error("{core}: Ethernet calls need an Ethernet core")]
    NotEthernet {
        /// The core.
        core: String,
    },
    /// A NoC address whose x-y is not a core.
    #[error("{core}: NoC address {x}-{y} is not a core")]
    NoCore {
        /// The issuing core.
        core: String,
        /// Target x.
        x: u32,
        /// Target y.
        y: u32,
    },
    /// A size or address that breaks an alignment rule.
    #[error("{core}: {what}")]
    Alignment {
        /// The core.
        core: String,
        /// The rule broken.
        what: String,
    },
    /// A memory access error.
    #[error("{0}")]
    Memory(#[from] MemError),
}

/// A kernel's view of its core: runtime arguments, memory, NoC and (on ERISC) Ethernet.
#[derive(Clone)]
pub struct Kernel {
    pub(crate) ctx: Ctx<Hw>,
    pub(crate) chip: ChipIdx,
    pub(crate) at: CoreCoord,
    pub(crate) kind: CoreKind,
    pub(crate) mem: MemSpace,
    pub(crate) regs: MemSpace,
    pub(crate) noc: usize,
    pub(crate) args: Rc<[u32]>,
    pub(crate) name: Rc<str>,
    /// Where this kernel may touch its own L1, computed once at launch from the parameters
    /// (`check_access` is the rule); local reads and writes check against it without a lookup.
    pub(crate) local: LocalWindow,
    /// When this kernel's NoC writes have left its L1 ("flushed"): per transaction id, and the
    /// last entry for every write it issued.
    pub(crate) flushed: Rc<[std::cell::Cell<Time>; NOC_TRIDS + 1]>,
    /// Writes issued per transaction id (the flushed-count register catches up with it).
    pub(crate) tagged: Rc<[std::cell::Cell<u32>; NOC_TRIDS]>,
    /// When each transaction id's writes have left this kernel's L1 (sent, not acknowledged).
    pub(crate) sent: Rc<[std::cell::Cell<Time>; NOC_TRIDS]>,
    /// Whether the run records a trace (kernel counters cost nothing otherwise).
    pub(crate) traced: bool,
    /// When the responses of every NoC atomic this kernel issued are back
    /// (`noc_async_atomic_barrier`).
    pub(crate) atomics_acked: Rc<std::cell::Cell<Time>>,
    /// Cycles each NoC command costs this kernel, when it differs from `noc_issue_cycles`
    /// ([`Kernel::set_noc_issue_cycles`]).
    pub(crate) issue_cycles: Rc<std::cell::Cell<Option<u64>>>,
    /// `[from, to)` windows in which this kernel's core is stalled (an injected ERISC stall;
    /// empty on almost every core).
    pub(crate) stalls: Rc<[(Time, Time)]>,
}

/// One of the things a service loop can wait for at once ([`Kernel::wait_for_any`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// A word of this core's L1 satisfies a condition.
    Word(u64, Cond),
    /// Tx command queue `q` (ERISC) holds no command.
    TxqFree(usize),
    /// Every write this kernel tagged with the transaction id has flushed.
    Flushed(usize),
}

/// The ranges of its own L1 a kernel may touch: the window, and on an ERISC also `erisc_info`
/// and the semaphore area.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LocalWindow {
    lo: u64,
    hi: u64,
    extra: [(u64, u64); 2],
}

impl LocalWindow {
    /// The window of a core of `kind` under `p` (the same rule as [`check_access`]).
    pub(crate) fn of(p: &crate::Params, kind: CoreKind) -> LocalWindow {
        match kind {
            CoreKind::Eth(_) => {
                let info =
                    (p.erisc_info_base, p.erisc_info_base + ERISC_INFO_CHANNELS as u64 * CHANNEL_SYNC_BYTES);
                let (lo, hi) = p.erisc_window();
                LocalWindow { lo, hi, extra: [info, semaphore_area(p, kind)] }
            }
            CoreKind::Worker => LocalWindow { lo: 0, hi: p.worker_l1_bytes, extra: [(0, 0); 2] },
            CoreKind::Dram(_) => LocalWindow { lo: 0, hi: p.dram_bank_bytes, extra: [(0, 0); 2] },
        }
    }

    fn allows(&self, addr: u64, len: u64) -> bool {
        let Some(end) = addr.checked_add(len) else { return false };
        (addr >= self.lo && end <= self.hi) || self.extra.iter().any(|&(a, b)| addr >= a && end <= b)
    }
}

/// Packs a NoC address as tt-metal does: `(y << 6 | x) << 36 | addr`.
pub fn get_noc_addr(x: u32, y: u32, addr: u64) -> u64 {
    ((((y as u64) << 6) | x as u64) << 36) | (addr & ((1 << 36) - 1))
}

fn split_noc_addr(a: u64) -> (CoreCoord, u64) {
    let xy = a >> 36;
    (CoreCoord { x: (xy & 0x3f) as u32, y: (xy >> 6) as u32 }, a & ((1 << 36) - 1))
}

impl Kernel {
    /// Runtime argument `i`.
    pub fn arg(&self, i: usize) -> u32 {
        self.args[i]
    }

    /// The current simulated time.
    pub fn now(&self) -> Time {
        self.ctx.now()
    }

    /// This kernel's chip.
    pub fn chip(&self) -> ChipIdx {
        self.chip
    }

    /// This core's NoC0 coordinates.
    pub fn my_core(&self) -> CoreCoord {
        self.at
    }

    /// Names a word of this core's L1 (say, "EDM channel 0 semaphore") for traces and deadlock
    /// reports. Costs no simulated time.
    pub fn label_word(&self, addr: u64, label: impl Into<std::borrow::Cow<'static, str>>) {
        let mem = self.mem;
        self.ctx.with(|_, s| s.label_word(mem, addr, label));
    }

    /// Marks a point of this kernel's timeline (say, "handshake done"): it shows in traces as
    /// an instant event and the op reports use it to split the critical path into stages.
    pub fn mark(&self, label: &'static str) {
        let (chip, core) = (self.chip, self.at);
        let eth_chan = match self.kind {
            CoreKind::Eth(c) => Some(c),
            _ => None,
        };
        self.ctx.with(|hw, s| {
            let (at, task) = (s.now(), s.current_task());
            hw.marks.push(crate::trace::Mark { at, chip, core, eth_chan, task, label });
        });
    }

    /// Whether the run records a trace (so a kernel can skip work only a trace would show).
    pub fn is_traced(&self) -> bool {
        self.traced
    }

    /// Reports a value this kernel keeps (say, a router channel's occupied slots): a counter
    /// track in traces. Costs nothing when the run is not traced.
    pub fn counter(&self, name: &'static str, value: u64) {
        if !self.traced {
            return;
        }
        let chip = self.chip;
        self.ctx.with(|hw, s| {
            if let Some(log) = hw.counter_log.as_mut() {
                let core = match self.kind {
                    CoreKind::Eth(c) => format!("eth{c}"),
                    _ => format!("worker({},{})", self.at.x, self.at.y),
                };
                log.push(crate::trace::CounterRec { at: s.now(), chip, core, name, value });
            }
        });
    }

    /// Waits until host event `event` has been raised at least once (returns at once if it has).
    /// Models the host or a dispatcher starting this kernel only after an earlier op ended: it
    /// costs no simulated time beyond the wait.
    pub async fn wait_event(&self, event: meshsim_engine::SignalId) {
        if self.ctx.sched().signal_count(event) == 0 {
            self.ctx.wait_signal(event).await;
            self.unstall().await;
        }
    }

    /// Raises host event `event`: every kernel waiting on it resumes now.
    pub fn raise_event(&self, event: meshsim_engine::SignalId) {
        self.ctx.with(|_, s| s.notify(event));
    }

    /// The kernel's name, `chip<id>/<core>/<kernel>`.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn core_name(&self) -> String {
        self.name.rsplit_once('/').map_or(self.name.to_string(), |(core, _)| core.to_owned())
    }

    /// `get_noc_addr(x, y, addr)`: a NoC address on this chip.
    pub fn get_noc_addr(&self, x: u32, y: u32, addr: u64) -> u64 {
        get_noc_addr(x, y, addr)
    }

    /// Holds this kernel while its core is stalled: whatever it waited for, it goes on only
    /// once the stall is over (the core's RISC-V runs nothing in the window; its Ethernet and
    /// NoC hardware go on moving what was queued).
    async fn unstall(&self) {
        if self.stalls.is_empty() {
            return;
        }
        let now = self.now();
        if let Some(&(_, to)) = self.stalls.iter().find(|&&(from, to)| from <= now && now < to) {
            self.ctx.delay(to - now).await;
        }
    }

    /// Spends `n` core cycles.
    pub async fn delay_cycles(&self, n: u64) {
        let t = self.ctx.with(|hw, _| hw.params.cycles(n));
        self.ctx.delay(t).await;
        self.unstall().await;
    }

    /// Checks that this kernel may touch `[addr, addr + len)` of its own L1 (inlined: the
    /// window test is the common case on every kernel word access).
    #[inline]
    fn check_local(&self, addr: u64, len: u64) -> Result<(), HwError> {
        if self.local.allows(addr, len) {
            return Ok(());
        }
        self.ctx.with(|hw, _| check_access(hw, self.kind, || self.core_name(), addr, len))
    }

    /// Writes a word of this core's L1.
    pub fn write_u32(&self, addr: u64, value: u32) -> Result<(), HwError> {
        self.check_local(addr, 4)?;
        Ok(self.ctx.sched().write_u32(self.mem, addr, value)?)
    }

    /// Adds `inc` (wrapping) to a word of this core's L1 and returns the new value: a local
    /// counter update (a circular buffer's push or pop, taking a credit) in one step.
    pub fn add_u32(&self, addr: u64, inc: u32) -> Result<u32, HwError> {
        self.check_local(addr, 4)?;
        Ok(self.ctx.sched().add_u32(self.mem, addr, inc)?)
    }

    /// Reads a word of this core's L1.
    pub fn read_u32(&self, addr: u64) -> Result<u32, HwError> {
        self.check_local(addr, 4)?;
        Ok(self.ctx.with(|_, s| s.read_u32(self.mem, addr))?)
    }

    /// Writes bytes into this core's L1.
    pub fn write_bytes(&self, addr: u64, data: &[u8]) -> Result<(), HwError> {
        self.check_local(addr, data.len() as u64)?;
        Ok(self.ctx.sched().write_bytes(self.mem, addr, data)?)
    }

    /// Reads bytes of this core's L1.
    pub fn read_bytes(&self, addr: u64, len: u64) -> Result<Vec<u8>, HwError> {
        self.check_local(addr, len)?;
        let mut buf = vec![0; len as usize];
        self.ctx.sched().memory().read(self.mem, addr, &mut buf)?;
        Ok(buf)
    }

    // ---- NoC ----------------------------------------------------------------------------

    fn target(&self, noc_addr: u64, len: u64) -> Result<(CoreCoord, MemSpace, u64, CoreKind), HwError> {
        let (at, addr) = split_noc_addr(noc_addr);
        self.ctx.with(|hw, s| {
            let slot = hw.core(self.chip, at).ok_or_else(|| HwError::NoCore {
                core: self.core_name(),
                x: at.x,
                y: at.y,
            })?;
            s.memory().check_range(slot.mem, addr, len)?;
            Ok((at, slot.mem, addr, slot.kind))
        })
    }

    /// `noc_async_write(src, dst_noc_addr, size)`: writes `size` bytes of this core's L1 to a
    /// core of this chip, in packets of at most `noc_max_packet_bytes`; returns once issued.
    pub async fn noc_async_write(&self, src: u64, dst_noc_addr: u64, size: u64) -> Result<(), HwError> {
        self.write_tagged(src, dst_noc_addr, size, None).await
    }

    /// `noc_async_write_one_packet_with_trid(src, dst_noc_addr, size, trid)`: a write tagged
    /// with transaction id `trid` (below [`NOC_TRIDS`]), so the issuer can later ask whether the
    /// writes of that id have been acknowledged without waiting for any others.
    pub async fn noc_async_write_with_trid(
        &self,
        src: u64,
        dst_noc_addr: u64,
        size: u64,
        trid: usize,
    ) -> Result<(), HwError> {
        assert!(trid < NOC_TRIDS, "transaction id {trid} does not exist");
        self.write_tagged(src, dst_noc_addr, size, Some(trid)).await
    }

    /// `ncrisc_noc_nonposted_write_with_transaction_id_flushed(trid)`: whether every write
    /// tagged `trid` has been acknowledged by its target (landed, and the acknowledgement back
    /// the way an atomic's response comes) — the NIU's outstanding-request count of the id, not
    /// its outgoing count (`..._sent`).
    pub fn noc_write_trid_flushed(&self, trid: usize) -> bool {
        self.flushed[trid].get() <= self.now()
    }

    /// `ncrisc_noc_nonposted_write_with_transaction_id_sent(trid)`: whether every write tagged
    /// `trid` has left this core's L1 (the NIU's outgoing count of the id): its source buffer
    /// may be reused, though the data may not have landed.
    pub fn noc_write_trid_sent(&self, trid: usize) -> bool {
        self.sent[trid].get() <= self.now()
    }

    /// Waits until every write tagged `trid` has left this core's L1 (see
    /// [`Kernel::noc_write_trid_sent`]).
    pub async fn noc_async_write_sent_with_trid(&self, trid: usize) {
        let at = self.sent[trid].get();
        self.ctx.delay(at.saturating_sub(self.now())).await;
        self.unstall().await;
    }

    /// `noc_async_write_flushed_with_trid(trid)`: waits until every write tagged `trid` has
    /// been acknowledged.
    pub async fn noc_async_write_flushed_with_trid(&self, trid: usize) {
        let at = self.flushed[trid].get();
        self.ctx.delay(at.saturating_sub(self.now())).await;
        self.unstall().await;
    }

    /// `noc_async_writes_flushed()`: waits until every write this kernel issued has left its
    /// L1 (not until it has landed: that is the write barrier).
    pub async fn noc_async_writes_flushed(&self) {
        let at = self.flushed[NOC_TRIDS].get();
        self.ctx.delay(at.saturating_sub(self.now())).await;
        self.unstall().await;
    }

    async fn write_tagged(
        &self,
        src: u64,
        dst_noc_addr: u64,
        size: u64,
        trid: Option<usize>,
    ) -> Result<(), HwError> {
        self.check_local(src, size)?;
        let (dst_at, dst_mem, dst, dst_kind) = self.target(dst_noc_addr, size)?;
        // The one-packet write with a transaction id is the dataflow API's leanest command.
        match trid {
            Some(_) => self.issue_as(|p| p.noc_trid_write_cycles).await,
            None => self.issue().await,
        }
        let (left, acked) = self.ctx.with(|hw, s| -> Result<(Time, Time), HwError> {
            let p = Rc::clone(&hw.params);
            // Only a tagged write's acknowledgement is waited for.
            let back =
                trid.map(|_| hw.chips[self.chip.0 as usize].noc.response(&p, self.noc, dst_at, self.at));
            let mut off = 0;
            let (mut left, mut acked) = (Time::ZERO, Time::ZERO);
            while off < size.max(1) {
                let n = (size - off).min(p.noc_max_packet_bytes);
                let sent =
                    hw.chips[self.chip.0 as usize].noc.send_packet(&p, self.noc, self.at, dst_at, n, s.now());
                left = sent.flushed;
                let mut arrive = sent.arrive;
                if let CoreKind::Dram(bank) = dst_kind {
                    arrive = hw.dram_access(self.chip, bank, None, n, arrive);
                }
                if let Some(back) = back {
                    acked = acked.max(arrive + back);
                }
                let (o, len) = hw.carried(size, off, n, dst_kind).unwrap_or((off, 0));
                let what = Payload::read(s.memory(), self.mem, src + o, len)?;
                hw.post(
                    s,
                    arrive,
                    Delivery {
                        mem: dst_mem,
                        addr: dst + o,
                        what,
                        done: Some((self.regs, reg_writes(self.noc))),
                        eth_to: None,
                    },
                )?;
                off += n.max(1);
            }
            Ok((left, acked))
        })?;
        let later = |c: &std::cell::Cell<Time>, t: Time| c.set(c.get().max(t));
        later(&self.flushed[NOC_TRIDS], left);
        if let Some(t) = trid {
            later(&self.flushed[t], acked);
            later(&self.sent[t], left);
            self.tagged[t].set(self.tagged[t].get().wrapping_add(1));
            let (regs, addr) = (self.regs, reg_trid_flushed(self.noc, t));
            // Counted when the acknowledgement is back, as a deferred add: only a wait for
            // every write of the id to flush looks at the count, so an acknowledgement before
            // the last costs no event.
            self.ctx.with(|_, s| s.add_u32_at(regs, addr, acked, 1))?;
        }
        Ok(())
    }

    /// `noc_async_read(src_noc_addr, dst, size)`: reads `size` bytes from a core or DRAM bank
    /// of this chip into this core's L1 (a request packet there, the data back); returns once
    /// issued. The data is as of the request's arrival.
    pub async fn noc_async_read(&self, src_noc_addr: u64, dst: u64, size: u64) -> Result<(), HwError> {
        self.check_local(dst, size)?;
        let (src_at, src_mem, src, kind) = self.target(src_noc_addr, size)?;
        self.issue_as(|p| p.noc_read_issue_cycles).await;
        self.ctx.with(|hw, s| -> Result<(), HwError> {
            let p = Rc::clone(&hw.params);
            let mut off = 0;
            while off < size.max(1) {
                let n = (size - off).min(p.noc_max_packet_bytes);
                let mut ready =
                    hw.chips[self.chip.0 as usize].noc.send(&p, self.noc, self.at, src_at, 0, s.now());
                if let CoreKind::Dram(bank) = kind {
                    // The endpoint puts the data on the NoC as it streams out of the bank: the
                    // response's last flit leaves when the stream ends, its first no earlier
                    // than the access latency after the request arrived.
                    let first = ready + p.cycles(p.dram_latency_cycles);
                    let done = hw.dram_access(self.chip, bank, Some(self.noc), n, ready);
                    let flits = p.cycles(crate::noc::packet_flits(&p, n));
                    ready = first.max(done.saturating_sub(flits));
                }
                let arrive =
                    hw.chips[self.chip.0 as usize].noc.send_later(&p, self.noc, src_at, self.at, n, ready);
                // In timing mode DRAM holds nothing (writes into it carry nothing), so reads
                // from it carry nothing either.
                let carried = match (hw.mode, kind) {
                    (Mode::Timing, CoreKind::Dram(_)) => None,
                    _ => hw.carried(size, off, n, self.kind),
                };
                let (o, len) = carried.unwrap_or((off, 0));
                let what = Payload::read(s.memory(), src_mem, src + o, len)?;
                hw.post(
                    s,
                    arrive,
                    Delivery {
                        mem: self.mem,
                        addr: dst + o,
                        what,
                        done: Some((self.regs, reg_reads(self.noc))),
                        eth_to: None,
                    },
                )?;
                off += n.max(1);
            }
            Ok(())
        })
    }

    /// Charges the core for one NoC command: `noc_issue_cycles`, or what the kernel's firmware
    /// set for its every command ([`Kernel::set_noc_issue_cycles`]).
    async fn issue(&self) {
        self.issue_as(|p| p.noc_issue_cycles).await;
    }

    /// Charges the core for one NoC command whose own cost is `cost` of the parameters, unless
    /// the kernel's firmware set one for its every command (the fabric router's).
    async fn issue_as(&self, cost: fn(&crate::Params) -> u64) {
        let c = match self.issue_cycles.get() {
            Some(c) => c,
            None => self.ctx.with(|hw, _| cost(&hw.params)),
        };
        self.delay_cycles(c).await;
    }

    /// Makes every NoC command this kernel issues cost `cycles` of its core (a firmware whose
    /// command path does more than the dataflow API's, such as the fabric router's).
    pub fn set_noc_issue_cycles(&self, cycles: u64) {
        self.issue_cycles.set(Some(cycles));
    }

    /// Makes this kernel notice a word it waits on `cycles` after the word changes, in place of
    /// `core_poll_cycles` (a firmware loop whose passes say when it looks).
    pub fn set_poll_cycles(&self, cycles: u64) {
        let t = self.cycles(cycles);
        self.ctx.sched().set_task_poll_latency(t);
    }

    /// `noc_async_write_barrier()`: waits until every write this kernel's NoC issued from this
    /// core has landed.
    pub async fn noc_async_write_barrier(&self) -> Result<(), HwError> {
        self.ctx.wait_word(self.regs, reg_writes(self.noc), Cond::Eq(0)).await?;
        self.unstall().await;
        Ok(())
    }

    /// `noc_async_read_barrier()`: waits until every read this kernel's NoC issued from this
    /// core has landed.
    pub async fn noc_async_read_barrier(&self) -> Result<(), HwError> {
        self.ctx.wait_word(self.regs, reg_reads(self.noc), Cond::Eq(0)).await?;
        self.unstall().await;
        Ok(())
    }

    /// `noc_semaphore_inc(noc_addr, inc)`: an atomic increment of a word on a core of this
    /// chip, on the same NoC as this kernel's writes (so it lands after them). The atomic is
    /// non-posted: its target answers with a one-flit response, back the same way round the
    /// NoC ([`Kernel::noc_async_atomic_barrier`] waits for it; the response's flit is not
    /// booked on the links).
    pub async fn noc_semaphore_inc(&self, noc_addr: u64, inc: u32) -> Result<(), HwError> {
        let (at, mem, addr, _) = self.target(noc_addr, 4)?;
        self.issue().await;
        let answered = self.ctx.with(|hw, s| -> Result<Time, HwError> {
            let p = Rc::clone(&hw.params);
            let noc = &mut hw.chips[self.chip.0 as usize].noc;
            let arrive = noc.send(&p, self.noc, self.at, at, 4, s.now());
            let back = noc.response(&p, self.noc, at, self.at);
            // A negative increment is a decrement, checked on arrival.
            let what = if (inc as i32) < 0 {
                Payload::Dec { by: inc.wrapping_neg(), chip: self.chip, at }
            } else {
                Payload::Add(inc)
            };
            hw.post(s, arrive, Delivery { mem, addr, what, done: None, eth_to: None })?;
            Ok(arrive + back)
        })?;
        self.atomics_acked.set(self.atomics_acked.get().max(answered));
        Ok(())
    }

    /// `noc_async_atomic_barrier()`: waits until every NoC atomic this kernel issued has been
    /// answered by its target.
    pub async fn noc_async_atomic_barrier(&self) {
        let at = self.atomics_acked.get();
        self.ctx.delay(at.saturating_sub(self.now())).await;
        self.unstall().await;
    }

    /// `noc_semaphore_set(addr, value)` on this core.
    pub fn noc_semaphore_set(&self, addr: u64, value: u32) -> Result<(), HwError> {
        self.write_u32(addr, value)
    }

    /// `noc_semaphore_wait(addr, value)`: waits until the local semaphore equals `value`.
    pub async fn noc_semaphore_wait(&self, addr: u64, value: u32) -> Result<(), HwError> {
        self.check_local(addr, 4)?;
        self.ctx.wait_word(self.mem, addr, Cond::Eq(value)).await?;
        self.unstall().await;
        Ok(())
    }

    /// `noc_semaphore_wait_min(addr, value)`: waits until the local semaphore is at least `value`.
    pub async fn noc_semaphore_wait_min(&self, addr: u64, value: u32) -> Result<(), HwError> {
        self.check_local(addr, 4)?;
        self.ctx.wait_word(self.mem, addr, Cond::Ge(value)).await?;
        self.unstall().await;
        Ok(())
    }

    /// NoC0 coordinates of Tensix worker `index` (row-major over the logical worker grid).
    pub fn worker_noc_coord(&self, index: usize) -> CoreCoord {
        self.ctx.with(|hw, _| hw.soc.workers[index])
    }

    /// The coordinates of DRAM bank `bank`'s endpoint this kernel's NoC goes through.
    pub fn dram_endpoint(&self, bank: usize) -> CoreCoord {
        self.ctx.with(|hw, _| hw.soc.dram_endpoint(bank, self.noc))
    }

    /// The model parameters.
    pub fn params(&self) -> Rc<crate::Params> {
        self.ctx.with(|hw, _| Rc::clone(&hw.params))
    }

    /// Spends `t` of simulated time (computation, for example).
    pub async fn delay(&self, t: Time) {
        self.ctx.delay(t).await;
        self.unstall().await;
    }

    /// Whether memories hold real bytes (functional mode) or only timing.
    pub fn is_functional(&self) -> bool {
        self.ctx.with(|hw, _| hw.mode == Mode::Functional)
    }

    /// `n` core cycles as time.
    pub fn cycles(&self, n: u64) -> Time {
        self.ctx.with(|hw, _| hw.params.cycles(n))
    }

    /// Waits until the first of several local words satisfies its condition (a service loop
    /// polling many flags); returns the index of a satisfied one.
    pub async fn wait_any(&self, words: Vec<(u64, Cond)>) -> Result<usize, HwError> {
        let v = self.ctx.wait_any(self.local_words(words)?).await?;
        self.unstall().await;
        Ok(v)
    }

    /// Checks local words and names them in this core's L1 for an engine wait.
    fn local_words(&self, words: Vec<(u64, Cond)>) -> Result<Vec<(MemSpace, u64, Cond)>, HwError> {
        for &(addr, _) in &words {
            self.check_local(addr, 4)?;
        }
        Ok(words.into_iter().map(|(a, c)| (self.mem, a, c)).collect())
    }

    /// Waits until the local word at `addr` satisfies `cond` (a polling loop on any flag).
    pub async fn wait_until(&self, addr: u64, cond: Cond) -> Result<u32, HwError> {
        self.check_local(addr, 4)?;
        let v = self.ctx.wait_word(self.mem, addr, cond).await?;
        self.unstall().await;
        Ok(v)
    }

    // ---- Ethernet -------------------------------------------------------------------------

    fn eth_chan(&self) -> Result<u8, HwError> {
        match self.kind {
            CoreKind::Eth(chan) => Ok(chan),
            _ => Err(HwError::NotEthernet { core: self.core_name() }),
        }
    }

    /// Address of `erisc_info` channel record `ch` in this ERISC's L1.
    pub fn erisc_info_addr(&self, ch: u8) -> u64 {
        self.info_addr(ch)
    }

    fn info_addr(&self, ch: u8) -> u64 {
        self.ctx.with(|hw, _| hw.params.erisc_info_base) + ch as u64 * CHANNEL_SYNC_BYTES
    }

    /// `eth_txq_is_busy(q)`: whether tx command queue `q` holds a command not yet latched.
    pub fn eth_txq_is_busy(&self, q: usize) -> Result<bool, HwError> {
        let chan = self.eth_chan()?;
        Ok(self.ctx.with(|hw, _| hw.chips[self.chip.0 as usize].eth[chan as usize].txq[q].busy()))
    }

    /// Waits until the first of `what` holds (a service loop with several kinds of pending
    /// work: channel words, a busy tx queue, writes not yet flushed). A loop that found the
    /// queue busy serves other work meanwhile, as the guide recommends, and wakes for either.
    pub async fn wait_for_any(&self, what: &[Wake]) -> Result<(), HwError> {
        let mut all = Vec::with_capacity(what.len());
        for w in what {
            all.push(match *w {
                Wake::Word(addr, cond) => {
                    self.check_local(addr, 4)?;
                    (self.mem, addr, cond)
                }
                Wake::TxqFree(q) => (self.regs, reg_txq_busy(q), Cond::Eq(0)),
                Wake::Flushed(t) => {
                    (self.regs, reg_trid_flushed(self.noc, t), Cond::Eq(self.tagged[t].get()))
                }
            });
        }
        self.ctx.wait_any(all).await?;
        self.unstall().await;
        Ok(())
    }

    /// `eth_send_packet(q, src_word_addr, dst_word_addr, num_words)`: sends `num_words` 16 B
    /// words from this ERISC's L1 to the L1 of the ERISC at the other end of its link. Waits
    /// while the queue is busy, spends the send initiation time, submits, and returns: there is
    /// no completion signal.
    pub async fn eth_send_packet(
        &self,
        q: usize,
        src_word_addr: u64,
        dst_word_addr: u64,
        num_words: u64,
    ) -> Result<(), HwError> {
        assert!(q < TXQ_COUNT, "tx queue {q} does not exist");
        let chan = self.eth_chan()?;
        let (src, dst, bytes) = (src_word_addr * 16, dst_word_addr * 16, num_words * 16);
        let far = self.ctx.with(|hw, _| hw.cluster.connected(Endpoint { chip: self.chip, chan }));
        let Some(far) = far else {
            return Err(HwError::NoLink { core: self.core_name(), chan });
        };
        self.check_local(src, bytes)?;
        self.ctx.with(|hw, _| {
            check_access(
                hw,
                CoreKind::Eth(far.chan),
                || format!("chip{}/eth{}", hw.cluster.chip(far.chip).id, far.chan),
                dst,
                bytes,
            )
        })?;
        // `while (eth_txq_is_busy(q)) {}`, then the core's RISC-V writes the command registers
        // (shared with any other thread of work on the core), then the command is submitted.
        self.wait_txq_idle(chan, q).await;
        let done = self.ctx.with(|hw, s| {
            let port = &mut hw.chips[self.chip.0 as usize].eth[chan as usize];
            port.cpu_free = s.now().max(port.cpu_free) + hw.params.cycles(hw.params.eth_send_initiate_cycles);
            port.cpu_free - s.now()
        });
        self.ctx.delay(done).await;
        self.unstall().await;
        // Another thread of work on this core may have submitted while this one wrote.
        self.wait_txq_idle(chan, q).await;
        self.ctx.with(|hw, s| {
            let p = Rc::clone(&hw.params);
            let port = &mut hw.chips[self.chip.0 as usize].eth[chan as usize];
            let txq = &mut port.txq[q];
            txq.pending = Some(EthCmd { src, dst, bytes });
            s.write_u32(self.regs, reg_txq_busy(q), 1).expect("the register block holds the flags");
            let at = latch_time(&p, s.now(), port.tx_dma_start);
            s.schedule(at, HwEvent::TxLatch { chip: self.chip.0, chan, q: q as u8 });
        });
        Ok(())
    }

    /// `while (eth_txq_is_busy(q)) {}`: spins until tx queue `q` holds no command (woken by the
    /// latch itself, not by a poll of a word).
    pub async fn eth_txq_wait_idle(&self, q: usize) -> Result<(), HwError> {
        let chan = self.eth_chan()?;
        self.wait_txq_idle(chan, q).await;
        Ok(())
    }

    /// Waits until tx queue `q` of this core's channel `chan` holds no command.
    async fn wait_txq_idle(&self, chan: u8, q: usize) {
        loop {
            let free = self.ctx.with(|hw, _| {
                let t = &hw.chips[self.chip.0 as usize].eth[chan as usize].txq[q];
                t.busy().then_some(t.free)
            });
            match free {
                Some(signal) => {
                    self.ctx.wait_signal(signal).await;
                    self.unstall().await;
                }
                None => return,
            }
        }
    }

    /// `eth_send_bytes_over_channel(src, dst, num_bytes, channel)`: sends the payload, then
    /// marks the channel's sync record with the byte count and sends it (two sends).
    pub async fn eth_send_bytes_over_channel(
        &self,
        src: u64,
        dst: u64,
        num_bytes: u64,
        channel: u8,
    ) -> Result<(), HwError> {
        if num_bytes % 16 != 0 || src % 16 != 0 || dst % 16 != 0 {
            return Err(HwError::Alignment {
                core: self.core_name(),
                what: format!(
                    "Ethernet sends need 16 B alignment (src {src:#x}, dst {dst:#x}, {num_bytes} bytes)"
                ),
            });
        }
        self.eth_send_packet(0, src >> 4, dst >> 4, num_bytes >> 4).await?;
        let info = self.info_addr(channel);
        self.ctx.with(|_, s| -> Result<(), MemError> {
            s.write_u32(self.mem, info, num_bytes as u32)?;
            s.write_u32(self.mem, info + 4, 0)
        })?;
        self.eth_send_packet(0, info >> 4, info >> 4, 1).await
    }

    /// `eth_send_bytes(src, dst, num_bytes)`: [`Kernel::eth_send_bytes_over_channel`] on channel 0.
    pub async fn eth_send_bytes(&self, src: u64, dst: u64, num_bytes: u64) -> Result<(), HwError> {
        self.eth_send_bytes_over_channel(src, dst, num_bytes, 0).await
    }

    fn info_word(&self, ch: u8, offset: u64) -> Result<u32, HwError> {
        self.eth_chan()?;
        let a = self.info_addr(ch) + offset;
        Ok(self.ctx.sched().read_u32(self.mem, a)?)
    }

    /// `eth_bytes_are_available_on_channel(ch)`: whether the channel's `bytes_sent` is set.
    pub fn eth_bytes_are_available_on_channel(&self, ch: u8) -> Result<bool, HwError> {
        Ok(self.info_word(ch, 0)? != 0)
    }

    /// `eth_is_receiver_channel_send_done(ch)`: whether the receiver has freed the channel.
    pub fn eth_is_receiver_channel_send_done(&self, ch: u8) -> Result<bool, HwError> {
        Ok(self.info_word(ch, 0)? == 0)
    }

    /// `eth_is_receiver_channel_send_acked(ch)`: whether the receiver has acknowledged.
    pub fn eth_is_receiver_channel_send_acked(&self, ch: u8) -> Result<bool, HwError> {
        Ok(self.info_word(ch, 4)? != 0)
    }

    /// Waits until bytes are available on channel `ch` (the polling loop on
    /// `eth_bytes_are_available_on_channel`).
    pub async fn eth_wait_for_bytes_on_channel(&self, ch: u8) -> Result<(), HwError> {
        self.eth_chan()?;
        self.ctx.wait_word(self.mem, self.info_addr(ch), Cond::Ne(0)).await?;
        self.unstall().await;
        Ok(())
    }

    /// `eth_wait_for_bytes(num_bytes)`: waits for bytes on channel 0.
    pub async fn eth_wait_for_bytes(&self, _num_bytes: u64) -> Result<(), HwError> {
        self.eth_wait_for_bytes_on_channel(0).await
    }

    /// Waits until the receiver has freed channel `ch` (the loop on
    /// `eth_is_receiver_channel_send_done`).
    pub async fn eth_wait_receiver_channel_done(&self, ch: u8) -> Result<(), HwError> {
        self.eth_chan()?;
        self.ctx.wait_word(self.mem, self.info_addr(ch), Cond::Eq(0)).await?;
        self.unstall().await;
        Ok(())
    }

    /// Waits until the receiver has acknowledged channel `ch`.
    pub async fn eth_wait_receiver_channel_acked(&self, ch: u8) -> Result<(), HwError> {
        self.eth_chan()?;
        self.ctx.wait_word(self.mem, self.info_addr(ch) + 4, Cond::Ne(0)).await?;
        self.unstall().await;
        Ok(())
    }

    /// `eth_wait_for_receiver_done()`: waits until the receiver frees channel 0.
    pub async fn eth_wait_for_receiver_done(&self) -> Result<(), HwError> {
        self.eth_wait_receiver_channel_done(0).await
    }

    /// `eth_receiver_channel_ack(ch, ack_src_addr)`: first-level acknowledgement. Writes a sync
    /// record with `receiver_ack` set at `ack_src_addr` (a 16 B word of this kernel's L1, kept
    /// apart from the channel record, as the guide recommends) and sends it to the sender's
    /// channel record.
    pub async fn eth_receiver_channel_ack(&self, ch: u8, ack_src_addr: u64) -> Result<(), HwError> {
        self.check_local(ack_src_addr, CHANNEL_SYNC_BYTES)?;
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&1u32.to_le_bytes());
        rec[4..8].copy_from_slice(&1u32.to_le_bytes());
        self.write_bytes(ack_src_addr, &rec)?;
        let info = self.info_addr(ch);
        self.eth_send_packet(0, ack_src_addr >> 4, info >> 4, 1).await
    }

    /// `eth_receiver_channel_done(ch)`: clears the channel's sync record here and sends it to
    /// the sender, freeing its buffer.
    pub async fn eth_receiver_channel_done(&self, ch: u8) -> Result<(), HwError> {
        self.eth_chan()?;
        let info = self.info_addr(ch);
        self.ctx.sched().write_bytes(self.mem, info, &[0; 16])?;
        self.eth_send_packet(0, info >> 4, info >> 4, 1).await
    }

    /// `run_routing()`: a context switch to the routing firmware.
    pub async fn run_routing(&self) {
        self.delay_cycles(self.ctx.with(|hw, _| hw.params.erisc_run_routing_cycles)).await;
    }

    /// The start-up handshake of "Ethernet Kernel Setup": the master sends 16 B over channel 0
    /// and waits for the receiver to free it; the other side waits for the bytes and frees the
    /// channel.
    pub async fn eth_setup_handshake(&self, handshake_addr: u64, is_master: bool) -> Result<(), HwError> {
        if is_master {
            self.eth_send_bytes(handshake_addr, handshake_addr, 16).await?;
            self.eth_wait_for_receiver_done().await
        } else {
            self.eth_wait_for_bytes(16).await?;
            self.eth_receiver_channel_done(0).await
        }
    }
}

/// Checks that a kernel on a core of `kind` may access `[addr, addr + len)` of its L1.
/// `core` names the core, built only when the access is refused.
pub(crate) fn check_access(
    hw: &Hw,
    kind: CoreKind,
    core: impl FnOnce() -> String,
    addr: u64,
    len: u64,
) -> Result<(), HwError> {
    let p = &hw.params;
    let (lo, hi) = match kind {
        CoreKind::Eth(_) => {
            let info =
                (p.erisc_info_base, p.erisc_info_base + ERISC_INFO_CHANNELS as u64 * CHANNEL_SYNC_BYTES);
            let sems = semaphore_area(p, kind);
            let end = addr.saturating_add(len);
            if (addr >= info.0 && end <= info.1) || (addr >= sems.0 && end <= sems.1) {
                return Ok(());
            }
            p.erisc_window()
        }
        CoreKind::Worker => (0, p.worker_l1_bytes),
        CoreKind::Dram(_) => (0, p.dram_bank_bytes),
    };
    if addr >= lo && addr.checked_add(len).is_some_and(|end| end <= hi) {
        Ok(())
    } else {
        Err(HwError::OutsideWindow { core: core(), addr, len, lo, hi })
    }
}
