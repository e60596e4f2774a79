//! The reduce-scatter on the flow model, from the same schedule as its kernels
//! (`fabric/reduce.rs`, `shared/fabric.md` §11.3): per lane, rank and direction a worker takes
//! its steps in order; a step that sends is a hop of its slice's side, whose first sync group
//! waits for its upstream's (the partial it adds) and the rest follow; the final steps add what
//! reached the rank into its output as the sides' groups land. A worker's reader, compute and
//! writer kernels overlap through their circular buffers, so a packet costs the worker the
//! slowest of the three, not their sum.

use rustc_hash::FxHashMap as HashMap;

use std::rc::Rc;

use meshsim_topology::soc::CoreCoord;

use super::{Key, Network, Side, Uses};
use crate::fabric::schedule::{RsBuf, RsLane, RsStep, Schedule};
use crate::flow::cost::Costs;
use crate::phase::Phase;
use crate::tensor::Memory;

/// What a worker's step does on a lane, per packet on average.
struct Load {
    /// Packets it handles.
    packets: f64,
    /// Operands its reader reads and adds its compute kernel makes, per packet.
    reads: f64,
    adds: f64,
    /// It sends them on (else it writes its own output).
    sends: bool,
    /// The buffers its reads wait for (partials, or the output another worker wrote).
    waits_on: Vec<RsBuf>,
}

/// `step`'s load on a lane whose packets have `count[x]` of parity `x`.
fn load(step: &RsStep, count: [u64; 2]) -> Load {
    let mut l = Load { packets: 0.0, reads: 0.0, adds: 0.0, sends: false, waits_on: Vec::new() };
    for (x, part) in step.parts.iter().enumerate() {
        let Some(part) = part else { continue };
        let c = count[x] as f64;
        l.packets += c;
        l.reads += c * part.reads.iter().flatten().count() as f64;
        l.adds += c * part.adds() as f64;
        l.sends |= part.send.is_some();
        for b in part.reads.into_iter().flatten().filter(|&b| b != RsBuf::Input) {
            if !l.waits_on.contains(&b) {
                l.waits_on.push(b);
            }
        }
    }
    if l.packets > 0.0 {
        l.reads /= l.packets;
        l.adds /= l.packets;
    }
    l
}

/// The units built so far: per (rank, direction, slice) a step's, and per (rank, direction)
/// its worker's last.
#[derive(Default)]
struct Built {
    done: HashMap<(usize, usize, usize), Units>,
    last: HashMap<(usize, usize), usize>,
}

/// A step's units: its first sync group's and the rest's (the same unit when one group).
#[derive(Clone, Copy)]
struct Units {
    head: usize,
    tail: usize,
}

impl Network<'_, '_> {
    /// Reduce-scatter along the line or ring, lane by lane (see the module documentation).
    pub(super) fn reduce_scatter(
        &mut self,
        pi: usize,
        p: &Phase,
        costs: &Costs,
        (sched, lanes): (&Schedule, &[RsLane]),
    ) {
        // Two units a step at most (its first group and the rest): room for them at once.
        let steps: usize = lanes.iter().flat_map(|l| l.steps.iter().flatten()).map(Vec::len).sum();
        self.units.reserve(2 * steps);
        for (li, lane) in lanes.iter().enumerate() {
            let core = self.worker_core(self.phases[pi].core + li);
            let count = lane.packets.len() as u64;
            if count == 0 {
                continue;
            }
            let pages = lane.packets.iter().map(|x| x.1).sum::<u64>().div_ceil(count);
            let odd = (0..count as usize).filter(|&i| lane.parity(i) == 1).count() as u64;
            let parities = [count - odd, odd];
            let mut order: Vec<(usize, usize, usize, usize)> = Vec::new();
            for (k, dirs) in lane.steps.iter().enumerate() {
                for (d, steps) in dirs.iter().enumerate() {
                    order.extend(steps.iter().enumerate().map(|(i, s)| (s.step, k, d, i)));
                }
            }
            order.sort();
            let mut b = Built::default();
            let mut finals = Vec::new();
            for (_, k, d, i) in order {
                let step = &lane.steps[k][d][i];
                let l = load(step, parities);
                if l.packets == 0.0 {
                    continue;
                }
                if !l.sends {
                    finals.push((k, d, step.slice, l));
                    continue;
                }
                let units =
                    self.rs_hop(pi, p, costs, (sched, lane, core), (k, d, step.slice), (&l, pages), &b);
                b.done.insert((k, d, step.slice), units);
                b.last.insert((k, d), units.tail);
            }
            // The line's forward worker hands its chunks to the backward one: forward first.
            finals.sort_by_key(|x| (x.1, x.0));
            for (k, d, j, l) in finals {
                let units = self.rs_final(pi, p, costs, (sched, lane, core), (k, d, j), (&l, pages), &b);
                b.done.insert((k, d, j), units);
                b.last.insert((k, d), units.tail);
            }
        }
    }

    /// The units that wrote what rank `k`'s step on slice `j` reads from `buf`: a partial's
    /// upstream hop that way, the output's (a ring's backward upstream, a line's own forward
    /// final add).
    fn rs_sources(
        &self,
        sched: &Schedule,
        (k, j): (usize, usize),
        waits_on: &[RsBuf],
        done: &HashMap<(usize, usize, usize), Units>,
    ) -> Vec<Units> {
        let n = sched.ranks();
        let up = |d: usize| if d == 0 { (k + n - 1) % n } else { (k + 1) % n };
        waits_on
            .iter()
            .filter_map(|&b| match b {
                RsBuf::Input => None,
                RsBuf::Partial(d) => done.get(&(up(d), d, j)).copied(),
                RsBuf::Output if sched.ring() => done.get(&(up(1), 1, j)).copied(),
                RsBuf::Output => done.get(&(k, 0, j)).copied(),
            })
            .collect()
    }

    /// A worker's time per packet: the slowest of its reader (a chunk's reads at a time),
    /// its compute kernel and its writer (`write` a packet).
    fn rs_worker_ps(
        &mut self,
        costs: &Costs,
        d: usize,
        (l, pages, page): (&Load, u64, u64),
        per_chunk: u64,
        write: f64,
    ) -> f64 {
        let hops_rt = self.round_hops(Memory::Dram, d);
        let chunk_reads = (per_chunk as f64 * l.reads * pages as f64).round() as u64;
        let reader = costs.reads(chunk_reads.max(1), page, hops_rt, true) / per_chunk as f64;
        let compute = costs.reduce(pages) * l.adds;
        reader.max(compute).max(write)
    }

    /// Rank `k`'s hop of slice `j`'s side going `d`: its head group waits for the upstream's
    /// head (the partials it adds), the rest follow; both after the worker's previous step.
    #[allow(clippy::too_many_arguments)]
    fn rs_hop(
        &mut self,
        pi: usize,
        p: &Phase,
        costs: &Costs,
        (sched, lane, core): (&Schedule, &RsLane, CoreCoord),
        (k, d, j): (usize, usize, usize),
        (l, pages): (&Load, u64),
        b: &Built,
    ) -> Units {
        let page = sched.page;
        let write = costs.inject(pages, page, 0);
        // Its reader reads each operand's pages (DRAM: the input and the partials); the packet
        // lands in the next rank's partial, in DRAM.
        let side =
            Side { core, reads: l.reads * pages as f64, from: Memory::Dram, land: Memory::Dram, copies: 0.0 };
        let worker_ps = self.rs_worker_ps(costs, d, (l, pages, page), lane.per_chunk, write);
        let (uses, reached, wire) = self.relay_hop(
            costs,
            p,
            (pi, k, d),
            (lane.plane, lane.worker, sched.mux()),
            (pages, page),
            (worker_ps, side),
        );
        let mut after: Vec<usize> = b.last.get(&(k, d)).copied().into_iter().collect();
        let sources = self.rs_sources(sched, (k, j), &l.waits_on, &b.done);
        after.extend(sources.iter().map(|u| u.head));
        let head_n = (lane.per_sync as f64).min(l.packets);
        let first = (lane.per_chunk as f64 * l.reads * pages as f64).round() as u64;
        let upstream = (!sources.is_empty()).then_some(Memory::Dram);
        let latency = self.head_latency(
            costs,
            upstream,
            (first.max(1), page, Memory::Dram, d),
            worker_ps,
            pages * page,
        );
        let head = self.unit(pi, head_n, uses.clone(), latency, &after, reached.clone());
        self.units[head].wire = wire.clone();
        let tail = if l.packets > head_n {
            let tail = self.unit(pi, l.packets - head_n, uses, 0.0, &[head], reached);
            self.units[tail].wire = wire;
            tail
        } else {
            head
        };
        // The worker's part ends once its last packet has left (a hop before it lands) and its
        // connection is closed: a line end's forward worker sends long after its own slice
        // has reached it.
        let chip = self.s.ops[p.op].comm.chips()[k];
        self.units[tail].from = Some((chip, costs.hop(pages * page) - costs.close()));
        Units { head, tail }
    }

    /// Rank `k`'s final add of its slice going `d`: its packets but the last group as the
    /// sides' heads land, the last group once their tails have.
    #[allow(clippy::too_many_arguments)]
    fn rs_final(
        &mut self,
        pi: usize,
        p: &Phase,
        costs: &Costs,
        (sched, lane, core): (&Schedule, &RsLane, CoreCoord),
        (k, d, j): (usize, usize, usize),
        (l, pages): (&Load, u64),
        b: &Built,
    ) -> Units {
        let page = sched.page;
        let chip = self.s.ops[p.op].comm.chips()[k];
        let out = p.tensors.output.memory;
        let write = costs.writes(pages, page);
        let worker_ps = self.rs_worker_ps(costs, d, (l, pages, page), lane.per_chunk, write);
        let worker = self.resource(Key::Worker(pi, k, lane.plane, lane.worker, d as u8));
        // On its NoC: the operands its reader reads (DRAM), the sums its writer writes out.
        let mut uses = vec![(worker, worker_ps)];
        self.noc_pages(chip, (d, core), (Memory::Dram, true), (l.reads * pages as f64, page), &mut uses);
        self.noc_pages(chip, (d, core), (out, false), (pages as f64, page), &mut uses);
        let uses: Uses = super::merge(uses).into();
        let sources = self.rs_sources(sched, (k, j), &l.waits_on, &b.done);
        let mut heads: Vec<usize> = sources.iter().map(|u| u.head).collect();
        heads.extend(b.last.get(&(k, d)).copied());
        let head_n = (lane.per_sync as f64).min(l.packets);
        let body = l.packets - head_n;
        let first =
            (body > 0.0).then(|| self.unit(pi, body, uses.clone(), worker_ps, &heads, Rc::new([chip])));
        let mut after: Vec<usize> = sources.iter().map(|u| u.tail).collect();
        after.extend(first);
        after.extend(b.last.get(&(k, d)).copied());
        let tail = self.unit(pi, head_n, uses, worker_ps, &after, Rc::new([chip]));
        Units { head: first.unwrap_or(tail), tail }
    }
}
