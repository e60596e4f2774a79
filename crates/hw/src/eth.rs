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
    let latency = Time::from_ns(p.eth_link_latency_ns);
    let mut offset = 0;
    let mut ready = now;
    tx.tx_dma_start = now.max(tx.tx_dma_free);
    while offset < bytes {
        let chunk = (bytes - offset).min(p.eth_mtu_bytes);
        let dma_end = ready.max(tx.tx_dma_free) + p.eth_dma_time(chunk);
        tx.tx_dma_free = dma_end;
        let wire_start = dma_end.max(tx.wire_free);
        let wire_end = wire_start + p.eth_wire_time(chunk + p.eth_packet_overhead_bytes);
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
