//! Algorithms as plans: pure data saying which slice each rank sends and receives, in which
//! order, in which direction, and what a receiver does with it. No simulation here: the
//! session lowers a plan onto a transport (today the EDM) with one generic sender and one
//! generic receiver kernel per lane.
//!
//! A plan is a list of [`Flow`]s. A flow moves slices one way along the communicator (rank `k`
//! to `k + 1`, or to `k - 1`), over a page range of each slice. For every rank it lists the
//! sends of that rank's sender, and the receives of its receiver; the sender of rank `k`
//! sends exactly what the receiver of the next rank receives, in the same order. A receive
//! that forwards feeds the same rank's sender, whose matching send waits for it.

use crate::op::{Bidir, Topology};

pub mod routed;

/// Which way a flow moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Rank `k` to rank `k + 1`.
    Forward,
    /// Rank `k` to rank `k - 1`.
    Backward,
}

impl Dir {
    /// The rank after `k` of `n` in this direction, if there is one on `topology`.
    pub fn next(self, k: usize, n: usize, topology: Topology) -> Option<usize> {
        match (self, topology) {
            (Dir::Forward, Topology::Ring) => Some((k + 1) % n),
            (Dir::Backward, Topology::Ring) => Some((k + n - 1) % n),
            (Dir::Forward, Topology::Line) => (k + 1 < n).then_some(k + 1),
            (Dir::Backward, Topology::Line) => k.checked_sub(1),
        }
    }

    /// The ranks up to `hops` hops from `k` of `n` in this direction on `topology`, nearest
    /// first (fewer where a line ends).
    pub fn ranks_from(self, k: usize, hops: usize, n: usize, topology: Topology) -> Vec<usize> {
        std::iter::successors(Some(k), |&r| self.next(r, n, topology)).skip(1).take(hops).collect()
    }
}

/// Where a chunk of slice `s` lives on a rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Loc {
    /// The input, which is the slice itself (all-gather).
    InputSlice,
    /// Slice `s` of the input, which is the whole tensor (reductions).
    InputWhole,
    /// Slice `s` of the output, which is the whole tensor (all-gather).
    OutputWhole,
    /// The output, which is the rank's own slice (reduce-scatter).
    OutputSlice,
    /// Slice `s` of a scratch tensor as large as the whole (a line reduction's partial that
    /// waits for the other side).
    Scratch,
    /// The relay buffer in L1 of this rank's sender for the flow: a partial result handed from
    /// the receiver to the sender that forwards it, never parked in a tensor.
    Relay,
    /// Slot `s` of a receive buffer holding one source's whole chunk after another (a direct
    /// reduce's contributions, by source).
    Receive,
}

/// One send of a rank's sender: the pages of `slice` in the flow's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Send {
    /// The slice.
    pub slice: usize,
    /// Where the sender reads it.
    pub from: Loc,
    /// Wait until this rank's receiver has stored it (a forwarded chunk).
    pub forwarded: bool,
    /// Also write it here on this rank (an all-gather's own slice into its output).
    pub copy_to: Option<Loc>,
}

/// One receive of a rank's receiver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recv {
    /// The slice.
    pub slice: usize,
    /// Operands the received chunk is reduced with, read on this rank (empty: store as is).
    pub reduce_with: Vec<Loc>,
    /// Where the result goes on this rank.
    pub to: Loc,
    /// Whether this rank's sender forwards the result.
    pub forward: bool,
    /// Wait for the other flow's receiver on this rank to have stored its part (a join).
    pub wait_join: bool,
    /// Tell the other flow's receiver on this rank that this part is stored.
    pub signal_join: bool,
}

/// A direction of travel and what every rank sends and receives on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flow {
    /// Which way.
    pub dir: Dir,
    /// The page range `[lo, hi)` of every slice this flow carries.
    pub pages: (u64, u64),
    /// Per rank, its sender's sends in order.
    pub sends: Vec<Vec<Send>>,
    /// Per rank, its receiver's receives in order.
    pub receives: Vec<Vec<Recv>>,
}

/// A copy on one rank that no link carries: a rooted collective's own part (a gather's root
/// keeps its slice, a scatter's root its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Copy {
    /// The rank.
    pub rank: usize,
    /// The slice.
    pub slice: usize,
    /// Where it is read.
    pub from: Loc,
    /// Where it is written.
    pub to: Loc,
}

/// A collective's algorithm on `n` ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Ranks.
    pub n: usize,
    /// Ring or line.
    pub topology: Topology,
    /// The flows, in the order their lanes are built.
    pub flows: Vec<Flow>,
    /// Local copies, each on its rank's own worker.
    pub copies: Vec<Copy>,
}

fn step(k: usize, d: i64, n: usize) -> usize {
    (k as i64 + d).rem_euclid(n as i64) as usize
}

fn store(slice: usize, to: Loc, forward: bool) -> Recv {
    Recv { slice, reduce_with: Vec::new(), to, forward, wait_join: false, signal_join: false }
}

/// An all-gather flow: slice `s` enters at rank `s` and travels `reach(s)` hops along `dir`.
fn gather_flow(n: usize, dir: Dir, reach: &dyn Fn(usize) -> usize, pages: (u64, u64), own: bool) -> Flow {
    let chains: Vec<(usize, usize, usize)> = (0..n).map(|s| (s, s, reach(s))).collect();
    copy_flow(n, dir, &chains, pages, own)
}

/// A flow of copies: each `(slice, source, hops)` leaves its source's input, lands in the
/// output of every rank it passes, and is forwarded from there; `own`: the source also writes
/// it into its own output.
fn copy_flow(n: usize, dir: Dir, chains: &[(usize, usize, usize)], pages: (u64, u64), own: bool) -> Flow {
    let d = if dir == Dir::Forward { 1 } else { -1 };
    let mut sends = vec![Vec::new(); n];
    let mut receives = vec![Vec::new(); n];
    let mut source = vec![0; n];
    for &(s, src, hops) in chains {
        source[s] = src;
        for h in 0..hops {
            let at = step(src, d * h as i64, n);
            sends[at].push(if h == 0 {
                Send {
                    slice: s,
                    from: Loc::InputSlice,
                    forwarded: false,
                    copy_to: own.then_some(Loc::OutputWhole),
                }
            } else {
                Send { slice: s, from: Loc::OutputWhole, forwarded: true, copy_to: None }
            });
            receives[step(src, d * (h as i64 + 1), n)].push(store(s, Loc::OutputWhole, h + 1 < hops));
        }
    }
    // Senders send their own slice first, then forward in arrival order (nearest source first).
    let dist = |k: usize, s: usize| (k as i64 - source[s] as i64).rem_euclid(n as i64) * d;
    for k in 0..n {
        sends[k].sort_by_key(|x| (x.forwarded, dist(k, x.slice)));
        receives[k].sort_by_key(|x| dist(k, x.slice));
    }
    Flow { dir, pages, sends, receives }
}

/// A chunk relayed from its source: `hops` along a direction, from the source's `from` to the
/// last rank's `to`.
#[derive(Clone, Copy, Debug)]
struct Chain {
    slice: usize,
    src: usize,
    hops: usize,
    from: Loc,
    to: Loc,
}

/// A flow of relayed chunks: each chain leaves the source's `from`
/// and travels `hops` along `dir` through the relay buffers of the ranks on the way to the last,
/// which stores it at `to`. Every rank handles the chunks in the order `chains` lists them.
fn relay_flow(n: usize, dir: Dir, chains: &[Chain], pages: (u64, u64)) -> Flow {
    let d = if dir == Dir::Forward { 1 } else { -1 };
    let mut sends = vec![Vec::new(); n];
    let mut receives = vec![Vec::new(); n];
    for &Chain { slice: s, src, hops, from, to } in chains {
        for h in 0..hops {
            let at = step(src, d * h as i64, n);
            let first = h == 0;
            sends[at].push(Send {
                slice: s,
                from: if first { from } else { Loc::Relay },
                forwarded: !first,
                copy_to: None,
            });
            let last = h + 1 == hops;
            receives[step(src, d * (h as i64 + 1), n)].push(store(
                s,
                if last { to } else { Loc::Relay },
                !last,
            ));
        }
    }
    Flow { dir, pages, sends, receives }
}

/// The direction and hops from rank `k` to rank `j`: along a line, or the shorter way round a
/// ring (forward on a tie).
pub fn way(n: usize, topology: Topology, k: usize, j: usize) -> (Dir, usize) {
    match topology {
        Topology::Ring => {
            let f = (j + n - k) % n;
            if f <= n - f { (Dir::Forward, f) } else { (Dir::Backward, n - f) }
        }
        Topology::Line if j >= k => (Dir::Forward, j - k),
        Topology::Line => (Dir::Backward, k - j),
    }
}

/// The flows of `chains` grouped by direction, forward first, skipping empty ones.
fn by_direction(n: usize, pages: u64, chains: Vec<(Dir, Chain)>) -> Vec<Flow> {
    [Dir::Forward, Dir::Backward]
        .into_iter()
        .filter_map(|dir| {
            let mine: Vec<_> = chains.iter().filter(|c| c.0 == dir).map(|c| c.1).collect();
            (!mine.is_empty()).then(|| relay_flow(n, dir, &mine, (0, pages)))
        })
        .collect()
}

/// Broadcast of one slice of `pages` pages from `root`: a ring sends it `n - 1` hops one way
/// (`Bidir::None`), half of it each way (`Split`), or all of it half-way each way (`Full`); a
/// line sends it to both ends. Every rank stores it in its output and forwards it from there,
/// as an all-gather does; `own`: the root also copies it into its output (a send/receive does
/// not).
pub fn broadcast(n: usize, topology: Topology, bidir: Bidir, root: usize, pages: u64, own: bool) -> Plan {
    let flow = |dir, hops, range| copy_flow(n, dir, &[(0, root, hops)], range, own);
    let mut flows = match (topology, bidir) {
        (Topology::Ring, Bidir::None) => vec![flow(Dir::Forward, n - 1, (0, pages))],
        (Topology::Ring, Bidir::Split) if pages >= 2 => {
            vec![flow(Dir::Forward, n - 1, (0, pages / 2)), flow(Dir::Backward, n - 1, (pages / 2, pages))]
        }
        (Topology::Ring, Bidir::Split) => vec![flow(Dir::Forward, n - 1, (0, pages))],
        (Topology::Ring, Bidir::Full) => {
            vec![flow(Dir::Forward, n / 2, (0, pages)), flow(Dir::Backward, n - 1 - n / 2, (0, pages))]
        }
        (Topology::Line, _) => {
            vec![flow(Dir::Forward, n - 1 - root, (0, pages)), flow(Dir::Backward, root, (0, pages))]
        }
    };
    flows.retain(|f| f.sends.iter().any(|s| !s.is_empty()));
    Plan { n, topology, flows, copies: Vec::new() }
}

/// Send/receive of one slice of `pages` pages from rank 0 to rank 1 of a two-rank line.
pub fn send_recv(pages: u64) -> Plan {
    broadcast(2, Topology::Line, Bidir::None, 0, pages, false)
}

/// Gather of slices of `pages` pages to `root`: each other rank's slice travels the shorter way
/// (the only way on a line) through the relay buffers of the ranks between, and lands in the
/// root's output; the root copies its own. Each rank sends its own slice first, then relays
/// the others nearest first, the order they arrive in.
pub fn gather(n: usize, topology: Topology, root: usize, pages: u64) -> Plan {
    let mut chains: Vec<(Dir, Chain)> = (0..n)
        .filter(|&s| s != root)
        .map(|s| {
            let (dir, hops) = way(n, topology, s, root);
            (dir, Chain { slice: s, src: s, hops, from: Loc::InputSlice, to: Loc::OutputWhole })
        })
        .collect();
    // Farther sources first: every rank then relays in the order the slices reach it.
    chains.sort_by_key(|c| std::cmp::Reverse(c.1.hops));
    let mut flows = by_direction(n, pages, chains);
    for f in &mut flows {
        let d = if f.dir == Dir::Forward { 1 } else { -1 };
        for k in 0..n {
            let dist = |s: usize| (k as i64 - s as i64).rem_euclid(n as i64) * d;
            f.sends[k].sort_by_key(|x| (x.forwarded, dist(x.slice)));
            f.receives[k].sort_by_key(|x| dist(x.slice));
        }
    }
    let copies = vec![Copy { rank: root, slice: root, from: Loc::InputSlice, to: Loc::OutputWhole }];
    Plan { n, topology, flows, copies }
}

/// Scatter of the root's slices of `pages` pages: slice `j` travels from the root the shorter
/// way (the only way on a line) to rank `j`, through the relay buffers of the ranks between;
/// the root sends the farthest first, and copies its own.
pub fn scatter(n: usize, topology: Topology, root: usize, pages: u64) -> Plan {
    let mut chains: Vec<(Dir, Chain)> = (0..n)
        .filter(|&j| j != root)
        .map(|j| {
            let (dir, hops) = way(n, topology, root, j);
            (dir, Chain { slice: j, src: root, hops, from: Loc::InputWhole, to: Loc::OutputSlice })
        })
        .collect();
    chains.sort_by_key(|c| (std::cmp::Reverse(c.1.hops), c.1.slice));
    let flows = by_direction(n, pages, chains);
    let copies = vec![Copy { rank: root, slice: root, from: Loc::InputWhole, to: Loc::OutputSlice }];
    Plan { n, topology, flows, copies }
}

/// All-gather of slices of `pages` pages. A ring sends every slice `n - 1` hops one way
/// (`Bidir::None`), half of each slice each way (`Split`), or the whole slice half-way each
/// way (`Full`); a line sends every slice both ways to both ends. `own`: each rank copies its
/// own slice into its output (LPF's all-gather without `exclude_myself`).
pub fn all_gather(n: usize, topology: Topology, bidir: Bidir, pages: u64, own: bool) -> Plan {
    let flows = match (topology, bidir) {
        (Topology::Ring, Bidir::None) => vec![gather_flow(n, Dir::Forward, &|_| n - 1, (0, pages), own)],
        (Topology::Ring, Bidir::Split) => {
            let half = pages / 2;
            let mut f = vec![gather_flow(n, Dir::Forward, &|_| n - 1, (0, half.max(1).min(pages)), own)];
            if half < pages && half > 0 {
                f.push(gather_flow(n, Dir::Backward, &|_| n - 1, (half, pages), own));
            }
            f
        }
        (Topology::Ring, Bidir::Full) => {
            let right = n / 2;
            let left = n - 1 - right;
            let mut f = vec![gather_flow(n, Dir::Forward, &|_| right, (0, pages), own)];
            if left > 0 {
                f.push(gather_flow(n, Dir::Backward, &|_| left, (0, pages), own));
            }
            f
        }
        (Topology::Line, _) => vec![
            gather_flow(n, Dir::Forward, &|s| n - 1 - s, (0, pages), own),
            gather_flow(n, Dir::Backward, &|s| s, (0, pages), own),
        ],
    };
    Plan { n, topology, flows, copies: Vec::new() }
}

/// Reduce-scatter of slices of `pages` pages: rank `s` ends with slice `s` reduced over all.
///
/// On a ring, the partial of slice `s` starts at rank `s + 1` with its own input and travels
/// `n - 1` hops forward; every rank on the way reduces its own input into it and hands it to
/// its sender's relay buffer to forward, and rank `s` writes the result. On a line, slice `s`
/// is reduced from both ends towards rank `s`: the forward partial (ranks `0..s`) lands in rank
/// `s`'s scratch, and the backward partial (ranks `n-1..s`) joins it there with rank `s`'s own
/// input.
pub fn reduce_scatter(n: usize, topology: Topology, pages: u64) -> Plan {
    let targets: Vec<(usize, usize)> = (0..n).map(|s| (s, s)).collect();
    let flows = match topology {
        Topology::Ring => vec![ring_reduce_flow(n, Dir::Forward, &targets, (0, pages))],
        Topology::Line => line_reduce_flows(n, &targets, pages),
    };
    Plan { n, topology, flows, copies: Vec::new() }
}

/// Reduce of one slice of `pages` pages to `root`: on a ring, half of it travels `n - 1` hops
/// forward and the other half `n - 1` hops backward, each partial starting next to the root
/// and ending in its output (one way only with 2 ranks or one page); on a line, from both ends
/// towards the root, joining there.
pub fn reduce(n: usize, topology: Topology, root: usize, pages: u64) -> Plan {
    let targets = [(0, root)];
    let flows = match topology {
        Topology::Ring if n > 2 && pages >= 2 => vec![
            ring_reduce_flow(n, Dir::Forward, &targets, (0, pages / 2)),
            ring_reduce_flow(n, Dir::Backward, &targets, (pages / 2, pages)),
        ],
        Topology::Ring => vec![ring_reduce_flow(n, Dir::Forward, &targets, (0, pages))],
        Topology::Line => line_reduce_flows(n, &targets, pages),
    };
    Plan { n, topology, flows, copies: Vec::new() }
}

/// A receive that reduces the chunk with this rank's input.
fn reduce_recv(slice: usize, to: Loc, forward: bool) -> Recv {
    Recv { reduce_with: vec![Loc::InputWhole], ..store(slice, to, forward) }
}

/// A ring reduction flow: for each `(slice, owner)`, the partial starts at the rank after the
/// owner along `dir` with its input, and travels `n - 1` hops; every rank on the way reduces
/// its own input into it and hands it to its sender's relay buffer, and the owner writes the
/// result. Every rank walks its steps in hop order.
fn ring_reduce_flow(n: usize, dir: Dir, targets: &[(usize, usize)], pages: (u64, u64)) -> Flow {
    let d = if dir == Dir::Forward { 1 } else { -1 };
    let mut sends: Vec<Vec<(usize, Send)>> = vec![Vec::new(); n];
    let mut receives: Vec<Vec<(usize, Recv)>> = vec![Vec::new(); n];
    for &(slice, owner) in targets {
        let first = step(owner, d, n);
        for h in 0..n - 1 {
            let at = step(first, d * h as i64, n);
            let from = if h == 0 { Loc::InputWhole } else { Loc::Relay };
            sends[at].push((h, Send { slice, from, forwarded: h > 0, copy_to: None }));
            let last = h == n - 2;
            let to = if last { Loc::OutputSlice } else { Loc::Relay };
            receives[step(at, d, n)].push((h, reduce_recv(slice, to, !last)));
        }
    }
    let ordered = |mut v: Vec<(usize, Send)>| {
        v.sort_by_key(|x| x.0);
        v.into_iter().map(|x| x.1).collect()
    };
    let ordered_r = |mut v: Vec<(usize, Recv)>| {
        v.sort_by_key(|x| x.0);
        v.into_iter().map(|x| x.1).collect()
    };
    Flow {
        dir,
        pages,
        sends: sends.into_iter().map(ordered).collect(),
        receives: receives.into_iter().map(ordered_r).collect(),
    }
}

/// A line reduction: each `(slice, owner)` is reduced from both ends towards its owner. The
/// forward partial (ranks `0..owner`) lands in the owner's scratch, and the backward partial
/// (ranks `n-1..owner`) joins it there with the owner's own input; an owner at an end has one
/// side only, whose partial it reduces with its input into its output.
fn line_reduce_flows(n: usize, targets: &[(usize, usize)], pages: u64) -> Vec<Flow> {
    let empty =
        |dir| Flow { dir, pages: (0, pages), sends: vec![Vec::new(); n], receives: vec![Vec::new(); n] };
    let (mut fwd, mut bwd) = (empty(Dir::Forward), empty(Dir::Backward));
    for &(s, o) in targets {
        for r in 0..o {
            fwd.sends[r].push(Send {
                slice: s,
                from: if r == 0 { Loc::InputWhole } else { Loc::Relay },
                forwarded: r > 0,
                copy_to: None,
            });
            let at = r + 1;
            fwd.receives[at].push(if at < o {
                reduce_recv(s, Loc::Relay, true)
            } else if o == n - 1 {
                reduce_recv(s, Loc::OutputSlice, false)
            } else {
                Recv { signal_join: true, ..store(s, Loc::Scratch, false) }
            });
        }
        for r in (o + 1..n).rev() {
            bwd.sends[r].push(Send {
                slice: s,
                from: if r == n - 1 { Loc::InputWhole } else { Loc::Relay },
                forwarded: r < n - 1,
                copy_to: None,
            });
            let at = r - 1;
            bwd.receives[at].push(if at > o {
                reduce_recv(s, Loc::Relay, true)
            } else if o == 0 {
                reduce_recv(s, Loc::OutputSlice, false)
            } else {
                Recv {
                    reduce_with: vec![Loc::InputWhole, Loc::Scratch],
                    wait_join: true,
                    ..store(s, Loc::OutputSlice, false)
                }
            });
        }
    }
    // Each rank handles slices in the order they arrive: the nearest owner first. The
    // backward side walks owners from the far end.
    let owner = |s: usize| targets.iter().find(|t| t.0 == s).expect("a target").1;
    for f in [&mut fwd, &mut bwd] {
        for k in 0..n {
            f.sends[k].sort_by_key(|x| owner(x.slice).abs_diff(k));
            f.receives[k].sort_by_key(|x| owner(x.slice).abs_diff(k));
        }
    }
    [fwd, bwd].into_iter().filter(|f| f.sends.iter().any(|s| !s.is_empty())).collect()
}

impl Plan {
    /// Checks the plan's consistency: every hop's sends and receives agree in order, every
    /// forwarded send is fed by a forwarding receive on the same rank in the same order, and
    /// every join wait has a matching join signal. `Err` names the first broken rule.
    pub fn check(&self) -> Result<(), String> {
        let n = self.n;
        for (fi, f) in self.flows.iter().enumerate() {
            for k in 0..n {
                let sent: Vec<usize> = f.sends[k].iter().map(|s| s.slice).collect();
                match f.dir.next(k, n, self.topology) {
                    Some(to) => {
                        let got: Vec<usize> = f.receives[to].iter().map(|r| r.slice).collect();
                        if sent != got {
                            return Err(format!(
                                "flow {fi}: rank {k} sends {sent:?}, rank {to} receives {got:?}"
                            ));
                        }
                    }
                    None if !sent.is_empty() => {
                        return Err(format!("flow {fi}: rank {k} sends past the end"));
                    }
                    None => {}
                }
                let fed: Vec<usize> = f.receives[k].iter().filter(|r| r.forward).map(|r| r.slice).collect();
                let fwd: Vec<usize> = f.sends[k].iter().filter(|s| s.forwarded).map(|s| s.slice).collect();
                if fed != fwd {
                    return Err(format!(
                        "flow {fi}: rank {k} forwards {fwd:?} but its receiver feeds {fed:?}"
                    ));
                }
            }
        }
        for k in 0..n {
            let count = |pick: &dyn Fn(&Recv) -> bool| -> usize {
                self.flows.iter().map(|f| f.receives[k].iter().filter(|r| pick(r)).count()).sum()
            };
            if count(&|r| r.wait_join) != count(&|r| r.signal_join) {
                return Err(format!("rank {k}: join waits and signals differ"));
            }
        }
        Ok(())
    }

    /// Whether any receive joins two flows.
    pub fn has_joins(&self) -> bool {
        self.flows.iter().any(|f| f.receives.iter().flatten().any(|r| r.wait_join))
    }

    /// Whether any receive hands its result to a sender's relay buffer.
    pub fn uses_relay(&self) -> bool {
        self.flows.iter().any(|f| f.receives.iter().flatten().any(|r| r.to == Loc::Relay))
    }

    /// The most operands any receive reduces with.
    pub fn max_operands(&self) -> usize {
        self.flows
            .iter()
            .flat_map(|f| f.receives.iter().flatten())
            .map(|r| r.reduce_with.len())
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays a plan on values: every rank holds `n` slices of `1 << rank` each; returns per
    /// rank what each output slice holds (a bit set of contributing ranks), following the
    /// plan's sends and receives in dependency order.
    fn replay(p: &Plan) -> Vec<Vec<Option<u64>>> {
        let n = p.n;
        let own = |k: usize| 1u64 << k;
        let mut output = vec![vec![None; n]; n];
        for c in &p.copies {
            output[c.rank][c.slice] = Some(own(c.rank));
        }
        let mut scratch = vec![vec![None::<u64>; n]; n];
        // Relay buffers belong to a flow's lane.
        let mut relay = vec![vec![vec![None::<u64>; n]; n]; p.flows.len()];
        // Chunk values in flight: per flow, per receiving rank, a queue.
        let mut progress = true;
        let mut sent = vec![vec![0usize; n]; p.flows.len()];
        let mut recvd = vec![vec![0usize; n]; p.flows.len()];
        let mut inflight: Vec<Vec<std::collections::VecDeque<u64>>> =
            vec![vec![std::collections::VecDeque::new(); n]; p.flows.len()];
        let mut joined = vec![0usize; n];
        let mut join_signals = vec![0usize; n];
        let mut fed = vec![vec![0usize; n]; p.flows.len()];
        let mut forwarded = vec![vec![0usize; n]; p.flows.len()];
        while progress {
            progress = false;
            for (fi, f) in p.flows.iter().enumerate() {
                for k in 0..n {
                    if let Some(s) =
                        f.sends[k].get(sent[fi][k]).filter(|s| !s.forwarded || forwarded[fi][k] < fed[fi][k])
                    {
                        let v = match s.from {
                            Loc::InputSlice | Loc::InputWhole => Some(own(k)),
                            Loc::OutputWhole | Loc::OutputSlice => output[k][s.slice],
                            Loc::Scratch => scratch[k][s.slice],
                            Loc::Relay => relay[fi][k][s.slice],
                            Loc::Receive => unreachable!("neighbour plans use no receive buffer"),
                        }
                        .expect("sent data exists");
                        if s.copy_to.is_some() {
                            output[k][s.slice] = Some(v);
                        }
                        forwarded[fi][k] += s.forwarded as usize;
                        let to = f.dir.next(k, n, p.topology).unwrap();
                        inflight[fi][to].push_back(v);
                        sent[fi][k] += 1;
                        progress = true;
                    }
                    let ready = |r: &&Recv| {
                        !inflight[fi][k].is_empty() && (!r.wait_join || join_signals[k] > joined[k])
                    };
                    if let Some(r) = f.receives[k].get(recvd[fi][k]).filter(ready) {
                        let mut v = inflight[fi][k].pop_front().unwrap();
                        for op in &r.reduce_with {
                            let x = match op {
                                Loc::InputWhole => own(k),
                                Loc::Scratch => scratch[k][r.slice].expect("joined part"),
                                _ => unreachable!(),
                            };
                            assert_eq!(v & x, 0, "rank {k} slice {}: a rank counted twice", r.slice);
                            v |= x;
                        }
                        joined[k] += r.wait_join as usize;
                        join_signals[k] += r.signal_join as usize;
                        match r.to {
                            Loc::Scratch => scratch[k][r.slice] = Some(v),
                            Loc::Relay => relay[fi][k][r.slice] = Some(v),
                            _ => output[k][r.slice] = Some(v),
                        }
                        fed[fi][k] += r.forward as usize;
                        recvd[fi][k] += 1;
                        progress = true;
                    }
                }
            }
        }
        for (fi, f) in p.flows.iter().enumerate() {
            for k in 0..n {
                assert_eq!(sent[fi][k], f.sends[k].len(), "flow {fi} rank {k} stalled sending");
                assert_eq!(recvd[fi][k], f.receives[k].len(), "flow {fi} rank {k} stalled receiving");
            }
        }
        output
    }

    #[test]
    fn all_gather_plans_give_every_rank_every_slice() {
        for n in 2..=9 {
            for (t, b) in [
                (Topology::Ring, Bidir::None),
                (Topology::Ring, Bidir::Split),
                (Topology::Ring, Bidir::Full),
                (Topology::Line, Bidir::None),
            ] {
                let p = all_gather(n, t, b, 8, true);
                p.check().unwrap_or_else(|e| panic!("n={n} {t} {b}: {e}"));
                let out = replay(&p);
                for (k, row) in out.iter().enumerate() {
                    for (s, v) in row.iter().enumerate() {
                        assert_eq!(*v, Some(1 << s), "n={n} {t} {b}: rank {k} slice {s}");
                    }
                }
            }
        }
    }

    #[test]
    fn reduce_scatter_plans_reduce_every_rank_once_into_its_slice() {
        for n in 2..=9 {
            for t in [Topology::Ring, Topology::Line] {
                let p = reduce_scatter(n, t, 8);
                p.check().unwrap_or_else(|e| panic!("n={n} {t}: {e}"));
                let out = replay(&p);
                for (k, row) in out.iter().enumerate() {
                    assert_eq!(row[k], Some((1 << n) - 1), "n={n} {t}: rank {k}");
                }
            }
        }
    }

    #[test]
    fn ring_all_gather_sends_n_minus_1_slices_per_rank_and_line_joins_only_in_reduce_scatter() {
        let p = all_gather(8, Topology::Ring, Bidir::None, 4, true);
        assert!(p.flows[0].sends.iter().all(|s| s.len() == 7));
        assert!(!p.has_joins());
        let rs = reduce_scatter(4, Topology::Line, 4);
        assert!(rs.has_joins());
        assert_eq!(rs.max_operands(), 2);
        // Rank 0 starts three forward chains and the last rank three backward ones.
        assert_eq!((rs.flows[0].sends[0].len(), rs.flows[1].sends[3].len()), (3, 3));
    }

    const SHAPES: [(Topology, Bidir); 4] = [
        (Topology::Ring, Bidir::None),
        (Topology::Ring, Bidir::Split),
        (Topology::Ring, Bidir::Full),
        (Topology::Line, Bidir::None),
    ];

    #[test]
    fn rooted_plans_deliver_exactly_what_each_rank_must_end_with() {
        for n in 2..=9 {
            for root in 0..n {
                for (t, b) in SHAPES {
                    let what = format!("n={n} root={root} {t} {b}");
                    let bc = broadcast(n, t, b, root, 8, true);
                    bc.check().unwrap_or_else(|e| panic!("broadcast {what}: {e}"));
                    for (k, row) in replay(&bc).iter().enumerate() {
                        assert_eq!(row[0], Some(1 << root), "broadcast {what}: rank {k}");
                    }
                    if b != Bidir::None {
                        continue;
                    }
                    let red = reduce(n, t, root, 8);
                    red.check().unwrap_or_else(|e| panic!("reduce {what}: {e}"));
                    let out = replay(&red);
                    assert_eq!(out[root][0], Some((1 << n) - 1), "reduce {what}");
                    let g = gather(n, t, root, 8);
                    g.check().unwrap_or_else(|e| panic!("gather {what}: {e}"));
                    let out = replay(&g);
                    for (s, v) in out[root].iter().enumerate() {
                        assert_eq!(*v, Some(1 << s), "gather {what}: slice {s}");
                    }
                    let sc = scatter(n, t, root, 8);
                    sc.check().unwrap_or_else(|e| panic!("scatter {what}: {e}"));
                    for (k, row) in replay(&sc).iter().enumerate() {
                        assert_eq!(row[k], Some(1 << root), "scatter {what}: rank {k}");
                        // Nothing but its own slice lands in a rank's output.
                        assert!(row.iter().enumerate().all(|(s, v)| s == k || v.is_none()), "scatter {what}");
                    }
                }
            }
        }
        let sr = send_recv(8);
        assert_eq!(replay(&sr), vec![vec![None, None], vec![Some(1), None]]);
    }

    #[test]
    fn exclude_myself_leaves_each_rank_its_own_slice_out() {
        let p = all_gather(5, Topology::Ring, Bidir::Full, 4, false);
        p.check().unwrap();
        for (k, row) in replay(&p).iter().enumerate() {
            for (s, v) in row.iter().enumerate() {
                assert_eq!(*v, (s != k).then_some(1 << s), "rank {k} slice {s}");
            }
        }
    }

    #[test]
    fn a_ring_reduce_halves_the_tensor_between_both_directions() {
        let p = reduce(8, Topology::Ring, 3, 8);
        assert_eq!(p.flows.len(), 2);
        assert_eq!((p.flows[0].pages, p.flows[1].pages), ((0, 4), (4, 8)));
        // Each half passes every rank but the root once.
        assert!(p.flows.iter().all(|f| f.sends.iter().map(Vec::len).sum::<usize>() == 7));
    }

    #[test]
    fn a_broken_plan_is_named() {
        let mut p = all_gather(4, Topology::Ring, Bidir::None, 4, true);
        p.flows[0].receives[1].swap(0, 1);
        assert!(p.check().unwrap_err().starts_with("flow 0: rank 0 sends"));
    }
}
