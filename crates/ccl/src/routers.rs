//! What a transport reports of its routers: each one's traffic, how full its channels got, how
//! long packets waited for credits and how long its core was busy, with where it runs. The
//! fabric's routers fill it (`fabric::Fabric::router_use`); a transport without routers reports
//! none. It lives beside the seam, not in a stack, so the seam names no stack.

use meshsim_engine::Time;

/// Sender channels of a 1D router: 0 for the local worker, 1 for packets forwarded from the
/// chip's opposite-facing router. Router statistics keep these two: a mesh router's forwarded
/// channels are summed into 1.
pub const SENDER_CHANNELS: usize = 2;

/// What one router did in a run: its channels' traffic, how full they got, how long a packet
/// waited for a free slot at the peer (credits), and how long its ERISC was busy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouterStats {
    /// Packets sent from sender channel 0 (local workers) and 1 (forwarded traffic).
    pub sent: [u64; SENDER_CHANNELS],
    /// Packets its receiver channel took.
    pub received: u64,
    /// Of those, packets forwarded to the next router and written on this chip.
    pub forwarded: u64,
    /// Packets written on this chip.
    pub written: u64,
    /// Most slots of each sender channel holding packets at once (not yet returned to the
    /// channel's producer).
    pub peak_slots: [u64; SENDER_CHANNELS],
    /// Most receiver slots holding packets at once (landed, not yet completed).
    pub peak_rx_slots: u64,
    /// Time a sender channel had a packet to send but the peer's receiver had no free slot.
    pub credit_wait: Time,
    /// Time its main loop spent on passes that moved something: on a router that runs on two
    /// ERISCs (Blackhole's senders on one, its receiver on the other), the busier one's, so
    /// that it is a share of one core's time.
    pub busy: Time,
}

impl RouterStats {
    /// Adds what another kernel of the same router did (a two-ERISC router's receiver loop to
    /// its sender loop's figures): counts and credit waits add, peaks and the busy time (each
    /// kernel's own core's) take the larger.
    pub fn absorb(&mut self, o: &RouterStats) {
        for c in 0..SENDER_CHANNELS {
            self.sent[c] += o.sent[c];
            self.peak_slots[c] = self.peak_slots[c].max(o.peak_slots[c]);
        }
        self.received += o.received;
        self.forwarded += o.forwarded;
        self.written += o.written;
        self.peak_rx_slots = self.peak_rx_slots.max(o.peak_rx_slots);
        self.credit_wait += o.credit_wait;
        self.busy = self.busy.max(o.busy);
    }
}

/// A router's statistics with where it runs, as the link report prints them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouterUse {
    /// Its Ethernet core.
    pub at: meshsim_topology::Endpoint,
    /// Its routing plane.
    pub plane: usize,
    /// What it did.
    pub stats: RouterStats,
}
