//! What a fabric packet carries: its route (1D hop codes or a 2D mesh route, and where it
//! goes on from each router), the NoC command it performs at its destination, and its header
//! as the side table holds it.

use super::Dir;

/// The most hops a 1D low-latency header routes (its 64 B form; the 48 B one carries up to
/// 16): `shared/fabric.md` §2, `fabric_edm_packet_header.hpp @01656bf7`.
pub const MAX_HOPS_1D: u32 = 64;

/// The route of a packet: 1D codes, or a 2D mesh route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// 1D: one 2-bit code per hop, lowest first: 01 write, 10 forward, 11 write and forward;
    /// up to [`MAX_HOPS_1D`] hops.
    Line(u128),
    /// 2D: a leg along one direction, then (N/S legs) east and west legs.
    Mesh(MeshRoute),
}

/// Where a packet goes on from a router that received it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// On along the line (1D): the router facing the other way.
    Onward,
    /// To the chip's router facing this direction (2D).
    Toward(Dir),
}

/// What a router does with a packet it received: write it here, and forward it (up to three
/// ways on a mesh, one on a line) with the route the next router reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// Write the payload on this chip.
    pub write: bool,
    /// Forwards: where, and the route from there; `count` are used.
    pub forwards: [(Turn, Route); 3],
    /// Forwards used.
    pub count: usize,
}

impl Step {
    fn new(write: bool) -> Step {
        Step { write, forwards: [(Turn::Onward, Route::Line(0)); 3], count: 0 }
    }

    fn push(&mut self, turn: Turn, route: Route) {
        self.forwards[self.count] = (turn, route);
        self.count += 1;
    }

    /// The forwards used.
    pub fn forwards(&self) -> &[(Turn, Route)] {
        &self.forwards[..self.count]
    }
}

/// A 2D route as the router that receives the packet reads it: the leg it travels, the hops
/// left on that leg beyond this chip, and — on a north/south leg — the east and west legs that
/// follow (a unicast's last leg, or a multicast's spines, branched at every chip of the trunk
/// after the first hop).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeshRoute {
    /// Direction of the current leg.
    pub dir: Dir,
    /// Hops left on it after this chip.
    pub left: u8,
    /// East and west legs after a north/south leg (their hop counts).
    pub east: u8,
    /// See `east`.
    pub west: u8,
    /// Multicast: every chip on the way writes (and trunk chips branch east and west).
    pub mcast: bool,
}

impl MeshRoute {
    /// What the router receiving a packet on this route does.
    pub fn step(self) -> Step {
        let leg = |dir: Dir, hops: u8, mcast: bool| {
            Route::Mesh(MeshRoute { dir, left: hops - 1, east: 0, west: 0, mcast })
        };
        if self.mcast {
            let mut s = Step::new(true);
            if self.left > 0 {
                s.push(Turn::Toward(self.dir), Route::Mesh(MeshRoute { left: self.left - 1, ..self }));
            }
            if self.dir.vertical() {
                if self.east > 0 {
                    s.push(Turn::Toward(Dir::E), leg(Dir::E, self.east, true));
                }
                if self.west > 0 {
                    s.push(Turn::Toward(Dir::W), leg(Dir::W, self.west, true));
                }
            }
            return s;
        }
        let mut s = Step::new(false);
        if self.left > 0 {
            s.push(Turn::Toward(self.dir), Route::Mesh(MeshRoute { left: self.left - 1, ..self }));
        } else if self.dir.vertical() && self.east > 0 {
            s.push(Turn::Toward(Dir::E), leg(Dir::E, self.east, false));
        } else if self.dir.vertical() && self.west > 0 {
            s.push(Turn::Toward(Dir::W), leg(Dir::W, self.west, false));
        } else {
            s.write = true;
        }
        s
    }
}

impl Route {
    /// Unicast to the chip `hops` away: `hops - 1` forwards, then a write.
    pub fn unicast(hops: u32) -> Route {
        assert!((1..=MAX_HOPS_1D).contains(&hops), "a 1D route spans 1 to {MAX_HOPS_1D} hops");
        Route::Line((0..hops - 1).fold(0, |r, i| r | 0b10 << (2 * i)) | 0b01 << (2 * (hops - 1)))
    }

    /// 2D unicast over `dy` rows (positive: south) and then `dx` columns (positive: east), N/S
    /// first; with the direction of the first hop, which picks the injecting router.
    pub fn mesh_unicast(dy: i32, dx: i32) -> (Dir, Route) {
        assert!(dy != 0 || dx != 0, "a route goes somewhere");
        let (east, west) = (dx.max(0) as u8, (-dx).max(0) as u8);
        let r = if dy != 0 {
            let dir = if dy > 0 { Dir::S } else { Dir::N };
            MeshRoute { dir, left: dy.unsigned_abs() as u8 - 1, east, west, mcast: false }
        } else {
            let dir = if dx > 0 { Dir::E } else { Dir::W };
            MeshRoute { dir, left: dx.unsigned_abs() as u8 - 1, east: 0, west: 0, mcast: false }
        };
        (r.dir, Route::Mesh(r))
    }

    /// 2D multicast along `dir` over `hops` chips; on a north/south trunk every chip reached
    /// also branches `east` and `west` chips along its row (spines).
    pub fn mesh_multicast(dir: Dir, hops: u8, east: u8, west: u8) -> Route {
        assert!(hops >= 1, "a multicast reaches at least one chip");
        let (east, west) = if dir.vertical() { (east, west) } else { (0, 0) };
        Route::Mesh(MeshRoute { dir, left: hops - 1, east, west, mcast: true })
    }

    /// Multicast to `range` chips starting `start` hops away: forwards up to the first, then
    /// write-and-forward, ending with a write.
    pub fn multicast(start: u32, range: u32) -> Route {
        assert!(
            start >= 1 && range >= 1 && start + range - 1 <= MAX_HOPS_1D,
            "a 1D route spans 1 to {MAX_HOPS_1D} hops"
        );
        let mut r = 0;
        for i in 0..start - 1 {
            r |= 0b10 << (2 * i);
        }
        for j in 0..range {
            let hop = start - 1 + j;
            let code = if j + 1 == range { 0b01 } else { 0b11 };
            r |= code << (2 * hop);
        }
        Route::Line(r)
    }

    /// Hops of the longest way the packet travels.
    pub fn hops(self) -> u32 {
        match self {
            Route::Line(r) => (128 - r.leading_zeros()).div_ceil(2),
            Route::Mesh(m) => {
                let legs = if m.dir.vertical() { m.east.max(m.west) } else { 0 };
                1 + m.left as u32 + legs as u32
            }
        }
    }

    /// What the receiving router does.
    pub fn step(self) -> Step {
        match self {
            Route::Line(r) => {
                let mut s = Step::new(r & 0b01 != 0);
                if r & 0b10 != 0 {
                    s.push(Turn::Onward, Route::Line(r >> 2));
                }
                s
            }
            Route::Mesh(m) => m.step(),
        }
    }
}

/// What the receiving router does with a packet's payload on the destination chip (the
/// header's NoC command union and `noc_send_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NocCmd {
    /// Unicast write of the payload to a NoC address.
    Write {
        /// Destination NoC address on the receiving chip.
        dst: u64,
    },
    /// A 4-byte value written to a NoC address; no payload.
    Inline {
        /// Destination NoC address.
        dst: u64,
        /// The value.
        value: u32,
    },
    /// An atomic increment of a semaphore; no payload.
    AtomicInc {
        /// The semaphore's NoC address.
        sem: u64,
        /// The increment.
        inc: u32,
        /// Wait for this channel's earlier writes to flush first.
        flush: bool,
    },
    /// The payload written, then (after it flushed) a semaphore incremented.
    FusedWriteInc {
        /// Destination NoC address.
        dst: u64,
        /// The semaphore's NoC address.
        sem: u64,
        /// The increment.
        inc: u32,
    },
    /// The payload split into 2-4 chunks, each written to its own address.
    Scatter {
        /// `(NoC address, bytes)` of each chunk; `count` are used.
        chunks: [(u64, u64); 4],
        /// Chunks used, 2 to 4.
        count: u8,
    },
}

impl NocCmd {
    /// Writes of whole pages, one per NoC address of `pages`: a unicast write for one page, a
    /// scatter write for 2-4.
    pub fn pages(pages: &[u64], page_bytes: u64) -> NocCmd {
        assert!((1..=4).contains(&pages.len()), "a packet carries 1 to 4 pages");
        if let [dst] = pages {
            return NocCmd::Write { dst: *dst };
        }
        let mut chunks = [(0, 0); 4];
        for (c, &dst) in chunks.iter_mut().zip(pages) {
            *c = (dst, page_bytes);
        }
        NocCmd::Scatter { chunks, count: pages.len() as u8 }
    }

    /// The calibration CSV's name of the command type.
    pub fn name(&self) -> &'static str {
        match self {
            NocCmd::Write { .. } => "unicast_write",
            NocCmd::Inline { .. } => "unicast_inline_write",
            NocCmd::AtomicInc { .. } => "atomic_inc",
            NocCmd::FusedWriteInc { .. } => "fused_atomic_inc",
            NocCmd::Scatter { .. } => "unicast_scatter_write",
        }
    }
}

/// A packet header, as the side table carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The NoC command at the destination(s).
    pub cmd: NocCmd,
    /// Payload bytes (0 for inline writes and increments).
    pub payload: u64,
    /// The route, advanced once per hop.
    pub route: Route,
    /// The sender channel it was sent from (filled in by the router).
    pub src_ch: u8,
}
