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

use meshsim_engine::Time;
use meshsim_topology::soc::CoreCoord;

use crate::params::Params;

/// Link and port occupancy of the two NoCs of one chip.
pub struct Noc {
    grid_x: u32,
    grid_y: u32,
    /// `[noc][(y * grid_x + x) * 2 + dim]`: the out-link of a router along `dim` (0 = x,
    /// 1 = y). A route walk touches each link's free time and occupancy together, so they
    /// sit side by side.
    links: [Vec<LinkState>; 2],
    /// `[noc][y * grid_x + x]`: when a core's injection / ejection port is next free.
    inject: [Vec<Time>; 2],
    eject: [Vec<Time>; 2],
    /// Total occupancy of the ports: injection ports, then ejection ports.
    busy: [Vec<u64>; 2],
}

/// One NoC link: when it is next free and how long packets have occupied it, in picoseconds.
#[derive(Clone, Copy, Default)]
struct LinkState {
    free: u64,
    busy: u64,
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
        let nodes = (grid_x * grid_y) as usize;
        let v = |n| vec![Time::ZERO; n];
        let l = || vec![LinkState::default(); nodes * 2];
        Noc {
            grid_x,
            grid_y,
            links: [l(), l()],
            inject: [v(nodes), v(nodes)],
            eject: [v(nodes), v(nodes)],
            busy: [vec![0; nodes * 2], vec![0; nodes * 2]],
        }
    }

    /// The most occupied link or port of either NoC (the first such by NoC, position and port
    /// on a tie), or `None` if no packet was sent.
    pub fn busiest(&self) -> Option<PortUse> {
        let nodes = (self.grid_x * self.grid_y) as usize;
        let mut best: Option<PortUse> = None;
        for (noc, ports) in self.busy.iter().enumerate() {
            let links = self.links[noc].iter().map(|l| l.busy);
            for (i, b) in links.chain(ports.iter().copied()).enumerate() {
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

    /// Sends a packet of `bytes` payload from `src` to `dst` on `noc`, injected no earlier than
    /// `ready`; books every link it uses and returns when its last flit is in `dst`.
    pub fn send(
        &mut self,
        p: &Params,
        noc: usize,
        src: CoreCoord,
        dst: CoreCoord,
        bytes: u64,
        ready: Time,
    ) -> Time {
        self.send_packet(p, noc, src, dst, bytes, ready).arrive
    }

    /// [`Noc::send`], also telling when the packet's last flit left `src`.
    pub fn send_packet(
        &mut self,
        p: &Params,
        noc: usize,
        src: CoreCoord,
        dst: CoreCoord,
        bytes: u64,
        ready: Time,
    ) -> Sent {
        let flits = packet_flits(p, bytes);
        // One clock conversion per packet (exact: a whole-picosecond period multiplies).
        let period = p.cycle_ps();
        let cyc = |n: u64| period.map_or_else(|| p.cycles(n).0, |ps| n * ps);
        let occupy = cyc(flits);
        let hop = cyc(p.noc_hop_cycles);
        let s = self.node(src);
        let nodes = self.inject[noc].len();
        let inject = &mut self.inject[noc][s];
        let mut t = (ready.0 + cyc(p.noc_inject_cycles)).max(inject.0);
        *inject = Time(t + occupy);
        let flushed = Time(t + occupy);
        self.busy[noc][s] += occupy;
        let (gx, gy) = (self.grid_x as usize, self.grid_y as usize);
        let links = &mut self.links[noc];
        // Walk the route in plain integers: the head crosses each link once it is free, holding
        // it for the packet's flits, and moves on one hop latency later.
        let mut cross = |link: usize, t: &mut u64| {
            let l = &mut links[link];
            let start = (*t).max(l.free);
            l.free = start + occupy;
            *t = start + hop;
            l.busy += occupy;
        };
        let (mut x, mut y) = (src.x as usize, src.y as usize);
        let (dx, dy) = (dst.x as usize, dst.y as usize);
        if noc == 1 {
            // NoC1 goes −y (up) first, then −x: the reverse of the NoC0 route from `dst` to
            // `src` (tt-isa-documentation's `NoC/RoutingPaths.md`, the same on both
            // architectures; `shared/fabric.md` §12).
            while y != dy {
                cross((y * gx + x) * 2 + 1, &mut t);
                y = if y == 0 { gy - 1 } else { y - 1 };
            }
        }
        while x != dx {
            cross((y * gx + x) * 2, &mut t);
            x = if noc == 0 {
                if x + 1 == gx { 0 } else { x + 1 }
            } else if x == 0 {
                gx - 1
            } else {
                x - 1
            };
        }
        while y != dy {
            cross((y * gx + x) * 2 + 1, &mut t);
            y = if noc == 0 {
                if y + 1 == gy { 0 } else { y + 1 }
            } else if y == 0 {
                gy - 1
            } else {
                y - 1
            };
        }
        let d = self.node(dst);
        let eject = &mut self.eject[noc][d];
        let start = t.max(eject.0);
        *eject = Time(start + occupy);
        self.busy[noc][nodes + d] += occupy;
        Sent { arrive: Time(start + occupy + cyc(p.noc_eject_cycles)), flushed }
    }
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
        // A packet from another core crossing one shared link waits for it.
        let other = noc.send(&p, 0, c(2, 1), c(3, 1), 32, Time::ZERO);
        assert!(other > Time::from_ns(257));
    }

    #[test]
    fn noc1_goes_up_first_then_left_the_reverse_of_a_noc0_route() {
        // From (5, 1) to (2, 8) on NoC1: −y first goes up column 5 (wrapping) and crosses row
        // 8's x links out of (5,8), (4,8) and (3,8), not row 1's; NoC0 from (2, 8) to (5, 1)
        // crosses the same x links the other way round the same row.
        let x_links = |noc: &Noc| {
            let mut v: Vec<(u32, u32)> = (0..10)
                .flat_map(|x| (0..12).map(move |y| (x, y)))
                .filter(|&(x, y)| noc.links[1][(y as usize * 10 + x as usize) * 2].busy > 0)
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
            (0..10).filter(|&x| noc0.links[0][(8 * 10 + x) * 2].busy > 0).map(|x| (x as u32, 8)).collect();
        assert_eq!(row, vec![(2, 8), (3, 8), (4, 8)]);
        // The same hops on either NoC, so an idle packet takes the same time.
        assert_eq!(t, Noc::new(10, 12).send(&p, 0, c(2, 8), c(5, 1), 64, Time::ZERO));
    }
}
