//! An EDM lane's four kernels: a reader and a writer on the sender worker (the reader fetches
//! the next packet while the writer pushes the last into the EDM channel), and a reader and a
//! writer on the receiver worker (the reader pulls packets out of the channel with their
//! reduction operands; the writer reduces, then stores, or hands the partial to the next
//! sender's relay buffer). All four walk the plan's steps, window by window, and know nothing
//! of which collective they run.

use std::rc::Rc;

use meshsim_engine::{TaskResult, Time};
use meshsim_hw::Kernel;
use meshsim_topology::soc::CoreCoord;

use super::ChannelInterface;
use crate::build::{read_pages, write_pages};
use crate::op::Reduction;
use crate::phase::Tensors;
use crate::plan::{Loc, Recv, Send};
use crate::tensor::STAGING;
use crate::transport::Gate;
use crate::worker::{ReceiverWorker, SenderWorker};

/// Packets a worker's circular buffer between its reader and writer holds (double buffering,
/// as tt-metal's CCL workers size their CBs): the reader fills one while the writer drains the
/// other.
pub const CB_PACKETS: u64 = 2;

/// Packets a sender's relay buffer holds: partial results its chip's receiver hands it to
/// forward. It is also the slicer's window: a reduction's lane runs every step of the plan over
/// this many packets before the next ones (the guide's tensor slicer), so what a chip injects
/// into a window always fits in the next chip's relay and the ring cannot deadlock.
pub const RELAY_PACKETS: u64 = 4;

/// The order a lane's sender or receiver walks: (plan step, packet pages `lo..hi`).
pub(super) type Walk = Rc<[(usize, u64, u64)]>;

/// A circular buffer between a core's reader and writer kernels: `CB_PACKETS` slots of
/// `slot` bytes at [`STAGING`], and two local counters.
#[derive(Clone, Copy, Debug)]
pub(super) struct Cb {
    pub(super) filled: u64,
    pub(super) freed: u64,
    pub(super) slot: u64,
}

impl Cb {
    pub(super) fn at(&self, k: u64) -> u64 {
        STAGING + (k % CB_PACKETS) * self.slot
    }

    /// Producer: waits for slot `k` to be free.
    async fn reserve(&self, kn: &Kernel, k: u64) -> TaskResult {
        if k >= CB_PACKETS {
            kn.noc_semaphore_wait_min(self.freed, (k + 1 - CB_PACKETS) as u32).await?;
        }
        Ok(())
    }

    /// Consumer: waits for slot `k` to be filled.
    async fn wait_filled(&self, kn: &Kernel, k: u64) -> TaskResult {
        kn.noc_semaphore_wait_min(self.filled, (k + 1) as u32).await?;
        Ok(())
    }

    fn push(&self, kn: &Kernel) -> TaskResult {
        bump(kn, self.filled)
    }

    fn pop(&self, kn: &Kernel) -> TaskResult {
        bump(kn, self.freed)
    }
}

/// The order a lane walks `steps` steps over its packets `mine`: every step over the first
/// `window` packets, then every step over the next, and so on (the guide's slicer).
pub(super) fn sequence(steps: usize, mine: &[(u64, u64)], window: usize) -> Vec<(usize, u64, u64)> {
    mine.chunks(window.max(1))
        .flat_map(|w| (0..steps).flat_map(move |s| w.iter().map(move |&(lo, hi)| (s, lo, hi))))
        .collect()
}

/// Increments a word of this core's L1 (a local CB counter).
fn bump(k: &Kernel, addr: u64) -> TaskResult {
    k.add_u32(addr, 1)?;
    Ok(())
}

/// What a lane's four kernels share, resolved when the lane is built.
pub(super) struct LaneCtx {
    pub(super) t: Tensors,
    pub(super) gate: Gate,
    /// Bytes of a packet slot (the sender's CB slot and relay slot).
    pub(super) packet: u64,
    pub(super) sends: Rc<[Send]>,
    pub(super) receives: Rc<[Recv]>,
    pub(super) send_seq: Walk,
    pub(super) recv_seq: Walk,
    pub(super) s_cb: Cb,
    pub(super) r_cb: Cb,
    /// The sender's EDM credit semaphore, the receiver's.
    pub(super) s_sem: u64,
    pub(super) r_sem: u64,
    /// The sender's forward semaphore (chunks its chip's receiver made ready).
    pub(super) fwd: u64,
    pub(super) relay_base: u64,
    /// The receiver's semaphore the next sender increments per relay slot it freed.
    pub(super) relay_free: u64,
    /// The receiver's join semaphore, and the other flow's receiver's it signals.
    pub(super) join_at: Option<u64>,
    pub(super) join_to: Option<(CoreCoord, u64)>,
    /// The next hop's sender on this chip: its forward semaphore, its core and relay buffer.
    pub(super) forward_to: Option<(CoreCoord, u64)>,
    pub(super) relay_to: Option<(CoreCoord, u64)>,
    /// The receiver that feeds this lane's sender: its relay-free semaphore.
    pub(super) fed_by: Option<(CoreCoord, u64)>,
    pub(super) red: Option<Reduction>,
}

/// Increments a semaphore of another core of this chip.
async fn inc_at(k: &Kernel, (at, addr): (CoreCoord, u64)) -> TaskResult {
    k.noc_semaphore_inc(k.get_noc_addr(at.x, at.y, addr), 1).await?;
    Ok(())
}

/// The sender's reader: fetches every packet that is not relayed into the sender's CB, a
/// forwarded one once its chip's receiver has stored it.
pub(super) async fn sender_reader(k: Kernel, c: Rc<LaneCtx>) -> TaskResult {
    let start = c.gate.enter(&k).await;
    let (t, cb) = (&c.t, c.s_cb);
    let (mut n, mut forwarded) = (0u64, 0u32);
    for &(si, lo, hi) in c.send_seq.iter() {
        let step = &c.sends[si];
        if step.from == Loc::Relay {
            continue; // the writer sends it from the relay buffer
        }
        if step.forwarded {
            forwarded += 1;
            k.noc_semaphore_wait_min(c.fwd, forwarded).await?;
        }
        cb.reserve(&k, n).await?;
        let (place, pages) = t.pages(step.from, step.slice, lo, hi);
        read_pages(&k, place, pages, cb.at(n)).await?;
        cb.push(&k)?;
        n += 1;
    }
    c.gate.leave(&k, start);
    Ok(())
}

/// The sender's writer: pushes every packet into the EDM — from the CB, or from the relay buffer
/// where its chip's receiver put a partial — and its own slice's copy into the output; the last
/// message carries the channel's termination signal.
pub(super) async fn sender_writer(k: Kernel, c: Rc<LaneCtx>, tx: ChannelInterface) -> TaskResult {
    let start = c.gate.enter(&k).await;
    let (t, cb) = (&c.t, c.s_cb);
    let mut w = SenderWorker::new(tx, c.s_sem, 0);
    let (mut n, mut relayed) = (0u64, 0u64);
    for (i, &(si, lo, hi)) in c.send_seq.iter().enumerate() {
        let step = &c.sends[si];
        let last = i + 1 == c.send_seq.len();
        if step.from == Loc::Relay {
            // The receiver has put the partial in relay slot `relayed`.
            k.noc_semaphore_wait_min(c.fwd, (relayed + 1) as u32).await?;
            w.send(&k, c.relay_base + (relayed % RELAY_PACKETS) * c.packet).await?;
            if last {
                w.terminate(&k).await?;
            }
            k.noc_async_write_barrier().await?;
            inc_at(&k, c.fed_by.expect("a relayed send has a feeding receiver")).await?;
            relayed += 1;
            continue;
        }
        cb.wait_filled(&k, n).await?;
        if let Some(to) = step.copy_to {
            let (place, pages) = t.pages(to, step.slice, lo, hi);
            write_pages(&k, place, pages, cb.at(n)).await?;
        }
        w.send(&k, cb.at(n)).await?;
        if last {
            w.terminate(&k).await?;
        }
        k.noc_async_write_barrier().await?;
        cb.pop(&k)?;
        n += 1;
    }
    c.gate.leave(&k, start);
    Ok(())
}

/// The receiver's reader: pulls every packet out of the EDM into the receiver's CB with the
/// matching pages of its reduction operands (after a join, the other side's partial); then
/// ends the channel.
pub(super) async fn receiver_reader(k: Kernel, c: Rc<LaneCtx>, rx: ChannelInterface) -> TaskResult {
    let start = c.gate.enter(&k).await;
    let (t, cb) = (&c.t, c.r_cb);
    let mut w = ReceiverWorker::new(rx, c.r_sem, 0);
    let (mut n, mut joined) = (0u64, 0u32);
    for &(si, lo, hi) in c.recv_seq.iter() {
        let step = &c.receives[si];
        cb.reserve(&k, n).await?;
        let bytes = w.receive(&k, cb.at(n)).await?;
        if step.wait_join {
            joined += 1;
            k.noc_semaphore_wait_min(c.join_at.expect("a joining receiver has a join semaphore"), joined)
                .await?;
        }
        for (i, &loc) in step.reduce_with.iter().enumerate() {
            let (place, pages) = t.pages(loc, step.slice, lo, hi);
            let at = cb.at(n) + (i as u64 + 1) * bytes;
            read_pages(&k, place, pages, at).await?;
        }
        cb.push(&k)?;
        n += 1;
    }
    // Read the last message: the receiver channel may end.
    w.terminate(&k).await?;
    c.gate.leave(&k, start);
    Ok(())
}

/// The receiver's writer: reduces each packet with its operands, then stores it or hands it to
/// the next sender's relay buffer (once that slot is free), and signals joins and forwards.
pub(super) async fn receiver_writer(k: Kernel, c: Rc<LaneCtx>) -> TaskResult {
    let start = c.gate.enter(&k).await;
    let (t, cb) = (&c.t, c.r_cb);
    let reduce = k.cycles(k.params().tile_reduce_cycles);
    let (mut n, mut relayed) = (0u64, 0u64);
    for &(si, lo, hi) in c.recv_seq.iter() {
        let step = &c.receives[si];
        cb.wait_filled(&k, n).await?;
        let at = cb.at(n);
        let bytes = (hi - lo) * t.slice.page_bytes();
        if !step.reduce_with.is_empty() {
            if k.is_functional() {
                let red = c.red.as_ref().expect("a reducing step belongs to a reduction");
                let mut acc = k.read_bytes(at, bytes)?;
                for i in 1..=step.reduce_with.len() as u64 {
                    red.reduce_words(&mut acc, &k.read_bytes(at + i * bytes, bytes)?);
                }
                k.write_bytes(at, &acc)?;
            }
            k.delay(Time(reduce.0 * (hi - lo) * step.reduce_with.len() as u64)).await;
        }
        if step.to == Loc::Relay {
            // Into the next sender's relay slot once that sender has sent what was there.
            if relayed >= RELAY_PACKETS {
                k.noc_semaphore_wait_min(c.relay_free, (relayed + 1 - RELAY_PACKETS) as u32).await?;
            }
            let (core, base) = c.relay_to.expect("a relaying receiver has a next hop");
            let slot = base + (relayed % RELAY_PACKETS) * c.packet;
            k.noc_async_write(at, k.get_noc_addr(core.x, core.y, slot), bytes).await?;
            relayed += 1;
        } else {
            let (place, pages) = t.pages(step.to, step.slice, lo, hi);
            write_pages(&k, place, pages, at).await?;
        }
        k.noc_async_write_barrier().await?;
        if step.signal_join {
            inc_at(&k, c.join_to.expect("a join signal has a partner")).await?;
        }
        if step.forward {
            inc_at(&k, c.forward_to.expect("a forwarding receiver has a next hop")).await?;
        }
        cb.pop(&k)?;
        n += 1;
    }
    c.gate.leave(&k, start);
    Ok(())
}
