//! Point-to-point phases on the flow model (all-to-all, gather, scatter, send/receive) and the
//! direct reductions built on them: per rank one kernel per direction on link 0 sends its
//! chunks one after another, farthest first, in waves of reads then sends; a direct
//! reduction's reducer cores add each contribution as it lands.

use std::rc::Rc;

use meshsim_topology::ChipIdx;

use super::{Chips, Key, Network, Route, merge, neighbour};
use crate::fabric::algo::Algo;
use crate::fabric::schedule::{A2A_WINDOW, ChunkSender, DIRECT_REDUCERS, Schedule, Work, packets};
use crate::flow::cost::Costs;
use crate::phase::Phase;
use crate::plan::Dir;
use crate::tensor::Memory;

impl Network<'_, '_> {
    /// Point-to-point senders (all-to-all, gather, scatter, send/receive) and the direct
    /// reductions built on them: per rank one kernel per direction on link 0 sends its chunks
    /// one after another, farthest first; `reduce`: the owners' reducer cores add every
    /// contribution as it lands.
    pub(super) fn point_to_point(
        &mut self,
        pi: usize,
        p: &Phase,
        costs: &Costs,
        (sched, senders): (&Schedule, &[ChunkSender]),
    ) {
        let req = &self.s.ops[p.op];
        let chips = req.comm.chips().to_vec();
        let t = p.tensors;
        let page = sched.page;
        let reduce = sched.algo == Algo::DirectReduction;
        let chunk = packets(sched.pages, sched.ppp);
        let count = chunk.len() as f64;
        let pages = t.slice.pages().div_ceil(chunk.len().max(1) as u64).max(1);
        let dram = t.input.memory == Memory::Dram;
        let core = self.worker_core(self.phases[pi].core);
        for sender in senders {
            let (k, dir) = (sender.rank, sender.dir);
            let (chip, d) = (chips[k], usize::from(dir == Dir::Backward));
            {
                let hops = self.round_hops(t.input.memory, d);
                let worker = self.resource(Key::Worker(pi, k, 0, 0, d as u8));
                // The rank's own chunk, if this kernel copies it (a direct reduction's reducers
                // read it in place instead).
                let local = sender.own.is_some();
                // A wave is at most a chunk: a chunk smaller than the window is a wave of its own.
                let window = (A2A_WINDOW as u64).min(chunk.len().max(1) as u64);
                let serial = self.sender_pace(costs, window, (pages, page), (hops, dram));
                let mut before: Vec<usize> = Vec::new();
                for tr in sender.sends.iter().copied() {
                    let land = (pages, if reduce { Memory::Dram } else { t.output.memory });
                    let Route { mut uses, reached, wire } =
                        self.route(costs, p, (k, dir, tr.hops), 0, pages * page, land, false);
                    uses.push((worker, serial));
                    let reads = (pages as f64, t.input.memory, page);
                    let hop = (chip, chips[neighbour(k, dir, chips.len())], 0);
                    self.noc_sender(hop, (d, core), reads, pages * page, &mut uses);
                    let uses = merge(uses);
                    // The kernel's waves are its packets' cost (`serial`, the first wave's reads
                    // included); its packets reach their destination their hops later. Its next
                    // destination's waves follow once these packets have left, not once they
                    // have arrived: that unit takes back this one's way.
                    let way = tr.hops as f64 * costs.hop(pages * page);
                    let reached: Chips = reached.into();
                    let u = self.unit(pi, count, uses.into(), way, &before, reached.clone());
                    self.units[u].chained = before.first().map(|&b| b as u32);
                    self.units[u].wire = wire.into();
                    // The kernel is done once its last packet has left and its router has
                    // acknowledged the connection's close.
                    self.units[u].from = Some((chip, way - costs.close()));
                    before = vec![u];
                    if reduce {
                        let dest = *reached.last().expect("a transfer reaches a rank");
                        self.direct_sum(pi, costs, (sched, u, dest), (chunk.len(), pages));
                    }
                }
                // The rank's own chunk is copied after the sends, in the same waves.
                if local {
                    let copied = vec![page; pages as usize];
                    let copy = costs.wave(window, pages, page, (hops, dram), (&copied, pages));
                    self.unit(pi, count, Rc::new([(worker, copy)]), copy, &before, Rc::new([chip]));
                }
            }
        }
    }

    /// A direct reduction's sum of the contribution unit `u` brought to `dest`: once the chunk
    /// has landed, the destination's reducers each read their share of it from the receive
    /// buffer (DRAM, on their NoC0) and add it to their sum, one contribution after another;
    /// the last one's sums are then written out.
    fn direct_sum(
        &mut self,
        pi: usize,
        costs: &Costs,
        (sched, u, dest): (&Schedule, usize, ChipIdx),
        (packets, pages): (usize, u64),
    ) {
        let page = sched.page;
        let Work::PointToPoint { reducers, .. } = &sched.work else {
            unreachable!("a point-to-point schedule")
        };
        let r = self.resource(Key::Reducers(pi, dest));
        let share = packets.div_ceil(DIRECT_REDUCERS) as u64 * pages;
        let add = costs.reads(share, page, self.round_hops(Memory::Dram, 0), true) + costs.reduce(share);
        let mut uses = vec![(r, add)];
        // The reducer cores follow the senders' core.
        for i in 0..*reducers {
            let core = self.worker_core(self.phases[pi].core + 1 + i);
            self.noc_pages(dest, (0, core), (Memory::Dram, true), (share as f64, page), &mut uses);
        }
        let sum = self.unit(pi, 1.0, merge(uses).into(), 0.0, &[u], Rc::new([dest]));
        self.units[sum].way = costs.writes(share, page);
    }

    /// Per packet, a point-to-point sender's pace: its waves of `window` packets of `pages`
    /// pages (their reads, then their sends), or those waves against the first hop's credits
    /// where the slots bind (`Costs::credit_period`).
    fn sender_pace(
        &self,
        costs: &Costs,
        window: u64,
        (pages, page): (u64, u64),
        (hops, dram): (f64, bool),
    ) -> f64 {
        let out = pages * page + costs.header;
        let sent = [pages * page, costs.header];
        let own = costs.wave(window, pages, page, (hops, dram), (&sent, 3));
        let read = costs.reads(window * pages, page, hops, dram) + costs.noc_flush(out);
        let rtt = costs.slot_rtt(pages * page, pages, page, hops, dram);
        let link = costs.link_forward(pages * page);
        let flight = costs.slot_flight(pages * page);
        let credited =
            costs.credit_period((window, self.slots.0), (read, costs.send_issues(), flight), link, rtt);
        own.max(credited)
    }
}
