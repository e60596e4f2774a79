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
}

/// Where a chunk of slice `s` lives on a rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// A collective's algorithm on `n` ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Ranks.
    pub n: usize,
    /// Ring or line.
    pub topology: Topology,
    /// The flows, in the order their lanes are built.
    pub flows: Vec<Flow>,
}

fn step(k: usize, d: i64, n: usize) -> usize {
    (k as i64 + d).rem_euclid(n as i64) as usize
}

fn store(slice: usize, to: Loc, forward: bool) -> Recv {
    Recv { slice, reduce_with: Vec::new(), to, forward, wait_join: false, signal_join: false }
}

/// An all-gather flow: slice `s` enters at rank `s` and travels `reach(s)` hops along `dir`.
fn gather_flow(n: usize, dir: Dir, reach: &dyn Fn(usize) -> usize, pages: (u64, u64)) -> Flow {
    let d = if dir == Dir::Forward { 1 } else { -1 };
    let mut sends = vec![Vec::new(); n];
    let mut receives = vec![Vec::new(); n];
    for s in 0..n {
        let hops = reach(s);
        for h in 0..hops {
            let at = step(s, d * h as i64, n);
            sends[at].push(if h == 0 {
                Send { slice: s, from: Loc::InputSlice, forwarded: false, copy_to: Some(Loc::OutputWhole) }
            } else {
                Send { slice: s, from: Loc::OutputWhole, forwarded: true, copy_to: None }
            });
            receives[step(s, d * (h as i64 + 1), n)].push(store(s, Loc::OutputWhole, h + 1 < hops));
        }
    }
    // Senders send their own slice first, then forward in arrival order (nearest source first).
    let dist = |k: usize, s: usize| (k as i64 - s as i64).rem_euclid(n as i64) * d;
    for k in 0..n {
        sends[k].sort_by_key(|x| (x.forwarded, dist(k, x.slice)));
        receives[k].sort_by_key(|x| dist(k, x.slice));
    }
    Flow { dir, pages, sends, receives }
}

/// All-gather of slices of `pages` pages. A ring sends every slice `n - 1` hops one way
/// (`Bidir::None`), half of each slice each way (`Split`), or the whole slice half-way each
/// way (`Full`); a line sends every slice both ways to both ends.
pub fn all_gather(n: usize, topology: Topology, bidir: Bidir, pages: u64) -> Plan {
    let flows = match (topology, bidir) {
        (Topology::Ring, Bidir::None) => vec![gather_flow(n, Dir::Forward, &|_| n - 1, (0, pages))],
        (Topology::Ring, Bidir::Split) => {
            let half = pages / 2;
            let mut f = vec![gather_flow(n, Dir::Forward, &|_| n - 1, (0, half.max(1).min(pages)))];
            if half < pages && half > 0 {
                f.push(gather_flow(n, Dir::Backward, &|_| n - 1, (half, pages)));
            }
            f
        }
        (Topology::Ring, Bidir::Full) => {
            let right = n / 2;
            let left = n - 1 - right;
            let mut f = vec![gather_flow(n, Dir::Forward, &|_| right, (0, pages))];
            if left > 0 {
                f.push(gather_flow(n, Dir::Backward, &|_| left, (0, pages)));
            }
            f
        }
        (Topology::Line, _) => vec![
            gather_flow(n, Dir::Forward, &|s| n - 1 - s, (0, pages)),
            gather_flow(n, Dir::Backward, &|s| s, (0, pages)),
        ],
    };
    Plan { n, topology, flows }
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
    let reduce = |slice: usize, to: Loc, forward: bool| Recv {
        slice,
        reduce_with: vec![Loc::InputWhole],
        to,
        forward,
        wait_join: false,
        signal_join: false,
    };
    let flows = match topology {
        Topology::Ring => {
            let sends = (0..n)
                .map(|c| {
                    (0..n - 1)
                        .map(|r| Send {
                            slice: step(c, -1 - r as i64, n),
                            from: if r == 0 { Loc::InputWhole } else { Loc::Relay },
                            forwarded: r > 0,
                            copy_to: None,
                        })
                        .collect()
                })
                .collect();
            let receives = (0..n)
                .map(|c| {
                    (0..n - 1)
                        .map(|r| {
                            let last = r == n - 2;
                            reduce(
                                step(c, -2 - r as i64, n),
                                if last { Loc::OutputSlice } else { Loc::Relay },
                                !last,
                            )
                        })
                        .collect()
                })
                .collect();
            vec![Flow { dir: Dir::Forward, pages: (0, pages), sends, receives }]
        }
        Topology::Line => {
            // Forward: rank 0 starts every slice s >= 1; ranks 1..s-1 reduce and forward; rank s
            // parks the partial (or, for the last rank, which has no right side, finishes it).
            let mut fwd = Flow {
                dir: Dir::Forward,
                pages: (0, pages),
                sends: vec![Vec::new(); n],
                receives: vec![Vec::new(); n],
            };
            let mut bwd = Flow {
                dir: Dir::Backward,
                pages: (0, pages),
                sends: vec![Vec::new(); n],
                receives: vec![Vec::new(); n],
            };
            for s in 1..n {
                for r in 0..s {
                    fwd.sends[r].push(Send {
                        slice: s,
                        from: if r == 0 { Loc::InputWhole } else { Loc::Relay },
                        forwarded: r > 0,
                        copy_to: None,
                    });
                    let at = r + 1;
                    fwd.receives[at].push(if at < s {
                        reduce(s, Loc::Relay, true)
                    } else if s == n - 1 {
                        reduce(s, Loc::OutputSlice, false)
                    } else {
                        Recv { signal_join: true, ..store(s, Loc::Scratch, false) }
                    });
                }
            }
            for s in (0..n - 1).rev() {
                for r in (s + 1..n).rev() {
                    bwd.sends[r].push(Send {
                        slice: s,
                        from: if r == n - 1 { Loc::InputWhole } else { Loc::Relay },
                        forwarded: r < n - 1,
                        copy_to: None,
                    });
                    let at = r - 1;
                    bwd.receives[at].push(if at > s {
                        reduce(s, Loc::Relay, true)
                    } else if s == 0 {
                        reduce(s, Loc::OutputSlice, false)
                    } else {
                        Recv {
                            reduce_with: vec![Loc::InputWhole, Loc::Scratch],
                            wait_join: true,
                            ..store(s, Loc::OutputSlice, false)
                        }
                    });
                }
            }
            for f in [&mut fwd, &mut bwd] {
                // Each rank handles slices in the order they arrive: the nearest first.
                for k in 0..n {
                    f.sends[k].sort_by_key(|x| x.slice.abs_diff(k));
                    f.receives[k].sort_by_key(|x| x.slice.abs_diff(k));
                }
            }
            vec![fwd, bwd]
        }
    };
    Plan { n, topology, flows }
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
        let mut scratch = vec![vec![None::<u64>; n]; n];
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
                            Loc::Scratch | Loc::Relay => scratch[k][s.slice],
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
                            Loc::Scratch | Loc::Relay => scratch[k][r.slice] = Some(v),
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
                let p = all_gather(n, t, b, 8);
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
        let p = all_gather(8, Topology::Ring, Bidir::None, 4);
        assert!(p.flows[0].sends.iter().all(|s| s.len() == 7));
        assert!(!p.has_joins());
        let rs = reduce_scatter(4, Topology::Line, 4);
        assert!(rs.has_joins());
        assert_eq!(rs.max_operands(), 2);
        // Rank 0 starts three forward chains and the last rank three backward ones.
        assert_eq!((rs.flows[0].sends[0].len(), rs.flows[1].sends[3].len()), (3, 3));
    }

    #[test]
    fn a_broken_plan_is_named() {
        let mut p = all_gather(4, Topology::Ring, Bidir::None, 4);
        p.flows[0].receives[1].swap(0, 1);
        assert!(p.check().unwrap_err().starts_with("flow 0: rank 0 sends"));
    }
}
