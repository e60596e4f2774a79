//! Raw ERISC bandwidth over one link: a sender streams packets through a ring of buffer slots,
//! the receiver acknowledges each slot so it can be reused.
//!
//! ```text
//!  sender ERISC (chip a)                      receiver ERISC (chip b)
//!   wait ack[slot] ≥ round ◄── ack 16 B ───── wait sync[slot] == n
//!   write sync[slot] = n                        (to_worker: NoC write slot → Tensix, tagged
//!   send slot + sync (one packet) ──────────►    with a transaction id; ack once it is sent)
//!                                               send ack[slot] = round + 1
//! ```
//!
//! Bandwidth is payload bytes over the time from the first send to the last arrival. With
//! `bidir` both ends run a sender and a receiver at once (two threads of work on each ERISC,
//! sharing its RISC-V and its tx queue) and the figure is the sum of both directions; the row
//! also gives it per direction, as the hardware's bidirectional figures are quoted.
//!
//! With `to_worker` the receiver forwards each slot to a Tensix core as hardware's benchmark
//! does: the write is tagged with a NoC transaction id and the receiver moves on; a slot is
//! acknowledged once its write has left the ERISC's L1 (the id's writes *sent*, tt-metal's
//! `..._with_transaction_id_sent`: the slot may then be reused, whether or not the data has
//! landed), checked without blocking, and waited for only when the sender cannot go on without
//! that slot. Hardware's curve says as much: forwarding costs it no bandwidth from 1 KiB up
//! (11.73 GB/s against 11.74 unforwarded), which a wait for each write's acknowledgement —
//! a NoC round trip per slot in the credit loop — would.

use std::cell::RefCell;
use std::rc::Rc;

use meshsim_engine::{Cond, TaskResult, Time};
use meshsim_hw::{CoreRef, Program};
use meshsim_topology::ChipIdx;
use meshsim_topology::soc::CoreCoord;
use rayon::prelude::*;
use serde::Serialize;

use crate::common::{BenchError, Layout, Measured, Setup, user_link};

/// What a bandwidth point is asked to do.
#[derive(Clone, Copy, Debug)]
pub struct BandwidthSpec {
    /// Payload bytes per packet.
    pub size_bytes: u64,
    /// Buffer slots (channels) per direction; `None`: [`DEFAULT_SLOTS`], or as many as fit
    /// the ERISC kernel window at this size.
    pub slots: Option<u64>,
    /// Packets sent per direction.
    pub packets: u64,
    /// Both directions at once.
    pub bidir: bool,
    /// The receiver forwards every slot to a Tensix core over the NoC before acknowledging.
    pub to_worker: bool,
}

/// One measured point.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct BandwidthRow {
    /// Payload bytes per packet.
    pub size_bytes: u64,
    /// Slots per direction.
    pub slots: u64,
    /// Directions measured (1 or 2).
    pub directions: u64,
    /// Achieved payload bandwidth, GB/s (1e9 bytes per second), summed over directions.
    pub gbps: f64,
    /// The same per direction (the mean of the directions).
    pub gbps_per_direction: f64,
}

/// Slots per direction when none are asked for: what hardware's Ethernet microbenchmarks keep
/// in flight.
pub const DEFAULT_SLOTS: u64 = 16;

/// Transaction ids the forwarding receiver rotates over (a fabric receiver channel has 4).
const FORWARD_TRIDS: u64 = 4;

/// ERISC L1 a point needs: slots of `size` + 16 B per direction it receives and sends, ack
/// words and their sources.
fn layout(p: &meshsim_hw::Params, size: u64, slots: u64, bidir: bool) -> Result<Layout, BenchError> {
    let regions = if bidir { 2 } else { 1 };
    Layout::new(p, size, slots * regions, 32 * slots)
}

/// The slots a point runs with: the asked number, else [`DEFAULT_SLOTS`] or fewer when the
/// ERISC window cannot hold them at this size (at least one, or the error saying why not).
pub fn slots_for(p: &meshsim_hw::Params, spec: &BandwidthSpec) -> Result<u64, BenchError> {
    if let Some(n) = spec.slots {
        return Ok(n);
    }
    let fits = |n: u64| layout(p, spec.size_bytes, n, spec.bidir).is_ok();
    Ok((1..=DEFAULT_SLOTS).rev().find(|&n| fits(n)).unwrap_or(1))
}

/// Address on the receiving Tensix core where forwarded slots land.
const WORKER_BUF: u64 = 0x10000;

/// Runs one bandwidth point.
pub fn bandwidth(setup: &Setup, spec: BandwidthSpec) -> Result<Measured<BandwidthRow>, BenchError> {
    let (a, a_chan, b, b_chan) = user_link(&setup.cluster)?;
    crate::common::check_count(("packet", "packets"), spec.packets, crate::common::MAX_PACKETS)?;
    let size = spec.size_bytes;
    let slots = slots_for(&setup.params, &spec)?;
    // Slots for sending, slots for receiving (bidir only), ack words, ack sources.
    let probe = layout(&setup.params, size, slots, spec.bidir)?;
    let lay = Rc::new(Layout::new(&setup.params, size, slots, 0)?);
    let rx_off = if spec.bidir { slots * (size + 16) } else { 0 };
    let acks = probe.end();
    let ack_src = acks + 16 * slots;
    let mut m = setup.machine();
    let spans = Rc::new(RefCell::new(Vec::new()));
    let directions: Vec<(ChipIdx, u8, ChipIdx, u8)> = if spec.bidir {
        vec![(a, a_chan, b, b_chan), (b, b_chan, a, a_chan)]
    } else {
        vec![(a, a_chan, b, b_chan)]
    };
    let mut programs = vec![Program::new(a), Program::new(b)];
    let prog = |c: ChipIdx| if c == a { 0 } else { 1 };
    let lane = Rc::new(Lane { lay, slots, size, rx_off, acks, ack_src, packets: spec.packets });
    for (dir, &(src, src_chan, dst, dst_chan)) in directions.iter().enumerate() {
        let starts = Rc::new(RefCell::new(Time::ZERO));
        let (l, st) = (lane.clone(), starts.clone());
        programs[prog(src)].create_kernel(CoreRef::Eth(src_chan), "sender", 0, vec![], move |k| {
            bw_sender(k, l, dir == 0, st)
        });
        let worker =
            spec.to_worker.then(|| m.device(dst).noc_coord(CoreRef::Worker(CoreCoord { x: 0, y: 0 })));
        let (l, sp) = (lane.clone(), spans.clone());
        // One handshake per link: with one direction the receiver answers the sender's.
        let answers_handshake = !spec.bidir;
        programs[prog(dst)].create_kernel(CoreRef::Eth(dst_chan), "receiver", 0, vec![], move |k| {
            bw_receiver(k, l, (answers_handshake, worker), starts, sp)
        });
    }
    let stats = m.launch(programs, |_| Time::ZERO)?;
    let gbps: f64 = spans
        .borrow()
        .iter()
        .map(|&(start, end)| (spec.packets * size) as f64 / (end - start).as_ns_f64())
        .sum();
    let n = directions.len() as u64;
    let row =
        BandwidthRow { size_bytes: size, slots, directions: n, gbps, gbps_per_direction: gbps / n as f64 };
    Ok(Measured::new(row, stats, &mut m))
}

/// What a direction's sender and receiver share: the slots' layout and count, the packet
/// size, where received slots sit (`rx_off` above the sent ones when both directions run), the
/// ack words and their sources, and the packets to send.
struct Lane {
    lay: Rc<Layout>,
    slots: u64,
    size: u64,
    rx_off: u64,
    acks: u64,
    ack_src: u64,
    packets: u64,
}

/// A direction's sender: every packet into the next slot once the receiver has acknowledged
/// that slot's previous packet.
async fn bw_sender(k: meshsim_hw::Kernel, c: Rc<Lane>, leads: bool, starts: Rc<RefCell<Time>>) -> TaskResult {
    let (l, slots) = (&c.lay, c.slots);
    k.eth_setup_handshake(l.handshake, leads).await?;
    *starts.borrow_mut() = k.now();
    for n in 0..c.packets {
        let slot = n % slots;
        if n >= slots {
            k.wait_until(c.acks + 16 * slot, Cond::Ge((n / slots) as u32)).await?;
        }
        let (from, to) = (l.slot(slot), l.slot(slot) + c.rx_off);
        k.write_u32(l.sync(slot), n as u32 + 1)?;
        k.eth_send_packet(0, from >> 4, to >> 4, (c.size + 16) >> 4).await?;
    }
    Ok(())
}

/// A direction's receiver: acknowledges each packet as it lands, or — forwarding to a worker —
/// once its NoC write (tagged with a transaction id) has been sent from L1; records the
/// direction's span.
async fn bw_receiver(
    k: meshsim_hw::Kernel,
    c: Rc<Lane>,
    (answers_handshake, worker): (bool, Option<CoreCoord>),
    starts: Rc<RefCell<Time>>,
    spans: Rc<RefCell<Vec<(Time, Time)>>>,
) -> TaskResult {
    let (l, slots) = (&c.lay, c.slots);
    if answers_handshake {
        k.eth_setup_handshake(l.handshake, false).await?;
    }
    // Slots received and not yet acknowledged (forwarding only), oldest first.
    let mut unacked = std::collections::VecDeque::new();
    let ack = |n: u64| send_ack(&k, n, slots, c.ack_src, c.acks);
    for n in 0..c.packets {
        let slot = n % slots;
        let buf = l.slot(slot) + c.rx_off;
        // The sender needs slot n - slots back before it can send packet n.
        if let Some(&oldest) = unacked.front()
            && oldest + slots <= n
        {
            k.noc_async_write_sent_with_trid((oldest % FORWARD_TRIDS) as usize).await;
            unacked.pop_front();
            ack(oldest).await?;
        }
        k.wait_until(l.sync(slot) + c.rx_off, Cond::Eq(n as u32 + 1)).await?;
        let Some(at) = worker else {
            ack(n).await?;
            continue;
        };
        let dst = k.get_noc_addr(at.x, at.y, WORKER_BUF + slot * c.size);
        k.noc_async_write_with_trid(buf, dst, c.size, (n % FORWARD_TRIDS) as usize).await?;
        unacked.push_back(n);
        while let Some(&oldest) = unacked.front()
            && k.noc_write_trid_sent((oldest % FORWARD_TRIDS) as usize)
        {
            unacked.pop_front();
            ack(oldest).await?;
        }
    }
    while let Some(oldest) = unacked.pop_front() {
        k.noc_async_write_sent_with_trid((oldest % FORWARD_TRIDS) as usize).await;
        ack(oldest).await?;
    }
    k.noc_async_write_barrier().await?;
    spans.borrow_mut().push((*starts.borrow(), k.now()));
    Ok(())
}

/// Acknowledges packet `n`: its slot's ack word becomes its round + 1 in the sender's L1.
async fn send_ack(
    k: &meshsim_hw::Kernel,
    n: u64,
    slots: u64,
    ack_src: u64,
    acks: u64,
) -> Result<(), meshsim_hw::HwError> {
    let (slot, src) = (n % slots, ack_src + 16 * (n % slots));
    k.write_u32(src, (n / slots) as u32 + 1)?;
    k.eth_send_packet(0, src >> 4, (acks + 16 * slot) >> 4, 1).await
}

/// Runs a sweep over packet sizes in parallel; rows come back in input order.
pub fn sweep(setup: &Setup, sizes: &[u64], spec: BandwidthSpec) -> Result<Vec<BandwidthRow>, BenchError> {
    sizes
        .par_iter()
        .map(|&size_bytes| bandwidth(setup, BandwidthSpec { size_bytes, ..spec }).map(|m| m.row))
        .collect()
}
