//! Replays of every algorithm family's schedule, without the hardware model: each kernel's
//! sends are followed to the ranks they are written on, and the tests check that every page
//! reaches every rank meant to have it exactly once, that a relay only forwards what reached
//! it, and that every count a semaphore waits for is what the kernels signal.

use super::{Input, Schedule, Work};
use crate::fabric::algo::{Algo, Pairs};
use crate::op::{Bidir, Topology};
use crate::plan::routed::{self, Routed};
use crate::plan::{Dir, Loc};

const PAGE: u64 = 2048;

fn schedule(
    algo: Algo,
    plan: Routed,
    (pages, planes): (u64, usize),
    root: Option<usize>,
    own: bool,
) -> Schedule {
    let n = plan.n as u64;
    Schedule::build(Input {
        algo,
        plan,
        page: PAGE,
        payload: 4 * PAGE,
        pages,
        bytes: pages * PAGE,
        slices: n,
        planes,
        workers: None,
        root,
        own,
    })
}

/// The rank `hops` hops from `k` going `dir`, and every rank before it.
fn route(s: &Schedule, k: usize, dir: Dir, hops: usize) -> Vec<usize> {
    dir.ranks_from(k, hops, s.ranks(), s.topology)
}

fn topologies(n: usize) -> Vec<Topology> {
    // The fabric closes a ring of more than two chips.
    if n > 2 { vec![Topology::Line, Topology::Ring] } else { vec![Topology::Line] }
}

/// Per rank and slice, how often each page of the slice was written there.
type Got = Vec<Vec<Vec<u32>>>;

fn add(got: &mut Got, rank: usize, slice: usize, (lo, pages): (u64, u64)) {
    (lo..lo + pages).for_each(|q| got[rank][slice][q as usize] += 1);
}

/// Multicast all-gathers and broadcasts: every page of every source's slice is written once
/// on every rank that should have it (its own rank too, when it keeps a copy), and each rank's
/// semaphore waits for exactly the final increments that reach it.
#[test]
fn multicast_writes_every_page_once_and_every_final_increment_is_awaited() {
    for n in 2..=9 {
        for topology in topologies(n) {
            for (pages, planes) in [(1, 1), (9, 1), (17, 2), (40, 3)] {
                let mut cases: Vec<(Routed, Option<usize>, bool)> = [true, false]
                    .map(|own| (routed::multicast_all_gather(n, topology, own), None, own))
                    .into();
                for bidir in [Bidir::None, Bidir::Split, Bidir::Full] {
                    let root = n / 2;
                    cases.push((routed::multicast_broadcast(n, topology, bidir, root), Some(root), true));
                }
                for (plan, root, own) in cases {
                    let s = schedule(Algo::Multicast, plan, (pages, planes), root, own);
                    let Work::Multicast { kernels, finals, .. } = &s.work else { panic!("a multicast") };
                    let mut got: Got = vec![vec![vec![0; pages as usize]; n]; n];
                    let mut incs = vec![vec![0u32; n]; planes];
                    for w in kernels {
                        let slice = root.map_or(w.rank, |_| 0);
                        for (&packet, &hops) in w.packets.iter().zip(&w.ranges) {
                            for r in route(&s, w.rank, w.dir, hops as usize) {
                                add(&mut got, r, slice, packet);
                            }
                            if w.local_copy {
                                add(&mut got, w.rank, slice, packet);
                            }
                        }
                        let reach = w.ranges.iter().copied().max().unwrap_or(0);
                        route(&s, w.rank, w.dir, reach as usize)
                            .into_iter()
                            .for_each(|r| incs[w.plane][r] += 1);
                    }
                    let case =
                        format!("n {n} {topology} {pages} pages {planes} planes root {root:?} own {own}");
                    for (r, slices) in got.iter().enumerate() {
                        for (slice, seen) in slices.iter().enumerate() {
                            let source =
                                root.map_or(slice, |root| if slice == 0 { root } else { usize::MAX });
                            let want = u32::from(source != usize::MAX && (source != r || own));
                            assert!(
                                seen.iter().all(|&c| c == want),
                                "{case}: rank {r} slice {slice}: {seen:?}"
                            );
                        }
                    }
                    assert_eq!(&incs, finals, "{case}: final increments");
                }
            }
        }
    }
}

/// The relay all-gather: each rank receives every other slice's packets of each lane exactly
/// once over its two neighbours, forwards only stripes that reached it, and its sync kernel
/// waits for what its neighbours relay to it.
#[test]
fn relays_forward_only_what_reached_them_and_deliver_every_slice_once() {
    for n in 3..=9 {
        for (pages, planes) in [(1, 1), (9, 1), (64, 2), (700, 2)] {
            for own in [true, false] {
                let s = schedule(Algo::Relay, routed::relay_all_gather(n, own), (pages, planes), None, own);
                let Work::Relay { lanes, own: copies } = &s.work else { panic!("a relay") };
                assert_eq!(*copies, own);
                assert_eq!(lanes.len(), planes * s.workers);
                let case = format!("n {n} {pages} pages {planes} planes own {own}");
                for lane in lanes {
                    let total = lane.packets.len();
                    // Packets of each slice that reach each rank, per direction.
                    let mut got = vec![vec![[0usize; 2]; n]; n];
                    for k in 0..n {
                        for (d, dir) in [Dir::Forward, Dir::Backward].into_iter().enumerate() {
                            let up = route(&s, k, if d == 0 { Dir::Backward } else { Dir::Forward }, 1)[0];
                            for (i, &(slice, first, count)) in lane.stripes[k][d].iter().enumerate() {
                                assert!(first + count <= total, "{case}: stripe past the lane's packets");
                                if i == 0 {
                                    assert_eq!(slice, k, "{case}: stripe 0 is the rank's own slice");
                                } else {
                                    // It came from upstream's previous stripe, at least as much.
                                    let (from, _, had) = lane.stripes[up][d][i - 1];
                                    assert!(
                                        from == slice && had >= count,
                                        "{case}: rank {k} forwards {slice}"
                                    );
                                }
                                got[route(&s, k, dir, 1)[0]][slice][d] += count;
                            }
                        }
                    }
                    for (r, slices) in got.iter().enumerate() {
                        for (slice, ways) in slices.iter().enumerate() {
                            let want = if slice == r { 0 } else { total };
                            assert_eq!(ways[0] + ways[1], want, "{case}: rank {r} slice {slice}");
                        }
                        let received: Vec<u64> = slices
                            .iter()
                            .fold([0u64; 2], |a, w| [a[0] + w[0] as u64, a[1] + w[1] as u64])
                            .into();
                        assert_eq!(received, lane.received[r].to_vec(), "{case}: rank {r}'s waits");
                    }
                }
            }
        }
    }
}

/// Every reduce-scatter worker's packets run symbolically, each as soon as the counts its
/// reader waits for have been signalled: nothing is read before it has landed, no worker
/// waits for what never comes, no rank's pages are added twice, and every rank's output ends
/// as the sum of every rank's pages of its slice.
#[test]
fn reduce_scatter_workers_add_every_rank_once_and_read_only_what_landed() {
    use super::{RsBuf, RsItem};
    use std::collections::HashMap;
    for n in 2..=9 {
        for topology in topologies(n) {
            for (pages, planes) in [(1, 1), (33, 1), (64, 1), (300, 2)] {
                let plan = routed::reduce_scatter_sides(n, topology);
                let s = schedule(Algo::ReduceScatter, plan, (pages, planes), None, true);
                let Work::ReduceScatter { lanes } = &s.work else { panic!("a reduce-scatter") };
                let case = format!("n {n} {topology} {pages} pages {planes} planes");
                assert_eq!(lanes.len(), planes * s.workers, "{case}");
                let lane_pages: u64 = lanes.iter().flat_map(|l| &l.packets).map(|p| p.1).sum();
                assert_eq!(lane_pages, pages, "{case}: the lanes share the slice's pages");
                for lane in lanes {
                    let items: Vec<[Vec<RsItem>; 2]> =
                        (0..n).map(|k| [0, 1].map(|d| lane.items(n, s.ring(), k, d))).collect();
                    // What each (rank, buffer, slice, packet) holds: one bit per rank added.
                    let mut held: HashMap<(usize, RsBuf, usize, usize), u32> = HashMap::new();
                    let mut finals: HashMap<(usize, usize), u32> = HashMap::new();
                    let mut sems = vec![[0u64; 3]; n];
                    let mut at = vec![[0usize; 2]; n];
                    let mut moved = true;
                    while moved {
                        moved = false;
                        for k in 0..n {
                            for d in 0..2 {
                                while let Some(x) = items[k][d].get(at[k][d]) {
                                    if (0..3).any(|i| sems[k][i] < x.need[i]) {
                                        break;
                                    }
                                    let mut v = 0u32;
                                    for b in x.part.reads.into_iter().flatten() {
                                        let got = match b {
                                            RsBuf::Input => 1 << k,
                                            _ => *held.get(&(k, b, x.slice, x.packet)).unwrap_or_else(|| {
                                                panic!(
                                                    "{case}: rank {k} reads {b:?} of {x:?} before it landed"
                                                )
                                            }),
                                        };
                                        assert_eq!(v & got, 0, "{case}: rank {k} adds a rank twice in {x:?}");
                                        v |= got;
                                    }
                                    if let Some(b) = x.part.send {
                                        let dir = if d == 0 { Dir::Forward } else { Dir::Backward };
                                        let next = route(&s, k, dir, 1)[0];
                                        let was = held.insert((next, b, x.slice, x.packet), v);
                                        assert!(was.is_none(), "{case}: rank {k} overwrites {b:?} of {x:?}");
                                        sems[next][d] += u64::from(x.sync_after.unwrap_or(0));
                                    } else {
                                        assert_eq!(x.slice, k, "{case}: rank {k} writes another's output");
                                        held.insert((k, RsBuf::Output, k, x.packet), v);
                                        finals.insert((k, x.packet), v);
                                        sems[k][2] += u64::from(x.signal);
                                    }
                                    at[k][d] += 1;
                                    moved = true;
                                }
                            }
                        }
                    }
                    for (k, ends) in at.iter().enumerate() {
                        for d in 0..2 {
                            assert_eq!(ends[d], items[k][d].len(), "{case}: rank {k} worker {d} stalls");
                        }
                    }
                    let all = (1u32 << n) - 1;
                    for j in 0..n {
                        for i in 0..lane.packets.len() {
                            assert_eq!(finals.get(&(j, i)), Some(&all), "{case}: rank {j} packet {i}");
                        }
                    }
                }
            }
        }
    }
}

/// Point-to-point senders: every chunk of the plan goes once from its source to its
/// destination, each rank's semaphore waits for the chunks that reach it, each kept chunk is
/// copied by exactly one kernel (none on a direct reduction, whose reducers read it).
#[test]
fn chunk_senders_deliver_every_chunk_once_and_copy_what_ranks_keep() {
    for n in 2..=9 {
        for topology in topologies(n) {
            let root = n - 1;
            let cases: Vec<(Algo, Routed)> = vec![
                (Algo::PointToPoint(Pairs::AllToAll), routed::all_to_all(n, topology)),
                (Algo::PointToPoint(Pairs::ToRoot(root)), routed::direct_gather(n, topology, root)),
                (Algo::PointToPoint(Pairs::FromRoot(root)), routed::direct_scatter(n, topology, root)),
                (Algo::DirectReduction, routed::direct_reduce_scatter(n, topology)),
                (Algo::DirectReduction, routed::direct_reduce(n, topology, root)),
            ];
            for (algo, plan) in cases {
                let case = format!("n {n} {topology} {algo:?}");
                let pairs: Vec<(usize, usize)> = plan
                    .transfers
                    .iter()
                    .map(|t| (t.from, t.dest(n, topology).expect("a destination")))
                    .collect();
                let keeps: Vec<usize> = plan.copies.iter().map(|c| c.rank).collect();
                let s = schedule(algo, plan, (9, 1), None, true);
                let Work::PointToPoint { senders, arriving, reducers } = &s.work else { panic!("{case}") };
                let mut sent = Vec::new();
                let mut got = vec![0usize; n];
                let mut copied = vec![0u32; n];
                for w in senders {
                    for t in &w.sends {
                        let to = route(&s, w.rank, w.dir, t.hops);
                        assert_eq!(to.len(), t.hops, "{case}: a route off the line");
                        sent.push((w.rank, *to.last().expect("a hop")));
                        got[*to.last().expect("a hop")] += 1;
                        assert!(t.to.loc != Loc::Relay, "{case}: point-to-point chunks are not relayed");
                    }
                    copied[w.rank] += u32::from(w.own.is_some());
                }
                sent.sort_unstable();
                let mut want = pairs.clone();
                want.sort_unstable();
                assert_eq!(sent, want, "{case}: every chunk once");
                assert_eq!(&got, arriving, "{case}: waits");
                let direct = algo == Algo::DirectReduction;
                for (k, &c) in copied.iter().enumerate() {
                    assert_eq!(c, u32::from(!direct && keeps.contains(&k)), "{case}: rank {k}'s own copy");
                }
                assert_eq!(*reducers > 0, direct, "{case}: reducers");
            }
        }
    }
}
