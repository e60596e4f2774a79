//! Single-link round trip: a sender pings a receiver one link away, which echoes; the sender
//! times send to echo.
//!
//! ```text
//!  chip a ERISC                         chip b ERISC
//!   write sync(seq) ─ send slot ──────►  wait sync == seq
//!                                         write sync(seq+1) ─ echo slot ─┐
//!   wait sync == seq+1 ◄──────────────────────────────────────────────────┘
//! ```
//!
//! Pings rotate over a ring of buffer slots. By default payload and its 16 B sync record go as
//! one packet (the calibration set's set-up). `unmerged` sends them separately through the
//! `erisc_info` channel records, as `eth_send_bytes_over_channel` does — the guide's
//! formulation of its ~1100 ns round trip. The first ping is not measured.

use std::cell::RefCell;
use std::rc::Rc;

use meshsim_engine::{Cond, Time};
use meshsim_hw::CoreRef;
use meshsim_hw::Program;
use rayon::prelude::*;
use serde::Serialize;

use crate::common::{BenchError, Layout, Measured, Setup, user_link};

/// What a latency point is asked to do.
#[derive(Clone, Copy, Debug)]
pub struct LatencySpec {
    /// Payload bytes per ping.
    pub size_bytes: u64,
    /// Buffer slots pings rotate over.
    pub slots: u64,
    /// Measured pings (after one unmeasured).
    pub samples: u64,
    /// Send payload and sync record separately.
    pub unmerged: bool,
}

/// One measured point.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LatencyRow {
    /// Payload bytes.
    pub size_bytes: u64,
    /// Mean send-to-echo time, ns.
    pub round_trip_ns: f64,
    /// The guide's one-way latency: (round trip − 2 × ideal payload serialization) / 2, ns.
    pub one_way_ns: f64,
}

/// Channel records used by the unmerged formulation: pings on 1, echoes on 2.
const PING_CH: u8 = 1;
const ECHO_CH: u8 = 2;

/// Runs one latency point.
pub fn latency(setup: &Setup, spec: LatencySpec) -> Result<Measured<LatencyRow>, BenchError> {
    let (a, a_chan, b, b_chan) = user_link(&setup.cluster)?;
    let lay = Rc::new(Layout::new(&setup.params, spec.size_bytes, spec.slots, 16)?);
    crate::common::check_count(("sample", "samples"), spec.samples, crate::common::MAX_SAMPLES)?;
    let mut m = setup.machine();
    let times = Rc::new(RefCell::new(Vec::new()));
    let (size, slots, rounds, unmerged) = (spec.size_bytes, spec.slots, spec.samples + 1, spec.unmerged);

    let mut pa = Program::new(a);
    let (l, t) = (lay.clone(), times.clone());
    pa.create_kernel(CoreRef::Eth(a_chan), "ping", 0, vec![], move |k| async move {
        k.eth_setup_handshake(l.handshake, true).await?;
        for r in 0..rounds {
            let (slot, seq) = (l.slot(r % slots), 2 * r as u32 + 1);
            let t0 = k.now();
            if unmerged {
                k.eth_send_bytes_over_channel(slot, slot, size, PING_CH).await?;
                k.eth_wait_for_bytes_on_channel(ECHO_CH).await?;
                if r > 0 {
                    t.borrow_mut().push(k.now() - t0);
                }
                k.eth_receiver_channel_ack(ECHO_CH, l.end()).await?;
                k.eth_receiver_channel_done(ECHO_CH).await?;
                k.eth_wait_receiver_channel_done(PING_CH).await?;
                continue;
            } else {
                k.write_u32(l.sync(r % slots), seq)?;
                k.eth_send_packet(0, slot >> 4, slot >> 4, (size + 16) >> 4).await?;
                k.wait_until(l.sync(r % slots), Cond::Eq(seq + 1)).await?;
            }
            if r > 0 {
                t.borrow_mut().push(k.now() - t0);
            }
        }
        Ok(())
    });
    let mut pb = Program::new(b);
    let l = lay.clone();
    pb.create_kernel(CoreRef::Eth(b_chan), "echo", 0, vec![], move |k| async move {
        k.eth_setup_handshake(l.handshake, false).await?;
        for r in 0..rounds {
            let (slot, seq) = (l.slot(r % slots), 2 * r as u32 + 1);
            if unmerged {
                // The guide's flow control: acknowledge, respond, then free the channel.
                k.eth_wait_for_bytes_on_channel(PING_CH).await?;
                k.eth_receiver_channel_ack(PING_CH, l.end()).await?;
                k.eth_send_bytes_over_channel(slot, slot, size, ECHO_CH).await?;
                k.eth_receiver_channel_done(PING_CH).await?;
            } else {
                k.wait_until(l.sync(r % slots), Cond::Eq(seq)).await?;
                k.write_u32(l.sync(r % slots), seq + 1)?;
                k.eth_send_packet(0, slot >> 4, slot >> 4, (size + 16) >> 4).await?;
            }
        }
        Ok(())
    });
    let stats = m.launch(vec![pa, pb], |_| Time::ZERO)?;
    let times = times.borrow();
    let rtt = times.iter().map(|t| t.as_ns_f64()).sum::<f64>() / times.len() as f64;
    let ser = setup.params.eth_wire_time(size).as_ns_f64();
    let row = LatencyRow { size_bytes: size, round_trip_ns: rtt, one_way_ns: (rtt - 2.0 * ser) / 2.0 };
    Ok(Measured::new(row, stats, &mut m))
}

/// Runs a sweep over payload sizes in parallel; rows come back in input order.
pub fn sweep(setup: &Setup, sizes: &[u64], spec: LatencySpec) -> Result<Vec<LatencyRow>, BenchError> {
    sizes
        .par_iter()
        .map(|&size_bytes| latency(setup, LatencySpec { size_bytes, ..spec }).map(|m| m.row))
        .collect()
}
