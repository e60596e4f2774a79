//! Builds the users' view of a schedule ([`ScheduleView`]) from the schedule.

use super::{ChunkSender, Multicaster, RelayLane, RsLane, Schedule, Work, barrier_reach, packets};
use crate::plan::Dir;
use crate::schedule_view::{KernelView, ScheduleView, SendView};

/// A kernel's view with nothing sent, copied or waited for yet.
fn kernel(rank: usize, role: &'static str, (plane, worker): (usize, usize)) -> KernelView {
    KernelView {
        rank,
        role,
        plane,
        worker,
        direction: None,
        sends: Vec::new(),
        copies: 0,
        waits: 0,
        barrier_hops: 0,
    }
}

/// A sending kernel's view going `dir`, its entry-barrier increment reaching `barrier` hops.
fn sender(rank: usize, role: &'static str, at: (usize, usize), dir: Dir, barrier: u32) -> KernelView {
    KernelView {
        direction: Some(if dir == Dir::Forward { "forward" } else { "backward" }),
        barrier_hops: barrier,
        ..kernel(rank, role, at)
    }
}

impl Schedule {
    /// The ranks up to `hops` hops from `k` going `dir`, nearest first.
    fn ranks_from(&self, k: usize, dir: Dir, hops: usize) -> Vec<usize> {
        dir.ranks_from(k, hops, self.ranks(), self.topology)
    }

    /// The schedule as users read it, for op `op`'s phase of `collective`.
    pub(crate) fn view(&self, op: &str, collective: &'static str) -> ScheduleView {
        let kernels = match &self.work {
            Work::Multicast { kernels, finals, root } => self.multicast_view(kernels, finals, *root),
            Work::Relay { lanes, own } => self.relay_view(lanes, *own),
            Work::ReduceScatter { lanes } => self.rs_view(lanes),
            Work::PointToPoint { senders, arriving, reducers } => self.p2p_view(senders, arriving, *reducers),
        };
        ScheduleView {
            op: op.to_string(),
            collective,
            algorithm: self.algo.name(self.ring()),
            topology: self.topology.to_string(),
            ranks: self.ranks(),
            page_bytes: self.page,
            pages_per_packet: self.ppp,
            planes: self.planes,
            workers: self.workers,
            mux_slots: self.mux(),
            kernels,
        }
    }

    /// Per multicast kernel its packets grouped by reach; per rank its sync kernel.
    fn multicast_view(
        &self,
        kernels: &[Multicaster],
        finals: &[Vec<u32>],
        root: Option<usize>,
    ) -> Vec<KernelView> {
        let mut v = Vec::new();
        for w in kernels {
            let mut kv = sender(w.rank, "multicast", (w.plane, 0), w.dir, w.barrier);
            let mut reach: Vec<u32> = w.ranges.iter().copied().filter(|&r| r > 0).collect();
            reach.sort_unstable();
            reach.dedup();
            for r in reach {
                kv.sends.push(SendView {
                    slice: root.map_or(w.rank, |_| 0),
                    packets: w.ranges.iter().filter(|&&x| x == r).count() as u64,
                    how: "multicast",
                    to: self.ranks_from(w.rank, w.dir, r as usize),
                    adds: false,
                });
            }
            kv.copies = if w.local_copy { w.packets.len() as u64 } else { 0 };
            // The forward kernel (tt-metal's reader) waits, once its data is out, for the final
            // increments its plane's core counts before it closes (the completion barrier).
            if w.dir == Dir::Forward {
                kv.waits = finals[w.plane][w.rank] as u64;
            }
            v.push(kv);
        }

        v
    }

    /// Per lane and rank its two relay kernels' stripes and its sync kernel.
    fn relay_view(&self, lanes: &[RelayLane], own: bool) -> Vec<KernelView> {
        let mut v = Vec::new();
        for lane in lanes {
            let at = (lane.plane, lane.worker);
            for k in 0..self.ranks() {
                for (d, dir) in [Dir::Forward, Dir::Backward].into_iter().enumerate() {
                    let mut kv = sender(k, "relay", at, dir, barrier_reach(self.ranks(), k, d == 0, true));
                    for &(slice, _, count) in &lane.stripes[k][d] {
                        let to = self.ranks_from(k, dir, 1);
                        kv.sends.push(SendView {
                            slice,
                            packets: count as u64,
                            how: "relay",
                            to,
                            adds: false,
                        });
                    }
                    kv.copies = if d == 0 && own { lane.packets.len() as u64 } else { 0 };
                    v.push(kv);
                }
                v.push(KernelView { waits: lane.received[k].iter().sum(), ..kernel(k, "sync", at) });
            }
        }
        v
    }

    /// Per lane, rank and direction its worker: what it sends on, step by step, and the final
    /// add it writes into its own output (as copies).
    fn rs_view(&self, lanes: &[RsLane]) -> Vec<KernelView> {
        let mut v = Vec::new();
        for lane in lanes {
            let at = (lane.plane, lane.worker);
            for k in 0..self.ranks() {
                for (d, dir) in [Dir::Forward, Dir::Backward].into_iter().enumerate() {
                    let mut kv =
                        sender(k, "worker", at, dir, barrier_reach(self.ranks(), k, d == 0, self.ring()));
                    let items = lane.items(self.ranks(), self.ring(), k, d);
                    for step in &lane.steps[k][d] {
                        let mine = items.iter().filter(|x| x.slice == step.slice);
                        let sent = mine.clone().filter(|x| x.part.send.is_some()).count() as u64;
                        let adds = mine.clone().any(|x| x.part.adds() > 0);
                        if sent > 0 {
                            let to = self.ranks_from(k, dir, 1);
                            kv.sends.push(SendView {
                                slice: step.slice,
                                packets: sent,
                                how: "relay",
                                to,
                                adds,
                            });
                        } else {
                            kv.copies += mine.count() as u64;
                        }
                    }
                    kv.waits = items.iter().filter(|x| x.need.iter().any(|&c| c > 0)).count() as u64;
                    v.push(kv);
                }
            }
        }
        v
    }

    /// Per rank its two chunk senders, then its sync kernel or a direct reduction's reducers.
    fn p2p_view(&self, senders: &[ChunkSender], arriving: &[usize], reducers: usize) -> Vec<KernelView> {
        let chunk = packets(self.pages, self.ppp).len() as u64;
        let mut v = Vec::new();
        for w in senders {
            let mut kv = sender(w.rank, "sender", (0, 0), w.dir, w.barrier);
            for t in &w.sends {
                let to = t.dest(self.ranks(), self.topology).into_iter().collect();
                kv.sends.push(SendView {
                    slice: t.src.slot,
                    packets: chunk,
                    how: "unicast",
                    to,
                    adds: false,
                });
            }
            kv.copies = if w.own.is_some() { chunk } else { 0 };
            v.push(kv);
        }
        for (k, &a) in arriving.iter().enumerate() {
            if reducers == 0 {
                v.push(KernelView { waits: a as u64, ..kernel(k, "sync", (0, 0)) });
            } else if a > 0 {
                v.extend(
                    (0..reducers).map(|r| KernelView { waits: a as u64, ..kernel(k, "reducer", (0, r)) }),
                );
            }
        }
        v
    }
}
