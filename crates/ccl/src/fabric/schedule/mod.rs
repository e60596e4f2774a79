//! What each worker core of a fabric phase does, derived once from the phase's routed plan
//! ([`Schedule::new`]) and read by both models: the packet model's lowerings (`gather.rs`,
//! `relay.rs`, `reduce.rs`, `direct.rs`) turn it into kernels, the flow model into flows and
//! credit loops. Per algorithm family ([`Work`]) it says which packets each kernel sends, over
//! which plane and direction and how far, in what order, what it copies and sums, what each
//! rank's semaphores count, and how many workers share a link and direction; the numbers it is
//! built from (packings, windows, chunks per sync, worker counts) are in [`numbers`].

pub(crate) mod numbers;
#[cfg(test)]
mod replay;
mod rs;
mod view;

pub use numbers::DIRECT_REDUCERS;
pub(crate) use numbers::{
    A2A_WINDOW, Packing, RELAY_CHUNKS_PER_SYNC, RELAY_WINDOW, RS_CHUNKS_PER_SYNC, RS_MUX_SLOTS,
    barrier_reach, packets, plane_packets, relay_mux_slots, relay_stripes, relay_workers, rs_workers,
};

pub(crate) use rs::{RS_CB_CHUNKS, RS_CHUNK_PAGES, RsBuf, RsItem, RsLane, RsStep};

use super::algo::{Algo, choose};
use crate::op::{CclError, Topology};
use crate::phase::Phase;
use crate::plan::routed::{self, Part, Routed, Transfer};
use crate::plan::{Copy, Dir};
use crate::transport::LowerCx;

/// A fabric phase's schedule: its algorithm, routed plan and packing, and what every worker
/// kernel does.
#[derive(Clone, Debug)]
pub(crate) struct Schedule {
    /// tt-metal's factory for the phase.
    pub algo: Algo,
    /// A ring when the op runs as one on its fabric line, else a line.
    pub topology: Topology,
    /// Who sends what to whom ([`Algo::plan`]).
    pub plan: Routed,
    /// Bytes of a page, and of a packet's payload at most.
    pub page: u64,
    pub payload: u64,
    /// A slice's (chunk's) pages.
    pub pages: u64,
    /// Pages per packet.
    pub ppp: u64,
    /// Routing planes (links per hop) the phase's packets are dealt over.
    pub planes: usize,
    /// Workers per link and direction.
    pub workers: usize,
    /// Slots per client channel of the mux its workers share a router through, when they do
    /// (tt-metal's factory's; [`super::worker::MUX_SLOTS_PER_CLIENT`] for other phases).
    pub mux_slots: u64,
    /// What the kernels do.
    pub work: Work,
    /// Whether the kernels run the entry barrier before their first read: all but a
    /// multicast all-gather on persistent buffers (`shared/fabric.md` §11.2).
    pub entry_barrier: bool,
}

/// What a phase's kernels do, by algorithm family.
#[derive(Clone, Debug)]
pub(crate) enum Work {
    /// The multicast all-gather (a broadcast too, from `root`): per rank, plane and direction
    /// a kernel, and per plane and rank the final increments the plane's core counts (one per
    /// source whose kernel on that plane reaches it).
    Multicast { kernels: Vec<Multicaster>, finals: Vec<Vec<u32>>, root: Option<usize> },
    /// The relay all-gather: per plane and worker a lane of relay kernels; `own`: each rank
    /// copies its own slice into its output (its forward kernel, with stripe 0).
    Relay { lanes: Vec<RelayLane>, own: bool },
    /// The reduce-scatter's workers, per plane and worker index.
    ReduceScatter { lanes: Vec<RsLane> },
    /// Point-to-point chunk senders on plane 0; per rank the chunks its semaphore counts;
    /// the reducer cores per owner of a direct reduction (0 for the others).
    PointToPoint { senders: Vec<ChunkSender>, arriving: Vec<usize>, reducers: usize },
}

/// A multicast direction kernel: rank `rank`'s on `plane` going `dir`.
#[derive(Clone, Debug)]
pub(crate) struct Multicaster {
    pub rank: usize,
    pub plane: usize,
    pub dir: Dir,
    /// The rank's packets on this plane (every `planes`-th of its slice; a broadcast's
    /// non-roots have none): (first page, pages).
    pub mine: Vec<(u64, u64)>,
    /// Its transfers that way in the plan.
    pub sends: Vec<Transfer>,
    /// It also copies the slice into the rank's own output.
    pub local_copy: bool,
    /// The packets it reads, and each one's multicast reach in hops (0: only copied).
    pub packets: Vec<(u64, u64)>,
    pub ranges: Vec<u32>,
    /// How far its entry-barrier increment reaches (0: no chip that way, no router).
    pub barrier: u32,
}

/// A relay lane: every rank's two relay kernels on one plane and worker, which carry every
/// `planes x workers`-th packet of each slice.
#[derive(Clone, Debug)]
pub(crate) struct RelayLane {
    pub plane: usize,
    pub worker: usize,
    /// The packets of a slice this lane carries: (first page, pages).
    pub packets: Vec<(u64, u64)>,
    /// Per rank and direction (forward, backward), its stripes in order: (slice, first packet,
    /// packets) — see [`relay_stripes`].
    pub stripes: Vec<[Vec<(usize, usize, usize)>; 2]>,
    /// Per rank and direction, the packets its upstream neighbour that way relays to it.
    pub received: Vec<[u64; 2]>,
}

/// A point-to-point direction kernel: rank `rank`'s going `dir`, on plane 0.
#[derive(Clone, Debug)]
pub(crate) struct ChunkSender {
    pub rank: usize,
    pub dir: Dir,
    /// Its chunks, in the order it sends them (farthest first).
    pub sends: Vec<Transfer>,
    /// The rank's own chunk, if this kernel copies it.
    pub own: Option<Copy>,
    /// How far its entry-barrier increment reaches (0: no router that way).
    pub barrier: u32,
}

/// What a schedule is derived from: the phase's algorithm and routed plan, its slice, and the
/// op's knobs.
#[derive(Clone, Debug)]
pub(crate) struct Input {
    pub algo: Algo,
    pub plan: Routed,
    /// Bytes of a page, and of a packet's payload at most.
    pub page: u64,
    pub payload: u64,
    /// A slice's pages and bytes, and the slices of the whole tensor.
    pub pages: u64,
    pub bytes: u64,
    pub slices: u64,
    /// Links per hop.
    pub planes: usize,
    /// The caller's reduce-scatter workers per link and direction, if given.
    pub workers: Option<usize>,
    /// A broadcast's root.
    pub root: Option<usize>,
    /// An all-gather rank copies its own slice into its output.
    pub own: bool,
}

impl Schedule {
    /// Phase `p`'s schedule, its op running as a ring on its fabric line if `closed`, in
    /// packets of at most `payload` bytes.
    pub(crate) fn new(s: &LowerCx, p: &Phase, closed: bool, payload: u64) -> Result<Schedule, CclError> {
        let req = &s.ops[p.op];
        let algo = choose(s, closed, p)?;
        let page = p.tensors.slice.page_bytes();
        if page > payload {
            return Err(CclError::Invalid(format!(
                "op '{}': pages of {page} B do not fit the fabric's {payload} B packets",
                req.name
            )));
        }
        let topology = if closed { Topology::Ring } else { Topology::Line };
        let slice = p.tensors.slice;
        let persistent = req.knobs.persistent_buffers
            && algo == Algo::Multicast
            && req.collective == crate::op::Collective::AllGather;
        let mut sched = Schedule::build(Input {
            algo,
            plan: algo.plan(req, p, topology),
            page,
            payload,
            pages: slice.pages(),
            bytes: slice.bytes(),
            slices: p.tensors.n,
            planes: req.knobs.links(),
            workers: req.knobs.workers,
            root: req.collective.root(),
            own: !(req.exclude_myself || req.in_place),
        });
        sched.entry_barrier = !persistent;
        Ok(sched)
    }

    /// The schedule of `x`.
    pub(crate) fn build(x: Input) -> Schedule {
        let ring = x.plan.topology == Topology::Ring;
        let packing = match x.algo {
            Algo::Multicast | Algo::Relay => Packing::Gather,
            Algo::ReduceScatter => Packing::ReduceScatter { ring },
            Algo::PointToPoint(_) | Algo::DirectReduction => Packing::Direct,
        };
        let ppp = packing.pages(x.payload, x.page);
        let planes = x.planes;
        let workers = match x.algo {
            Algo::Relay => {
                let per_plane = packets(x.pages, ppp).len() as u64 / planes as u64;
                relay_workers(x.bytes / planes as u64, per_plane)
            }
            Algo::ReduceScatter => {
                x.workers.unwrap_or_else(|| rs_workers(x.bytes * x.slices / planes as u64, ring))
            }
            _ => 1,
        };
        let mux_slots = match x.algo {
            Algo::Relay => relay_mux_slots(x.bytes / planes as u64, ring),
            Algo::ReduceScatter => RS_MUX_SLOTS,
            _ => super::worker::MUX_SLOTS_PER_CLIENT,
        };
        let f = Frame { plan: &x.plan, pages: x.pages, ppp, planes, workers, ring };
        let work = match x.algo {
            Algo::Multicast => f.multicast(x.root),
            Algo::Relay => f.relay(x.own),
            Algo::ReduceScatter => f.reduce_scatter(),
            Algo::PointToPoint(_) => f.point_to_point(true),
            Algo::DirectReduction => f.point_to_point(false),
        };
        Schedule {
            algo: x.algo,
            topology: x.plan.topology,
            plan: x.plan,
            page: x.page,
            payload: x.payload,
            pages: x.pages,
            ppp,
            planes,
            workers,
            mux_slots,
            work,
            entry_barrier: true,
        }
    }

    /// The slots each worker has on the mux its workers share a router through, when they
    /// do (more than one worker per link and direction).
    pub(crate) fn mux(&self) -> Option<u64> {
        (self.workers > 1).then_some(self.mux_slots)
    }

    /// Whether the phase runs as a ring.
    pub(crate) fn ring(&self) -> bool {
        self.topology == Topology::Ring
    }

    /// Ranks.
    pub(crate) fn ranks(&self) -> usize {
        self.plan.n
    }
}

/// What every family's kernels are derived from: the plan, a slice's pages, the packing, and
/// the planes and workers its packets are dealt over.
struct Frame<'a> {
    plan: &'a Routed,
    pages: u64,
    ppp: u64,
    planes: usize,
    workers: usize,
    ring: bool,
}

impl Frame<'_> {
    /// Every (plane, worker) pair, planes outermost, with its lane index among them.
    fn lanes(&self) -> impl Iterator<Item = (usize, usize, (usize, usize))> + use<> {
        let (planes, workers) = (self.planes, self.workers);
        (0..planes).flat_map(move |plane| {
            (0..workers).map(move |w| (plane, w, (plane * workers + w, planes * workers)))
        })
    }

    fn multicast(&self, root: Option<usize>) -> Work {
        let n = self.plan.n;
        let planes = self.planes;
        let slice_packets = packets(self.pages, self.ppp);
        let mut finals = vec![vec![0u32; n]; planes];
        let mut kernels = Vec::new();
        for k in 0..n {
            for (plane, plane_finals) in finals.iter_mut().enumerate() {
                let mine: Vec<(u64, u64)> = slice_packets
                    .iter()
                    .copied()
                    .enumerate()
                    .filter(|(j, _)| j % planes == plane && root.is_none_or(|r| r == k))
                    .map(|x| x.1)
                    .collect();
                for dir in [Dir::Forward, Dir::Backward] {
                    kernels.push(self.multicaster(k, plane, dir, mine.clone(), plane_finals));
                }
            }
        }
        Work::Multicast { kernels, finals, root }
    }

    /// Rank `k`'s multicast kernel going `dir` on `plane`, sending its packets `mine` as its
    /// transfers that way say; counts in `finals` the final increment each rank gets from it.
    fn multicaster(
        &self,
        k: usize,
        plane: usize,
        dir: Dir,
        mine: Vec<(u64, u64)>,
        finals: &mut [u32],
    ) -> Multicaster {
        let (plan, n) = (self.plan, self.plan.n);
        // The rank's own copy rides with each direction that carries only part of its packets
        // (a split broadcast's root), else with the kernel the plan names.
        let sends: Vec<Transfer> = plan.sends(k, dir).copied().collect();
        let partial = matches!(sends[..], [t] if t.part != Part::All);
        let local_copy = plan.keeps(k) && (partial || plan.copies_going(k, dir));
        let (packets, ranges) = walk(&sends, &mine, local_copy);
        let reach = ranges.iter().copied().max().unwrap_or(0);
        // The final increment reaches every rank the farthest packet does.
        if let Some(far) = sends.iter().find(|t| t.hops as u32 == reach) {
            for j in far.route(n, plan.topology) {
                finals[j] += 1;
            }
        }
        let barrier = barrier_reach(n, k, dir == Dir::Forward, self.ring);
        Multicaster { rank: k, plane, dir, mine, sends, local_copy, packets, ranges, barrier }
    }

    fn relay(&self, own: bool) -> Work {
        let n = self.plan.n;
        let passes = routed::relay_passes(self.plan);
        let lanes = self
            .lanes()
            .map(|(plane, worker, on)| {
                let packets = plane_packets(self.pages, self.ppp, on);
                let total = packets.len();
                let stripes: Vec<[Vec<(usize, usize, usize)>; 2]> =
                    (0..n).map(|k| [0, 1].map(|d| relay_stripes(&passes[d][k], total))).collect();
                // What the upstream neighbour each way relays on to each rank, in all.
                let sum = |s: &[(usize, usize, usize)]| s.iter().map(|x| x.2 as u64).sum::<u64>();
                let received = (0..n)
                    .map(|k| [sum(&stripes[(k + n - 1) % n][0]), sum(&stripes[(k + 1) % n][1])])
                    .collect();
                RelayLane { plane, worker, packets, stripes, received }
            })
            .collect();
        Work::Relay { lanes, own }
    }

    fn reduce_scatter(&self) -> Work {
        let steps = rs::steps(self.plan);
        let lanes = self
            .lanes()
            .map(|(plane, worker, on)| {
                let packets = plane_packets(self.pages, self.ppp, on);
                let count = packets.len() as u64;
                let cap = if self.ring { RS_CHUNKS_PER_SYNC.0 } else { RS_CHUNKS_PER_SYNC.1 };
                let per_sync = cap.min((count / 2).max(1));
                let per_chunk = (RS_CHUNK_PAGES / self.ppp).max(1);
                RsLane { plane, worker, packets, per_chunk, per_sync, steps: steps.clone() }
            })
            .collect();
        Work::ReduceScatter { lanes }
    }

    /// Point-to-point senders; `own_copy`: a rank that keeps a chunk copies it (a direct
    /// reduction's reducers read it instead).
    fn point_to_point(&self, own_copy: bool) -> Work {
        let (plan, n, ring) = (self.plan, self.plan.n, self.ring);
        let senders = (0..n)
            .flat_map(|k| {
                [Dir::Forward, Dir::Backward].map(|dir| ChunkSender {
                    rank: k,
                    dir,
                    sends: plan.sends(k, dir).copied().collect(),
                    own: plan
                        .copies
                        .iter()
                        .find(|c| c.rank == k)
                        .copied()
                        .filter(|_| own_copy && plan.copies_going(k, dir)),
                    barrier: barrier_reach(n, k, dir == Dir::Forward, ring),
                })
            })
            .collect();
        let arriving = (0..n).map(|k| plan.arriving(k)).collect();
        let reducers = if own_copy { 0 } else { DIRECT_REDUCERS.min(packets(self.pages, self.ppp).len()) };
        Work::PointToPoint { senders, arriving, reducers }
    }
}

/// A multicast kernel's packets and each one's multicast reach, from the rank's transfers that
/// way in its plan: one transfer carries its part of the rank's packets `mine` (every other
/// one, for a split broadcast); two alternating ones share them packet by packet (an even
/// ring's long and short halves). A kernel without transfers sends nothing: it keeps every
/// packet, unreached, only to copy them into its own output.
fn walk(sends: &[Transfer], mine: &[(u64, u64)], local_copy: bool) -> (Vec<(u64, u64)>, Vec<u32>) {
    let packets: Vec<(u64, u64)> = match sends {
        [] if local_copy => mine.to_vec(),
        [] => Vec::new(),
        [t] => match t.part {
            Part::Alternate(x) => {
                mine.iter().copied().enumerate().filter(|(j, _)| j % 2 == x as usize).map(|p| p.1).collect()
            }
            Part::All | Part::Half(_) | Part::Parity(_) => mine.to_vec(),
        },
        _ => mine.to_vec(),
    };
    let ranges = (0..packets.len())
        .map(|j| match sends {
            [] => 0,
            [t] => t.hops as u32,
            many => many
                .iter()
                .find(|t| t.part == Part::All || t.part == Part::Alternate((j % 2) as u8))
                .map_or(0, |t| t.hops as u32),
        })
        .collect();
    (packets, ranges)
}
