//! Ethernet: ERISC tx command queues and the link, one direction per lane.
//!
//! ```text
//!  ERISC ─send─► txq0/txq1 ─latch─► tx DMA (L1→MAC) ─► serializer ─► wire (latency) ─► rx DMA ─► peer L1
//! ```
//!
//! A kernel waits for a tx command queue to be idle, spends `eth_send_initiate_cycles` of its
//! core's one RISC-V writing the command (source, destination, size) into the queue's
//! registers, and submits it. Only the submitted command makes the queue busy: until the
//! Ethernet subsystem latches it, `eth_txq_latch_cycles` after submission or once the tx DMA
//! has started on the previous command, whichever is later: one command may wait behind the one
//! the DMA is moving (so a router's counter write does not spin for its data packet's DMA, and
//! its per-packet cost does not grow with the packet: `shared/calibration/`'s unidirectional
//! multicast takes the same time per packet at 2 and 4 KiB); there is no completion signal. Commands of one queue complete in order. A latched command is split into
//! packets of at most `eth_mtu_bytes`; each packet flows through three store-and-forward stages
//! — tx DMA at `eth_dma_bytes_per_cycle`, the serializer at the line rate with
//! `eth_packet_overhead_bytes` added, and rx DMA into the peer L1 — with the fixed
//! `eth_link_latency_ns` between serializer and rx DMA. Stages are FIFO, so delivery is in order
//! and the last packet, holding the tail of the send, lands last. Each packet landing is one
//! event; idle links cost nothing.

use meshsim_engine::{SignalId, Time};

use crate::params::Params;

/// Tx command queues per ERISC core.
pub const TXQ_COUNT: usize = 2;

/// One send command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EthCmd {
    /// Source address in the sender's L1.
    pub src: u64,
    /// Destination address in the peer's L1.
    pub dst: u64,
    /// Bytes to send (a multiple of 16).
    pub bytes: u64,
}

/// A tx command queue.
pub struct TxQueue {
    /// The submitted command not yet latched: the queue is busy while this is set.
    pub pending: Option<EthCmd>,
    /// Raised whenever the queue latches its command and frees up.
    pub free: SignalId,
}

/// Per-ERISC Ethernet state: its queues, its tx pipeline and its rx DMA.
pub struct EthPort {
    /// The two tx command queues.
    pub txq: [TxQueue; TXQ_COUNT],
    /// When the ERISC's one RISC-V is next free: every kernel on the core is a thread of work
    /// of one loop on hardware, so the cycles they spend issuing commands add up.
    pub cpu_free: Time,
    /// When the tx DMA engine can start the next packet.
    pub tx_dma_free: Time,
    /// When the tx DMA engine started (or starts) on the newest command: the queue latches the
    /// next command no earlier.
    pub tx_dma_start: Time,
    /// When the serializer can start the next packet.
    pub wire_free: Time,
    /// When the rx DMA engine can start the next incoming packet.
    pub rx_dma_free: Time,
    /// Bytes sent and packets sent, for reports.
    pub bytes_sent: u64,
    /// Ethernet packets put on the wire.
    pub packets_sent: u64,
    /// Total time the serializer spent putting packets on the wire.
    pub wire_busy: Time,
    /// An injected fault of the link this port sends on, if any.
    pub fault: Option<LinkFault>,
}

/// A fault injected into a link (both directions): a slower serializer, a longer wire, and
/// windows in which the link is down.
///
/// A packet whose wire time overlaps a down window, or that would arrive after the window
/// began, is lost and sent again once the link is back (the link layer's go-back-N), in order;
/// a link down for good loses every packet from its window on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkFault {
    /// The serializer's rate as a fraction of the line rate, in parts per million (1e6: full
    /// rate; 5e5: half).
    pub rate_ppm: u64,
    /// Added to `eth_link_latency_ns`.
    pub extra_latency: Time,
    /// `[from, to)` windows in which the link is down; `to = None`: for good.
    pub down: Vec<(Time, Option<Time>)>,
}

impl Default for LinkFault {
    /// No fault: full rate, no added latency, never down.
    fn default() -> LinkFault {
        LinkFault { rate_ppm: 1_000_000, extra_latency: Time::ZERO, down: Vec::new() }
    }
}

/// When one packet of a send lands in the peer's L1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Landing {
    /// Offset of the packet's first byte within the send.
    pub offset: u64,
    /// Payload bytes of the packet.
    pub bytes: u64,
    /// When its last byte is in the peer's L1.
    pub at: Time,
    /// When the serializer started putting it on the wire.
    pub wire_start: Time,
    /// When the serializer finished.
    pub wire_end: Time,
}

impl TxQueue {
    /// Whether the queue can take no command now.
    pub fn busy(&self) -> bool {
        self.pending.is_some()
    }
}

impl EthPort {
    /// A port with idle queues whose free signals are `free`.
    pub fn new(free: [SignalId; TXQ_COUNT]) -> EthPort {
        EthPort {
            txq: free.map(|free| TxQueue { pending: None, free }),
            cpu_free: Time::ZERO,
            tx_dma_free: Time::ZERO,
            tx_dma_start: Time::ZERO,
            wire_free: Time::ZERO,
            rx_dma_free: Time::ZERO,
            bytes_sent: 0,
            packets_sent: 0,
            wire_busy: Time::ZERO,
            fault: None,
        }
    }
}

/// Runs a latched command of `bytes` through `tx` (this port's pipeline) and `rx_dma_free` (the
/// peer's rx DMA) starting at `now`; books the stages and appends each packet's landing to
/// `landings`.
pub fn transmit(
    p: &Params,
    tx: &mut EthPort,
    rx_dma_free: &mut Time,
    bytes: u64,
    now: Time,
    landings: &mut Vec<Landing>,
) {
    let fault = tx.fault.as_ref();
    let latency = Time::from_ns(p.eth_link_latency_ns) + fault.map_or(Time::ZERO, |f| f.extra_latency);
    let mut offset = 0;
    let mut ready = now;
    tx.tx_dma_start = now.max(tx.tx_dma_free);
    while offset < bytes {
        let chunk = (bytes - offset).min(p.eth_mtu_bytes);
        let dma_end = ready.max(tx.tx_dma_free) + p.eth_dma_time(chunk);
        tx.tx_dma_free = dma_end;
        let mut wire = p.eth_wire_time(chunk + p.eth_packet_overhead_bytes);
        if let Some(f) = fault {
            wire = Time(wire.0 * 1_000_000 / f.rate_ppm.max(1));
        }
        let mut wire_start = dma_end.max(tx.wire_free);
        let mut lost = false;
        for &(from, to) in fault.map_or(&[][..], |f| &f.down[..]) {
            // Lost if it is still on its way when the link goes down: sent again once it is up.
            if wire_start + wire + latency > from && to.is_none_or(|to| wire_start < to) {
                match to {
                    Some(to) => wire_start = wire_start.max(to),
                    None => lost = true,
                }
            }
        }
        if lost {
            // Down for good: this packet and every later one never arrive.
            tx.wire_free = Time(u64::MAX / 2);
            offset += chunk;
            ready = dma_end;
            continue;
        }
        let wire_end = wire_start + wire;
        tx.wire_free = wire_end;
        tx.wire_busy += wire_end - wire_start;
        let rx_end = (wire_end + latency).max(*rx_dma_free) + p.eth_dma_time(chunk);
        *rx_dma_free = rx_end;
        landings.push(Landing { offset, bytes: chunk, at: rx_end, wire_start, wire_end });
        tx.packets_sent += 1;
        offset += chunk;
        ready = dma_end;
    }
    tx.bytes_sent += bytes;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port() -> EthPort {
        EthPort::new([SignalId(0), SignalId(1)])
    }

    #[test]
    fn a_faulty_link_is_slower_resends_after_a_flap_and_loses_all_when_down_for_good() {
        let p = Params::default();
        let send = |fault: Option<LinkFault>| {
            let (mut tx, mut rx) = (port(), Time::ZERO);
            tx.fault = fault;
            let mut l = Vec::new();
            transmit(&p, &mut tx, &mut rx, 32, Time::ZERO, &mut l);
            l
        };
        let clean = send(None)[0];
        let wire = clean.wire_end - clean.wire_start;
        let half = send(Some(LinkFault { rate_ppm: 500_000, ..LinkFault::default() }))[0];
        assert_eq!(half.wire_end - half.wire_start, Time(wire.0 * 2));
        let far = send(Some(LinkFault { extra_latency: Time::from_ns(100), ..LinkFault::default() }))[0];
        assert_eq!(far.at, clean.at + Time::from_ns(100));
        // Down from 1 ns to 5 us: the packet, on its way then, goes again at 5 us.
        let window = vec![(Time::from_ns(1), Some(Time::from_ns(5000)))];
        let flap = send(Some(LinkFault { down: window, ..LinkFault::default() }))[0];
        assert_eq!(flap.wire_start, Time::from_ns(5000));
        assert_eq!(flap.at - flap.wire_start, clean.at - clean.wire_start);
        // A window that ends before the send starts changes nothing.
        let before = vec![(Time::ZERO, Some(Time::ZERO))];
        assert_eq!(send(Some(LinkFault { down: before, ..LinkFault::default() }))[0], clean);
        let dead = send(Some(LinkFault { down: vec![(Time::from_ns(1), None)], ..LinkFault::default() }));
        assert!(dead.is_empty());
    }

    #[test]
    fn a_small_send_is_one_packet_through_three_stages_and_the_wire_latency() {
        let p = Params::default();
        let (mut tx, mut rx) = (port(), Time::ZERO);
        let mut l = Vec::new();
        transmit(&p, &mut tx, &mut rx, 32, Time::ZERO, &mut l);
        // dma 2 cycles + wire (32 + 50) B at 12.5 GB/s + latency + dma 2 cycles.
        let want =
            Time::from_ns(2) + p.eth_wire_time(82) + Time::from_ns(p.eth_link_latency_ns) + Time::from_ns(2);
        let wire_start = Time::from_ns(2);
        let wire_end = wire_start + p.eth_wire_time(82);
        assert_eq!(l, [Landing { offset: 0, bytes: 32, at: want, wire_start, wire_end }]);
        assert_eq!(tx.wire_busy, wire_end - wire_start);
    }

    #[test]
    fn large_sends_split_at_the_mtu_and_stream_at_the_line_rate() {
        let p = Params::default();
        let (mut tx, mut rx) = (port(), Time::ZERO);
        let mut l = Vec::new();
        transmit(&p, &mut tx, &mut rx, 8208, Time::ZERO, &mut l);
        let sizes: Vec<u64> = l.iter().map(|x| x.bytes).collect();
        assert_eq!(sizes, [1500, 1500, 1500, 1500, 1500, 708]);
        assert!(l.windows(2).all(|w| w[0].at < w[1].at), "in order, tail last");
        // After the first packet's DMA the wire is the bottleneck: 8208 + 6 * 50 bytes on it.
        let first_dma = p.eth_dma_time(1500);
        assert_eq!(tx.wire_free, first_dma + p.eth_wire_time(8208 + 300));
        assert_eq!(tx.packets_sent, 6);
    }
}
