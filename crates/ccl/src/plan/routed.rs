//! Algorithms on a routed transport (the fabric) as plans: which chunk each rank sends, to
//! which ranks, in what order and by which mechanism. Where a neighbour [`Plan`](super::Plan)
//! moves slices one hop at a time between a rank's sender and the next rank's receiver, a
//! routed transfer names its whole route — a direction and a hop count along the
//! communicator's line or ring — because the routers carry it there:
//!
//! - [`Mechanism::Unicast`]: packets to the rank `hops` away; the routers on the way forward
//!   them untouched.
//! - [`Mechanism::Multicast`]: packets written at every rank within `hops` as they pass (the
//!   routers write and forward).
//! - [`Mechanism::Relay`]: store and forward, one hop at a time: each rank on the route takes
//!   the chunk and its own worker sends it on.
//!
//! With [`Transfer::reduce`] the receiver reduces what arrives (reduce at receiver): a relay's
//! every rank adds its own part of the chunk before sending it on, and the last rank — like a
//! unicast's destination — reduces it into its output slice. A transfer may carry only part of
//! a chunk's packets ([`Part`]): every other packet, or the first or second half, so that two
//! transfers share a chunk between two routes.
//!
//! The fabric's lowering walks these plans (who sends what to whom, farthest destination
//! first, which rank expects how many chunks, which keeps its own); [`Routed::check`] and the
//! symbolic replay in the tests hold every fabric algorithm to what its collective must leave
//! on every rank, for 2 to 9 ranks.

use super::{Copy, Dir, Loc, way};
use crate::op::{Bidir, Topology};

/// How a transfer reaches its destinations (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// To the rank `hops` away, the routers forwarding the packets untouched.
    Unicast,
    /// To every rank within `hops`, written as the packets pass.
    Multicast,
    /// Hop by hop, each rank on the route sending it on.
    Relay,
}

/// Which of a chunk's packets a transfer carries, counted in the sender's stream for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Every packet.
    All,
    /// Every other packet: the even-numbered (0) or the odd-numbered (1).
    Alternate(u8),
    /// The first half of the packets (0) or the rest (1).
    Half(u8),
    /// Every other reduce-scatter chunk (tt-metal's 8 pages; see the schedule's
    /// `RS_CHUNK_PAGES`): the even-numbered (0) or the odd-numbered (1).
    Parity(u8),
}

impl Part {
    /// The halves of a chunk this part covers, as a two-bit set (bit 0 and bit 1): `All` both,
    /// either split of it one.
    pub fn halves(self) -> u8 {
        match self {
            Part::All => 0b11,
            Part::Alternate(x) | Part::Half(x) | Part::Parity(x) => 1 << x,
        }
    }
}

/// A place on a rank: where a chunk is read or lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// Which tensor.
    pub loc: Loc,
    /// Which chunk of it (0 for a tensor that is one chunk: a slice input or output).
    pub slot: usize,
}

impl Place {
    const fn new(loc: Loc, slot: usize) -> Place {
        Place { loc, slot }
    }
}

/// One chunk a rank sends over the routers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// The sending rank.
    pub from: usize,
    /// Which way along the line or ring.
    pub dir: Dir,
    /// How far: the destination (unicast), the last rank written (multicast) or relayed to.
    pub hops: usize,
    /// How.
    pub mech: Mechanism,
    /// Which of the chunk's packets.
    pub part: Part,
    /// Where the sender reads it.
    pub src: Place,
    /// Where it lands on each rank that keeps it.
    pub to: Place,
    /// Reduce at the receiver (see the module documentation).
    pub reduce: bool,
}

impl Transfer {
    /// The ranks on its route, nearest first.
    pub fn route(&self, n: usize, topology: Topology) -> Vec<usize> {
        self.dir.ranks_from(self.from, self.hops, n, topology)
    }

    /// The rank it ends at.
    pub fn dest(&self, n: usize, topology: Topology) -> Option<usize> {
        self.route(n, topology).last().copied()
    }
}

/// A collective's algorithm on a routed transport, for `n` ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routed {
    /// Ranks.
    pub n: usize,
    /// The line or ring the routes run along.
    pub topology: Topology,
    /// Every transfer, each sender's in the order it sends them.
    pub transfers: Vec<Transfer>,
    /// Chunks a rank keeps: read and written on its own worker.
    pub copies: Vec<Copy>,
}

impl Routed {
    /// The most hops one packet of the plan travels: a unicast's or multicast's whole
    /// transfer, a relay's one hop at a time (0 for a plan with no transfer).
    pub fn longest_route(&self) -> usize {
        self.transfers.iter().map(|t| if t.mech == Mechanism::Relay { 1 } else { t.hops }).max().unwrap_or(0)
    }

    /// Rank `k`'s transfers going `dir`, in the order it sends them.
    pub fn sends(&self, k: usize, dir: Dir) -> impl Iterator<Item = &Transfer> {
        self.transfers.iter().filter(move |t| t.from == k && t.dir == dir)
    }

    /// How many transfers end at (unicast, relay) or pass over (multicast) rank `k`.
    pub fn arriving(&self, k: usize) -> usize {
        self.transfers
            .iter()
            .filter(|t| match t.mech {
                Mechanism::Multicast => t.route(self.n, self.topology).contains(&k),
                Mechanism::Unicast | Mechanism::Relay => t.dest(self.n, self.topology) == Some(k),
            })
            .count()
    }

    /// Whether rank `k` keeps a chunk of its own.
    pub fn keeps(&self, k: usize) -> bool {
        self.copies.iter().any(|c| c.rank == k)
    }

    /// Which of rank `k`'s two direction kernels copies its own chunk, if it keeps one: the
    /// one that sends nothing when the other sends (a line end's idle side, so the sending
    /// kernel only reads and sends), else the forward one. Whether the kernel going `dir` is it.
    pub fn copies_going(&self, k: usize, dir: Dir) -> bool {
        let other = if dir == Dir::Forward { Dir::Backward } else { Dir::Forward };
        match (self.sends(k, dir).next().is_none(), self.sends(k, other).next().is_none()) {
            (true, false) => true,
            (false, true) => false,
            _ => dir == Dir::Forward,
        }
    }

    /// Checks the plan's consistency: every route has a hop and stays on the line or ring
    /// (a ring's short of a full turn), reductions only where a receiver can reduce (unicast or
    /// relay), and no transfer or copy names a rank that does not exist. `Err` names the first
    /// broken rule.
    pub fn check(&self) -> Result<(), String> {
        let n = self.n;
        for (i, t) in self.transfers.iter().enumerate() {
            if t.from >= n {
                return Err(format!("transfer {i}: rank {} of {n}", t.from));
            }
            if t.hops == 0 || t.route(n, self.topology).len() != t.hops {
                return Err(format!(
                    "transfer {i}: {} hops {:?} from rank {} leave the {}",
                    t.hops, t.dir, t.from, self.topology
                ));
            }
            if self.topology == Topology::Ring && t.hops >= n {
                return Err(format!("transfer {i}: {} hops go round the ring of {n}", t.hops));
            }
            if t.reduce && t.mech == Mechanism::Multicast {
                return Err(format!("transfer {i}: a multicast cannot reduce at its receivers"));
            }
        }
        if let Some(c) = self.copies.iter().find(|c| c.rank >= n) {
            return Err(format!("a copy on rank {} of {n}", c.rank));
        }
        Ok(())
    }
}

/// The packets' ways of a chunk multicast from rank `k` half-way round a ring each way: an
/// odd ring `(n - 1) / 2` each way; an even ring `n / 2` one way and `n / 2 - 1` the other,
/// swapping packet by packet (the forward way long on even packets).
fn half_ring(n: usize, k: usize, src: Place, to: Place, out: &mut Vec<Transfer>) {
    let t = |dir, hops, part| Transfer {
        from: k,
        dir,
        hops,
        mech: Mechanism::Multicast,
        part,
        src,
        to,
        reduce: false,
    };
    if n % 2 == 1 {
        out.push(t(Dir::Forward, (n - 1) / 2, Part::All));
        out.push(t(Dir::Backward, (n - 1) / 2, Part::All));
        return;
    }
    let (long, short) = (n / 2, n / 2 - 1);
    out.push(t(Dir::Forward, long, Part::Alternate(0)));
    out.push(t(Dir::Forward, short, Part::Alternate(1)));
    out.push(t(Dir::Backward, short, Part::Alternate(0)));
    out.push(t(Dir::Backward, long, Part::Alternate(1)));
}

/// Multicasts of rank `k`'s chunk to both ends of a line.
fn to_both_ends(n: usize, k: usize, src: Place, to: Place, out: &mut Vec<Transfer>) {
    let t = |dir, hops| Transfer {
        from: k,
        dir,
        hops,
        mech: Mechanism::Multicast,
        part: Part::All,
        src,
        to,
        reduce: false,
    };
    out.push(t(Dir::Forward, n - 1 - k));
    out.push(t(Dir::Backward, k));
}

/// The multicast all-gather (tt-metal's 2026 factory): every rank multicasts its slice to
/// every other rank — to both ends of a line, half-way round a ring each way — straight into
/// their outputs; `own`: each also copies it into its own output.
pub fn multicast_all_gather(n: usize, topology: Topology, own: bool) -> Routed {
    let mut transfers = Vec::new();
    for k in 0..n {
        let (src, to) = (Place::new(Loc::InputSlice, 0), Place::new(Loc::OutputWhole, k));
        match topology {
            Topology::Ring => half_ring(n, k, src, to, &mut transfers),
            Topology::Line => to_both_ends(n, k, src, to, &mut transfers),
        }
    }
    transfers.retain(|t| t.hops > 0);
    let copies = if own {
        (0..n).map(|k| Copy { rank: k, slice: k, from: Loc::InputSlice, to: Loc::OutputWhole }).collect()
    } else {
        Vec::new()
    };
    Routed { n, topology, transfers, copies }
}

/// A broadcast by multicast from `root`: on a line to both ends; round a ring the whole tensor
/// half-way each way (`Full`), every other packet all the way round each way (`Split`), or all
/// of it one way (`None`). The root keeps its tensor.
pub fn multicast_broadcast(n: usize, topology: Topology, bidir: Bidir, root: usize) -> Routed {
    let (src, to) = (Place::new(Loc::InputSlice, 0), Place::new(Loc::OutputWhole, 0));
    let all_round = |dir, part| Transfer {
        from: root,
        dir,
        hops: n - 1,
        mech: Mechanism::Multicast,
        part,
        src,
        to,
        reduce: false,
    };
    let mut transfers = Vec::new();
    match (topology, bidir) {
        (Topology::Line, _) => to_both_ends(n, root, src, to, &mut transfers),
        (Topology::Ring, Bidir::Full) => half_ring(n, root, src, to, &mut transfers),
        (Topology::Ring, Bidir::Split) => {
            transfers.push(all_round(Dir::Forward, Part::Alternate(0)));
            transfers.push(all_round(Dir::Backward, Part::Alternate(1)));
        }
        (Topology::Ring, Bidir::None) => transfers.push(all_round(Dir::Forward, Part::All)),
    }
    transfers.retain(|t| t.hops > 0);
    let copies = vec![Copy { rank: root, slice: 0, from: Loc::InputSlice, to: Loc::OutputWhole }];
    Routed { n, topology, transfers, copies }
}

/// The relay all-gather on a ring (tt-metal's unicast factory): every rank's slice is stored
/// and forwarded half-way round each way, the antipode's of an even ring split between the
/// ways — the first half of its packets forward, the rest backward; `own`: each rank also
/// copies its slice into its own output.
pub fn relay_all_gather(n: usize, own: bool) -> Routed {
    let mut transfers = Vec::new();
    for k in 0..n {
        let t = |dir, hops, part| Transfer {
            from: k,
            dir,
            hops,
            mech: Mechanism::Relay,
            part,
            src: Place::new(Loc::InputSlice, 0),
            to: Place::new(Loc::OutputWhole, k),
            reduce: false,
        };
        if n % 2 == 1 {
            transfers.push(t(Dir::Forward, (n - 1) / 2, Part::All));
            transfers.push(t(Dir::Backward, (n - 1) / 2, Part::All));
        } else {
            transfers.push(t(Dir::Forward, n / 2, Part::Half(0)));
            transfers.push(t(Dir::Forward, n / 2 - 1, Part::Half(1)));
            transfers.push(t(Dir::Backward, n / 2 - 1, Part::Half(0)));
            transfers.push(t(Dir::Backward, n / 2, Part::Half(1)));
        }
    }
    transfers.retain(|t| t.hops > 0);
    let copies = if own {
        (0..n).map(|k| Copy { rank: k, slice: k, from: Loc::InputSlice, to: Loc::OutputWhole }).collect()
    } else {
        Vec::new()
    };
    Routed { n, topology: Topology::Ring, transfers, copies }
}

/// Point-to-point chunks, each unicast the shorter way (a line's side; on a ring the antipode
/// forward), every rank sending its destinations farthest first in each direction: `pairs`
/// lists each `(from, to, src, land)` and `copies` what ranks keep.
fn point_to_point(
    n: usize,
    topology: Topology,
    pairs: Vec<(usize, usize, Place, Place)>,
    reduce: bool,
    copies: Vec<Copy>,
) -> Routed {
    let mut transfers: Vec<Transfer> = pairs
        .into_iter()
        .map(|(k, j, src, to)| {
            let (dir, hops) = way(n, topology, k, j);
            Transfer { from: k, dir, hops, mech: Mechanism::Unicast, part: Part::All, src, to, reduce }
        })
        .collect();
    transfers.sort_by_key(|t| (t.from, t.dir != Dir::Forward, std::cmp::Reverse(t.hops)));
    Routed { n, topology, transfers, copies }
}

/// All-to-all: rank k sends chunk j of its input to rank j, landing at chunk k of j's output,
/// and keeps its own chunk k.
pub fn all_to_all(n: usize, topology: Topology) -> Routed {
    let pairs = (0..n)
        .flat_map(|k| (0..n).filter(move |&j| j != k).map(move |j| (k, j)))
        .map(|(k, j)| (k, j, Place::new(Loc::InputWhole, j), Place::new(Loc::OutputWhole, k)))
        .collect();
    let copies =
        (0..n).map(|k| Copy { rank: k, slice: k, from: Loc::InputWhole, to: Loc::OutputWhole }).collect();
    point_to_point(n, topology, pairs, false, copies)
}

/// Gather: every other rank unicasts its input to the root, landing at its own chunk of the
/// root's output; the root keeps its own.
pub fn direct_gather(n: usize, topology: Topology, root: usize) -> Routed {
    let pairs = (0..n)
        .filter(|&k| k != root)
        .map(|k| (k, root, Place::new(Loc::InputSlice, 0), Place::new(Loc::OutputWhole, k)))
        .collect();
    let copies = vec![Copy { rank: root, slice: root, from: Loc::InputSlice, to: Loc::OutputWhole }];
    point_to_point(n, topology, pairs, false, copies)
}

/// Scatter: the root unicasts chunk j of its input to each other rank j, landing as its whole
/// output; the root keeps its own chunk.
pub fn direct_scatter(n: usize, topology: Topology, root: usize) -> Routed {
    let pairs = (0..n)
        .filter(|&j| j != root)
        .map(|j| (root, j, Place::new(Loc::InputWhole, j), Place::new(Loc::OutputSlice, 0)))
        .collect();
    let copies = vec![Copy { rank: root, slice: root, from: Loc::InputWhole, to: Loc::OutputSlice }];
    point_to_point(n, topology, pairs, false, copies)
}

/// Send/receive: rank 0's input to rank 1's output.
pub fn direct_send_recv() -> Routed {
    let pairs = vec![(0, 1, Place::new(Loc::InputSlice, 0), Place::new(Loc::OutputSlice, 0))];
    point_to_point(2, Topology::Line, pairs, false, Vec::new())
}

/// The one-shot direct reduce-scatter: every rank unicasts chunk j of its input straight to
/// rank j, into the slot for its source in j's receive buffer (scratch), and j reduces every
/// contribution into its output slice with its own chunk.
pub fn direct_reduce_scatter(n: usize, topology: Topology) -> Routed {
    let pairs = (0..n)
        .flat_map(|k| (0..n).filter(move |&j| j != k).map(move |j| (k, j)))
        .map(|(k, j)| (k, j, Place::new(Loc::InputWhole, j), Place::new(Loc::Scratch, k)))
        .collect();
    let copies =
        (0..n).map(|k| Copy { rank: k, slice: k, from: Loc::InputWhole, to: Loc::OutputSlice }).collect();
    point_to_point(n, topology, pairs, true, copies)
}

/// A reduce straight to its root: every other rank unicasts its whole input into the root's
/// receive buffer (its slot by source), and the root reduces them with its own into its
/// output.
pub fn direct_reduce(n: usize, topology: Topology, root: usize) -> Routed {
    let pairs = (0..n)
        .filter(|&k| k != root)
        .map(|k| (k, root, Place::new(Loc::InputSlice, 0), Place::new(Loc::Receive, k)))
        .collect();
    let copies = vec![Copy { rank: root, slice: 0, from: Loc::InputSlice, to: Loc::OutputSlice }];
    point_to_point(n, topology, pairs, true, copies)
}

/// The two sides of slice `j` on `n` ranks: how many ranks precede its owner going forward
/// and going backward — on a line the ranks before and after it, round a ring half each
/// (since tt-metal's PR #41522 each full slice travels half the ring: on an even ring both
/// sides start at the antipode, which they share by chunk parity).
pub fn sides(n: usize, j: usize, topology: Topology) -> (usize, usize) {
    match topology {
        Topology::Ring if n % 2 == 0 => (n / 2, n / 2),
        Topology::Ring => ((n - 1) / 2, (n - 1) / 2),
        Topology::Line => (j, n - 1 - j),
    }
}

/// Reduce-scatter along the line or ring (`reduce_scatter_minimal_async`, `shared/fabric.md`
/// §11.3): slice j is reduced on its way to its owner from both sides at once, each side a
/// relay that starts at its farthest rank, every next rank adding its own pages, into the
/// owner's partial buffer for that direction (scratch); the owner's chunks are summed with its
/// own pages into its output. On an even ring both sides start at the antipode, the forward
/// one with its even chunks and the backward one with its odd (the other parity of each side
/// starts a rank nearer), so every rank adds each chunk once. Every rank takes a direction's
/// slices in the order their chains reach it.
pub fn reduce_scatter_sides(n: usize, topology: Topology) -> Routed {
    let mut chains = Vec::new();
    let chain = |from, dir, hops, part| Transfer {
        from,
        dir,
        hops,
        mech: Mechanism::Relay,
        part,
        src: Place::new(Loc::InputWhole, 0),
        to: Place::new(Loc::Scratch, 0),
        reduce: true,
    };
    for j in 0..n {
        let (f, b) = sides(n, j, topology);
        let at = |place: Place| Place { slot: j, ..place };
        let mut push = |t: Transfer| {
            if t.hops > 0 {
                chains.push(Transfer { src: at(t.src), to: at(t.to), ..t });
            }
        };
        if topology == Topology::Ring && n % 2 == 0 {
            let a = (j + n / 2) % n;
            push(chain(a, Dir::Forward, f, Part::Parity(0)));
            push(chain((a + 1) % n, Dir::Forward, f - 1, Part::Parity(1)));
            push(chain(a, Dir::Backward, b, Part::Parity(1)));
            push(chain((a + n - 1) % n, Dir::Backward, b - 1, Part::Parity(0)));
            continue;
        }
        push(chain((j + n - f) % n, Dir::Forward, f, Part::All));
        push(chain((j + b) % n, Dir::Backward, b, Part::All));
    }
    chains.sort_by_key(|t| (t.from, t.dir != Dir::Forward, std::cmp::Reverse(t.hops)));
    let copies =
        (0..n).map(|k| Copy { rank: k, slice: k, from: Loc::InputWhole, to: Loc::OutputSlice }).collect();
    Routed { n, topology, transfers: chains, copies }
}

/// Where on its route rank `k` handles transfer `t` of a relay (0: it starts it), if it does:
/// every rank on the route but the last sends it on.
pub fn relay_position(t: &Transfer, n: usize, topology: Topology, k: usize) -> Option<usize> {
    if t.from == k {
        return Some(0);
    }
    let route = t.route(n, topology);
    route.iter().position(|&r| r == k).filter(|&i| i + 1 < route.len()).map(|i| i + 1)
}

/// Every transfer's [`relay_position`] at every rank it passes, from one walk of each route:
/// per direction (forward, backward) and rank, the transfers going that way that pass it with
/// their position there, in plan order.
pub fn relay_passes(plan: &Routed) -> [Vec<Vec<(usize, &Transfer)>>; 2] {
    let n = plan.n;
    let mut passes: [Vec<Vec<(usize, &Transfer)>>; 2] = [vec![Vec::new(); n], vec![Vec::new(); n]];
    for t in &plan.transfers {
        let at = &mut passes[usize::from(t.dir == Dir::Backward)];
        at[t.from].push((0, t));
        let route = t.route(n, plan.topology);
        // A route of n hops or more comes back to ranks it passed: the first pass counts.
        let repeats = route.len() >= n;
        for (i, &r) in route.iter().enumerate().take(route.len().saturating_sub(1)) {
            if r == t.from || (repeats && route[..i].contains(&r)) {
                continue;
            }
            at[r].push((i + 1, t));
        }
    }
    passes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A chunk's value: which (rank, chunk) inputs it holds, one bit each (`rank * n + chunk`).
    type Val = u128;

    /// What each rank holds after a replay: per place, each half of the chunk.
    type Held = Vec<BTreeMap<(Loc, usize), [Option<Val>; 2]>>;

    /// Replays a routed plan on values: rank k's input chunk j is the bit `(k, j)`, its input
    /// slice the bit `(k, k)`. Copies first, then every transfer along its route; a place is
    /// written once per half, and a reduction never counts an input twice.
    fn replay(p: &Routed) -> Held {
        let n = p.n;
        let bit = |k: usize, j: usize| -> Val { 1 << (k * n + j) };
        let mut held: Held = vec![BTreeMap::new(); n];
        let read = |held: &Held, k: usize, at: Place, half: usize| -> Val {
            match at.loc {
                Loc::InputSlice => bit(k, k),
                Loc::InputWhole => bit(k, at.slot),
                _ => held[k].get(&(at.loc, at.slot)).and_then(|h| h[half]).expect("read data exists"),
            }
        };
        fn store(held: &mut Held, k: usize, at: Place, half: usize, v: Val) {
            let slot = held[k].entry((at.loc, at.slot)).or_insert([None; 2]);
            assert!(slot[half].is_none(), "rank {k} {at:?} half {half} written twice");
            slot[half] = Some(v);
        }
        fn reduce_into(held: &mut Held, k: usize, half: usize, v: Val) {
            let slot = held[k].entry((Loc::OutputSlice, 0)).or_insert([None; 2]);
            let was = slot[half].unwrap_or(0);
            assert_eq!(was & v, 0, "rank {k}: an input reduced twice");
            slot[half] = Some(was | v);
        }
        for c in &p.copies {
            for half in 0..2 {
                let v = read(&held, c.rank, Place::new(c.from, c.slice), half);
                let to = match c.to {
                    Loc::OutputSlice => Place::new(c.to, 0),
                    _ => Place::new(c.to, c.slice),
                };
                store(&mut held, c.rank, to, half, v);
            }
        }
        for t in &p.transfers {
            let route = t.route(n, p.topology);
            for half in (0..2).filter(|&h| t.part.halves() & (1 << h) != 0) {
                let mut v = read(&held, t.from, t.src, half);
                for (i, &r) in route.iter().enumerate() {
                    let last = i + 1 == route.len();
                    match (t.mech, last, t.reduce) {
                        (Mechanism::Multicast, ..) | (Mechanism::Relay, false, false) => {
                            store(&mut held, r, t.to, half, v)
                        }
                        (Mechanism::Relay, false, true) => {
                            let own = read(&held, r, t.src, half);
                            assert_eq!(v & own, 0, "rank {r}: its own part added twice");
                            v |= own;
                        }
                        (_, true, true) => reduce_into(&mut held, r, half, v),
                        (_, true, false) => store(&mut held, r, t.to, half, v),
                        (Mechanism::Unicast, false, _) => {}
                    }
                }
            }
        }
        held
    }

    /// What rank `k` holds at `loc` chunk `slot`, if both halves are there and equal-sourced.
    fn whole(held: &Held, k: usize, loc: Loc, slot: usize) -> Option<Val> {
        let h = held[k].get(&(loc, slot))?;
        Some(h[0]? | h[1]?)
    }

    const TOPOLOGIES: [Topology; 2] = [Topology::Ring, Topology::Line];

    #[test]
    fn fabric_all_gathers_give_every_rank_every_slice_once() {
        for n in 2..=9 {
            for own in [true, false] {
                let mut plans =
                    TOPOLOGIES.map(|t| (format!("multicast {t}"), multicast_all_gather(n, t, own))).to_vec();
                plans.push(("relay".into(), relay_all_gather(n, own)));
                for (what, p) in plans {
                    p.check().unwrap_or_else(|e| panic!("n={n} {what}: {e}"));
                    let held = replay(&p);
                    let bit = |k: usize| 1u128 << (k * n + k);
                    for (k, _) in held.iter().enumerate() {
                        for s in 0..n {
                            let want = (s != k || own).then(|| bit(s));
                            assert_eq!(
                                whole(&held, k, Loc::OutputWhole, s),
                                want,
                                "n={n} {what} own={own}: rank {k} slice {s}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn fabric_broadcasts_reach_every_rank_from_any_root() {
        for n in 2..=9 {
            for root in 0..n {
                for (t, b) in [
                    (Topology::Line, Bidir::None),
                    (Topology::Ring, Bidir::None),
                    (Topology::Ring, Bidir::Split),
                    (Topology::Ring, Bidir::Full),
                ] {
                    let p = multicast_broadcast(n, t, b, root);
                    p.check().unwrap_or_else(|e| panic!("n={n} root={root} {t} {b}: {e}"));
                    let held = replay(&p);
                    for k in 0..n {
                        assert_eq!(
                            whole(&held, k, Loc::OutputWhole, 0),
                            Some(1 << (root * n + root)),
                            "n={n} root={root} {t} {b}: rank {k}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn fabric_point_to_point_plans_land_each_chunk_where_its_collective_says() {
        for n in 2..=9 {
            for t in TOPOLOGIES {
                let bit = |k: usize, j: usize| 1u128 << (k * n + j);
                let a2a = all_to_all(n, t);
                a2a.check().unwrap();
                let held = replay(&a2a);
                for j in 0..n {
                    for k in 0..n {
                        assert_eq!(
                            whole(&held, j, Loc::OutputWhole, k),
                            Some(bit(k, j)),
                            "a2a n={n} {t}: rank {j} chunk {k}"
                        );
                    }
                    assert_eq!(a2a.arriving(j), n - 1);
                }
                for root in 0..n {
                    let g = direct_gather(n, t, root);
                    g.check().unwrap();
                    let held = replay(&g);
                    for s in 0..n {
                        assert_eq!(
                            whole(&held, root, Loc::OutputWhole, s),
                            Some(bit(s, s)),
                            "gather n={n} {t} root={root}: slice {s}"
                        );
                    }
                    assert!(
                        (0..n).filter(|&k| k != root).all(|k| held[k].is_empty()),
                        "gather n={n} {t}: only the root ends with data"
                    );
                    let sc = direct_scatter(n, t, root);
                    sc.check().unwrap();
                    let held = replay(&sc);
                    for j in 0..n {
                        assert_eq!(
                            whole(&held, j, Loc::OutputSlice, 0),
                            Some(bit(root, j)),
                            "scatter n={n} {t} root={root}: rank {j}"
                        );
                    }
                }
            }
        }
        let sr = direct_send_recv();
        sr.check().unwrap();
        let held = replay(&sr);
        assert_eq!(whole(&held, 1, Loc::OutputSlice, 0), Some(1));
        assert!(held[0].is_empty());
    }

    #[test]
    fn fabric_reductions_count_every_rank_once_at_the_owner() {
        for n in 2..=9 {
            for t in TOPOLOGIES {
                let all = |j: usize| (0..n).map(|k| 1u128 << (k * n + j)).fold(0, |a, b| a | b);
                for (what, p) in
                    [("direct", direct_reduce_scatter(n, t)), ("sides", reduce_scatter_sides(n, t))]
                {
                    p.check().unwrap_or_else(|e| panic!("{what} n={n} {t}: {e}"));
                    let held = replay(&p);
                    for j in 0..n {
                        assert_eq!(
                            whole(&held, j, Loc::OutputSlice, 0),
                            Some(all(j)),
                            "{what} n={n} {t}: rank {j}"
                        );
                    }
                }
                for root in 0..n {
                    let p = direct_reduce(n, t, root);
                    p.check().unwrap();
                    let held = replay(&p);
                    let want = (0..n).map(|k| 1u128 << (k * n + k)).fold(0, |a, b| a | b);
                    assert_eq!(
                        whole(&held, root, Loc::OutputSlice, 0),
                        Some(want),
                        "reduce n={n} {t} root={root}"
                    );
                }
            }
        }
    }

    #[test]
    fn senders_go_farthest_first_and_a_broken_route_is_named() {
        let p = all_to_all(8, Topology::Ring);
        let fwd: Vec<usize> = p.sends(0, Dir::Forward).map(|t| t.hops).collect();
        let bwd: Vec<usize> = p.sends(0, Dir::Backward).map(|t| t.hops).collect();
        // The antipode goes forward: 4, 3, 2, 1 forward and 3, 2, 1 back.
        assert_eq!((fwd, bwd), (vec![4, 3, 2, 1], vec![3, 2, 1]));
        let mut bad = multicast_all_gather(4, Topology::Line, true);
        bad.transfers[0].hops += 1;
        assert!(bad.check().unwrap_err().contains("leave the line"), "{:?}", bad.check());
        let mut round = relay_all_gather(5, true);
        round.transfers[0].hops = 5;
        assert!(round.check().is_err());
    }

    /// The passes found in one walk of each route are [`relay_position`]'s at every rank, in
    /// plan order, for every routed plan from 2 to 9 ranks (and a route that comes round).
    #[test]
    fn relay_passes_are_relay_positions() {
        for n in 2..=9 {
            let mut plans = vec![relay_all_gather(n, true), relay_all_gather(n, false)];
            for t in TOPOLOGIES {
                plans.extend([
                    multicast_all_gather(n, t, true),
                    all_to_all(n, t),
                    direct_reduce_scatter(n, t),
                    reduce_scatter_sides(n, t),
                ]);
            }
            let mut round = relay_all_gather(n, true);
            round.transfers[0].hops = n + 2;
            plans.push(round);
            for p in &plans {
                let passes = relay_passes(p);
                for (dir, at) in [Dir::Forward, Dir::Backward].into_iter().zip(&passes) {
                    assert_eq!(at.len(), n);
                    for (k, here) in at.iter().enumerate() {
                        let want: Vec<(usize, *const Transfer)> = p
                            .transfers
                            .iter()
                            .filter(|t| t.dir == dir)
                            .filter_map(|t| relay_position(t, n, p.topology, k).map(|i| (i, t as *const _)))
                            .collect();
                        let got: Vec<(usize, *const Transfer)> =
                            here.iter().map(|&(i, t)| (i, t as *const _)).collect();
                        assert_eq!(got, want, "n={n} rank {k} {dir:?}");
                    }
                }
            }
        }
    }
}
