//! Raw ERISC bandwidth over one link: a sender streams packets through a ring of buffer slots,
//! the receiver acknowledges each slot so it can be reused.
//!
//! ```text
//!  sender ERISC (chip a)                      receiver ERISC (chip b)
//!   wait ack[slot] ≥ round ◄── ack 16 B ───── wait sync[slot] == n
//!   write sync[slot] = n                        (to_worker: NoC write slot → Tensix, barrier)
//!   send slot + sync (one packet) ──────────►   send ack[slot] = round + 1
//! ```
//!
//! Bandwidth is payload bytes over the time from the first send to the last arrival. With
//! `bidir` both ends run a sender and a receiver at once (two threads of work on each ERISC,
//! sharing its tx queue) and the figure is the sum of both directions.

use std::cell::RefCell;
use std::rc::Rc;

use meshsim_engine::{Cond, Time};
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
    /// Buffer slots (channels) per direction.
    pub slots: u64,
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
}

/// Address on the receiving Tensix core where forwarded slots land.
const WORKER_BUF: u64 = 0x10000;

/// Runs one bandwidth point.
pub fn bandwidth(setup: &Setup, spec: BandwidthSpec) -> Result<Measured<BandwidthRow>, BenchError> {
    let (a, a_chan, b, b_chan) = user_link(&setup.cluster)?;
    if spec.packets == 0 {
        return Err(BenchError::BadArgument("at least one packet is needed".into()));
    }
    let (size, slots) = (spec.size_bytes, spec.slots);
    // Slots for sending, slots for receiving (bidir only), ack words, ack sources.
    let regions = if spec.bidir { 2 } else { 1 };
    let probe = Layout::new(&setup.params, size, slots * regions, 32 * slots)?;
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
    for (dir, &(src, src_chan, dst, dst_chan)) in directions.iter().enumerate() {
        let packets = spec.packets;
        let starts = Rc::new(RefCell::new(Time::ZERO));
        let (l, st) = (lay.clone(), starts.clone());
        programs[prog(src)].create_kernel(CoreRef::Eth(src_chan), "sender", 0, vec![], move |k| async move {
            k.eth_setup_handshake(l.handshake, dir == 0).await?;
            *st.borrow_mut() = k.now();
            for n in 0..packets {
                let slot = n % slots;
                if n >= slots {
                    k.wait_until(acks + 16 * slot, Cond::Ge((n / slots) as u32)).await?;
                }
                let (from, to) = (l.slot(slot), l.slot(slot) + rx_off);
                k.write_u32(l.sync(slot), n as u32 + 1)?;
                k.eth_send_packet(0, from >> 4, to >> 4, (size + 16) >> 4).await?;
            }
            Ok(())
        });
        let worker = spec.to_worker.then(|| {
            let core = CoreRef::Worker(CoreCoord { x: 0, y: 0 });
            (m.device(dst).noc_coord(core), core)
        });
        let (l, sp) = (lay.clone(), spans.clone());
        // One handshake per link: with one direction the receiver answers the sender's.
        let answers_handshake = !spec.bidir;
        programs[prog(dst)].create_kernel(
            CoreRef::Eth(dst_chan),
            "receiver",
            0,
            vec![],
            move |k| async move {
                if answers_handshake {
                    k.eth_setup_handshake(l.handshake, false).await?;
                }
                for n in 0..packets {
                    let slot = n % slots;
                    let buf = l.slot(slot) + rx_off;
                    k.wait_until(l.sync(slot) + rx_off, Cond::Eq(n as u32 + 1)).await?;
                    if let Some((at, _)) = worker {
                        let dst = k.get_noc_addr(at.x, at.y, WORKER_BUF + slot * size);
                        k.noc_async_write(buf, dst, size).await?;
                        k.noc_async_write_barrier().await?;
                    }
                    let src = ack_src + 16 * slot;
                    k.write_u32(src, (n / slots) as u32 + 1)?;
                    k.eth_send_packet(0, src >> 4, (acks + 16 * slot) >> 4, 1).await?;
                }
                sp.borrow_mut().push((*starts.borrow(), k.now()));
                Ok(())
            },
        );
    }
    let stats = m.launch(programs, |_| Time::ZERO)?;
    let gbps = spans
        .borrow()
        .iter()
        .map(|&(start, end)| (spec.packets * size) as f64 / (end - start).as_ns_f64())
        .sum();
    let row = BandwidthRow { size_bytes: size, slots, directions: directions.len() as u64, gbps };
    Ok(Measured::new(row, stats, &mut m))
}

/// Runs a sweep over packet sizes in parallel; rows come back in input order.
pub fn sweep(setup: &Setup, sizes: &[u64], spec: BandwidthSpec) -> Result<Vec<BandwidthRow>, BenchError> {
    sizes
        .par_iter()
        .map(|&size_bytes| bandwidth(setup, BandwidthSpec { size_bytes, ..spec }).map(|m| m.row))
        .collect()
}
