//! The chips' NoCs on the flow model: every link and port of a chip's two NoCs that a phase's
//! packets cross is a resource serving one flit a cycle, as the packet model's NoC does
//! (`hw/src/noc.rs`), and each flow's packets put on it the flits the packet model's kernels
//! send across it, along the same dimension-ordered routes ([`walk_ports`]) between the same
//! cores:
//!
//! - a worker kernel, on its own NoC from its core: each page it reads (the request's header
//!   flit to the page's bank, the answer back), the packet it writes into its router's sender
//!   slot (payload, then header) and the doorbell it rings;
//! - a router's receiver, on NoC1 from its Ethernet core: a packet it forwards into the next
//!   router's sender slot and that router's doorbell, and each page it writes where the packet
//!   lands.
//!
//! Pages are interleaved over their memory's banks, so a flow's pages are spread evenly over
//! them. The cores are the packet model's: an op's workers take the chip's worker cores in
//! turn, row-major, a core per lane (per plane on a multicast all-gather, one for a
//! point-to-point phase's senders), as the packet model's lowering hands them out
//! (`fabric/build.rs`, `Lowering::take_core`).

use std::rc::Rc;

use meshsim_hw::noc::{packet_flits, walk_ports};
use meshsim_topology::ChipIdx;
use meshsim_topology::soc::CoreCoord;
use rustc_hash::FxHashMap as HashMap;

use std::collections::{BTreeMap, BTreeSet};

use super::{Network, ResourceId, Uses, merge};
use crate::tensor::Memory;
use crate::transport::LowerCx;

/// Whether the session's NoC links and ports are flow resources: `flow_noc_ports`, on a
/// session whose ops use at most `flow_noc_ports_max_chips` chips (beyond, ops whose
/// communicators cross on a chip would become one part, and the cost would outgrow the
/// machine).
pub(super) fn noc_ports(s: &LowerCx) -> bool {
    let p = s.params;
    p.flow_noc_ports == 1 && {
        let used: BTreeSet<ChipIdx> = s.ops.iter().flat_map(|o| o.comm.chips().iter().copied()).collect();
        used.len() as u64 <= p.flow_noc_ports_max_chips
    }
}

/// Per port of a chip's NoC (numbered as [`walk_ports`] numbers them), the flits one page's
/// traffic puts on it, spread over its memory's banks.
pub(super) type Spread = Rc<[(u32, f64)]>;

/// The port resources a NoC route holds.
pub(super) type Ports = Rc<[ResourceId]>;

/// A worker's leg through the mux in front of its router (`chip`'s toward `to` on `plane`),
/// in phase `phase`: the worker (its NoC and core), its packets' payload, its client slots'
/// loop and the router's sender slots' loop, and the hop's uses it adds to.
pub(super) struct MuxLeg {
    pub chip: ChipIdx,
    pub to: ChipIdx,
    pub plane: usize,
    pub phase: usize,
    pub worker: (usize, CoreCoord),
    pub payload: u64,
    pub held: ResourceId,
    pub slots: ResourceId,
    pub hop: Option<Uses>,
}

impl Network<'_, '_> {
    /// Places the muxes as the packet model's lowering does once every phase has taken its
    /// cores (`fabric/lower.rs`, `install_muxes`): on each chip, one core per router and phase
    /// whose workers share the router, in the fabric's router order (by line, plane, the
    /// router toward the next chip before the one toward the previous), after the phases'
    /// cores. Then adds each worker's legs: its packet, header and doorbell into its mux
    /// client slot on its own NoC and the mux's credit back (NoC0); the mux's send of it into
    /// the router's sender slot (NoC0) and the router's credit back (NoC1).
    pub(super) fn place_muxes(&mut self) {
        let legs = std::mem::take(&mut self.mux_legs);
        let mut muxes: BTreeMap<ChipIdx, Vec<(usize, usize, bool, usize)>> = BTreeMap::new();
        let order = |m: &Self, l: &MuxLeg| {
            let line = m.lines.iter().enumerate().find_map(|(i, line)| {
                let n = line.chips.len();
                let at = line.chips.iter().position(|&c| c == l.chip)?;
                let next = line.chips[(at + 1) % n] == l.to && (line.closed || at + 1 < n);
                let prev = line.chips[(at + n - 1) % n] == l.to && (line.closed || at > 0);
                (next || prev).then_some((i, !next))
            });
            let (line, back) = line.unwrap_or((usize::MAX, false));
            (line, l.plane, back, l.phase)
        };
        for l in &legs {
            let key = order(self, l);
            let list = muxes.entry(l.chip).or_default();
            if !list.contains(&key) {
                list.push(key);
            }
        }
        for list in muxes.values_mut() {
            list.sort();
        }
        let mut added: HashMap<*const (ResourceId, f64), Uses> = HashMap::default();
        for l in &legs {
            let base = self.next_core.get(&l.chip).copied().unwrap_or(0);
            let index = muxes[&l.chip].iter().position(|k| *k == order(self, l)).expect("placed");
            let mux = self.worker_core(base + index);
            let router = self.router_core(l.chip, l.to, l.plane);
            let (noc, core) = l.worker;
            let mut uses = Vec::new();
            for bytes in [l.payload, self.header, 4] {
                self.noc_packets(l.chip, noc, (core, mux), (1.0, bytes), &mut uses);
                self.noc_packets(l.chip, 0, (mux, router), (1.0, bytes), &mut uses);
            }
            self.noc_packets(l.chip, 0, (mux, core), (1.0, 4), &mut uses);
            self.noc_packets(l.chip, 1, (router, mux), (1.0, 4), &mut uses);
            let client = self.noc_route(l.chip, noc, (core, mux));
            self.loop_route(l.held, client);
            let sent = self.noc_route(l.chip, 0, (mux, router));
            self.loop_route(l.slots, sent);
            let hop = l.hop.as_ref().expect("a leg's hop is built");
            let with: Uses = merge(hop.iter().copied().chain(uses).collect()).into();
            added.insert(hop.as_ptr(), with);
        }
        // Units that shared a hop's uses share its new ones.
        for u in &mut self.units {
            if let Some(with) = added.get(&u.uses.as_ptr()) {
                u.uses = with.clone();
            }
        }
    }

    /// The first of `count` worker cores taken on every one of `chips` (the same on each: the
    /// next free on the chip that has used most), as the packet model's lowering takes them.
    pub(super) fn take_cores(&mut self, chips: &[ChipIdx], count: usize) -> usize {
        let first = chips.iter().map(|c| self.next_core.get(c).copied().unwrap_or(0)).max().unwrap_or(0);
        for &c in chips {
            self.next_core.insert(c, first + count);
        }
        first
    }

    /// The NoC coordinates of the `k`-th worker core (row-major; the packet model's lowering
    /// refuses an op that needs more cores than the chip has, so `k` wraps only where the
    /// packet model would have stopped).
    pub(super) fn worker_core(&self, k: usize) -> CoreCoord {
        let soc = self.s.cluster.soc();
        soc.worker(soc.logical_worker((k % soc.workers.len()) as u64))
    }

    /// The Ethernet core of `chip`'s router toward `to` on `plane` (the plane-th usable link
    /// between them, as the fabric puts its planes on them).
    pub(super) fn router_core(&self, chip: ChipIdx, to: ChipIdx, plane: usize) -> CoreCoord {
        let cluster = self.s.cluster;
        let usable = cluster.usable_links_between(chip, to);
        let (end, _) = cluster.link(usable[plane]).ends_from(chip).expect("a plane's link joins its chips");
        cluster.soc().eth_cores[end.chan as usize]
    }

    /// Drops from every unit's uses the NoC ports that cannot bind: a port where every flow
    /// that may run at once through it, each at the fastest its other resources let it run
    /// alone, together stay under the port's cycle. Max-min fair rates never saturate such a
    /// port, so they are the same without it; the flow net then solves fewer resources. Flows
    /// of one phase may run at once, and so may two phases unless one follows the other (an
    /// op's phases, or ordered by dependencies); units that share their uses are one
    /// kernel's, which run one after another, and count once. Runs after the credit loops
    /// have been charged, which read every port.
    pub(super) fn prune_idle_ports(&mut self) {
        if !self.noc {
            return;
        }
        let is_noc = std::mem::take(&mut self.is_noc);
        // Per port, per phase and per resource that bounds a flow alone (its dearest other
        // one), the most of the port a flow so bounded may take: flows that share that
        // resource share its picosecond, so together they take at most the largest share of
        // the port per share of it any of them has (fractional knapsack).
        let mut peak: Vec<Vec<(u32, u32, f64)>> = vec![Vec::new(); is_noc.len()];
        // Units that share their uses (and phase) add nothing past the first: the shares fold
        // by max.
        let mut seen: HashMap<*const (ResourceId, f64), ()> = HashMap::default();
        for u in &self.units {
            if seen.insert(u.uses.as_ptr(), ()).is_some() {
                continue;
            }
            let slowest = u.uses.iter().filter(|x| !is_noc[x.0.0 as usize]).fold(
                None,
                |m: Option<(ResourceId, f64)>, x| if m.is_some_and(|m| m.1 >= x.1) { m } else { Some(*x) },
            );
            for x in u.uses.iter().filter(|x| is_noc[x.0.0 as usize]) {
                // Nothing else bounding it, the port may bind.
                let (by, share) = slowest.map_or((u32::MAX, f64::INFINITY), |(r, d)| (r.0, x.1 / d));
                let list = &mut peak[x.0.0 as usize];
                match list.iter_mut().find(|e| e.0 == u.phase && e.1 == by) {
                    Some(e) => e.2 = e.2.max(share),
                    None => list.push((u.phase, by, share)),
                }
            }
        }
        let phases = self.s.phases;
        let after = crate::phase::after_matrix(phases);
        let apart =
            |i: usize, j: usize| i != j && (after[i][j] || after[j][i] || phases[i].op == phases[j].op);
        // A port is a server of one picosecond per picosecond.
        let idle: Vec<bool> = peak
            .iter()
            .enumerate()
            .map(|(r, list)| {
                is_noc[r]
                    && list.iter().all(|&(i, _, _)| {
                        let at_once: f64 =
                            list.iter().filter(|e| !apart(i as usize, e.0 as usize)).map(|e| e.2).sum();
                        at_once < 1.0 - 1e-9
                    })
            })
            .collect();
        let (carried, by_id) = self.carried(&idle);
        let idle = twins(&is_noc, &carried, idle);
        let idle = dominated(&is_noc, (&carried, &by_id), idle);
        let mut kept: HashMap<*const (ResourceId, f64), Uses> = HashMap::default();
        for u in &mut self.units {
            let new = kept
                .entry(u.uses.as_ptr())
                .or_insert_with(|| u.uses.iter().copied().filter(|x| !idle[x.0.0 as usize]).collect())
                .clone();
            u.uses = new;
        }
        self.is_noc = is_noc;
    }

    /// What every resource that is not `idle` carries: per resource, each distinct uses (units
    /// that share theirs are one kernel's and count once, numbered in the units' order) that
    /// puts a demand on it, with that demand's bits; and the uses by number.
    fn carried(&self, idle: &[bool]) -> (Carried, Vec<&Uses>) {
        let mut carried: Carried = vec![Vec::new(); idle.len()];
        let mut by_id: Vec<&Uses> = Vec::new();
        let mut seen: HashMap<*const (ResourceId, f64), ()> = HashMap::default();
        for u in &self.units {
            if seen.insert(u.uses.as_ptr(), ()).is_some() {
                continue;
            }
            let id = by_id.len() as u32;
            by_id.push(&u.uses);
            for x in u.uses.iter().filter(|x| !idle[x.0.0 as usize]) {
                carried[x.0.0 as usize].push((id, x.1.to_bits()));
            }
        }
        (carried, by_id)
    }

    /// Adds to `uses` what `count` NoC packets of `bytes` from `src` to `dst` on `noc` of
    /// `chip` put on every port they hold: their flits, a cycle each.
    pub(super) fn noc_packets(
        &mut self,
        chip: ChipIdx,
        noc: usize,
        (src, dst): (CoreCoord, CoreCoord),
        (count, bytes): (f64, u64),
        uses: &mut Vec<(ResourceId, f64)>,
    ) {
        if !self.noc {
            return;
        }
        let ps = self.cycle_ps * count * packet_flits(self.s.params, bytes) as f64;
        let ports = self.ports_between(noc, (src, dst));
        for &i in ports.iter() {
            uses.push((self.port(chip, noc, i), ps));
        }
    }

    /// Adds to `uses` the traffic of `pages` pages of `page` bytes that `core` reads (`read`)
    /// from, or writes into, `memory` on `noc` of `chip`: a read's request (a header flit) to
    /// the page's bank and its answer back, a write's page to the bank; spread over the banks.
    pub(super) fn noc_pages(
        &mut self,
        chip: ChipIdx,
        (noc, core): (usize, CoreCoord),
        (memory, read): (Memory, bool),
        (pages, page): (f64, u64),
        uses: &mut Vec<(ResourceId, f64)>,
    ) {
        if pages <= 0.0 || !self.noc {
            return;
        }
        let spread = self.spread(noc, core, memory, read, page);
        for &(i, flits) in spread.iter() {
            let r = self.port(chip, noc, i);
            uses.push((r, self.cycle_ps * pages * flits));
        }
    }

    /// Adds to `uses` what a worker kernel on `core` of `chip`, on its NoC `noc`, puts on the
    /// NoCs per packet it sends through its router toward `to` on `plane`: the `reads` pages of
    /// `page` bytes it reads from `memory`, the packet's `payload` and header written into the
    /// router's sender slot, the doorbell it rings, and the credit the router returns to it (an
    /// increment on the router's NoC1); and puts its write into the slot on the way of the
    /// slots' credit loop.
    pub(super) fn noc_sender(
        &mut self,
        (chip, to, plane): (ChipIdx, ChipIdx, usize),
        (noc, core): (usize, CoreCoord),
        (reads, memory, page): (f64, Memory, u64),
        payload: u64,
        uses: &mut Vec<(ResourceId, f64)>,
    ) {
        if !self.noc {
            return;
        }
        let router = self.router_core(chip, to, plane);
        self.noc_pages(chip, (noc, core), (memory, true), (reads, page), uses);
        if payload > 0 {
            self.noc_packets(chip, noc, (core, router), (1.0, payload), uses);
        }
        self.noc_packets(chip, noc, (core, router), (1.0, self.header), uses);
        self.noc_packets(chip, noc, (core, router), (1.0, 4), uses);
        self.noc_packets(chip, 1, (router, core), (1.0, 4), uses);
        let written = self.noc_route(chip, noc, (core, router));
        let slots = self.resource(super::Key::Slots(chip, to, plane, 0));
        self.loop_route(slots, written);
    }

    /// Adds to `uses` what the receiver of `chip`'s router from `from` on `plane` (on NoC1, from
    /// its Ethernet core) puts on the chip's NoCs per packet of `payload` bytes: when it
    /// forwards the packet on toward `onward`, the packet and header into that router's sender
    /// slot and its doorbell; the `writes` pages of `page` bytes it writes into `land`. Returns
    /// the ports of the forward, and every port its writes hold.
    pub(super) fn noc_receiver(
        &mut self,
        (chip, from, onward, plane): (ChipIdx, ChipIdx, Option<ChipIdx>, usize),
        (writes, page, land): (u64, u64, Memory),
        payload: u64,
        uses: &mut Vec<(ResourceId, f64)>,
    ) -> (Option<Ports>, Option<Ports>) {
        if !self.noc {
            return (None, None);
        }
        let at = self.router_core(chip, from, plane);
        let forward = onward.map(|to| self.router_core(chip, to, plane));
        let forwarded = forward.map(|next| {
            let bytes = (self.header + payload).next_multiple_of(16);
            self.noc_packets(chip, 1, (at, next), (1.0, bytes), uses);
            self.noc_packets(chip, 1, (at, next), (1.0, 4), uses);
            self.noc_route(chip, 1, (at, next))
        });
        if writes == 0 {
            return (forwarded, None);
        }
        self.noc_pages(chip, (1, at), (land, false), (writes as f64, page), uses);
        let spread = self.spread(1, at, land, false, page);
        let written = spread.iter().map(|&(i, _)| self.port(chip, 1, i)).collect();
        (forwarded, Some(written))
    }

    /// The ports a NoC packet from `src` to `dst` on `noc` of `chip` holds.
    fn noc_route(&mut self, chip: ChipIdx, noc: usize, (src, dst): (CoreCoord, CoreCoord)) -> Ports {
        if !self.noc {
            return Rc::new([]);
        }
        let ports = self.ports_between(noc, (src, dst));
        ports.iter().map(|&i| self.port(chip, noc, i)).collect()
    }

    /// The ports a NoC packet from `src` to `dst` on `noc` holds (found once per route).
    fn ports_between(&mut self, noc: usize, (src, dst): (CoreCoord, CoreCoord)) -> Rc<[u32]> {
        let soc = self.s.cluster.soc();
        self.noc_routes
            .entry((noc as u8, src, dst))
            .or_insert_with(|| {
                let mut ports = Vec::new();
                walk_ports(soc.grid_x, soc.grid_y, noc, (src, dst), |i| ports.push(i as u32));
                ports.into()
            })
            .clone()
    }

    /// The resource of port `i` of `chip`'s NoC `noc`, made when a flow first crosses it.
    fn port(&mut self, chip: ChipIdx, noc: usize, i: u32) -> ResourceId {
        let soc = self.s.cluster.soc();
        let per_noc = (soc.grid_x * soc.grid_y * 4) as usize;
        let table = self.noc_ports.entry(chip).or_insert_with(|| vec![u32::MAX; 2 * per_noc]);
        let at = noc * per_noc + i as usize;
        if table[at] == u32::MAX {
            table[at] = self.net.resource(1e12).0;
            self.is_noc.push(true);
        }
        ResourceId(table[at])
    }

    /// Per port, the flits one page's read or write between `core` and `memory` on `noc` puts
    /// on it, the page's bank taken in turn over every bank (found once per shape).
    fn spread(&mut self, noc: usize, core: CoreCoord, memory: Memory, read: bool, page: u64) -> Spread {
        let key = (noc as u8, core.x, core.y, memory == Memory::Dram, read, page);
        if let Some(s) = self.spreads.get(&key) {
            return s.clone();
        }
        let (soc, p) = (self.s.cluster.soc(), self.s.params);
        let banks: Vec<CoreCoord> = match memory {
            Memory::Dram => (0..soc.dram.len()).map(|b| soc.dram_endpoint(b, noc)).collect(),
            Memory::L1 => {
                (0..p.l1_tensor_banks as usize).map(|b| soc.workers[b % soc.workers.len()]).collect()
            }
        };
        let share = 1.0 / banks.len().max(1) as f64;
        let data = packet_flits(p, page) as f64 * share;
        let request = packet_flits(p, 0) as f64 * share;
        let mut flits: std::collections::BTreeMap<u32, f64> = std::collections::BTreeMap::new();
        for &bank in &banks {
            if read {
                walk_ports(soc.grid_x, soc.grid_y, noc, (core, bank), |i| {
                    *flits.entry(i as u32).or_default() += request
                });
                walk_ports(soc.grid_x, soc.grid_y, noc, (bank, core), |i| {
                    *flits.entry(i as u32).or_default() += data
                });
            } else {
                walk_ports(soc.grid_x, soc.grid_y, noc, (core, bank), |i| {
                    *flits.entry(i as u32).or_default() += data
                });
            }
        }
        let s: Spread = flits.into_iter().collect();
        self.spreads.insert(key, s.clone());
        s
    }
}

/// Per resource, the distinct uses it carries with their demands' bits ([`Network::carried`]).
type Carried = Vec<Vec<(u32, u64)>>;

/// `idle` and the NoC ports that carry the same flows with the same demands as a port before
/// them (a route's links one after another, where no other traffic joins): they bind together,
/// so one of them stands for all.
fn twins(is_noc: &[bool], carried: &Carried, idle: Vec<bool>) -> Vec<bool> {
    let mut first: HashMap<&[(u32, u64)], usize> = HashMap::default();
    let mut out = idle;
    for (r, c) in carried.iter().enumerate() {
        if is_noc[r] && !c.is_empty() && first.insert(c.as_slice(), r).is_some() {
            out[r] = true;
        }
    }
    out
}

/// `idle` and the NoC ports whose flows are a proper subset of another resource's, each with
/// no more demand on the port than on that resource (every resource is a server of one
/// picosecond per picosecond): the port is never busier than the other, so it saturates only
/// with it and then freezes no flow the other does not. A route's ports past the point where
/// traffic leaves it are such ports. Exact for max-min rates, like the rest. (A twin [`twins`]
/// dropped carries its kept twin's flows, so it may stand as the other resource.)
fn dominated(is_noc: &[bool], (carried, by_id): (&Carried, &[&Uses]), idle: Vec<bool>) -> Vec<bool> {
    let mut out = idle.clone();
    for (r, c) in carried.iter().enumerate() {
        if !is_noc[r] || idle[r] || c.is_empty() {
            continue;
        }
        let within = |q: usize| {
            let cq = &carried[q];
            q != r
                && cq.len() > c.len()
                && c.iter().all(|&(id, w)| {
                    cq.binary_search_by_key(&id, |e| e.0)
                        .is_ok_and(|k| f64::from_bits(cq[k].1) >= f64::from_bits(w))
                })
        };
        // A resource that carries every one of the port's flows carries its first.
        if by_id[c[0].0 as usize].iter().any(|x| within(x.0.0 as usize)) {
            out[r] = true;
        }
    }
    out
}
