//! What one packet costs each resource of the fabric, in picoseconds, from the same parameters
//! the packet model spends: the link's wire time, the router ERISC's loop work, the worker's
//! serial path. Each figure follows the step of the packet model's kernels it stands for
//! (`fabric/router.rs`, `fabric/gather.rs`, `fabric/relay.rs`, `fabric/reduce.rs`,
//! `hw/src/eth.rs`, `hw/src/noc.rs`); docs/model.md, "The flow model", lists them.

use meshsim_hw::Params;

/// Per-packet costs of a phase's packets on the fabric, read from the parameters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Costs<'p> {
    p: &'p Params,
    /// One core cycle, ps (a fraction where the clock's period is not whole picoseconds).
    cycle: f64,
    /// The router's packet header.
    pub header: u64,
    /// Whether the router runs a ring's flow control (first-level acknowledgements).
    pub ring: bool,
}

impl Costs<'_> {
    /// The costs on `p` for a router with `header`-byte headers.
    pub fn new(p: &Params, header: u64, ring: bool) -> Costs<'_> {
        Costs { p, cycle: p.cycles(1_000_000).0 as f64 / 1e6, header, ring }
    }

    fn cyc(&self, n: f64) -> f64 {
        n * self.cycle
    }

    /// Bytes a packet of `payload` puts through the Ethernet DMA: header and payload, in 16 B
    /// words.
    pub fn eth_bytes(&self, payload: u64) -> u64 {
        (self.header + payload).next_multiple_of(16)
    }

    /// Wire time of `bytes` sent as one command: MTU-sized packets, each with its overhead on
    /// the line (`Params::eth_wire_time`, as `eth::transmit` splits them).
    pub fn wire(&self, bytes: u64) -> f64 {
        let (mtu, overhead) = (self.p.eth_mtu_bytes, self.p.eth_packet_overhead_bytes);
        let (full, rest) = (bytes / mtu, bytes % mtu);
        let one = |b: u64| self.p.eth_wire_time(b + overhead).0 as f64;
        full as f64 * one(mtu) + if rest > 0 { one(rest) } else { 0.0 }
    }

    /// Ethernet DMA time of `bytes` (`Params::eth_dma_time`).
    pub fn dma(&self, bytes: u64) -> f64 {
        self.p.eth_dma_time(bytes).0 as f64
    }

    /// The link direction a data packet of `payload` takes: its own wire time and the
    /// "packets sent" counter that follows it.
    pub fn link_forward(&self, payload: u64) -> f64 {
        self.wire(self.eth_bytes(payload)) + self.wire(16)
    }

    /// The opposite direction, per data packet: the receiver's completion, and on a ring its
    /// first-level acknowledgement.
    pub fn link_back(&self) -> f64 {
        self.wire(16) * self.counters_back() as f64
    }

    /// What a data packet of `payload` puts on its link direction ([`Costs::link_forward`]):
    /// bytes, and Ethernet packets (its send split at the MTU, then the 16 B counter).
    pub fn link_forward_sent(&self, payload: u64) -> (u64, u64) {
        let bytes = self.eth_bytes(payload);
        (bytes + 16, bytes.div_ceil(self.p.eth_mtu_bytes) + 1)
    }

    /// What it puts on the opposite direction ([`Costs::link_back`]): bytes and packets.
    pub fn link_back_sent(&self) -> (u64, u64) {
        (16 * self.counters_back(), self.counters_back())
    }

    /// 16 B counters back per data packet: the completion, and on a ring the acknowledgement.
    fn counters_back(&self) -> u64 {
        if self.ring { 2 } else { 1 }
    }

    /// Whether a router's sender and receiver channels run on two ERISCs, each its own loop on
    /// its own tx queue (`fabric_router_eriscs`; the packet model's `Role::Senders` and
    /// `Role::Receiver`).
    fn two_eriscs(&self) -> bool {
        self.p.fabric_router_eriscs >= 2
    }

    /// The sender channel's ERISC work per packet: the step reading its state, the data send,
    /// the wait for the tx queue to take it, the counter send, the credit it returns to its
    /// producer and its pass. On a ring on one ERISC the receiver step's acknowledgement comes
    /// next in the same pass and waits for the tx queue, which takes it only once the DMA has
    /// moved the data: the ERISC spins for the rest of the DMA. On two ERISCs the receiver
    /// sends its acknowledgements on its own queue, and the sender does not wait for them.
    pub fn send(&self, payload: u64) -> f64 {
        let own = self.cyc(
            (self.p.fabric_router_step_cycles as f64)
                + 2.0 * (self.p.eth_send_initiate_cycles as f64)
                + (self.p.eth_txq_latch_cycles as f64)
                + (self.p.fabric_router_noc_cycles as f64)
                + (self.p.fabric_router_pass_cycles as f64),
        );
        let spin = if self.ring && !self.two_eriscs() {
            (self.dma(self.eth_bytes(payload))
                - self.cyc((self.p.eth_send_initiate_cycles as f64) + (self.p.eth_txq_latch_cycles as f64)))
            .max(0.0)
        } else {
            0.0
        };
        own + spin
    }

    /// The tx DMA per data packet: the data and its counter, moved from L1 to the MAC one
    /// command after another.
    pub fn tx_dma(&self, payload: u64) -> f64 {
        self.dma(self.eth_bytes(payload)) + self.dma(16)
    }

    /// The receiver channel's ERISC work per packet: a ring's acknowledgement, `forwards`
    /// forwards into the next router (the packet and its doorbell), `writes` local NoC commands,
    /// the completion, and its pass where the sender's does not carry it.
    pub fn receive(&self, forwards: u64, writes: u64) -> f64 {
        // On a ring on one ERISC every router sends as it receives, one pass doing both: the
        // sender's work carries the pass. On two, the receiver's loop is its own.
        let ack = if self.ring { self.p.eth_send_initiate_cycles as f64 } else { 0.0 };
        let pass =
            if self.ring && !self.two_eriscs() { 0.0 } else { self.p.fabric_router_pass_cycles as f64 };
        self.cyc(
            ack + (2 * forwards + writes) as f64 * (self.p.fabric_router_noc_cycles as f64)
                + (self.p.eth_send_initiate_cycles as f64)
                + pass,
        )
    }

    /// One packet's way across a hop: the send, the DMA, the wire, the link and the receiver
    /// noticing and processing it.
    pub fn hop(&self, payload: u64) -> f64 {
        self.data_way(payload) + self.receive(0, 1)
    }

    /// A NoC write of `bytes` to a bank `round_hops / 2` hops away (a DRAM bank if `dram`),
    /// until its acknowledgement is back: the same round trip as a read's request and answer.
    pub fn write_ack(&self, bytes: u64, round_hops: f64, dram: bool) -> f64 {
        self.read(bytes, round_hops, dram)
    }

    /// A 16 B counter (a completion, an acknowledgement) sent back over the link, until the
    /// router at the far end notices it.
    fn counter_back(&self) -> f64 {
        self.cyc((self.p.eth_send_initiate_cycles as f64) + (self.p.fabric_router_notice_cycles as f64))
            + 2.0 * self.dma(16)
            + self.wire(16)
            + (self.p.eth_link_latency_ns as f64 * 1e3)
    }

    /// A data packet's way from the sending router's step to the receiving router noticing it.
    fn data_way(&self, payload: u64) -> f64 {
        let bytes = self.eth_bytes(payload);
        let last = if bytes % self.p.eth_mtu_bytes == 0 {
            self.p.eth_mtu_bytes
        } else {
            bytes % self.p.eth_mtu_bytes
        };
        self.cyc(
            (self.p.fabric_router_step_cycles as f64)
                + (self.p.eth_send_initiate_cycles as f64)
                + (self.p.fabric_router_notice_cycles as f64),
        ) + self.dma(bytes.min(self.p.eth_mtu_bytes))
            + self.wire(bytes)
            + (self.p.eth_link_latency_ns as f64 * 1e3)
            + self.dma(last)
    }

    /// The time a receiver channel holds a transaction id for a packet: its processing and its
    /// `writes` NoC writes of `page` bytes until they are acknowledged.
    pub fn trid_hold(&self, writes: u64, page: u64, round_hops: f64, dram: bool) -> f64 {
        self.receive(0, writes) + self.write_ack(page, round_hops, dram)
    }

    /// The round trip of a receiver slot: from the send, over the link, through the
    /// receiver's processing and writes, until the completion is back at the sender.
    pub fn rx_loop(&self, payload: u64, writes: u64, page: u64, round_hops: f64, dram: bool) -> f64 {
        self.data_way(payload) + self.trid_hold(writes, page, round_hops, dram) + self.counter_back()
    }

    /// The round trip of a sender-channel slot: its producer's write into it, the send, and
    /// the slot's return — on a ring the first-level acknowledgement on arrival, on a line the
    /// completion after the receiver's writes — and the credit's NoC increment back to the
    /// producer, who notices it.
    pub fn slot_loop(&self, payload: u64, writes: u64, page: u64, round_hops: f64, dram: bool) -> f64 {
        let back = if self.ring {
            self.data_way(payload) + self.counter_back()
        } else {
            self.rx_loop(payload, writes, page, round_hops, dram)
        };
        let credit = self.cyc(
            (self.p.fabric_router_noc_cycles as f64)
                + (self.p.noc_inject_cycles as f64)
                + round_hops / 2.0 * (self.p.noc_hop_cycles as f64)
                + 1.0
                + (self.p.noc_eject_cycles as f64)
                + (self.p.core_poll_cycles as f64),
        );
        self.fill(payload) + back + credit
    }

    /// A producer's write of a packet of `payload` into a router slot, until the router
    /// notices it.
    fn fill(&self, payload: u64) -> f64 {
        self.cyc(
            (self.p.noc_issue_cycles as f64)
                + (self.p.noc_inject_cycles as f64)
                + self.flits(payload)
                + (self.p.fabric_router_notice_cycles as f64),
        )
    }

    /// Flits of a NoC packet of `bytes`.
    fn flits(&self, bytes: u64) -> f64 {
        1.0 + (bytes as f64 / (self.p.noc_flit_bytes as f64)).ceil()
    }

    /// Cycles a DRAM endpoint streams one page of `page` bytes out of its bank: at the
    /// endpoint's rate, or the bank's when that is lower.
    fn dram_stream(&self, page: u64) -> f64 {
        let rate = self.p.dram_endpoint_bytes_per_cycle.min(self.p.dram_bank_bytes_per_cycle);
        (page as f64 / rate as f64).ceil()
    }

    /// A NoC read of one page of `page` bytes whose request and answer travel `round_hops`
    /// hops in all, from a DRAM bank (`dram`) or an L1. A DRAM endpoint puts the data on the
    /// NoC as it streams, so the answer's flits and the stream overlap.
    fn read(&self, page: u64, round_hops: f64, dram: bool) -> f64 {
        let body = if dram {
            self.flits(page).max(self.dram_stream(page)) + (self.p.dram_latency_cycles as f64)
        } else {
            self.flits(page)
        };
        self.cyc(
            2.0 * ((self.p.noc_inject_cycles as f64) + (self.p.noc_eject_cycles as f64))
                + round_hops * (self.p.noc_hop_cycles as f64)
                + 1.0
                + body,
        )
    }

    /// A worker's reads of `pages` pages issued one after another and waited for together:
    /// the issues, the first round trip, the answers one after another into its port, and
    /// the barrier noticing.
    pub fn reads(&self, pages: u64, page: u64, round_hops: f64, dram: bool) -> f64 {
        let p = pages as f64;
        let issue = self.p.noc_read_issue_cycles as f64;
        // Consecutive pages of an interleaved tensor sit in different banks: their streams run
        // side by side, and the answers queue only at the reader's port.
        let spacing = issue.max(self.flits(page));
        self.cyc(issue + (p - 1.0) * spacing + (self.p.core_poll_cycles as f64))
            + self.read(page, round_hops, dram)
    }

    /// A worker's sending of one packet of `pages` pages of `page` bytes into its router:
    /// `local` pages also written into its own output first, the payload, the header and the
    /// doorbell (a command with no flits), until the writes have left its L1 (the next
    /// packet's buffer is this one's).
    pub fn inject(&self, pages: u64, page: u64, local: u64) -> f64 {
        let writes = std::iter::repeat_n(self.flits(page), local as usize)
            .chain([self.flits(pages * page), self.flits(self.header)]);
        self.leave(writes, local + 3)
    }

    /// NoC writes issued one after another, of the given flits each, among `commands` commands
    /// in all, until they have left the worker's L1: its port sends one write's flits while the
    /// core issues the next, each write's once it is issued and injected and the one before
    /// has left; and all of them no sooner than the last command is issued.
    fn leave(&self, writes: impl Iterator<Item = f64>, commands: u64) -> f64 {
        let issue = self.p.noc_issue_cycles as f64;
        let inject = self.p.noc_inject_cycles as f64;
        let mut port = 0.0f64;
        for (k, flits) in writes.enumerate() {
            port = port.max((k + 1) as f64 * issue + inject) + flits;
        }
        self.cyc(port.max(commands as f64 * issue))
    }

    /// The serial path of a worker that reads a packet, waits for it and sends it before the
    /// next (the multicast all-gather's and the point-to-point senders' loop).
    pub fn serial(&self, pages: u64, page: u64, round_hops: f64, dram: bool, local: bool) -> f64 {
        self.reads(pages, page, round_hops, dram) + self.inject(pages, page, if local { pages } else { 0 })
    }

    /// The serial path of a worker that only copies each packet it reads into its own output
    /// (a line end's idle direction keeping the rank's slice).
    pub fn copy(&self, pages: u64, page: u64, round_hops: f64, dram: bool) -> f64 {
        self.reads(pages, page, round_hops, dram) + self.writes(pages, page)
    }

    /// `pages` NoC writes of `page` bytes a worker issues one after another, until they have
    /// left its L1 ([`Costs::leave`]).
    pub fn writes(&self, pages: u64, page: u64) -> f64 {
        self.leave(std::iter::repeat_n(self.flits(page), pages as usize), pages)
    }

    /// A worker that reads a window of packets ahead while it sends (the relay all-gather's
    /// and the reduce-scatter's): per packet its issues — `reads` page reads, `local` local
    /// writes, the three commands of a send — and `reduced` pages summed on its Tensix.
    pub fn windowed(&self, reads: u64, local: u64, reduced: u64) -> f64 {
        self.cyc(
            reads as f64 * (self.p.noc_read_issue_cycles as f64)
                + (local + 3) as f64 * (self.p.noc_issue_cycles as f64)
                + reduced as f64 * (self.p.tile_reduce_cycles as f64),
        )
    }

    /// Per packet, a worker that works in waves of `window` packets (the point-to-point
    /// senders'): it waits for the last wave's writes to leave, issues the reads of the wave
    /// (`reads` pages per packet), waits for them, then issues each packet's `commands`, among
    /// them NoC writes of `writes` bytes (a send's payload and header, or a copy's pages). Its
    /// port sends one write's flits while the core issues the next, across the whole wave
    /// ([`Costs::leave`]): a wave of 2 KiB page writes leaves at the port's pace, not at the
    /// issues'.
    pub fn wave(
        &self,
        window: u64,
        reads: u64,
        page: u64,
        (round_hops, dram): (f64, bool),
        (writes, commands): (&[u64], u64),
    ) -> f64 {
        let w = window as f64;
        let read = if reads > 0 { self.reads(window * reads, page, round_hops, dram) } else { 0.0 };
        let out = (0..window).flat_map(|_| writes.iter().map(|&b| self.flits(b)));
        (read + self.leave(out, window * commands)) / w
    }

    /// Per packet, the steady state of a producer that works in waves of `window` packets
    /// against its channel's `slots` credits: each wave it spends `read` (its reads and the wait
    /// for the last wave's writes), then writes its packets one after another, `write` each
    /// (the commands it issues), each into a slot whose credit came back `rtt` after the router
    /// began sending the packet that held it. The router begins a packet once the packet's
    /// bytes have crossed into its slot and it has noticed the doorbell (`flight` after the
    /// write) and the link has sent the one before (one every `link`). A slot credited back
    /// during the read phase waits for the next send phase, so the period can exceed both the
    /// producer's own work and the link's. A short deterministic walk of the loop (40 waves,
    /// the second half timed), from the same figures.
    pub fn credit_period(
        &self,
        (window, slots): (u64, u64),
        (read, write, flight): (f64, f64, f64),
        link: f64,
        rtt: f64,
    ) -> f64 {
        const WAVES: usize = 40;
        let mut free: std::collections::BinaryHeap<std::cmp::Reverse<u64>> =
            (0..slots.max(1)).map(|_| std::cmp::Reverse(0)).collect();
        let (mut t, mut link_free, mut half) = (0.0f64, 0.0f64, 0.0f64);
        for w in 0..WAVES {
            if w == WAVES / 2 {
                half = t;
            }
            t += read;
            for _ in 0..window {
                let std::cmp::Reverse(at) = free.pop().expect("a slot");
                t = t.max(at as f64) + write;
                let send = (t + flight).max(link_free);
                link_free = send + link;
                free.push(std::cmp::Reverse((send + rtt).round() as u64));
            }
        }
        (t - half) / (window as f64 * (WAVES - WAVES / 2) as f64)
    }

    /// The network part of a sender-channel slot's round trip, from the router's step for the
    /// packet to the credit back at its producer ([`Costs::slot_loop`] without the producer's
    /// write).
    pub fn slot_rtt(&self, payload: u64, writes: u64, page: u64, round_hops: f64, dram: bool) -> f64 {
        self.slot_loop(payload, writes, page, round_hops, dram) - self.fill(payload)
    }

    /// A sender-channel slot's time from its packet's landing until its producer has it back.
    pub fn slot_after_landing(
        &self,
        payload: u64,
        writes: u64,
        page: u64,
        round_hops: f64,
        dram: bool,
    ) -> f64 {
        self.slot_rtt(payload, writes, page, round_hops, dram)
            + self.cyc(self.p.fabric_router_notice_cycles as f64)
    }

    /// A slot's credit from the router's NoC command until the producer has noticed it.
    pub fn credit_way(&self, round_hops: f64) -> f64 {
        self.cyc(
            (self.p.noc_inject_cycles as f64)
                + round_hops / 2.0 * (self.p.noc_hop_cycles as f64)
                + 1.0
                + (self.p.noc_eject_cycles as f64)
                + (self.p.core_poll_cycles as f64),
        )
    }

    /// A producer's packet of `payload` from its issued write until the router has noticed it
    /// in its slot: the write's way into the slot and the router's notice ([`Costs::fill`]
    /// without the issue, which the producer's own work holds).
    pub fn slot_flight(&self, payload: u64) -> f64 {
        self.fill(payload) - self.cyc(self.p.noc_issue_cycles as f64)
    }

    /// The wait for a packet of `bytes` to leave a worker's L1 once issued.
    pub fn noc_flush(&self, bytes: u64) -> f64 {
        self.cyc((self.p.noc_inject_cycles as f64) + self.flits(bytes))
    }

    /// The three commands of a send into a router or mux: payload, header, doorbell.
    pub fn send_issues(&self) -> f64 {
        self.cyc(3.0 * (self.p.noc_issue_cycles as f64))
    }

    /// A Tensix mux's work per packet it forwards: the send into the router slot, the blocking
    /// flush of its writes, and the credit it returns to its client.
    pub fn mux(&self, pages: u64, page: u64) -> f64 {
        self.inject(pages, page, 0) + self.cyc(self.p.noc_issue_cycles as f64)
    }

    /// The round trip of a mux client's slot: the client's send into it until it has left its
    /// L1, its way `hops` NoC hops to the mux, the mux noticing the doorbell at its poll, the
    /// mux's forwarding of it ([`Costs::mux`]), and the credit's NoC increment back to the
    /// client, who notices it.
    pub fn mux_client_loop(&self, pages: u64, page: u64, hops: f64) -> f64 {
        let way = hops * (self.p.noc_hop_cycles as f64) + 1.0 + (self.p.noc_eject_cycles as f64);
        let poll = self.p.core_poll_cycles as f64;
        let credit = (self.p.noc_issue_cycles as f64) + (self.p.noc_inject_cycles as f64);
        self.inject(pages, page, 0) + self.mux(pages, page) + self.cyc(2.0 * (way + poll) + credit)
    }

    /// Summing `pages` tiles on a worker's Tensix.
    pub fn reduce(&self, pages: u64) -> f64 {
        self.cyc(pages as f64 * (self.p.tile_reduce_cycles as f64))
    }

    /// A worker's closing of its router connection (`shared/fabric.md` §5): its two writes to
    /// the router, the router's noticing them at its connection check and its increment of the
    /// worker's teardown word, the worker's noticing that.
    pub fn close(&self) -> f64 {
        let way = (self.p.noc_inject_cycles + self.p.noc_eject_cycles) as f64;
        self.cyc(
            2.0 * (self.p.noc_issue_cycles as f64) + 2.0 * way + (self.p.fabric_router_noc_cycles as f64),
        ) + self.notice()
    }

    /// A router's noticing a change and a worker's: the fixed latency of a semaphore wait.
    pub fn notice(&self) -> f64 {
        self.cyc((self.p.fabric_router_notice_cycles as f64) + (self.p.core_poll_cycles as f64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshsim_topology::Arch;

    fn wormhole() -> Costs<'static> {
        Costs::new(Box::leak(Box::new(Params::of(Arch::WormholeB0).unwrap())), 48, true)
    }

    /// A 4 KiB packet with its 48 B header is three MTU packets on the wire, each with its
    /// overhead, at 12.5 GB/s.
    #[test]
    fn the_wire_splits_at_the_mtu() {
        let c = wormhole();
        let bytes = c.eth_bytes(4096);
        assert_eq!(bytes, 4144);
        let want = (2.0 * (1500.0 + 50.0) + (4144.0 - 3000.0 + 50.0)) * 8_000.0 / 100.0;
        assert!((c.wire(bytes) - want).abs() < 1e-6);
    }

    /// A producer with as many slots as the round trip needs runs at its own pace or the
    /// link's; with too few it waits for credits.
    #[test]
    fn a_wave_producer_waits_for_credits_it_has_too_few_of() {
        let c = wormhole();
        let (read, write, link) = (1_000_000.0, 100_000.0, 150_000.0);
        let free = c.credit_period((8, 64), (read, write, 0.0), link, 2_000_000.0);
        assert!((free - (read + 8.0 * write) / 8.0).abs() < 1.0, "{free}");
        let short = c.credit_period((8, 4), (read, write, 0.0), link, 2_000_000.0);
        assert!(short > free * 1.5, "{short} vs {free}");
        // A producer with no work of its own, paced by the link once its slots are in flight.
        let paced = c.credit_period((8, 16), (0.0, 0.0, 0.0), link, 4.0 * link);
        assert!((paced - link).abs() < 1.0, "{paced}");
        // A slot's packet leaves only once it has crossed into the router's slot: with too few
        // credits each is held the flight longer, and the period grows by the flight over the
        // slots.
        let late = c.credit_period((8, 4), (read, write, 200_000.0), link, 2_000_000.0);
        assert!((late - (short + 200_000.0 / 4.0)).abs() < 1.0, "{late} vs {short}");
        // With credits to spare, the producer's pace is its own whatever the flight.
        let spare = c.credit_period((8, 64), (read, write, 200_000.0), link, 2_000_000.0);
        assert!((spare - free).abs() < 1.0, "{spare} vs {free}");
    }

    /// On a ring the sender's ERISC waits for the tx DMA of a large packet, not of a small one;
    /// on a line it does not wait.
    #[test]
    fn a_large_packet_holds_the_sender_for_its_dma() {
        let c = wormhole();
        let small = c.send(0);
        let large = c.send(4096);
        assert!(large > small + 100_000.0, "{large} vs {small}");
        let line = Costs { ring: false, ..c };
        assert_eq!(line.send(4096), line.send(0));
    }

    /// On two ERISCs (Blackhole's router) the receiver's loop is its own: a ring's receiver
    /// pays its pass, and the sender no longer waits for the tx DMA before the acknowledgement,
    /// which the receiver sends on its own queue. On one the pass is the sender's.
    #[test]
    fn two_eriscs_give_the_receiver_its_own_pass_and_the_sender_no_spin() {
        let one = wormhole();
        let mut p = one.p.clone();
        p.fabric_router_eriscs = 2;
        let two = Costs { p: Box::leak(Box::new(p)), ..one };
        let pass = one.cyc(one.p.fabric_router_pass_cycles as f64);
        assert!((two.receive(1, 2) - one.receive(1, 2) - pass).abs() < 1e-6);
        assert!(two.send(4096) < one.send(4096) - 100_000.0, "{} vs {}", two.send(4096), one.send(4096));
        assert_eq!(two.send(4096), two.send(0));
        // A line's receiver paid its pass on one ERISC already.
        let (l1, l2) = (Costs { ring: false, ..one }, Costs { ring: false, ..two });
        assert_eq!(l1.receive(1, 2), l2.receive(1, 2));
    }

    /// A worker's writes leave its port while it issues the next: large pages are gone once the
    /// first write is issued and every flit has left (not after every issue, then every flit);
    /// small ones once the last command is issued.
    #[test]
    fn a_worker_s_port_sends_while_it_issues() {
        let c = wormhole();
        let p = c.p;
        let issue = p.noc_issue_cycles as f64;
        let flits = 2.0 * c.flits(2048) + c.flits(4096) + c.flits(c.header);
        let large = c.cyc(issue + p.noc_inject_cycles as f64 + flits);
        assert!((c.inject(2, 2048, 2) - large).abs() < 1e-6, "{} vs {large}", c.inject(2, 2048, 2));
        assert!((c.inject(1, 32, 4) - c.cyc(7.0 * issue)).abs() < 1e-6, "{}", c.inject(1, 32, 4));
    }

    /// The receiver's DMA of a packet's last MTU piece is paid when that piece is full too
    /// (6000 B with the header, in 16 B words: four whole pieces), not only when it is a
    /// remainder.
    #[test]
    fn a_packet_that_fills_its_last_mtu_piece_still_pays_its_dma() {
        let c = wormhole();
        assert_eq!(c.eth_bytes(5952), 6000);
        assert!(c.hop(5952) > c.hop(5936), "{} vs {}", c.hop(5952), c.hop(5936));
    }
}
