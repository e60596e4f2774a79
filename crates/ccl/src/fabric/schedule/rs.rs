//! The reduce-scatter's worker schedule (`reduce_scatter_minimal_async`, `shared/fabric.md`
//! §11.3): per lane (plane × worker), rank and direction, one worker — a reader, a compute and
//! a writer kernel joined by circular buffers — and the steps it takes.
//!
//! Slice j's sides run from their farthest rank to j, every rank on the way adding its own pages
//! to the partial that arrived and sending the sum on ([`routed::reduce_scatter_sides`]). On an
//! even ring both sides start at j's antipode, which gives its even chunks (of
//! [`RS_CHUNK_PAGES`] pages, counted in the lane's share of the slice) to the forward side and
//! its odd ones to the backward side: the next rank each way adds only the parity that reached
//! it and passes the other through raw. The forward side's last hop lands in j's partial
//! buffer for that direction, a ring's backward side's in j's output. There is no owner: at j
//! the final add is split by parity on a ring (the forward worker sums the even chunks of its
//! input, the forward partial and what the backward side wrote into the output; the backward
//! worker the odd ones), and pipelined per chunk on a line (the forward worker adds its partial
//! to the input and writes the output, then hands the chunk to the backward worker, which adds
//! its partial to it).

use std::collections::HashMap;

use crate::op::Topology;
use crate::plan::Dir;
use crate::plan::routed::{self, Routed, Transfer};

/// Per (slice, packet) a worker sends, the count its receiver's semaphore reaches once it has
/// gone.
type Counts = HashMap<(usize, usize), u64>;

/// Pages of a reduce-scatter chunk: the compute kernel adds at most 8 tiles at a time and the
/// ring's sides share the antipode's chunks by parity (`shared/fabric.md` §11.3).
pub(crate) const RS_CHUNK_PAGES: u64 = 8;

/// Chunks each circular buffer of a reduce-scatter worker holds, reader to compute and compute
/// to writer: tt-metal's are 2 to 3 chunks (`shared/fabric.md` §11.3); meshsim takes 2.
pub(crate) const RS_CB_CHUNKS: u64 = 2;

/// Where a reduce-scatter worker reads an operand or its writer puts a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum RsBuf {
    /// The rank's input (the whole tensor), at the slice's pages.
    Input,
    /// A direction's partial (intermediate) buffer, as large as the input.
    Partial(usize),
    /// The rank's output (its slice).
    Output,
}

/// What a worker does with the packets of one parity in one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RsPart {
    /// What the reader reads: the first always, the compute kernel adds the rest to it.
    pub reads: [Option<RsBuf>; 3],
    /// Where the writer sends the sum: into this buffer of the next rank that way, or (`None`)
    /// into the rank's own output.
    pub send: Option<RsBuf>,
    /// The writer hands each chunk written to its rank's backward worker (a line's final add).
    pub handoff: bool,
}

impl RsPart {
    /// Adds per page: one fewer than the operands.
    pub(crate) fn adds(&self) -> u64 {
        self.reads.iter().flatten().count() as u64 - 1
    }
}

/// A worker's step: one slice, and what it does with each parity of the lane's chunks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RsStep {
    pub slice: usize,
    /// Its place in the ring algorithm: the rank's position on the slice's side (the final
    /// add after every position).
    pub step: usize,
    /// Per parity (even, odd), what it does, if it handles it.
    pub parts: [Option<RsPart>; 2],
}

/// A reduce-scatter lane: every rank's two workers on one plane and worker index, which carry
/// every `planes x workers`-th packet of each slice.
#[derive(Clone, Debug)]
pub(crate) struct RsLane {
    pub plane: usize,
    pub worker: usize,
    /// The packets of a slice this lane carries: (first page, pages).
    pub packets: Vec<(u64, u64)>,
    /// Packets of the lane per chunk.
    pub per_chunk: u64,
    /// Packets between a writer's increments of its next rank's semaphore.
    pub per_sync: u64,
    /// Per rank and direction, its worker's steps in order.
    pub steps: Vec<[Vec<RsStep>; 2]>,
}

/// A packet a worker handles: its slice and packet, what it reads, where it goes, and what
/// must have arrived first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RsItem {
    pub slice: usize,
    /// Its index among the lane's packets.
    pub packet: usize,
    pub part: RsPart,
    /// Per semaphore of the rank (forward arrivals, backward arrivals, the line's handoff), the
    /// count the reader waits for before reading it.
    pub need: [u64; 3],
    /// After sending it the writer increments the next rank's semaphore that way by this.
    pub sync_after: Option<u32>,
    /// After writing it the writer increments the rank's handoff semaphore.
    pub signal: bool,
}

/// The semaphore a read of `buf` by rank `k`'s worker waits on, and the worker it counts the
/// sends of: a partial's upstream neighbour that way; the output's, on a ring, the backward
/// upstream (its side's last hop), on a line the rank's own forward worker (the handoff).
fn source(n: usize, ring: bool, k: usize, buf: RsBuf) -> Option<(usize, usize, usize)> {
    let up = |d: usize| if d == 0 { (k + n - 1) % n } else { (k + 1) % n };
    match buf {
        RsBuf::Input => None,
        RsBuf::Partial(d) => Some((d, up(d), d)),
        RsBuf::Output if ring => Some((1, up(1), 1)),
        RsBuf::Output => Some((2, k, 0)),
    }
}

impl RsLane {
    /// The parity of the lane's packet `i`: its chunk's, chunks counted in the lane's packets.
    pub(crate) fn parity(&self, i: usize) -> usize {
        ((i as u64 / self.per_chunk) % 2) as usize
    }

    /// Rank `k`'s worker going `d`, packet by packet, with its increments but not its waits.
    fn expand(&self, k: usize, d: usize) -> Vec<RsItem> {
        let mut items = Vec::new();
        for step in &self.steps[k][d] {
            let first = items.len();
            for i in 0..self.packets.len() {
                if let Some(part) = step.parts[self.parity(i)] {
                    items.push(RsItem {
                        slice: step.slice,
                        packet: i,
                        part,
                        need: [0; 3],
                        sync_after: None,
                        signal: false,
                    });
                }
            }
            // A slice's sends in groups of `per_sync`, the last of each incrementing; a
            // handoff after the last packet of each chunk.
            let sent: Vec<usize> = (first..items.len()).filter(|&i| items[i].part.send.is_some()).collect();
            for group in sent.chunks(self.per_sync as usize) {
                items[*group.last().expect("a group")].sync_after = Some(group.len() as u32);
            }
            for i in first..items.len() {
                let next = items.get(i + 1).filter(|x| x.slice == step.slice);
                let closes = next.is_none_or(|x| {
                    x.packet as u64 / self.per_chunk != items[i].packet as u64 / self.per_chunk
                });
                items[i].signal = items[i].part.handoff && closes;
            }
        }
        items
    }

    /// Rank `k`'s worker going `d`, packet by packet, each with the counts its reader waits for:
    /// for every operand that another worker writes, the count its semaphore reaches once that
    /// worker has sent the packet's group (or handed over its chunk).
    pub(crate) fn items(&self, n: usize, ring: bool, k: usize, d: usize) -> Vec<RsItem> {
        let mut items = self.expand(k, d);
        let mut counts: [Option<(usize, Counts)>; 3] = Default::default();
        for x in &mut items {
            for buf in x.part.reads.into_iter().flatten() {
                let Some((sem, rank, dir)) = source(n, ring, k, buf) else { continue };
                if counts[sem].is_none() {
                    counts[sem] = Some((rank, self.counts_after(rank, dir, sem == 2)));
                }
                let (_, at) = counts[sem].as_ref().expect("counted");
                let want = *at.get(&(x.slice, x.packet)).expect("what a worker reads, another writes");
                x.need[sem] = x.need[sem].max(want);
            }
        }
        items
    }

    /// For rank `k`'s worker going `d`: per (slice, packet) it sends (or, `handoff`, hands
    /// over), the count of increments its receiver has got once that packet's group has gone.
    fn counts_after(&self, k: usize, d: usize, handoff: bool) -> Counts {
        let items = self.expand(k, d);
        let mut at = HashMap::new();
        let mut total = 0u64;
        let mut waiting = Vec::new();
        for x in &items {
            let counted = if handoff { x.part.handoff } else { x.part.send.is_some() };
            if !counted {
                continue;
            }
            waiting.push((x.slice, x.packet));
            let inc = if handoff { u64::from(x.signal) } else { x.sync_after.map_or(0, u64::from) };
            if inc > 0 {
                total += inc;
                at.extend(waiting.drain(..).map(|p| (p, total)));
            }
        }
        at
    }
}

/// Every lane's steps per rank and direction for `plan` (see the module documentation).
pub(crate) fn steps(plan: &Routed) -> Vec<[Vec<RsStep>; 2]> {
    let (n, ring) = (plan.n, plan.topology == Topology::Ring);
    let passes = routed::relay_passes(plan);
    (0..n)
        .map(|k| {
            [Dir::Forward, Dir::Backward].map(|dir| {
                let d = usize::from(dir == Dir::Backward);
                // The passes through k that way, by slice.
                let mut by_slice: Vec<Vec<(usize, &Transfer)>> = vec![Vec::new(); n];
                for &(pos, t) in &passes[d][k] {
                    by_slice[t.to.slot].push((pos, t));
                }
                let mut v: Vec<RsStep> =
                    (0..n).filter_map(|j| relay_step(plan, (k, j, dir), &by_slice[j])).collect();
                v.extend(final_step(plan, k, d, ring));
                let away = |j: usize| if dir == Dir::Forward { (j + n - k) % n } else { (k + n - j) % n };
                v.sort_by_key(|s| (s.step, std::cmp::Reverse(away(s.slice))));
                v
            })
        })
        .collect()
}

/// Rank `k`'s step on slice `j`'s side going `dir`, if the side passes it before `j`: per
/// parity its position (0 starts the side with the rank's own pages, raw) and where its sum
/// goes — the next rank's partial buffer, on a ring's backward side the owner's output.
/// `passes`: the plan's transfers of slice `j` through `k` going `dir`, with their positions
/// there ([`routed::relay_passes`]).
fn relay_step(
    plan: &Routed,
    (k, j, dir): (usize, usize, Dir),
    passes: &[(usize, &Transfer)],
) -> Option<RsStep> {
    let (n, ring) = (plan.n, plan.topology == Topology::Ring);
    let d = usize::from(dir == Dir::Backward);
    let next = dir.ranks_from(k, 1, n, plan.topology).first().copied();
    let send = if ring && d == 1 && next == Some(j) { RsBuf::Output } else { RsBuf::Partial(d) };
    let mut parts = [None; 2];
    let mut step = None;
    for &(pos, t) in passes {
        step = step.max(Some(pos));
        let reads = [Some(RsBuf::Input), (pos > 0).then_some(RsBuf::Partial(d)), None];
        for x in (0..2).filter(|x| t.part.halves() & (1 << x) != 0) {
            parts[x] = Some(RsPart { reads, send: Some(send), handoff: false });
        }
    }
    Some(RsStep { slice: j, step: step?, parts })
}

/// Rank `k`'s final add of its own slice going `d`: which parities reach it from each side,
/// summed with its input into its output — on a ring the worker of parity `d` adds both
/// sides' (the forward side's partial and the backward side's, in the output); on a line the
/// forward worker adds its side's and hands each chunk to the backward worker, which adds its
/// own side's to the output.
fn final_step(plan: &Routed, k: usize, d: usize, ring: bool) -> Option<RsStep> {
    let (n, topology) = (plan.n, plan.topology);
    // Per direction and parity, whether a side of `k`'s slice reaches it; the longest side.
    let mut reach = [[false; 2]; 2];
    let mut step = 0;
    for t in plan.transfers.iter().filter(|t| t.to.slot == k && t.dest(n, topology) == Some(k)) {
        let dd = usize::from(t.dir == Dir::Backward);
        step = step.max(t.hops);
        for x in (0..2).filter(|x| t.part.halves() & (1 << x) != 0) {
            reach[dd][x] = true;
        }
    }
    let mut parts = [None; 2];
    if ring {
        let x = d;
        let reads = [
            Some(RsBuf::Input),
            reach[0][x].then_some(RsBuf::Partial(0)),
            reach[1][x].then_some(RsBuf::Output),
        ];
        parts[x] = Some(RsPart { reads, send: None, handoff: false });
    } else {
        let (fwd, bwd) = (reach[0][0], reach[1][0]);
        let part = match d {
            0 if fwd => RsPart {
                reads: [Some(RsBuf::Input), Some(RsBuf::Partial(0)), None],
                send: None,
                handoff: bwd,
            },
            1 if bwd => {
                let base = if fwd { RsBuf::Output } else { RsBuf::Input };
                RsPart { reads: [Some(base), Some(RsBuf::Partial(1)), None], send: None, handoff: false }
            }
            _ => return None,
        };
        parts = [Some(part); 2];
        step = if d == 0 { k } else { n - 1 - k };
    }
    Some(RsStep { slice: k, step, parts })
}
