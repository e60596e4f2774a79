//! The on-chip NoCs: two 2D tori per chip, dimension-ordered routing, per-link contention.
//!
//! ```text
//!  core ──inject──► router ─link─► router ─link─► … ──eject──► core
//!  NoC0: +x (wrapping) then +y        NoC1: −y (wrapping) then −x
//! ```
//!
//! Timing is per packet, never per flit: a packet of F flits (one header flit plus its payload
//! in 32 B flits) occupies each link of its route for F cycles, starting when both the packet's
//! head has arrived and the link is free; the head moves on one hop latency later. The
//! injection and ejection ports of each core are links too. A later packet on the same route
//! therefore never overtakes an earlier one, so a write and the semaphore increment issued after
//! it on the same NoC arrive in order.
//!
//! A link serves packets in the order their heads reach it, as the hardware's arbiters do, not
//! in the order they were booked: a packet that reaches a link later than it would on an idle
//! NoC (a DRAM read's answer that waits for its bank, a packet queued at an earlier link)
//! leaves the link idle until then, and a packet whose head arrives in that idle time and whose
//! flits fit in it crosses first ([`Noc::book`]). A link keeps its latest four such intervals.

use meshsim_engine::Time;
use meshsim_topology::soc::CoreCoord;

use crate::params::Params;

/// Link and port occupancy of the two NoCs of one chip.
pub struct Noc {
    grid_x: u32,
    grid_y: u32,
    /// `[noc][i]`: a link or port, `i` as [`Noc::busiest`] counts them: the out-link of router
    /// `(y * grid_x + x)` along `dim` (0 = x, 1 = y) at `(y * grid_x + x) * 2 + dim`, then the
    /// cores' injection ports, then their ejection ports. A route walk touches each once.
    res: [Vec<LinkState>; 2],
    /// `[noc][i]`: the older idle intervals of the same link or port, touched only when one
    /// still open gives way to a newer one or a packet that finds the link busy may take one.
    idle: [Vec<Idle>; 2],
    /// The simulated time of the latest send: no packet is injected before it.
    now: u64,
}

/// One NoC link or port, in picoseconds: when it is next free, how long packets have occupied
/// it, its newest idle interval before a later booking, and until when the older ones it keeps
/// (in [`Noc`]'s `idle`) last (at most: 0 when it keeps none).
#[derive(Clone, Copy, Default)]
struct LinkState {
    free: u64,
    busy: u64,
    gap: Gap,
    older_to: u64,
}

/// Older idle intervals a link or port keeps beside its newest ([`Idle`]).
const OLDER: usize = 3;

/// The older idle intervals of a link or port ([`Gap`]), a ring whose newest is at `newest`.
#[derive(Clone, Copy, Default)]
struct Idle {
    gaps: [Gap; OLDER],
    newest: usize,
}

/// An idle interval of a link or port before a later booking (`from..to`, empty when equal),
/// and the earliest head arrival of the packets booked after it and before the next interval:
/// a packet whose head came later than any packet booked after an interval may not take it
/// (first come, first served, so packets on one route stay in order).
#[derive(Clone, Copy, Default)]
struct Gap {
    from: u64,
    to: u64,
    first: u64,
}

impl Gap {
    /// Where a head at `t` that must come before `after` starts in the interval if it holds
    /// `occupy`.
    fn fit(&self, t: u64, occupy: u64, after: u64) -> Option<u64> {
        let start = self.from.max(t);
        (t < after && start + occupy <= self.to).then_some(start)
    }
}

impl Idle {
    /// Keeps `g` as the newest older interval (the oldest kept goes).
    fn push(&mut self, g: Gap) {
        self.newest = (self.newest + 1) % OLDER;
        self.gaps[self.newest] = g;
    }

    /// For a head at `t` that must come before `after` (the earliest head booked after the
    /// older intervals): the start of the earliest interval that holds `occupy` and that the
    /// head reaches before every packet booked after it, which stays idle after the packet;
    /// `None` if none does (the caller then books it later and notes its head there).
    fn take(&mut self, t: u64, occupy: u64, after: u64) -> Option<u64> {
        // Newest to oldest: the earliest head booked after each interval.
        let mut firsts = [0; OLDER];
        let mut first = after;
        for (j, f) in firsts.iter_mut().enumerate() {
            first = first.min(self.gaps[(self.newest + OLDER - j) % OLDER].first);
            *f = first;
        }
        for j in (0..OLDER).rev() {
            let i = (self.newest + OLDER - j) % OLDER;
            if let Some(start) = self.gaps[i].fit(t, occupy, firsts[j]) {
                // Booked after the interval before this one.
                self.gaps[i].from = start + occupy;
                if j + 1 < OLDER {
                    let p = &mut self.gaps[(i + OLDER - 1) % OLDER];
                    p.first = p.first.min(t);
                }
                return Some(start);
            }
        }
        None
    }
}

impl Noc {
    /// Books `occupy` on link or port `i` of `noc` for a head that arrives at `t`: first come,
    /// first served by head arrival. A head that finds it busy takes the earliest idle
    /// interval before a later booking that holds it and that it reaches before every packet
    /// booked after it, else waits until it is free. A `delayed` head (its packet queued
    /// earlier on its route or waits for its data) leaves the time until it arrives idle for
    /// others; a packet that is not delayed claims its route from its issue (the cycles its
    /// head takes to travel are not offered to others). Returns when the packet starts on it.
    #[inline]
    fn book(&mut self, noc: usize, i: usize, t: u64, occupy: u64, delayed: bool) -> u64 {
        let (l, now) = (&mut self.res[noc][i], self.now);
        l.busy += occupy;
        if t >= l.free {
            // A tail booking's head comes after every interval's first: nothing to note.
            let idle = l.free.max(now);
            l.free = t + occupy;
            if delayed && t > idle {
                let g = std::mem::replace(&mut l.gap, Gap { from: idle, to: t, first: t });
                if g.to > now && g.from < g.to {
                    l.older_to = g.to;
                    self.idle[noc][i].push(g);
                }
            }
            return t;
        }
        self.book_busy(noc, i, t, occupy)
    }

    /// [`Noc::book`] of a head that finds its link or port busy.
    #[inline(never)]
    fn book_busy(&mut self, noc: usize, i: usize, t: u64, occupy: u64) -> u64 {
        let (l, now) = (&mut self.res[noc][i], self.now);
        if t >= l.gap.to {
            // After every interval (the newest ends last), and after every head booked after
            // them (each came no later than the newest's end).
            let start = l.free;
            l.free += occupy;
            return start;
        }
        let (gap, older) = (l.gap, l.older_to > now && t < l.older_to);
        let taken = if older { self.idle[noc][i].take(t, occupy, gap.first) } else { None };
        let l = &mut self.res[noc][i];
        if let Some(start) = taken {
            return start;
        }
        if let Some(start) = gap.fit(t, occupy, gap.first) {
            l.gap.from = start + occupy;
            if older {
                let idle = &mut self.idle[noc][i];
                let p = &mut idle.gaps[idle.newest];
                p.first = p.first.min(t);
            }
            return start;
        }
        l.gap.first = l.gap.first.min(t);
        let start = l.free;
        l.free += occupy;
        start
    }
}

/// A NoC link or port of one router.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Port {
    /// The out-link along x (NoC0: +x, NoC1: −x).
    X,
    /// The out-link along y (NoC0: +y, NoC1: −y).
    Y,
    /// The core's injection port.
    Inject,
    /// The core's ejection port.
    Eject,
}

/// How long one NoC link or port was occupied in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortUse {
    /// NoC 0 or 1.
    pub noc: usize,
    /// The router's grid position.
    pub at: CoreCoord,
    /// Which link or port.
    pub port: Port,
    /// Total time packets occupied it.
    pub busy: Time,
}

/// Flits of a NoC packet carrying `bytes`: a header flit and the payload's.
pub fn packet_flits(p: &Params, bytes: u64) -> u64 {
    1 + bytes.div_ceil(p.noc_flit_bytes)
}

impl Noc {
    /// Idle NoCs on a `grid_x` by `grid_y` grid.
    pub fn new(grid_x: u32, grid_y: u32) -> Noc {
        // Each NoC's links and ports are made when its first packet crosses it
        // ([`Noc::book_route`]): a chip whose NoCs carry nothing (every chip of a flow-model
        // run) holds no state for them.
        Noc { grid_x, grid_y, res: [Vec::new(), Vec::new()], idle: [Vec::new(), Vec::new()], now: 0 }
    }

    /// The most occupied link or port of either NoC (the first such by NoC, position and port
    /// on a tie), or `None` if no packet was sent.
    pub fn busiest(&self) -> Option<PortUse> {
        let nodes = (self.grid_x * self.grid_y) as usize;
        let mut best: Option<PortUse> = None;
        for (noc, res) in self.res.iter().enumerate() {
            for (i, b) in res.iter().map(|l| l.busy).enumerate() {
                if b == 0 || best.is_some_and(|x| x.busy.0 >= b) {
                    continue;
                }
                let (node, port) = match i {
                    i if i < nodes * 2 => (i / 2, if i % 2 == 0 { Port::X } else { Port::Y }),
                    i if i < nodes * 3 => (i - nodes * 2, Port::Inject),
                    i => (i - nodes * 3, Port::Eject),
                };
                let at = CoreCoord { x: node as u32 % self.grid_x, y: node as u32 / self.grid_x };
                best = Some(PortUse { noc, at, port, busy: Time(b) });
            }
        }
        best
    }

    fn node(&self, c: CoreCoord) -> usize {
        (c.y * self.grid_x + c.x) as usize
    }

    /// Number of router hops from `src` to `dst` on `noc`.
    pub fn hops(&self, noc: usize, src: CoreCoord, dst: CoreCoord) -> u32 {
        let (gx, gy) = (self.grid_x, self.grid_y);
        let (dx, dy) = if noc == 0 {
            ((dst.x + gx - src.x) % gx, (dst.y + gy - src.y) % gy)
        } else {
            ((src.x + gx - dst.x) % gx, (src.y + gy - dst.y) % gy)
        };
        dx + dy
    }

    /// How long a one-flit response (an atomic's answer, a write's acknowledgement) takes from
    /// `from` back to `to` on `noc`: it goes on round the NoC the way requests do, and is not
    /// booked on the links.
    pub fn response(&self, p: &Params, noc: usize, from: CoreCoord, to: CoreCoord) -> Time {
        p.cycles(
            self.hops(noc, from, to) as u64 * p.noc_hop_cycles + p.noc_inject_cycles + p.noc_eject_cycles + 1,
        )
    }

    /// Sends a packet of `bytes` payload from `src` to `dst` on `noc`, ready at `now`, the
    /// simulated time; books every link it uses and returns when its last flit is in `dst`.
    pub fn send(
        &mut self,
        p: &Params,
        noc: usize,
        src: CoreCoord,
        dst: CoreCoord,
        bytes: u64,
        now: Time,
    ) -> Time {
        self.send_packet(p, noc, src, dst, bytes, now).arrive
    }

    /// [`Noc::send`], also telling when the packet's last flit left `src`.
    pub fn send_packet(
        &mut self,
        p: &Params,
        noc: usize,
        src: CoreCoord,
        dst: CoreCoord,
        bytes: u64,
        now: Time,
    ) -> Sent {
        self.now = self.now.max(now.0);
        self.book_route(p, noc, (src, dst), bytes, now)
    }

    /// Sends a packet that will be ready at `ready`, later than the simulated time (a read's
    /// answer, which leaves once its request has arrived and, from DRAM, once the bank has
    /// streamed it): the links it will cross stay free to earlier packets until it reaches
    /// them. Returns when it is in `dst`.
    pub fn send_later(
        &mut self,
        p: &Params,
        noc: usize,
        src: CoreCoord,
        dst: CoreCoord,
        bytes: u64,
        ready: Time,
    ) -> Time {
        self.book_route(p, noc, (src, dst), bytes, ready).arrive
    }

    /// Books a packet's injection port, route links and ejection port from `ready` on.
    fn book_route(
        &mut self,
        p: &Params,
        noc: usize,
        (src, dst): (CoreCoord, CoreCoord),
        bytes: u64,
        ready: Time,
    ) -> Sent {
        let flits = packet_flits(p, bytes);
        // One clock conversion per packet (exact: a whole-picosecond period multiplies).
        let period = p.cycle_ps();
        let cyc = |n: u64| period.map_or_else(|| p.cycles(n).0, |ps| n * ps);
        let occupy = cyc(flits);
        let hop = cyc(p.noc_hop_cycles);
        let nodes = (self.grid_x * self.grid_y) as usize;
        if self.res[noc].is_empty() {
            self.res[noc] = vec![LinkState::default(); nodes * 4];
            self.idle[noc] = vec![Idle::default(); nodes * 4];
        }
        let (s, d) = (self.node(src), self.node(dst));
        // Whether the packet's head is later than on an idle NoC: it waits for its data, or
        // queued at an earlier link or port.
        let mut delayed = ready.0 > self.now;
        let mut t = ready.0 + cyc(p.noc_inject_cycles);
        let start = self.book(noc, nodes * 2 + s, t, occupy, delayed);
        delayed |= start > t;
        t = start;
        let flushed = Time(t + occupy);
        // Walk the route: the head crosses each link once it may, holding it for the
        // packet's flits, and moves on one hop latency later.
        walk_links(self.grid_x, self.grid_y, noc, (src, dst), |link| {
            let start = self.book(noc, link, t, occupy, delayed);
            delayed |= start > t;
            t = start + hop;
        });
        let start = self.book(noc, nodes * 3 + d, t, occupy, delayed);
        Sent { arrive: Time(start + occupy + cyc(p.noc_eject_cycles)), flushed }
    }
}

/// Calls `cross` with every link of the route from `src` to `dst` on `noc`, in order, each
/// numbered as [`Noc`] numbers its links (the out-link of router `(y * grid_x + x)` along x at
/// `2 * router`, along y at `2 * router + 1`): NoC0 goes +x (wrapping) then +y, NoC1 −y
/// (up, wrapping) first, then −x — the reverse of the NoC0 route from `dst` to `src`
/// (tt-isa-documentation's `NoC/RoutingPaths.md`, the same on both architectures;
/// `shared/fabric.md` §12). The packet model books these links; the flow model shares them.
#[inline(always)]
pub fn walk_links(
    grid_x: u32,
    grid_y: u32,
    noc: usize,
    (src, dst): (CoreCoord, CoreCoord),
    mut cross: impl FnMut(usize),
) {
    let (gx, gy) = (grid_x as usize, grid_y as usize);
    let (mut x, mut y) = (src.x as usize, src.y as usize);
    let (dx, dy) = (dst.x as usize, dst.y as usize);
    // One hop along a torus dimension of `n`: up on NoC0, down on NoC1.
    let step = |v: usize, n: usize| {
        if noc == 0 {
            if v + 1 == n { 0 } else { v + 1 }
        } else if v == 0 {
            n - 1
        } else {
            v - 1
        }
    };
    if noc == 1 {
        while y != dy {
            cross((y * gx + x) * 2 + 1);
            y = step(y, gy);
        }
    }
    while x != dx {
        cross((y * gx + x) * 2);
        x = step(x, gx);
    }
    while y != dy {
        cross((y * gx + x) * 2 + 1);
        y = step(y, gy);
    }
}

/// Calls `cross` with every link and port a packet from `src` to `dst` on `noc` holds, in
/// order, numbered as [`Noc`] numbers them: `src`'s injection port, the route's links
/// ([`walk_links`]), `dst`'s ejection port.
pub fn walk_ports(
    grid_x: u32,
    grid_y: u32,
    noc: usize,
    (src, dst): (CoreCoord, CoreCoord),
    mut cross: impl FnMut(usize),
) {
    let nodes = (grid_x * grid_y) as usize;
    let node = |c: CoreCoord| (c.y * grid_x + c.x) as usize;
    cross(nodes * 2 + node(src));
    walk_links(grid_x, grid_y, noc, (src, dst), &mut cross);
    cross(nodes * 3 + node(dst));
}

/// When a NoC packet's last flit left its source and when it was in its destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sent {
    /// The source may be overwritten from here on ("flushed").
    pub flushed: Time,
    /// The packet is in the destination.
    pub arrive: Time,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(x: u32, y: u32) -> CoreCoord {
        CoreCoord { x, y }
    }

    #[test]
    fn routes_wrap_in_the_direction_of_each_noc() {
        let noc = Noc::new(10, 12);
        assert_eq!(noc.hops(0, c(9, 0), c(1, 0)), 2);
        assert_eq!(noc.hops(1, c(9, 0), c(1, 0)), 8);
        assert_eq!(noc.hops(0, c(1, 1), c(1, 11)), 10);
        assert_eq!(noc.hops(1, c(1, 1), c(1, 11)), 2);
    }

    /// The ports `walk_ports` names (which the flow model's NoC resources follow) are the ones
    /// a packet books, on both NoCs and across the wrap.
    #[test]
    fn walk_ports_names_the_ports_a_packet_books() {
        let p = Params::default();
        let pairs = [(c(1, 1), c(9, 0)), (c(4, 1), c(2, 0)), (c(9, 0), c(5, 11)), (c(2, 6), c(2, 6))];
        for noc in 0..2 {
            for &(src, dst) in &pairs {
                let mut booked = Noc::new(10, 12);
                booked.send(&p, noc, src, dst, 64, Time::ZERO);
                let busy: Vec<usize> =
                    (0..booked.res[noc].len()).filter(|&i| booked.res[noc][i].busy > 0).collect();
                let mut walked = Vec::new();
                walk_ports(10, 12, noc, (src, dst), |i| walked.push(i));
                let hops = booked.hops(noc, src, dst) as usize;
                assert_eq!(walked.len(), hops + 2, "NoC{noc} {src} -> {dst}: {walked:?}");
                walked.sort_unstable();
                assert_eq!(walked, busy, "NoC{noc} {src} -> {dst}");
            }
        }
    }

    #[test]
    fn occupancy_is_summed_per_link_and_port_and_the_busiest_is_named() {
        let p = Params::default();
        let mut noc = Noc::new(10, 12);
        assert_eq!(noc.busiest(), None);
        // Two packets from (1,1) east to (4,1) and one from (2,1) to (3,1): the x-link out of
        // (2,1) carries all three.
        noc.send(&p, 0, c(1, 1), c(4, 1), 64, Time::ZERO);
        noc.send(&p, 0, c(1, 1), c(4, 1), 64, Time::ZERO);
        noc.send(&p, 0, c(2, 1), c(3, 1), 64, Time::ZERO);
        let flits = 1 + 64 / p.noc_flit_bytes;
        let want = PortUse { noc: 0, at: c(2, 1), port: Port::X, busy: Time(3 * p.cycles(flits).0) };
        assert_eq!(noc.busiest(), Some(want));
    }

    #[test]
    fn an_idle_packet_takes_inject_hops_flits_and_eject() {
        let p = Params::default();
        let mut noc = Noc::new(10, 12);
        // 2 hops, 64 B = 2 payload flits + 1 header: 5 + 2*9 + 3 + 5 = 31 cycles.
        assert_eq!(noc.send(&p, 0, c(9, 0), c(1, 0), 64, Time::ZERO), Time::from_ns(31));
    }

    #[test]
    fn packets_sharing_a_link_serialise_and_stay_in_order() {
        let p = Params::default();
        let mut noc = Noc::new(10, 12);
        let big = noc.send(&p, 0, c(1, 1), c(4, 1), 8192, Time::ZERO);
        let sem = noc.send(&p, 0, c(1, 1), c(4, 1), 4, Time::ZERO);
        assert!(sem > big, "the increment arrives after the write it follows");
        // A packet from another core that reaches a shared link while the write holds it
        // waits for it.
        let other = noc.send(&p, 0, c(2, 1), c(3, 1), 32, Time::from_ns(20));
        assert!(other > Time::from_ns(257));
    }

    #[test]
    fn a_packet_crosses_a_link_in_the_idle_time_before_a_later_booking() {
        let p = Params::default();
        let mut noc = Noc::new(10, 12);
        // A DRAM answer from (1,1) to (4,1) booked to leave 1 µs from now holds the x links
        // out of (1,1), (2,1) and (3,1) only from then on.
        let late = noc.send_later(&p, 0, c(1, 1), c(4, 1), 2048, Time::from_ns(1000));
        assert!(late > Time::from_ns(1000));
        // A write across the same links now goes first, as on an idle NoC.
        let idle = Noc::new(10, 12).send(&p, 0, c(2, 1), c(4, 1), 2048, Time::ZERO);
        assert_eq!(noc.send(&p, 0, c(2, 1), c(4, 1), 2048, Time::ZERO), idle);
        // One that does not fit before the booking waits for it.
        let mut noc = Noc::new(10, 12);
        noc.send_later(&p, 0, c(1, 1), c(4, 1), 2048, Time::from_ns(20));
        assert!(noc.send(&p, 0, c(2, 1), c(4, 1), 2048, Time::ZERO) > late - Time::from_ns(1000));
    }

    #[test]
    fn a_later_packet_never_passes_one_whose_head_came_first() {
        let p = Params::default();
        // The x link out of (3,1) is booked from 100 ns on, for a DRAM answer.
        let booked = || {
            let mut noc = Noc::new(10, 12);
            noc.send_later(&p, 0, c(3, 1), c(5, 1), 4096, Time::from_ns(100));
            noc
        };
        // A large write from (0,1) reaches it after 3 hops but does not fit before the
        // booking, so it goes after; an increment from (3,1) whose head gets there first fits
        // and passes both.
        let mut noc = booked();
        let write = noc.send(&p, 0, c(0, 1), c(5, 1), 8192, Time::ZERO);
        let first = noc.send(&p, 0, c(3, 1), c(4, 1), 4, Time::ZERO);
        assert!(first < Time::from_ns(100) && write > Time::from_ns(357));
        // One issued once the write's head is there would fit as well, but may not pass it.
        let late = noc.send(&p, 0, c(3, 1), c(4, 1), 4, Time::from_ns(40));
        assert!(late > Time::from_ns(357), "{late:?}");
        // Nor may the increment issued behind the write on its own route.
        let mut noc = booked();
        let write = noc.send(&p, 0, c(2, 1), c(5, 1), 8192, Time::ZERO);
        let inc = noc.send(&p, 0, c(2, 1), c(5, 1), 4, Time::ZERO);
        assert!(inc > write, "the increment lands after the write it follows");
    }

    #[test]
    fn noc1_goes_up_first_then_left_the_reverse_of_a_noc0_route() {
        // From (5, 1) to (2, 8) on NoC1: −y first goes up column 5 (wrapping) and crosses row
        // 8's x links out of (5,8), (4,8) and (3,8), not row 1's; NoC0 from (2, 8) to (5, 1)
        // crosses the same x links the other way round the same row.
        let x_links = |noc: &Noc| {
            let mut v: Vec<(u32, u32)> = (0..10)
                .flat_map(|x| (0..12).map(move |y| (x, y)))
                .filter(|&(x, y)| noc.res[1][(y as usize * 10 + x as usize) * 2].busy > 0)
                .collect();
            v.sort();
            v
        };
        let p = Params::default();
        let mut noc1 = Noc::new(10, 12);
        let t = noc1.send(&p, 1, c(5, 1), c(2, 8), 64, Time::ZERO);
        assert_eq!(x_links(&noc1), vec![(3, 8), (4, 8), (5, 8)]);
        let mut noc0 = Noc::new(10, 12);
        noc0.send(&p, 0, c(2, 8), c(5, 1), 64, Time::ZERO);
        let row: Vec<(u32, u32)> =
            (0..10).filter(|&x| noc0.res[0][(8 * 10 + x) * 2].busy > 0).map(|x| (x as u32, 8)).collect();
        assert_eq!(row, vec![(2, 8), (3, 8), (4, 8)]);
        // The same hops on either NoC, so an idle packet takes the same time.
        assert_eq!(t, Noc::new(10, 12).send(&p, 0, c(2, 8), c(5, 1), 64, Time::ZERO));
    }
}
