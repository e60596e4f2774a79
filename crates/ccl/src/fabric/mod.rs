//! TT-Fabric: the persistent, packet-switched router tt-metal runs on every active Ethernet
//! core, and the worker side that injects packets into it (`shared/fabric.md` has the sources).
//!
//! ```text
//!  worker ──NoC: payload, header, doorbell──► router sender ch0 ══Ethernet══► peer receiver
//!    ▲                                          │  (header + payload, then "packets sent")    │
//!    └──── NoC: credits (slots read) ◄──────────┘◄── completion once the slot's writes flushed ┤
//!                                  local NoC write (write, inline, inc, fused, scatter) ◄──────┤
//!           opposite router's sender ch1 ◄── NoC: whole packet, route shifted (forward) ◄─────┘
//! ```
//!
//! - [`Fabric`]: which routers exist (one per active Ethernet core and routing plane on each
//!   line of the fabric), their channel slots, and how a chip reaches another on a line.
//! - [`router`]: the router kernel — sender channels 0 (local worker) and 1 (forwarded
//!   traffic), one receiver channel, stream-register credits, the main loop and its per-pass
//!   cost `fabric_router_pass_cycles`.
//! - [`worker`]: a worker's connection — open, send (every NoC command type of the 1D
//!   header), close.
//!
//! Packet headers travel as bytes (their size is on the wire and in every NoC copy) and, for
//! the routers to read in timing mode too, as values in a per-slot side table that moves with
//! the packet: the sender's slot, then the receiver slot it is sent into, then the forwarding
//! channel's slot. A slot's entry is read only after the counter write that follows its bytes,
//! so the table obeys the same flow control as the memory.

pub(crate) mod algo;
pub(crate) mod build;
pub(crate) mod direct;
mod gather;
pub(crate) mod lines;
pub(crate) mod lower;
pub use algo::DIRECT_MAX_BYTES;
pub use build::ENTRY_BARRIER;
pub(crate) use lines::{line_planes, on_link_zero};
pub use lower::FabricTransport;
pub use schedule::DIRECT_REDUCERS;
pub mod mux;
mod packet;
pub use crate::routers::{RouterStats, RouterUse, SENDER_CHANNELS};
pub use packet::{Header, MAX_HOPS_1D, MeshRoute, NocCmd, Route, Step, Turn};
pub(crate) mod reduce;
pub(crate) mod relay;
pub mod router;
pub(crate) mod schedule;
pub mod worker;

use std::cell::RefCell;
use std::rc::Rc;

use meshsim_hw::Params;
use meshsim_hw::params::FABRIC_CONFIG_BYTES;
use meshsim_topology::soc::CoreCoord;
use meshsim_topology::{ChipIdx, Cluster, Endpoint};

/// Bytes of the 1D low-latency header for routes of up to 16 hops, and beyond
/// (`fabric_edm_packet_header.hpp @01656bf7`).
pub const HEADER_1D_BYTES: (u64, u64) = (48, 64);
/// Bytes of the 2D header (default of 80-128 B).
pub const HEADER_2D_BYTES: u64 = 96;
/// (sender, receiver) slots per channel tried in order for a 1D router whose first option is
/// (`most`, `most`) (`fabric_router_slots_1d`: Wormhole's 16, Blackhole's 32); the first whose
/// slots fit the router's L1 is used (`fabric_static_sized_channels_allocator.cpp @659e8ce7`:
/// Wormhole {16,16}, {8,16}, {8,8}, {4,8}…, Blackhole {32,32}, {16,32}, {16,16}, {8,16}…; each
/// option halves the sender slots, then the receiver slots).
pub fn slot_options_1d(most: u64) -> Vec<(u64, u64)> {
    let (mut s, mut r) = (most.max(1), most.max(1));
    let mut options = vec![(s, r)];
    while r > 1 {
        if s == r {
            s /= 2;
        } else {
            r /= 2;
        }
        options.push((s, r));
    }
    options
}
/// The same for a 2D mesh router: the architecture's first option (`fabric_mesh_sender_slots`,
/// `fabric_mesh_receiver_slots`: Wormhole (7, 11), Blackhole (8, 16)), tt-metal's (4, 8), then
/// meshsim's halvings for payloads too large for those.
pub fn slot_options_2d(first: (u64, u64)) -> Vec<(u64, u64)> {
    let mut options = vec![first];
    options.extend([(4, 8), (2, 4), (1, 2), (1, 1)].into_iter().filter(|&(s, r)| s < first.0 && r < first.1));
    options
}
/// NoC transaction ids a receiver channel rotates over: 4 on a line, 8 on a ring
/// (`fabric_erisc_router_ct_args.hpp @0263ed93`).
pub const RECEIVER_TRIDS: (u64, u64) = (4, 8);
/// Free remote slots an injection channel needs on a ring (bubble flow control). A ring's
/// injection channel also waits while forwarded packets are queued for the same link (transit
/// first: docs/model.md, "Ring arbitration").
pub const BUBBLE_SLOTS: u64 = 2;

/// Sender channels of a 2D mesh router: 0 for the local worker, 1-3 for packets forwarded from
/// each of the chip's other three routers (in [`Dir`] order).
pub const MESH_SENDER_CHANNELS: usize = 4;

/// The fabric configurations meshsim runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FabricKind {
    /// `FABRIC_1D_NEIGHBOR_EXCHANGE`: packets go one hop.
    NeighborExchange,
    /// `FABRIC_1D`: every row and every column of the mesh is its own line.
    Linear,
    /// `FABRIC_1D_RING`: the lines close into rings where the links wrap; bubble flow control
    /// and first-level acknowledgements (2026).
    Ring,
    /// `FABRIC_2D`: one router per direction of each chip of the mesh, four sender channels,
    /// packets turning between rows and columns (N/S first, then E/W).
    Mesh,
}

impl FabricKind {
    /// Whether routers run the ring's flow control.
    pub fn is_ring(self) -> bool {
        self == FabricKind::Ring
    }

    /// Sender channels per router.
    pub fn sender_channels(self) -> usize {
        if self == FabricKind::Mesh { MESH_SENDER_CHANNELS } else { SENDER_CHANNELS }
    }
}

/// A direction on the mesh: east (up the columns), west, north (down the rows), south.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dir {
    /// Toward higher columns.
    E,
    /// Toward lower columns.
    W,
    /// Toward lower rows.
    N,
    /// Toward higher rows.
    S,
}

impl Dir {
    /// Every direction, in channel order.
    pub const ALL: [Dir; 4] = [Dir::E, Dir::W, Dir::N, Dir::S];

    /// Whether the direction runs along a column (north or south).
    pub fn vertical(self) -> bool {
        matches!(self, Dir::N | Dir::S)
    }

    /// Its index in [`Dir::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The sender channel of a router facing `self` that takes packets from the chip's router
    /// facing `from`: 1-3, the other directions in [`Dir::ALL`] order.
    pub fn channel_from(self, from: Dir) -> usize {
        debug_assert_ne!(self, from, "a router does not forward to itself");
        1 + Dir::ALL.iter().filter(|&&d| d != self).position(|&d| d == from).expect("another direction")
    }
}

/// A fabric configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FabricConfig {
    /// Line, ring or neighbour exchange.
    pub kind: FabricKind,
    /// Largest payload of a packet (global, set at init).
    pub max_payload_bytes: u64,
    /// Routing planes: parallel links between neighbours, each an independent fabric.
    pub planes: usize,
}

impl FabricConfig {
    /// A 1D line fabric of one plane at the architecture's default payload.
    pub fn linear(p: &Params) -> FabricConfig {
        FabricConfig {
            kind: FabricKind::Linear,
            max_payload_bytes: p.fabric_default_payload_bytes,
            planes: 1,
        }
    }
}

/// A fabric that cannot be built as asked.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum FabricError {
    /// A packet payload the router cannot carry.
    #[error(
        "packet size {asked} B (--packet-size, packet_size): the fabric routers' payload must be a positive multiple of 16 up to {max} B on this architecture"
    )]
    Payload {
        /// The payload asked for.
        asked: u64,
        /// The architecture's largest (`fabric_max_payload_bytes`).
        max: u64,
    },
    /// Slots do not fit the router's L1.
    #[error("fabric packet slots of {slot} B do not fit the router's {have} B of L1 even one per channel")]
    DoesNotFit {
        /// Bytes per slot.
        slot: u64,
        /// The router's L1 for slots.
        have: u64,
    },
    /// Fewer parallel usable links than routing planes asked for somewhere.
    #[error("{planes} routing plane(s) asked for, but chips {a} and {b} have {have} usable link(s)")]
    Planes {
        /// Planes asked for.
        planes: usize,
        /// One chip (file id).
        a: u64,
        /// The other (file id).
        b: u64,
        /// Usable links between them.
        have: usize,
    },
    /// A 2D fabric on a cluster with no mesh grid to follow.
    #[error("a 2D (mesh) fabric needs a cluster whose chips form a mesh (this one is {0})")]
    NoGrid(String),
}

/// A router's place in the fabric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouterSpec {
    /// Its chip and Ethernet channel.
    pub at: Endpoint,
    /// The router at the other end of its link.
    pub peer: Endpoint,
    /// The router on the same chip, line and plane facing the other way, which forwards into
    /// this one's sender channel 1 (none at a line's end).
    pub partner: Option<u8>,
    /// Index of its line.
    pub line: usize,
    /// Its routing plane.
    pub plane: usize,
    /// On a mesh, the direction it faces.
    pub dir: Option<Dir>,
    /// The routers it forwards into, with the sender channel each takes its packets on; index
    /// `o` has the downstream-credit word `DOWN_FREED[o]`.
    pub outs: Vec<Out>,
    /// Per sender channel: the router forwarding into it and the index of this router among
    /// that router's [`RouterSpec::outs`] (channel 0, the worker's, has none).
    pub ups: Vec<Option<(u8, usize)>>,
}

/// A router a receiver forwards into: its Ethernet channel on the same chip, and the sender
/// channel there that takes the packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Out {
    /// The router's Ethernet channel.
    pub chan: u8,
    /// Its sender channel.
    pub channel: usize,
    /// On a mesh, the direction it faces.
    pub dir: Option<Dir>,
}

/// Where a router keeps things in its ERISC L1 (the peer's layout mirrors it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// First byte of the router's area.
    pub base: u64,
    /// Slots per sender channel.
    pub sender_slots: u64,
    /// Slots of the receiver channel.
    pub receiver_slots: u64,
    /// Bytes per slot: header plus the largest payload, 32 B aligned.
    pub slot_bytes: u64,
    /// Header bytes.
    pub header_bytes: u64,
    /// Sender channels.
    pub channels: usize,
}

/// Offsets of the router's words from its base (each 16 B record alone, so remote writes of
/// one do not cover another).
pub mod words {
    /// Connection semaphore of sender channel 0: +1 per open, +[`CLOSE`] per close.
    pub const CONN: u64 = 0;
    /// A close request's increment of [`CONN`].
    pub const CLOSE: u32 = 1 << 16;
    /// Connection record the worker writes: its credit word's NoC address (low, high), its
    /// teardown word's NoC address (low, high).
    pub const CONN_INFO: u64 = 16;
    /// Doorbells: packets written into each sender channel (NoC increments).
    pub const DOORBELL: [u64; 4] = [32, 48, 64, 80];
    /// Packets the peer's sender channels have sent into this receiver (written over Ethernet).
    pub const RX_SENT: u64 = 96;
    /// Packets of this router's sender channels the peer acknowledged (first level).
    pub const ACKED: [u64; 4] = [112, 128, 144, 160];
    /// Packets of this router's sender channels the peer completed.
    pub const COMPLETED: [u64; 4] = [176, 192, 208, 224];
    /// Slots freed so far in the sender channel of each router this one forwards into (NoC
    /// increments from that router), by [`super::RouterSpec::outs`] index.
    pub const DOWN_FREED: [u64; 3] = [240, 256, 272];
    /// Host termination word: 2 = IMMEDIATELY_TERMINATE.
    pub const TERMINATE: u64 = 288;
    /// Staging records for the counter writes this router sends: sent, acked[4], completed[4].
    pub const STAGE: u64 = 304;
    /// Staging record of the acked count of channel `ch`.
    pub const fn stage_acked(ch: usize) -> u64 {
        STAGE + 16 + 16 * ch as u64
    }
    /// Staging record of the completed count of channel `ch`.
    pub const fn stage_completed(ch: usize) -> u64 {
        STAGE + 80 + 16 * ch as u64
    }
    /// The Ethernet handshake record.
    pub const HANDSHAKE: u64 = 448;
    /// Slots of sender channel 0 returned to its producers so far (a worker reads it at open).
    pub const CREDITED: u64 = 464;
}

impl Layout {
    /// The layout of a 1D router for `max_payload` and `route_hops` (the longest route the
    /// fabric carries), with the most slots that fit `p.fabric_router_l1_bytes`.
    pub fn new(p: &Params, max_payload: u64, route_hops: u32) -> Result<Layout, FabricError> {
        let header_bytes = if route_hops <= 16 { HEADER_1D_BYTES.0 } else { HEADER_1D_BYTES.1 };
        Layout::with(
            p,
            max_payload,
            header_bytes,
            SENDER_CHANNELS,
            &slot_options_1d(p.fabric_router_slots_1d),
        )
    }

    /// The layout of a neighbour-exchange router for `max_payload`: packets go one hop, so
    /// nothing is forwarded and the router has its worker's sender channel alone, which leaves
    /// room for more slots ((16, 16) at the default payload, against a line's (8, 16)).
    pub fn neighbor_exchange(p: &Params, max_payload: u64) -> Result<Layout, FabricError> {
        Layout::with(p, max_payload, HEADER_1D_BYTES.0, 1, &slot_options_1d(p.fabric_router_slots_1d))
    }

    /// The layout of a 2D mesh router for `max_payload`: the 2D header, four sender channels.
    pub fn mesh(p: &Params, max_payload: u64) -> Result<Layout, FabricError> {
        let first = (p.fabric_mesh_sender_slots, p.fabric_mesh_receiver_slots);
        Layout::with(p, max_payload, HEADER_2D_BYTES, MESH_SENDER_CHANNELS, &slot_options_2d(first))
    }

    fn with(
        p: &Params,
        max_payload: u64,
        header_bytes: u64,
        channels: usize,
        options: &[(u64, u64)],
    ) -> Result<Layout, FabricError> {
        if max_payload == 0 || max_payload % 16 != 0 || max_payload > p.fabric_max_payload_bytes {
            return Err(FabricError::Payload { asked: max_payload, max: p.fabric_max_payload_bytes });
        }
        let slot_bytes = (header_bytes + max_payload).next_multiple_of(32);
        let have = p.fabric_router_l1_bytes;
        let fits = |&(s, r): &(u64, u64)| (channels as u64 * s + r) * slot_bytes <= have;
        let (sender_slots, receiver_slots) =
            options.iter().copied().find(fits).ok_or(FabricError::DoesNotFit { slot: slot_bytes, have })?;
        let base = p.erisc_kernel_l1_base;
        Ok(Layout { base, sender_slots, receiver_slots, slot_bytes, header_bytes, channels })
    }

    /// Address of a word (see [`words`]).
    pub fn word(&self, offset: u64) -> u64 {
        self.base + offset
    }

    /// Address of slot `i` of sender channel `ch`.
    pub fn sender_slot(&self, ch: usize, i: u64) -> u64 {
        self.base + FABRIC_CONFIG_BYTES + (ch as u64 * self.sender_slots + i) * self.slot_bytes
    }

    /// Address of receiver slot `i`.
    pub fn receiver_slot(&self, i: u64) -> u64 {
        self.base + FABRIC_CONFIG_BYTES + (self.channels as u64 * self.sender_slots + i) * self.slot_bytes
    }

    /// Side-table index of sender channel `ch`'s slot `i`.
    pub fn sender_entry(&self, ch: usize, i: u64) -> usize {
        (ch as u64 * self.sender_slots + i) as usize
    }

    /// Side-table index of receiver slot `i`.
    pub fn receiver_entry(&self, i: u64) -> usize {
        (self.channels as u64 * self.sender_slots + i) as usize
    }

    fn entries(&self) -> usize {
        (self.channels as u64 * self.sender_slots + self.receiver_slots) as usize
    }
}

/// One line of the fabric: chips in order, closed into a ring or not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// The chips, in order.
    pub chips: Vec<ChipIdx>,
    /// Whether the last chip links back to the first.
    pub closed: bool,
}

impl Line {
    /// Whether `chips` sit consecutively on this line, in order or reversed (wrapping round a
    /// closed line).
    pub fn carries(&self, chips: &[ChipIdx]) -> bool {
        let n = self.chips.len();
        if chips.is_empty() || chips.len() > n {
            return false;
        }
        let Some(start) = self.chips.iter().position(|&c| c == chips[0]) else { return false };
        let walk = |step: isize| {
            chips.iter().enumerate().all(|(i, &c)| {
                let at = start as isize + step * i as isize;
                let ok = self.closed || (0..n as isize).contains(&at);
                ok && self.chips[at.rem_euclid(n as isize) as usize] == c
            })
        };
        walk(1) || walk(-1)
    }
}

/// A built fabric: its routers and what they share during a run.
pub struct Fabric {
    /// The configuration.
    pub config: FabricConfig,
    /// Every router's L1 layout (the same for all).
    pub layout: Layout,
    /// The lines.
    pub lines: Vec<Line>,
    /// The routers.
    pub routers: Vec<RouterSpec>,
    /// NoC coordinates of the Ethernet cores, by channel.
    pub eth_cores: Vec<CoreCoord>,
    /// Per router, per slot: the header of the packet in it.
    pub(crate) headers: RefCell<Vec<Vec<Option<Header>>>>,
    /// Per router: what it did, written as it runs.
    pub(crate) stats: RefCell<Vec<RouterStats>>,
    /// ERISCs each router runs on: the architecture's (`fabric_router_eriscs`).
    eriscs: u64,
}

impl Fabric {
    /// Every router's statistics, in router order.
    pub fn router_use(&self) -> Vec<RouterUse> {
        let stats = self.stats.borrow();
        self.routers
            .iter()
            .zip(stats.iter())
            .map(|(r, s)| RouterUse { at: r.at, plane: r.plane, stats: *s })
            .collect()
    }
}

impl Fabric {
    /// Builds the routers of `lines` on `planes` routing planes: for each neighbouring pair of a
    /// line, the plane-th usable link carries that plane's pair of routers.
    pub fn new(
        cluster: &Cluster,
        p: &Params,
        eth_cores: Vec<CoreCoord>,
        config: FabricConfig,
        lines: Vec<Line>,
    ) -> Result<Rc<Fabric>, FabricError> {
        let longest = lines.iter().map(|l| l.chips.len() as u32).max().unwrap_or(1);
        let mesh = config.kind == FabricKind::Mesh;
        let layout = match config.kind {
            FabricKind::Mesh => Layout::mesh(p, config.max_payload_bytes)?,
            FabricKind::NeighborExchange => Layout::neighbor_exchange(p, config.max_payload_bytes)?,
            FabricKind::Linear | FabricKind::Ring => Layout::new(p, config.max_payload_bytes, longest)?,
        };
        let mut routers: Vec<RouterSpec> = Vec::new();
        for (li, line) in lines.iter().enumerate() {
            let n = line.chips.len();
            let pairs = if line.closed && n > 2 { n } else { n - 1 };
            // Per chip of the line, per plane: the channel toward the next and the previous chip.
            let mut next_chan = vec![vec![None; config.planes]; n];
            let mut prev_chan = vec![vec![None; config.planes]; n];
            for i in 0..pairs {
                let (a, b) = (line.chips[i], line.chips[(i + 1) % n]);
                let usable = cluster.usable_links_between(a, b);
                if usable.len() < config.planes {
                    return Err(FabricError::Planes {
                        planes: config.planes,
                        a: cluster.chip(a).id,
                        b: cluster.chip(b).id,
                        have: usable.len(),
                    });
                }
                for plane in 0..config.planes {
                    let (ea, eb) = cluster.link(usable[plane]).ends_from(a).expect("a link between a and b");
                    next_chan[i][plane] = Some(ea);
                    prev_chan[(i + 1) % n][plane] = Some(eb);
                }
            }
            for i in 0..n {
                for plane in 0..config.planes {
                    for (mine, other) in [
                        (next_chan[i][plane], prev_chan[i][plane]),
                        (prev_chan[i][plane], next_chan[i][plane]),
                    ] {
                        let Some(at) = mine else { continue };
                        let peer = cluster.connected(at).expect("a usable link has a far end");
                        let partner = other.map(|e| e.chan);
                        routers.push(RouterSpec {
                            at,
                            peer,
                            partner,
                            line: li,
                            plane,
                            dir: None,
                            outs: partner
                                .map(|chan| Out { chan, channel: 1, dir: None })
                                .into_iter()
                                .collect(),
                            ups: vec![None, partner.map(|chan| (chan, 0))],
                        });
                    }
                }
            }
        }
        if mesh {
            mesh_turns(cluster, &mut routers)?;
        }
        let headers = RefCell::new(vec![vec![None; layout.entries()]; routers.len()]);
        let stats = RefCell::new(vec![RouterStats::default(); routers.len()]);
        let eriscs = p.fabric_router_eriscs;
        Ok(Rc::new(Fabric { config, layout, lines, routers, eth_cores, headers, stats, eriscs }))
    }

    /// The router on `chip` and `plane` of a mesh fabric facing `dir`.
    pub fn router_toward(&self, chip: ChipIdx, plane: usize, dir: Dir) -> Option<usize> {
        self.routers.iter().position(|r| r.at.chip == chip && r.plane == plane && r.dir == Some(dir))
    }

    /// The line that carries `chips` (in this order or reversed, consecutive on it), and
    /// whether they close into a ring on it (the whole of a closed line).
    pub fn line_of(&self, chips: &[ChipIdx]) -> Option<(usize, bool)> {
        self.lines
            .iter()
            .enumerate()
            .find_map(|(i, l)| l.carries(chips).then_some((i, l.closed && chips.len() == l.chips.len())))
    }

    /// Adds every router's kernels to the programs (one per chip, indexed by chip): one
    /// kernel per router, or two on a two-ERISC architecture (`fabric_router_eriscs`), its
    /// sender loop ("router") and its receiver loop ("router rx").
    pub fn install(self: &Rc<Fabric>, programs: &mut [meshsim_hw::Program]) {
        for (r, spec) in self.routers.iter().enumerate() {
            let roles: &[(router::Role, &str)] = match self.eriscs {
                1 => &[(router::Role::Both, "router")],
                _ => &[(router::Role::Senders, "router"), (router::Role::Receiver, "router rx")],
            };
            for &(role, name) in roles {
                let f = self.clone();
                programs[spec.at.chip.0 as usize].create_kernel(
                    meshsim_hw::CoreRef::Eth(spec.at.chan),
                    name,
                    1,
                    vec![],
                    move |k| router::run(k, f, r, role),
                );
            }
        }
    }

    /// Adds the host's close: on every chip with routers, a kernel on the core `core(chip)`
    /// gives waits for every event in `after`, then writes IMMEDIATELY_TERMINATE into each of
    /// the chip's routers.
    pub fn install_close<E>(
        &self,
        programs: &mut [meshsim_hw::Program],
        mut core: impl FnMut(ChipIdx) -> Result<meshsim_hw::CoreRef, E>,
        after: Rc<[meshsim_engine::SignalId]>,
    ) -> Result<(), E> {
        let term = self.layout.word(words::TERMINATE);
        for (c, prog) in programs.iter_mut().enumerate() {
            let mine: Vec<CoreCoord> = (0..self.routers.len())
                .filter(|&r| self.routers[r].at.chip.0 as usize == c)
                .map(|r| self.core_of(r))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let after = after.clone();
            prog.create_kernel(core(ChipIdx(c as u32))?, "fabric close", 0, vec![], move |k| async move {
                for &d in after.iter() {
                    k.wait_event(d).await;
                }
                for at in &mine {
                    k.noc_semaphore_inc(k.get_noc_addr(at.x, at.y, term), router::TERMINATE_NOW).await?;
                }
                Ok(())
            });
        }
        Ok(())
    }

    /// The index of the router on `at`.
    pub fn router_on(&self, at: Endpoint) -> Option<usize> {
        self.routers.iter().position(|r| r.at == at)
    }

    /// The router on `chip` of line `line` and `plane` facing the chip after it on the line
    /// (`forward`) or before it, and the hops to `to` that way; `None` if `to` is not reachable
    /// that way on the line.
    pub fn toward(&self, line: usize, plane: usize, from: ChipIdx, to: ChipIdx) -> Option<(usize, u32)> {
        let l = &self.lines[line];
        let n = l.chips.len();
        let i = l.chips.iter().position(|&c| c == from)?;
        let j = l.chips.iter().position(|&c| c == to)?;
        if i == j {
            return None;
        }
        let (forward, hops) = if l.closed && n > 2 {
            let fwd = (j + n - i) % n;
            if fwd <= n - fwd { (true, fwd) } else { (false, n - fwd) }
        } else if j > i {
            (true, j - i)
        } else {
            (false, i - j)
        };
        let neighbour = if forward { l.chips[(i + 1) % n] } else { l.chips[(i + n - 1) % n] };
        self.router_facing(line, plane, from, neighbour).map(|r| (r, hops as u32))
    }

    /// The router on `chip` of `line` and `plane` whose link goes to `neighbour`.
    pub fn router_facing(
        &self,
        line: usize,
        plane: usize,
        chip: ChipIdx,
        neighbour: ChipIdx,
    ) -> Option<usize> {
        self.routers
            .iter()
            .position(|r| r.line == line && r.plane == plane && r.at.chip == chip && r.peer.chip == neighbour)
    }

    /// The NoC coordinates of router `r`'s Ethernet core.
    pub fn core_of(&self, r: usize) -> CoreCoord {
        self.eth_cores[self.routers[r].at.chan as usize]
    }
}

/// Turns the routers of a mesh's rows and columns into 2D routers: each faces a direction and
/// forwards into any of its chip's other routers on the same plane, each of which takes the
/// packets on the sender channel kept for this direction.
fn mesh_turns(cluster: &Cluster, routers: &mut [RouterSpec]) -> Result<(), FabricError> {
    let grid = cluster.grid().ok_or_else(|| FabricError::NoGrid(cluster.shape().to_string()))?;
    let pos = |c: ChipIdx| {
        let i = grid.at.iter().position(|&x| x == c).expect("every chip of a mesh is on its grid");
        (i / grid.cols, i % grid.cols)
    };
    for r in routers.iter_mut() {
        let ((r1, c1), (r2, c2)) = (pos(r.at.chip), pos(r.peer.chip));
        // Neighbours one apart; a torus's wrap links are not mesh links (and are never built
        // from open lines), so a step is +1 or -1 without wrapping.
        r.dir = Some(if r1 == r2 {
            if c2 == c1 + 1 { Dir::E } else { Dir::W }
        } else if r2 == r1 + 1 {
            Dir::S
        } else {
            Dir::N
        });
    }
    let snapshot: Vec<(Endpoint, usize, Dir)> =
        routers.iter().map(|r| (r.at, r.plane, r.dir.expect("set above"))).collect();
    let on_chip = |at: Endpoint, plane: usize| -> Vec<(u8, Dir)> {
        let mut v: Vec<(u8, Dir)> = snapshot
            .iter()
            .filter(|(e, p, _)| e.chip == at.chip && *p == plane && e.chan != at.chan)
            .map(|(e, _, d)| (e.chan, *d))
            .collect();
        v.sort_by_key(|&(_, d)| d);
        v
    };
    for (i, r) in routers.iter_mut().enumerate() {
        let (at, plane, me) = snapshot[i];
        let others = on_chip(at, plane);
        r.partner = None;
        r.outs =
            others.iter().map(|&(chan, d)| Out { chan, channel: d.channel_from(me), dir: Some(d) }).collect();
        r.ups = vec![None; MESH_SENDER_CHANNELS];
        for &(chan, d) in &others {
            // That router's outs are its chip's other routers in direction order: find this one.
            let theirs = on_chip(Endpoint { chip: at.chip, chan }, plane);
            let idx = theirs.iter().position(|&(c, _)| c == at.chan).expect("routers see each other");
            r.ups[me.channel_from(d)] = Some((chan, idx));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_encode_forwards_then_writes_lowest_hop_first() {
        assert_eq!(Route::unicast(1), Route::Line(0b01));
        assert_eq!(Route::unicast(3), Route::Line(0b01_10_10));
        assert_eq!(Route::multicast(1, 3), Route::Line(0b01_11_11));
        assert_eq!(Route::multicast(2, 2), Route::Line(0b01_11_10));
        let r = Route::multicast(2, 2);
        assert_eq!(r.hops(), 3);
        let s = r.step();
        assert_eq!((s.write, s.count), (false, 1));
        let s = s.forwards()[0].1.step();
        assert_eq!((s.write, s.count), (true, 1));
        let s = s.forwards()[0].1.step();
        assert_eq!((s.write, s.count), (true, 0));
    }

    /// A 1D route reaches as far as the 64 B header's 64 hops: every hop but the last
    /// forwards, the multicast's chips from its start write, and the last one ends it.
    #[test]
    fn routes_reach_the_long_header_s_sixty_four_hops() {
        for hops in [16, 17, 32, 33, MAX_HOPS_1D] {
            let (mut u, mut m) = (Route::unicast(hops), Route::multicast(hops / 2, hops - hops / 2 + 1));
            assert_eq!((u.hops(), m.hops()), (hops, hops));
            for h in 1..=hops {
                let (su, sm) = (u.step(), m.step());
                assert_eq!(
                    (su.write, su.count),
                    (h == hops, usize::from(h < hops)),
                    "unicast hop {h} of {hops}"
                );
                assert_eq!(
                    (sm.write, sm.count),
                    (h >= hops / 2, usize::from(h < hops)),
                    "multicast hop {h} of {hops}"
                );
                if h < hops {
                    (u, m) = (su.forwards()[0].1, sm.forwards()[0].1);
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "a 1D route spans 1 to 64 hops")]
    fn a_route_past_the_header_s_reach_is_a_bug_the_lowering_refuses_first() {
        let _ = Route::unicast(MAX_HOPS_1D + 1);
    }

    /// Follows a 2D route from the first chip it reaches, at (row, col) offset (dy, dx) from
    /// the sender: every chip written, in visiting order.
    fn walk(route: Route, at: (i32, i32)) -> Vec<(i32, i32)> {
        let mut out = Vec::new();
        let mut todo = vec![(route, at)];
        while let Some((r, (y, x))) = todo.pop() {
            let s = r.step();
            if s.write {
                out.push((y, x));
            }
            for &(turn, next) in s.forwards() {
                let Turn::Toward(d) = turn else { panic!("a mesh route turns by direction") };
                let (dy, dx) = match d {
                    Dir::E => (0, 1),
                    Dir::W => (0, -1),
                    Dir::N => (-1, 0),
                    Dir::S => (1, 0),
                };
                todo.push((next, (y + dy, x + dx)));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn mesh_unicast_goes_north_south_first_and_writes_once() {
        let (dir, r) = Route::mesh_unicast(1, 3);
        assert_eq!(dir, Dir::S);
        assert_eq!(walk(r, (1, 0)), vec![(1, 3)]);
        assert_eq!(r.hops(), 4);
        let (dir, r) = Route::mesh_unicast(0, -2);
        assert_eq!(dir, Dir::W);
        assert_eq!(walk(r, (0, -1)), vec![(0, -2)]);
        let (dir, r) = Route::mesh_unicast(-2, 0);
        assert_eq!(dir, Dir::N);
        assert_eq!(walk(r, (-1, 0)), vec![(-2, 0)]);
    }

    #[test]
    fn mesh_multicast_trunk_branches_spines_after_the_first_hop() {
        // A 2-hop south trunk with 1 chip east and 2 west: the rows below, not the sender's.
        let r = Route::mesh_multicast(Dir::S, 2, 1, 2);
        let mut want = vec![];
        for y in 1..=2 {
            for x in -2..=1 {
                want.push((y, x));
            }
        }
        assert_eq!(walk(r, (1, 0)), want);
        // A pure east line of 3.
        assert_eq!(walk(Route::mesh_multicast(Dir::E, 3, 5, 5), (0, 1)), vec![(0, 1), (0, 2), (0, 3)]);
    }

    #[test]
    fn mesh_channels_give_each_upstream_direction_its_own() {
        for me in Dir::ALL {
            let mut seen: Vec<usize> =
                Dir::ALL.iter().filter(|&&d| d != me).map(|&d| me.channel_from(d)).collect();
            seen.sort();
            assert_eq!(seen, vec![1, 2, 3]);
        }
        let p = Params::default();
        let l = Layout::mesh(&p, p.fabric_default_payload_bytes).unwrap();
        assert_eq!((l.sender_slots, l.receiver_slots, l.header_bytes, l.channels), (4, 8, 96, 4));
    }

    #[test]
    fn the_default_packet_gets_8_sender_and_16_receiver_slots() {
        let p = Params::default();
        let l = Layout::new(&p, p.fabric_default_payload_bytes, 8).unwrap();
        assert_eq!((l.sender_slots, l.receiver_slots), (8, 16));
        assert_eq!(l.header_bytes, 48);
        assert_eq!(l.slot_bytes, 4416);
        let big = Layout::new(&p, p.fabric_max_payload_bytes, 8).unwrap();
        assert!(big.sender_slots * 2 + big.receiver_slots <= 20);
        assert!(Layout::new(&Params::default(), 8000, 8).is_err());
        let p = Params::default();
        assert!(l.receiver_slot(l.receiver_slots) <= p.erisc_kernel_l1_base + p.erisc_kernel_l1_bytes);
    }

    /// Each architecture's allocator tries its own options first: at 1 KiB a Wormhole router
    /// takes {16,16}, a Blackhole one {32,32}; at 2 KiB Blackhole's first fit is {16,32}; at
    /// the default payload both come down to {8,16}.
    #[test]
    fn each_architecture_takes_its_allocators_first_fitting_option() {
        use meshsim_topology::Arch;
        assert_eq!(slot_options_1d(16)[..4], [(16, 16), (8, 16), (8, 8), (4, 8)]);
        assert_eq!(slot_options_1d(32)[..4], [(32, 32), (16, 32), (16, 16), (8, 16)]);
        assert_eq!(*slot_options_1d(32).last().unwrap(), (1, 1));
        let slots = |arch, payload| {
            let p = Params::of(arch).unwrap();
            let l = Layout::new(&p, payload, 8).unwrap();
            (l.sender_slots, l.receiver_slots)
        };
        assert_eq!(slots(Arch::WormholeB0, 1024), (16, 16));
        assert_eq!(slots(Arch::Blackhole, 1024), (32, 32));
        assert_eq!(slots(Arch::Blackhole, 2048), (16, 32));
        assert_eq!(slots(Arch::WormholeB0, 4352), (8, 16));
        assert_eq!(slots(Arch::Blackhole, 4352), (8, 16));
        assert_eq!(slot_options_2d((8, 16)), [(8, 16), (4, 8), (2, 4), (1, 2), (1, 1)]);
        assert_eq!(slot_options_2d((7, 11)), [(7, 11), (4, 8), (2, 4), (1, 2), (1, 1)]);
    }
}
