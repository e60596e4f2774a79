//! The relay all-gather's kernels in step with their routers' slots. A relay kernel reads a
//! window of packets ahead while it sends the one before ([`crate::fabric::relay`]), and each
//! send waits for a slot of its router's channel. A slot comes back once its packet has
//! landed in the router, gone round the rest of its loop, and the router's credit has come
//! back to the kernel over NoC1. With several planes the kernels' payloads into their routers
//! and the routers' credits back queue behind one another's windows at the chip's busiest
//! NoC links (on the Galaxy torus rows, four links: both legs about 2 µs where one link has
//! them under 0.5), which lengthens every slot's loop; a fluid share of those links does not
//! see it. Meanwhile the downstream routers' receivers write what the kernels send into
//! their chips' banks.

use meshsim_engine::Time;
use meshsim_topology::soc::CoreCoord;

use super::{Feed, STEPPED_WINDOWS, Slots, Stepper, Write, stepped};
use crate::fabric::schedule::{RELAY_WINDOW, RelayLane, Schedule};
use crate::flow::cost::Costs;
use crate::flow::fabric::loops::Bare;
use crate::flow::fabric::{Key, Network, neighbour};
use crate::flow::net::ResourceId;
use crate::phase::Phase;
use crate::plan::Dir;
use crate::tensor::Memory;

/// Rounds of step and loop analysis ([`Network::relays_in_step`]), and how many of the first
/// are left out of the mean.
const STEP_ROUNDS: usize = 8;
const SETTLING_ROUNDS: usize = 2;

/// Per window of a stepped kernel: its page reads' banks, its writes, and the writes after
/// which it rings its router.
type Windows = (Vec<Vec<usize>>, Vec<Vec<Write>>, Vec<Vec<usize>>);

/// A relay kernel's stepped packets in sending order: (stripe, slice, first page, pages).
type Sent = Vec<(usize, u64, u64, u64)>;

/// A relay phase's kernels to step once the credit loops are charged ([`Network::
/// relays_in_step`]): their steppers, the downstream receivers' writes, and per stepper its
/// kernel's resources.
pub(in crate::flow::fabric) struct RelayStep {
    steppers: Vec<Stepper>,
    feeds: Vec<Feed>,
    kernels: Vec<RelayKernel>,
}

/// A stepped relay kernel's worker and its first hop's sender-channel slots (resources), and
/// the part of a slot's loop the step times itself, ps: the payload's way in and the credit's
/// way back, unloaded.
struct RelayKernel {
    worker: ResourceId,
    slots: ResourceId,
    timed: f64,
}

impl Network<'_, '_> {
    /// Records phase `pi`'s relay kernels for [`Network::relays_in_step`]. Nothing without
    /// the NoC, with a mux in front of the workers (their writes go to the mux), or when the
    /// input and output are not in the same memory.
    pub(in crate::flow::fabric) fn relay_steppers(
        &mut self,
        pi: usize,
        p: &Phase,
        costs: &Costs,
        (sched, lanes, own): (&Schedule, &[RelayLane], bool),
    ) {
        let chips = self.s.ops[p.op].comm.chips().to_vec();
        let (n, t, page) = (chips.len(), p.tensors, sched.page);
        if !self.noc || sched.mux().is_some() || t.input.memory != t.output.memory {
            return;
        }
        let dram = t.input.memory == Memory::Dram;
        let hop = Time(costs.hop(sched.ppp * page).round() as u64);
        let mut step = RelayStep { steppers: Vec::new(), feeds: Vec::new(), kernels: Vec::new() };
        for (l, lane) in lanes.iter().enumerate() {
            let core = self.worker_core(self.phases[pi].core + l);
            for k in 0..n {
                for d in 0..2 {
                    let dir = if d == 0 { Dir::Forward } else { Dir::Backward };
                    let sent = sampled(lane, k, d);
                    if sent.is_empty() {
                        continue;
                    }
                    let down = neighbour(k, dir, n);
                    let router = self.router_core(chips[k], chips[down], lane.plane);
                    let window = RELAY_WINDOW.min(sent.len());
                    let (reads, writes, rings) = self.windows(p, (k, d, own), &sent, (window, router), page);
                    let pages = sent.iter().map(|x| x.3).sum::<u64>().div_ceil(sent.len() as u64);
                    let round = self.round_hops(t.input.memory, d);
                    let payload = pages * page;
                    let timed = costs.slot_loop(payload, pages, page, round, dram)
                        - costs.slot_after_landing(payload, pages, page, round, dram)
                        + costs.credit_way(round);
                    let worker = self.resource(Key::Worker(pi, k, lane.plane, lane.worker, d as u8));
                    let slots = self.resource(Key::Slots(chips[k], chips[down], lane.plane, 0));
                    step.kernels.push(RelayKernel { worker, slots, timed });
                    let follows = step.steppers.len();
                    let (ahead, slots) = (true, Some(Slots { count: 0, back: Time::ZERO, router }));
                    step.steppers.push(Stepper {
                        chip: k,
                        noc: d,
                        core,
                        reads,
                        page,
                        dram,
                        writes,
                        rings,
                        ahead,
                        slots,
                    });
                    // The receiver downstream writes each packet's pages into its output.
                    let writes = sent
                        .iter()
                        .map(|&(_, slice, lo, pages)| self.output_writes(p, (slice, lo, pages), 1, page))
                        .collect();
                    let core = self.router_core(chips[down], chips[k], lane.plane);
                    step.feeds.push(Feed { chip: down, follows, lag: hop, core, writes });
                }
            }
        }
        self.relay_steps.push(step);
    }

    /// Rank `k`'s relay kernel going `d`: per window of `sent`, the banks of its page reads,
    /// its writes (its own slice's copies into its output going forward, then each packet's
    /// payload, header and doorbell into `router`) and the doorbells after which it rings.
    fn windows(
        &self,
        p: &Phase,
        (k, d, own): (usize, usize, bool),
        sent: &Sent,
        (window, router): (usize, CoreCoord),
        page: u64,
    ) -> Windows {
        let t = p.tensors;
        let (mut reads, mut writes, mut rings) = (Vec::new(), Vec::new(), Vec::new());
        for group in sent.chunks(window) {
            let (mut r, mut w, mut g) = (Vec::new(), Vec::<Write>::new(), Vec::new());
            for &(stripe, slice, lo, pages) in group {
                for q in lo..lo + pages {
                    let bank = if stripe == 0 {
                        let (at, q) = t.own_page(k, q);
                        at.page(q).0
                    } else {
                        t.output.page(t.slice.page_in_whole(t.dim, t.n, slice, q)).0
                    };
                    r.push(bank as usize);
                }
                if stripe == 0 && d == 0 && own {
                    w.extend(self.output_writes(p, (k as u64, lo, pages), 0, page));
                }
                w.extend([(router, pages * page, None), (router, self.header, None)]);
                g.push(w.len());
                w.push((router, 4, None));
            }
            reads.push(r);
            writes.push(w);
            rings.push(g);
        }
        (reads, writes, rings)
    }

    /// Steps the recorded relay kernels ([`Network::relay_steppers`]) now that the credit
    /// loops are charged, and charges each kernel its slots' loop at the pace that gives. The
    /// step and the loops' analysis answer each other. A slot's credit leaves its router the
    /// loop's period times its slots after its packet landed, less the NoC legs the step
    /// times itself; the step measures those legs, queued behind the other kernels' windows
    /// and credits; and the loop's analysis, without its NoC routes as stations, takes them
    /// as latency and gives the loop's period. The step's legs jitter from round to round, so
    /// each kernel's period is the mean over the rounds after the first few. A kernel then
    /// costs each of its units no less than that period.
    pub(in crate::flow::fabric) fn relays_in_step(&mut self) {
        let soc = self.s.cluster.soc();
        let slots = self.slots.0 as f64;
        for mut step in std::mem::take(&mut self.relay_steps) {
            // Every stepped kernel's loop was charged ([`Network::queue_in_loops`]).
            let bare: Vec<Bare> = step.kernels.iter().map(|k| self.loop_sans_noc[&k.slots].clone()).collect();
            let mut period: Vec<f64> = bare.iter().map(|b| b.period).collect();
            let mut sum = vec![0.0; period.len()];
            for round in 0..STEP_ROUNDS {
                for ((stepper, k), &pd) in step.steppers.iter_mut().zip(&step.kernels).zip(&period) {
                    if let Some(s) = stepper.slots.as_mut() {
                        (s.count, s.back) =
                            (slots as usize, Time((pd * slots - k.timed).max(0.0).round() as u64));
                    }
                }
                let legs = stepped(self.s.params, soc, step.steppers.iter().collect(), &step.feeds);
                for (i, ((b, k), &(_, legs))) in bare.iter().zip(&step.kernels).zip(&legs).enumerate() {
                    // The loop's latency with its NoC legs as the step measured them.
                    let think = (b.think - k.timed + legs).max(0.0);
                    let next = crate::flow::mva::period(b.customers, &b.stations, think);
                    if round < SETTLING_ROUNDS {
                        period[i] = next;
                    } else {
                        sum[i] += next;
                        period[i] = sum[i] / (round + 1 - SETTLING_ROUNDS) as f64;
                    }
                }
            }
            for (k, &pd) in step.kernels.iter().zip(&period) {
                self.raise(k.worker, pd);
            }
        }
    }

    /// The first-hop slots of every relay kernel waiting to be stepped.
    pub(in crate::flow::fabric) fn relay_loops(&self) -> impl Iterator<Item = ResourceId> + '_ {
        self.relay_steps.iter().flat_map(|s| s.kernels.iter().map(|k| k.slots))
    }

    /// Raises every unit's demand on `worker` to at least `ps` a packet.
    fn raise(&mut self, worker: ResourceId, ps: f64) {
        for u in &mut self.units {
            if u.uses.iter().any(|x| x.0 == worker && x.1 < ps) {
                u.uses = u.uses.iter().map(|&(r, c)| (r, if r == worker { c.max(ps) } else { c })).collect();
            }
        }
    }
}

/// The packets of rank `k`'s relay kernel going `d` on `lane` that are stepped:
/// [`STEPPED_WINDOWS`] windows of [`RELAY_WINDOW`] packets taken evenly over its stripes, so
/// the first stripe's (read from the input, and copied into the output going forward) and the
/// later ones' (read back from the output) count as often as the kernel sends them.
fn sampled(lane: &RelayLane, k: usize, d: usize) -> Sent {
    let all: Sent = lane.stripes[k][d]
        .iter()
        .enumerate()
        .flat_map(|(i, &(slice, first, count))| {
            lane.packets[first..first + count].iter().map(move |&(lo, pages)| (i, slice as u64, lo, pages))
        })
        .collect();
    if all.len() <= RELAY_WINDOW * STEPPED_WINDOWS {
        return all;
    }
    (0..STEPPED_WINDOWS)
        .flat_map(|g| {
            let from = g * (all.len() - RELAY_WINDOW) / (STEPPED_WINDOWS - 1);
            all[from..from + RELAY_WINDOW].iter().copied()
        })
        .collect()
}
