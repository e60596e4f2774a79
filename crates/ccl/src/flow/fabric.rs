//! The fabric's phases as flows: each transfer of a phase's routed plan — the same plan, the
//! same algorithm choice, knobs and placement the packet model lowers — becomes flows of its
//! packets over the resources they use:
//!
//! - each link direction, per routing plane: the wire time of a data packet and its counter,
//!   and on the way back the completions (and a ring's acknowledgements);
//! - each router's ERISC: its sender channel's work per packet sent, its receiver channel's
//!   per packet received, forwarded and written (one resource when one ERISC runs both);
//! - each worker kernel: its serial per-packet path (reads, waits, sends; a reduction's sums);
//! - a direct reduction's reducer cores.
//!
//! A multicast or unicast transfer is one flow over its whole route; a relay is one flow per
//! hop, each starting once the hop before has delivered its first synchronised group of
//! packets (the packet model's kernels wait for an increment after every `chunks_per_sync`
//! packets), so a relayed chunk pipelines along its path. A kernel's transfers run in the
//! order it sends them when it sends them one after another, together when it interleaves
//! them. A phase starts once those it depends on have ended, after its routers' handshake (the
//! session's first phases), its connections and its entry barrier; a chip's part of it ends
//! with the last flow that reaches it, plus the final increment's way and notice.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use rayon::prelude::*;
use rustc_hash::FxHashMap as HashMap;

use meshsim_engine::Time;
use meshsim_hw::noc::Noc;
use meshsim_topology::ChipIdx;
use meshsim_topology::soc::CoreCoord;

mod links;
mod loops;
mod noc;
mod p2p;
mod parts;
mod rs;
mod step;

pub(crate) use links::FlowLink;

use super::cost::Costs;
use super::net::{FlowId, FlowNet, ResourceId};
use crate::fabric::lines::{fabric_lines, runs_closed, session_payload};
use crate::fabric::schedule::{Multicaster, RELAY_CHUNKS_PER_SYNC, RELAY_WINDOW, RelayLane, Schedule, Work};
use crate::fabric::{Layout, Line, RECEIVER_TRIDS};
use crate::op::{CclError, Topology};
use crate::phase::Phase;
use crate::plan::Dir;
use crate::plan::routed::Part;
use crate::tensor::Memory;
use crate::transport::{KernelTimes, LowerCx, PhaseRun};

/// What the flow model found: per phase how it ran, when it started and when each chip's part
/// of it ended.
pub(crate) struct Solution {
    /// Per phase, its pages per packet and algorithm.
    pub runs: Vec<PhaseRun>,
    /// Per op, workers per link and direction.
    pub workers: Vec<usize>,
    /// Per phase, when it started (its dependencies ended).
    pub starts: Vec<Time>,
    /// Per phase, each of its chips and when its part ended.
    pub ends: Vec<Vec<(ChipIdx, Time)>>,
    /// Every link direction a flow crossed, once each (the transport orders them).
    pub links: Vec<FlowLink>,
}

/// A resource of the fabric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Key {
    /// The link direction from a chip to a neighbour on a routing plane.
    Link(ChipIdx, ChipIdx, usize),
    /// The ERISC of a chip's router facing a neighbour on a plane: 0 its sender channels,
    /// 1 its receiver channel (the same resource on one ERISC).
    Erisc(ChipIdx, ChipIdx, usize, u8),
    /// A worker kernel: (phase, rank, plane, worker, kernel).
    Worker(usize, usize, usize, usize, u8),
    /// A chip's reducer cores of a phase.
    Reducers(usize, ChipIdx),
    /// The tx DMA of a chip's router toward a neighbour on a plane.
    TxDma(ChipIdx, ChipIdx, usize),
    /// The Tensix mux in front of a chip's router toward a neighbour on a plane.
    Mux(ChipIdx, ChipIdx, usize),
    /// The slots of a worker's client channel on that mux: (phase, rank, plane, worker,
    /// direction); a packet holds one for a round trip.
    MuxSlots(usize, usize, usize, usize, u8),
    /// The slots of a sender channel of a chip's router toward a neighbour on a plane: a
    /// packet holds one for a round trip.
    Slots(ChipIdx, ChipIdx, usize, u8),
    /// The receiver slots of a chip's router from a neighbour on a plane.
    RxSlots(ChipIdx, ChipIdx, usize),
    /// The transaction ids of a chip's receiver channel from a neighbour on a plane.
    Trids(ChipIdx, ChipIdx, usize),
}

/// A flow to be: its packets, the resources it uses, when its first packet lands, the units
/// it waits for, and the chips its packets reach.
struct Unit {
    phase: u32,
    packets: f64,
    uses: Uses,
    latency: f64,
    /// What its chips still wait for once it has ended (a reducer's writes of its sums).
    way: f64,
    /// The unit before it in its kernel's order, if it follows one whose packets are still on
    /// their way while this one's kernel already works: this one's latency overlaps that one's.
    chained: Option<u32>,
    waiting: u32,
    ready: f64,
    dependents: Vec<usize>,
    chips: Chips,
    /// The chip whose kernel sends it, and how long before the unit's end that kernel is
    /// done with it (its last packet's way, less the connection's close), if the kernel ends
    /// with its sends (a point-to-point sender's chip may receive nothing: a gather's
    /// non-root ranks, a scatter's root, a line end of an all-to-all).
    from: Option<(ChipIdx, f64)>,
    /// What each of its packets puts on the link directions it crosses.
    wire: Wire,
    /// When its first packet landed and when it ended, once run.
    began: f64,
    ended: f64,
}

/// A unit's resources and its demand on each (shared by the units of one kernel's hop).
type Uses = Rc<[(ResourceId, f64)]>;
/// The chips a unit's packets reach (shared likewise).
type Chips = Rc<[ChipIdx]>;
/// A relay hop as built: (phase, rank, direction, plane, worker, pages, page, the worker's
/// time per packet as bits, its [`Side`]: the pages it reads and copies per packet as bits,
/// whether it reads DRAM and whether its packets land in DRAM).
type HopKey = (usize, usize, usize, usize, usize, u64, u64, u64, [u64; 2], bool, bool);

/// A worker kernel's side of a hop on the NoC: its core, the pages it reads per packet and
/// from where, where its packets land, and the pages it copies into its own output per packet
/// (a relay's own slice).
#[derive(Clone, Copy, Debug)]
struct Side {
    core: CoreCoord,
    reads: f64,
    from: Memory,
    land: Memory,
    copies: f64,
}
/// Per link direction a unit's packets cross (its link resource), the bytes and Ethernet
/// packets each of its packets puts on it.
type Wire = Rc<[(ResourceId, u64, u64)]>;

/// A route's resources, as [`Network::route`] finds them.
struct Route {
    /// Each resource and a packet's demand on it.
    uses: Vec<(ResourceId, f64)>,
    /// The chips it reaches, nearest first.
    reached: Vec<ChipIdx>,
    /// What a packet puts on each link direction.
    wire: Vec<(ResourceId, u64, u64)>,
}

/// How a phase runs on the flow model.
struct PhaseState {
    units: Vec<usize>,
    /// Before its flows: connections and entry barrier (and the routers' handshake).
    setup: f64,
    /// After its last flow reaches a chip: the final increment and its notice.
    tail: f64,
    start: Option<f64>,
    left: usize,
    end: Option<f64>,
    /// Looked up, and folded by max (which no order changes).
    chip_end: HashMap<ChipIdx, f64>,
    /// The first worker core its kernels run on ([`Network::take_cores`]).
    core: usize,
}

impl PhaseState {
    /// A phase with nothing to run (another part's): it ends as it starts; a phase of the part
    /// starts from it.
    fn empty() -> PhaseState {
        PhaseState {
            units: Vec::new(),
            setup: 0.0,
            tail: 0.0,
            start: None,
            left: 0,
            end: None,
            chip_end: HashMap::default(),
            core: 0,
        }
    }
}

/// The session's flow network as it is built and run.
struct Network<'a, 'c> {
    s: &'a LowerCx<'c>,
    net: FlowNet,
    /// Looked up, never iterated: a hash map keeps runs deterministic.
    keys: HashMap<Key, ResourceId>,
    units: Vec<Unit>,
    phases: Vec<PhaseState>,
    lines: &'a [Line],
    /// Per op, whether it runs as a ring on its line, once found ([`Network::closed`]).
    closed_ops: Vec<Option<bool>>,
    payload: u64,
    header: u64,
    one_erisc: bool,
    /// Slots per sender channel and of the receiver channel.
    slots: (u64, u64),
    /// [`Network::round_hops`] by memory and NoC, once computed.
    hops: BTreeMap<(bool, usize), f64>,
    /// Every credit loop (a sender channel's slots, a receiver's slots or transaction ids):
    /// its credits and the resources a packet queues at on its way round (the link, the tx
    /// DMA and the two routers' ERISCs of its hop; a forwarding channel's also the ERISC of the
    /// receiver that fills it).
    /// Indexed by resource.
    loops: Vec<Option<loops::Loop>>,
    /// [`Network::relay_hop`]'s answers by (phase, rank, direction, plane, worker, pages,
    /// page, the worker's bits): every stripe of a kernel's hop has the same.
    hops_built: HashMap<HopKey, (Uses, Chips, Wire)>,
    /// The wire of a unit that crosses no link (shared).
    no_wire: Wire,
    /// Whether the chips' NoC ports are resources ([`noc::noc_ports`]).
    noc: bool,
    /// One core cycle, ps: a NoC port serves a flit a cycle.
    cycle_ps: f64,
    /// Per chip, the next worker core free ([`Network::take_cores`]).
    next_core: HashMap<ChipIdx, usize>,
    /// Per (NoC, core x and y, DRAM, read, page bytes), a page's traffic over the banks
    /// ([`noc`]).
    spreads: HashMap<(u8, u32, u32, bool, bool, u64), noc::Spread>,
    /// The workers' legs through a mux, placed once every phase has taken its cores.
    mux_legs: Vec<noc::MuxLeg>,
    /// The relay kernels to step once the credit loops are charged.
    relay_steps: Vec<step::RelayStep>,
    /// Per credit loop a relay step asks for, its network without its NoC routes as stations.
    loop_sans_noc: HashMap<ResourceId, loops::Bare>,
    /// Per chip, the resource of each port of its NoCs (`u32::MAX` until a flow crosses it),
    /// numbered as [`meshsim_hw::noc::walk_ports`] numbers them, NoC1's after NoC0's.
    noc_ports: HashMap<ChipIdx, Vec<u32>>,
    /// Per resource, whether it is a NoC port.
    is_noc: Vec<bool>,
    /// The ports of each NoC route found so far, by (NoC, source, destination).
    noc_routes: HashMap<(u8, CoreCoord, CoreCoord), Rc<[u32]>>,
}

/// Solves every phase of the session on the flow model: each independent part of the session
/// apart ([`parts`]), in parallel, each in a flow network of its own, so that what is held at
/// once is the parts' in flight. A part's solution depends on nothing outside it, so the
/// threads change no time.
pub(crate) fn solve(s: &LowerCx) -> Result<Solution, CclError> {
    let lines = fabric_lines(s.cluster, s.ops)?;
    let payload = session_payload(s)?;
    // The packet model's router layout for the session's lines: the same payload check, header
    // and slots.
    let longest = lines.iter().map(|l| l.chips.len()).max().unwrap_or(1) as u32;
    let layout = Layout::new(s.params, payload, longest).map_err(|e| CclError::Invalid(e.to_string()))?;
    let n = s.phases.len();
    // The lowering context holds the gates' kernel times, which are not shared between
    // threads: each part gets the rest of it, and kernel times of its own it never uses.
    let (cluster, params, ops, given, phases, done) = (s.cluster, s.params, s.ops, s.given, s.phases, s.done);
    let noc = noc::noc_ports(s);
    let solved: Vec<Result<PartSolved, CclError>> = parts::parts(s, noc)
        .into_par_iter()
        .with_max_len(1)
        .map(|part| {
            let times: KernelTimes = Rc::new(RefCell::new(Vec::new()));
            let cx = LowerCx { cluster, params, ops, given, phases, done, times: &times };
            solve_part(&cx, part, (&lines, payload, &layout), noc)
        })
        .collect();
    let mut runs: Vec<Option<PhaseRun>> = (0..n).map(|_| None).collect();
    let mut workers = vec![1usize; s.ops.len()];
    let mut starts = vec![Time::ZERO; n];
    let mut ends = vec![Vec::new(); n];
    let mut links = Vec::new();
    for part in solved {
        let (phases, part_links) = part?;
        for (pi, run, w, start, chip_ends) in phases {
            workers[s.phases[pi].op] = workers[s.phases[pi].op].max(w);
            runs[pi] = Some(run);
            starts[pi] = start;
            ends[pi] = chip_ends;
        }
        // Parts share no pair of chips: their links are their own.
        links.extend(part_links);
    }
    let runs = runs.into_iter().map(|r| r.expect("every phase is in a part")).collect();
    Ok(Solution { runs, workers, starts, ends, links })
}

/// One part's phases as solved: each phase, how it ran, its workers, its start and its chips'
/// ends; and its link directions' use.
type PartSolved = (Vec<(usize, PhaseRun, usize, Time, Vec<(ChipIdx, Time)>)>, Vec<FlowLink>);

/// Builds and runs the flow network of one independent part of the session, with the chips'
/// NoC ports as resources if `noc` ([`noc::noc_ports`]).
fn solve_part(
    s: &LowerCx,
    part: Vec<usize>,
    (lines, payload, layout): (&[Line], u64, &Layout),
    noc: bool,
) -> Result<PartSolved, CclError> {
    let mut m = Network {
        s,
        net: FlowNet::new(),
        keys: HashMap::default(),
        units: Vec::new(),
        phases: Vec::new(),
        lines,
        closed_ops: vec![None; s.ops.len()],
        payload,
        header: layout.header_bytes,
        // Two ERISCs split a router's channels on an architecture that runs them (a mux in
        // front of a router does not change that: `shared/fabric.md` §11.1).
        one_erisc: s.params.fabric_router_eriscs < 2,
        slots: (layout.sender_slots, layout.receiver_slots),
        hops: BTreeMap::new(),
        loops: Vec::new(),
        hops_built: HashMap::default(),
        no_wire: Rc::new([]),
        noc,
        cycle_ps: s.params.cycles(1_000_000).0 as f64 / 1e6,
        next_core: HashMap::default(),
        spreads: HashMap::default(),
        mux_legs: Vec::new(),
        relay_steps: Vec::new(),
        loop_sans_noc: HashMap::default(),
        noc_ports: HashMap::default(),
        is_noc: Vec::new(),
        noc_routes: HashMap::default(),
    };
    let mut ran = Vec::new();
    for (pi, p) in s.phases.iter().enumerate() {
        if part.binary_search(&pi).is_err() {
            // Another part's phase: present (phases are numbered across the session), empty.
            m.phases.push(PhaseState::empty());
            continue;
        }
        ran.push(m.phase(pi, p)?);
    }
    m.place_muxes();
    m.queue_in_loops();
    m.relays_in_step();
    m.prune_idle_ports();
    m.run();
    let links = m.links();
    let phases = part
        .iter()
        .zip(ran)
        .map(|(&pi, (run, w))| {
            let (ph, req) = (&m.phases[pi], &s.ops[s.phases[pi].op]);
            let start = ph.start.unwrap_or(0.0);
            let end = ph.end.unwrap_or(start);
            let chip_ends = req
                .comm
                .chips()
                .iter()
                .map(|&c| (c, ps(ph.chip_end.get(&c).copied().unwrap_or(end))))
                .collect();
            (pi, run, w, ps(start), chip_ends)
        })
        .collect();
    Ok((phases, links))
}

fn ps(t: f64) -> Time {
    Time(t.round().max(0.0) as u64)
}

impl Network<'_, '_> {
    fn resource(&mut self, key: Key) -> ResourceId {
        if let Some(&r) = self.keys.get(&key) {
            return r;
        }
        // Every resource is a server: one picosecond of work per picosecond; demands are
        // picoseconds per packet and amounts are packets.
        let r = self.net.resource(1e12);
        self.keys.insert(key, r);
        self.is_noc.push(false);
        r
    }

    /// The ERISC resource of `chip`'s router toward `to` on `plane`, for its sender (0) or
    /// receiver (1) channel.
    fn erisc(&mut self, chip: ChipIdx, to: ChipIdx, plane: usize, half: u8) -> ResourceId {
        let half = if self.one_erisc { 0 } else { half };
        self.resource(Key::Erisc(chip, to, plane, half))
    }

    /// Whether the op of phase `p` runs as a ring on its fabric line (found once per op: it
    /// looks through every line of the session).
    fn closed(&mut self, p: &Phase) -> bool {
        *self.closed_ops[p.op].get_or_insert_with(|| runs_closed(self.lines, &self.s.ops[p.op]))
    }

    /// Mean hops of a NoC read's request and answer between the op's worker and the banks of
    /// `memory`, on `noc`.
    fn round_hops(&mut self, memory: Memory, noc: usize) -> f64 {
        let key = (memory == Memory::Dram, noc);
        if let Some(&h) = self.hops.get(&key) {
            return h;
        }
        let h = self.mean_round_hops(memory, noc);
        self.hops.insert(key, h);
        h
    }

    fn mean_round_hops(&self, memory: Memory, noc: usize) -> f64 {
        let soc = self.s.cluster.soc();
        let grid = Noc::new(soc.grid_x, soc.grid_y);
        let me = soc.worker(soc.logical_worker(1));
        let ends: Vec<_> = match memory {
            Memory::Dram => (0..soc.dram.len()).map(|b| soc.dram_endpoint(b, noc)).collect(),
            Memory::L1 => soc.workers.clone(),
        };
        if ends.is_empty() {
            return 0.0;
        }
        let sum: u32 = ends.iter().map(|&d| grid.hops(noc, me, d) + grid.hops(noc, d, me)).sum();
        sum as f64 / ends.len() as f64
    }

    /// Adds a unit of phase `pi`.
    #[allow(clippy::too_many_arguments)]
    fn unit(
        &mut self,
        pi: usize,
        packets: f64,
        uses: Uses,
        latency: f64,
        after: &[usize],
        chips: Chips,
    ) -> usize {
        let id = self.units.len();
        for &a in after {
            self.units[a].dependents.push(id);
        }
        self.units.push(Unit {
            phase: pi as u32,
            packets,
            uses,
            latency,
            way: 0.0,
            chained: None,
            waiting: after.len() as u32,
            ready: 0.0,
            dependents: Vec::new(),
            chips,
            from: None,
            wire: self.no_wire.clone(),
            began: 0.0,
            ended: 0.0,
        });
        self.phases[pi].units.push(id);
        id
    }

    /// The resources a packet of `payload` uses over `hops` hops from rank `from` going `dir`
    /// on `plane`, every rank on the way writing it (`writes` NoC commands, pages into `land`)
    /// if `multicast`, else only the last; and the chips on its route, nearest first.
    #[allow(clippy::too_many_arguments)]
    fn route(
        &mut self,
        costs: &Costs,
        p: &Phase,
        (from, dir, hops): (usize, Dir, usize),
        plane: usize,
        payload: u64,
        (writes, land): (u64, Memory),
        multicast: bool,
    ) -> Route {
        let req = &self.s.ops[p.op];
        let (n, chips) = (req.comm.size(), req.comm.chips());
        let topology = if self.closed(p) { Topology::Ring } else { Topology::Line };
        let mut wire = Vec::new();
        let ranks = dir.ranks_from(from, hops, n, topology);
        let mut uses = Vec::new();
        let mut at = chips[from];
        let memory = p.tensors.output.memory;
        let round = self.round_hops(memory, 0);
        let dram = memory == Memory::Dram;
        let page = p.tensors.slice.page_bytes();
        let trids = if costs.ring { RECEIVER_TRIDS.1 } else { RECEIVER_TRIDS.0 } as f64;
        let (tx_slots, rx_slots) = (self.slots.0 as f64, self.slots.1 as f64);
        let mut producer: Option<ResourceId> = None;
        let mut forwarded = None;
        for (i, &r) in ranks.iter().enumerate() {
            let next = chips[r];
            let last = i + 1 == ranks.len();
            let link = self.resource(Key::Link(at, next, plane));
            let back = self.resource(Key::Link(next, at, plane));
            let send = self.erisc(at, next, plane, 0);
            let recv = self.erisc(next, at, plane, 1);
            let w = if multicast || last { writes } else { 0 };
            uses.push((link, costs.link_forward(payload)));
            uses.push((back, costs.link_back()));
            let ((fb, fp), (bb, bp)) = (costs.link_forward_sent(payload), costs.link_back_sent());
            wire.extend([(link, fb, fp), (back, bb, bp)]);
            uses.push((send, costs.send(payload)));
            let dma = self.resource(Key::TxDma(at, next, plane));
            uses.push((dma, costs.tx_dma(payload)));
            // The credit loops: the sender channel's slots (the worker's on the first hop,
            // the forwarding channel's after), the receiver's slots and transaction ids.
            let slots = self.resource(Key::Slots(at, next, plane, u8::from(i > 0)));
            uses.push((slots, costs.slot_loop(payload, w.max(1), page, round, dram) / tx_slots));
            let rx = self.resource(Key::RxSlots(next, at, plane));
            uses.push((rx, costs.rx_loop(payload, w.max(1), page, round, dram) / rx_slots));
            let ids = self.resource(Key::Trids(next, at, plane));
            uses.push((ids, costs.trid_hold(w.max(1), page, round, dram) / trids));
            // What a packet queues at on its way round each loop: the hop's link, tx DMA and
            // ERISCs (a transaction id is held over the receiver's work only).
            // (The two ERISCs sit on the hop's two chips: never one resource.)
            let stations = vec![link, dma, send, recv];
            // A forwarding channel's slots are filled by the previous hop's receiver: its
            // packets queue there too.
            let fills = producer.filter(|r| !stations.contains(r));
            self.set_loop(slots, (tx_slots, stations.iter().copied().chain(fills).collect()));
            self.set_loop(rx, (rx_slots, stations));
            self.set_loop(ids, (trids, vec![recv]));
            uses.push((recv, costs.receive(u64::from(!last), w)));
            // The receiver's NoC writes and forward hold its slot; the forward fills the next
            // hop's forwarding channel.
            if let Some(r) = forwarded.take() {
                self.loop_route(slots, r);
            }
            let onward = (!last).then(|| chips[ranks[i + 1]]);
            let (fwd, written) =
                self.noc_receiver((next, at, onward, plane), (w, page, land), payload, &mut uses);
            for r in fwd.iter().chain(&written) {
                self.loop_route(rx, r.clone());
            }
            forwarded = fwd;
            producer = Some(recv);
            at = next;
        }
        let reached = if multicast { ranks.iter().map(|&r| chips[r]).collect() } else { vec![at] };
        Route { uses: merge(uses), reached, wire }
    }

    /// One hop of a relay from rank `k` going forward (`d` 0) or backward (1) on `plane`: the
    /// route's resources, the kernel's (`worker_ps` a packet) and, when the workers share the
    /// router through a mux (`mux` its slots per client), the mux's and the kernel's client
    /// slots' loop; and the chip it reaches.
    fn relay_hop(
        &mut self,
        costs: &Costs,
        p: &Phase,
        (pi, k, d): (usize, usize, usize),
        (plane, w, mux): (usize, usize, Option<u64>),
        (pages, page): (u64, u64),
        (worker_ps, side): (f64, Side),
    ) -> (Uses, Chips, Wire) {
        let (dram_from, dram_land) = (side.from == Memory::Dram, side.land == Memory::Dram);
        let key = (
            pi,
            k,
            d,
            plane,
            w,
            pages,
            page,
            worker_ps.to_bits(),
            [side.reads.to_bits(), side.copies.to_bits()],
            dram_from,
            dram_land,
        );
        if let Some(built) = self.hops_built.get(&key) {
            return built.clone();
        }
        let req = &self.s.ops[p.op];
        let (n, chips) = (req.comm.size(), req.comm.chips());
        let dir = if d == 0 { Dir::Forward } else { Dir::Backward };
        let down = if d == 0 { (k + 1) % n } else { (k + n - 1) % n };
        let mux_key = Key::Mux(chips[k], chips[down], plane);
        let worker = self.resource(Key::Worker(pi, k, plane, w, d as u8));
        let Route { mut uses, reached, wire } =
            self.route(costs, p, (k, dir, 1), plane, pages * page, (pages, side.land), false);
        uses.push((worker, worker_ps));
        let slots_loop = self.resource(Key::Slots(chips[k], chips[down], plane, 0));
        if mux.is_none() {
            let reads = (side.reads, side.from, page);
            let hop = (chips[k], chips[down], plane);
            self.noc_sender(hop, (d, side.core), reads, pages * page, &mut uses);
        } else {
            // Its writes go to the mux, whose core is known once every phase has taken its
            // cores ([`Network::place_muxes`]).
            self.noc_pages(chips[k], (d, side.core), (side.from, true), (side.reads, page), &mut uses);
        }
        self.noc_pages(chips[k], (d, side.core), (side.land, false), (side.copies, page), &mut uses);
        let mut uses = merge(uses);
        let mut leg = None;
        if let Some(slots) = mux {
            let at = self.resource(mux_key);
            uses.push((at, costs.mux(pages, page)));
            // A client's slot goes round its send, the mux's turn and forwarding, and the
            // credit back: a loop whose packets queue at the kernel and the mux.
            let held = self.resource(Key::MuxSlots(pi, k, plane, w, d as u8));
            let hops = self.round_hops(Memory::L1, 0) / 2.0;
            uses.push((held, costs.mux_client_loop(pages, page, hops) / slots as f64));
            self.set_loop(held, (slots as f64, vec![worker, at]));
            let (chip, to) = (chips[k], chips[down]);
            let worker = (d, side.core);
            leg = Some(noc::MuxLeg {
                chip,
                to,
                plane,
                phase: pi,
                worker,
                payload: pages * page,
                held,
                slots: slots_loop,
                hop: None,
            });
        }
        let built: (Uses, Chips, Wire) = (uses.into(), reached.into(), wire.into());
        if let Some(mut leg) = leg.filter(|_| self.noc) {
            leg.hop = Some(built.0.clone());
            self.mux_legs.push(leg);
        }
        self.hops_built.insert(key, built.clone());
        built
    }

    /// The latency of a hop chain's first packet (a relay stripe's, a reduce-scatter side's):
    /// past the increment it waits for from `upstream` (its router sends it only once its
    /// writes into that memory have landed: a flushed increment, one write's round trip), the
    /// kernel reads its first window (`reads` pages of `page` bytes from `memory` on `noc`) and
    /// waits for them all (its read barrier), spends `worker_ps` on the packet, which takes its
    /// hop (`payload` bytes) to the next kernel, who notices it.
    fn head_latency(
        &mut self,
        costs: &Costs,
        upstream: Option<Memory>,
        (reads, page, memory, noc): (u64, u64, Memory, usize),
        worker_ps: f64,
        payload: u64,
    ) -> f64 {
        let flushed =
            upstream.map_or(0.0, |out| costs.write_ack(page, self.round_hops(out, 0), out == Memory::Dram));
        let read = costs.reads(reads, page, self.round_hops(memory, noc), memory == Memory::Dram);
        flushed + read + worker_ps + costs.hop(payload) + costs.notice()
    }

    /// Builds phase `pi`'s units; returns how it runs and its workers per link and direction.
    fn phase(&mut self, pi: usize, p: &Phase) -> Result<(PhaseRun, usize), CclError> {
        let s = self.s;
        let req = &s.ops[p.op];
        let n = req.comm.size();
        let closed = self.closed(p);
        let sched = Schedule::new(s, p, closed, self.payload)?;
        let page = sched.page;
        let ring = self.lines.iter().any(|l| l.closed);
        let costs = Costs::new(s.params, self.header, ring);
        // The session's first phases wait for the routers' handshake.
        let handshake = if p.deps.is_empty() { 2.0 * costs.hop(16) } else { 0.0 };
        let reach = if closed { n / 2 } else { n - 1 } as f64;
        // The entry barrier: an increment multicast as far as it reaches, then its notice (none on
        // a persistent-buffer all-gather).
        let barrier = costs.inject(0, page, 0) + costs.notice() + reach * costs.hop(0) + costs.notice();
        let setup = handshake + if sched.entry_barrier { barrier } else { 0.0 };
        // The last final increment's way; a multicast all-gather's reader then closes its
        // connection (the completion barrier, `shared/fabric.md` §11.2).
        let closes = matches!(sched.work, Work::Multicast { .. });
        let tail = costs.hop(0) + costs.notice() + if closes { costs.close() } else { 0.0 };
        // The worker cores its kernels take, as the packet model's lowering takes them: one per
        // lane, per plane on a multicast all-gather, one for point-to-point senders.
        let cores = match &sched.work {
            Work::Multicast { .. } => sched.planes,
            Work::Relay { lanes, .. } => lanes.len(),
            Work::ReduceScatter { lanes } => lanes.len(),
            Work::PointToPoint { .. } => 1,
        };
        let core = self.take_cores(req.comm.chips(), cores);
        // A direct reduction's reducer cores, on the ranks that own a result.
        if let Work::PointToPoint { reducers, .. } = &sched.work
            && *reducers > 0
        {
            let owners: Vec<ChipIdx> = match req.collective.root() {
                Some(r) => vec![req.comm.chips()[r]],
                None => req.comm.chips().to_vec(),
            };
            self.take_cores(&owners, *reducers);
        }
        self.phases.push(PhaseState { setup, tail, core, ..PhaseState::empty() });
        match &sched.work {
            Work::Multicast { kernels, .. } => self.multicast(pi, p, &costs, (&sched, kernels)),
            Work::Relay { lanes, own } => self.relay(pi, p, &costs, (&sched, lanes, *own)),
            Work::ReduceScatter { lanes } => self.reduce_scatter(pi, p, &costs, (&sched, lanes)),
            Work::PointToPoint { senders, .. } => self.point_to_point(pi, p, &costs, (&sched, senders)),
        }
        self.phases[pi].left = self.phases[pi].units.len();
        let run = PhaseRun {
            pages_per_packet: sched.ppp,
            packet_bytes: sched.payload,
            algorithm: sched.algo.name(closed),
        };
        Ok((run, sched.workers))
    }

    /// The multicast all-gather (a broadcast too): per rank, plane and direction the
    /// schedule's kernel sends its packets over every transfer its plan gives it, interleaved.
    fn multicast(
        &mut self,
        pi: usize,
        p: &Phase,
        costs: &Costs,
        (sched, kernels): (&Schedule, &[Multicaster]),
    ) {
        let req = &self.s.ops[p.op];
        let chips = req.comm.chips().to_vec();
        let t = p.tensors;
        let page = sched.page;
        let dram = t.input.memory == Memory::Dram;
        let in_step = self.multicasters_in_step(pi, p, (sched, kernels), costs.hop(sched.ppp * sched.page));
        for (w, in_step) in kernels.iter().zip(in_step).filter(|(w, _)| !w.mine.is_empty()) {
            let (k, plane, chip) = (w.rank, w.plane, chips[w.rank]);
            let core = self.worker_core(self.phases[pi].core + plane);
            let d = usize::from(w.dir == Dir::Backward);
            let count = w.mine.len() as f64;
            let pages = w.mine.iter().map(|x| x.1).sum::<u64>().div_ceil(w.mine.len() as u64);
            let local = w.local_copy;
            let hops = self.round_hops(t.input.memory, d);
            let serial = costs.serial(pages, page, hops, dram, local);
            let worker = self.resource(Key::Worker(pi, k, plane, 0, d as u8));
            if w.sends.is_empty() {
                if local {
                    // Its reads, and its writes into its own output.
                    let copy = costs.copy(pages, page, hops, dram);
                    let mut uses = vec![(worker, copy)];
                    let pages = pages as f64;
                    self.noc_pages(chip, (d, core), (t.input.memory, true), (pages, page), &mut uses);
                    self.noc_pages(chip, (d, core), (t.output.memory, false), (pages, page), &mut uses);
                    self.unit(pi, count, merge(uses).into(), copy, &[], Rc::new([chip]));
                }
                continue;
            }
            let shares = w.sends.len() as f64;
            for tr in &w.sends {
                let share = match tr.part {
                    Part::All if shares == 1.0 => count,
                    Part::All | Part::Alternate(_) | Part::Half(_) | Part::Parity(_) => count / 2.0,
                };
                let land = (pages, t.output.memory);
                let Route { mut uses, mut reached, wire } =
                    self.route(costs, p, (k, w.dir, tr.hops), plane, pages * page, land, true);
                // What running in step with the chip's other readers adds to its packets.
                uses.push((worker, serial + in_step));
                let reads = (pages as f64, t.input.memory, page);
                let hop = (chip, chips[neighbour(k, w.dir, chips.len())], plane);
                self.noc_sender(hop, (d, core), reads, pages * page, &mut uses);
                if local {
                    // It also writes each packet into its own output.
                    let out = (t.output.memory, false);
                    self.noc_pages(chip, (d, core), out, (pages as f64, page), &mut uses);
                    reached.push(chip);
                }
                let uses = merge(uses);
                // Its serial path is each packet's cost, the first's too; the last packet then
                // takes its hops.
                let latency = tr.hops as f64 * costs.hop(pages * page);
                let u = self.unit(pi, share, uses.into(), latency, &[], reached.into());
                self.units[u].wire = wire.into();
            }
        }
    }

    /// The relay all-gather on a ring: per rank, plane, worker and direction a kernel sends its
    /// stripes one after another, stripe i once the upstream neighbour's stripe i - 1 has
    /// begun to land (its first synchronised group).
    fn relay(
        &mut self,
        pi: usize,
        p: &Phase,
        costs: &Costs,
        (sched, lanes, own): (&Schedule, &[RelayLane], bool),
    ) {
        let req = &self.s.ops[p.op];
        let (n, chips) = (req.comm.size(), req.comm.chips().to_vec());
        let t = p.tensors;
        let page = sched.page;
        let mux = sched.mux();
        // Two units a stripe at most (its first group and the rest): room for them at once.
        let stripes: usize = lanes.iter().flat_map(|l| l.stripes.iter().flatten()).map(Vec::len).sum();
        self.units.reserve(2 * stripes);
        self.relay_steppers(pi, p, costs, (sched, lanes, own));
        for (li, lane) in lanes.iter().enumerate() {
            let (plane, w, packets) = (lane.plane, lane.worker, &lane.packets);
            let core = self.worker_core(self.phases[pi].core + li);
            let total = packets.len();
            if total == 0 {
                continue;
            }
            let pages = packets.iter().map(|x| x.1).sum::<u64>().div_ceil(total as u64);
            // Per (rank, direction), per stripe: its head and tail units.
            let mut heads: HashMap<(usize, usize, usize), usize> = HashMap::default();
            let mut order: Vec<(usize, usize, usize, usize)> = Vec::new();
            for d in 0..2 {
                for k in 0..n {
                    for (i, &(_, _, count)) in lane.stripes[k][d].iter().enumerate() {
                        order.push((i, d, k, count));
                    }
                }
            }
            // Stripe by stripe, so each upstream head exists before its downstream waits on it.
            order.sort();
            let mut last: HashMap<(usize, usize), usize> = HashMap::default();
            for (i, d, k, count) in order {
                let local = if i == 0 && d == 0 && own { pages } else { 0 };
                let worker_ps = costs.windowed(pages, local, 0);
                // The first stripe is the rank's own slice; the later ones landed in its output.
                let from = if i == 0 { t.input.memory } else { t.output.memory };
                let side =
                    Side { core, reads: pages as f64, from, land: t.output.memory, copies: local as f64 };
                let (uses, reached, wire) =
                    self.relay_hop(costs, p, (pi, k, d), (plane, w, mux), (pages, page), (worker_ps, side));
                let up = if d == 0 { (k + n - 1) % n } else { (k + 1) % n };
                let mut after: Vec<usize> = last.get(&(k, d)).copied().into_iter().collect();
                if i > 0
                    && let Some(&h) = heads.get(&(up, d, i - 1))
                {
                    after.push(h);
                }
                let window = (RELAY_WINDOW as u64).min(count as u64) * pages;
                let upstream = (i > 0).then_some(t.output.memory);
                let latency =
                    self.head_latency(costs, upstream, (window, page, from, d), worker_ps, pages * page);
                let head_n = (RELAY_CHUNKS_PER_SYNC as f64).min(count as f64);
                let reached: Chips =
                    if local > 0 { reached.iter().copied().chain([chips[k]]).collect() } else { reached };
                let head = self.unit(pi, head_n, uses.clone(), latency, &after, reached.clone());
                self.units[head].wire = wire.clone();
                heads.insert((k, d, i), head);
                let end = if (count as f64) > head_n {
                    let rest = self.unit(pi, count as f64 - head_n, uses, 0.0, &[head], reached);
                    self.units[rest].wire = wire;
                    rest
                } else {
                    head
                };
                last.insert((k, d), end);
            }
        }
    }

    /// Runs every phase: a phase starts when those it depends on have ended; a unit starts
    /// once its phase has started and the units it waits for have ended.
    fn run(&mut self) {
        let s = self.s;
        // Every unit becomes one flow.
        self.net.reserve(self.units.len());
        // The unit of each flow, by flow id (the net numbers flows as they start).
        let mut by_flow: Vec<usize> = Vec::new();
        let mut started = vec![false; self.phases.len()];
        // The phases not started yet, and those not ended: each event looks at these only.
        let mut waiting: Vec<usize> = (0..self.phases.len()).collect();
        let mut running = self.phases.len();
        loop {
            // Start every phase whose dependencies have ended, in order.
            let mut i = 0;
            while i < waiting.len() {
                let pi = waiting[i];
                let deps = &s.phases[pi].deps;
                if deps.iter().any(|&d| self.phases[d].end.is_none()) {
                    i += 1;
                    continue;
                }
                waiting.remove(i);
                started[pi] = true;
                let at = deps.iter().filter_map(|&d| self.phases[d].end).fold(0.0, f64::max);
                self.phases[pi].start = Some(at);
                let go = at + self.phases[pi].setup;
                if self.phases[pi].units.is_empty() {
                    self.phases[pi].end = Some(go);
                    running -= 1;
                    continue;
                }
                let units = std::mem::take(&mut self.phases[pi].units);
                for &u in &units {
                    let unit = &mut self.units[u];
                    unit.ready = unit.ready.max(go);
                    if unit.waiting == 0 {
                        let f = self.start(u);
                        debug_assert_eq!(f.0 as usize, by_flow.len());
                        by_flow.push(u);
                    }
                }
            }
            if waiting.is_empty() && running == 0 {
                break;
            }
            let Some((t, f)) = self.net.next_end() else {
                // Nothing in flight: the phases left wait on one that never ends (none do).
                break;
            };
            let u = by_flow[f.0 as usize];
            let t = t.0 as f64;
            self.units[u].ended = t;
            let pi = self.units[u].phase as usize;
            let tail = self.phases[pi].tail + self.units[u].way;
            for &c in self.units[u].chips.clone().iter() {
                let e = self.phases[pi].chip_end.entry(c).or_insert(0.0);
                *e = e.max(t + tail);
            }
            if let Some((c, before)) = self.units[u].from {
                let e = self.phases[pi].chip_end.entry(c).or_insert(0.0);
                *e = e.max(t - before);
            }
            for d in std::mem::take(&mut self.units[u].dependents) {
                let unit = &mut self.units[d];
                unit.waiting -= 1;
                unit.ready = unit.ready.max(t);
                if unit.waiting == 0 && started[unit.phase as usize] {
                    let f = self.start(d);
                    debug_assert_eq!(f.0 as usize, by_flow.len());
                    by_flow.push(d);
                }
            }
            self.phases[pi].left -= 1;
            if self.phases[pi].left == 0 {
                let ph = &mut self.phases[pi];
                let end = ph.chip_end.values().copied().fold(ph.start.unwrap_or(0.0) + ph.setup, f64::max);
                ph.end = Some(end);
                running -= 1;
            }
        }
    }

    fn start(&mut self, u: usize) -> FlowId {
        let unit = &self.units[u];
        let overlap = unit.chained.map_or(0.0, |c| self.units[c as usize].latency);
        let latency = (unit.latency - overlap).max(0.0);
        let began = unit.ready.max(self.net.now().0 as f64) + latency;
        let f = self.net.start(ps(unit.ready), unit.packets, ps(latency), &unit.uses, None);
        self.units[u].began = began;
        f
    }
}

/// The rank next to rank `k` of `n` going `dir` (round a ring).
fn neighbour(k: usize, dir: Dir, n: usize) -> usize {
    if dir == Dir::Forward { (k + 1) % n } else { (k + n - 1) % n }
}

/// Sums the demands on each resource (a route may pass a resource twice: a link's two
/// directions both ways round a ring of two).
fn merge(mut uses: Vec<(ResourceId, f64)>) -> Vec<(ResourceId, f64)> {
    uses.sort_by_key(|u| u.0);
    let mut out: Vec<(ResourceId, f64)> = Vec::with_capacity(uses.len());
    for (r, w) in uses {
        match out.last_mut() {
            Some(last) if last.0 == r => last.1 += w,
            _ => out.push((r, w)),
        }
    }
    out
}
