//! Worker kernels in step on the chips' NoCs: what a fluid share cannot see. A worker that
//! reads a packet, waits for it and writes it on sends its writes in a burst, and its next
//! read requests follow the burst down the same links; the chip's other such workers start
//! their bursts at the same moments, so a request finds the links busy with their bursts far
//! more often than their mean load says, and waits behind them (the packet model shows it: on
//! a two-link ring's broadcast the root's two NoC0 readers wait about one burst each per
//! packet, the link where they wait 48 % busy). The flow model therefore steps these
//! workers' commands, and what the routers' receivers write as their packets arrive, through
//! the packet model's own NoC ([`Noc`]) and DRAM banks ([`dram_serve`]) for a few dozen
//! packets, together and each worker alone, and charges each worker the difference in its
//! period.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use meshsim_engine::Time;
use meshsim_hw::Params;
use meshsim_hw::noc::{Noc, packet_flits};
use meshsim_hw::world::dram_serve;
use meshsim_topology::soc::{CoreCoord, SocDescriptor};

use super::{Network, neighbour};
use crate::fabric::schedule::{Multicaster, Schedule, Work};
use crate::phase::Phase;
use crate::plan::Dir;
use crate::tensor::Memory;

mod relay;
pub(super) use relay::RelayStep;

/// A NoC write a stepped command issues: (destination core, bytes, the DRAM bank it writes
/// into if it does).
type Write = (CoreCoord, u64, Option<usize>);

/// Packets each worker is stepped through: enough for the workers to settle into their
/// pattern over the banks; the period is measured over the second half.
const STEPPED_PACKETS: usize = 48;

/// Windows a kernel reading a window ahead is stepped through (each its "packet").
const STEPPED_WINDOWS: usize = 12;

/// One worker kernel's NoC commands per packet, in the order its kernel issues them.
pub(super) struct Stepper {
    /// Its chip (a rank of the op), NoC and core.
    pub chip: usize,
    pub noc: usize,
    pub core: CoreCoord,
    /// Per packet (taken in turn), the banks of the pages it reads, each a page of `page`
    /// bytes, from DRAM (`dram`) or workers' L1.
    pub reads: Vec<Vec<usize>>,
    pub page: u64,
    pub dram: bool,
    /// Per packet (taken in turn), the writes it issues once its reads have landed.
    pub writes: Vec<Vec<Write>>,
    /// Per packet (taken in turn), the writes after which it rings its router: the
    /// receivers downstream then get one packet each ([`Feed`]).
    pub rings: Vec<Vec<usize>>,
    /// Whether it issues the next packet's reads as soon as this one's have landed, before
    /// this one's writes (a kernel reading a window ahead; its "packet" is then a window).
    pub ahead: bool,
    /// Its router channel's slots, if it waits for them ([`Slots`]).
    pub slots: Option<Slots>,
}

/// A router channel's slots as a stepped worker waits for them: how many; how long after a
/// packet has landed in its slot the router sends the slot's credit back; and the core that
/// sends it (on NoC1, to the worker). The credit's NoC way is stepped; the slot is free once
/// it has arrived and the worker has polled it.
#[derive(Clone, Copy)]
pub(super) struct Slots {
    pub count: usize,
    pub back: Time,
    pub router: CoreCoord,
}

impl Network<'_, '_> {
    /// Per multicast kernel, what running in step with the chip's other multicast kernels adds
    /// to its packets, ps ([`step`]): their reads of its input, its copies into its output and
    /// its writes into its router, stepped through the chip's NoCs. None without the NoC.
    pub(super) fn multicasters_in_step(
        &mut self,
        pi: usize,
        p: &Phase,
        (sched, kernels): (&Schedule, &[Multicaster]),
        hop: f64,
    ) -> Vec<f64> {
        let mut out = vec![0.0; kernels.len()];
        if !self.noc {
            return out;
        }
        let req = &self.s.ops[p.op];
        let chips = req.comm.chips().to_vec();
        let t = p.tensors;
        let (soc, params) = (self.s.cluster.soc(), self.s.params);
        let whole = |k: usize, q: u64| t.slice.page_in_whole(t.dim, t.n, slice_of(sched, k), q);
        let (mut steppers, mut stepper_of) = (Vec::new(), vec![None; kernels.len()]);
        for (i, w) in kernels.iter().enumerate() {
            if w.mine.is_empty() || w.packets.is_empty() {
                continue;
            }
            let d = usize::from(w.dir == Dir::Backward);
            let core = self.worker_core(self.phases[pi].core + w.plane);
            let router = (!w.sends.is_empty()).then(|| {
                self.router_core(chips[w.rank], chips[neighbour(w.rank, w.dir, chips.len())], w.plane)
            });
            let read =
                |q: u64| if t.in_place { t.output.page(whole(w.rank, q)).0 } else { t.input.page(q).0 };
            let reads = w
                .packets
                .iter()
                .take(STEPPED_PACKETS)
                .map(|&(lo, n)| (lo..lo + n).map(|q| read(q) as usize).collect())
                .collect();
            let writes = per_packet(w, |lo, n, range| {
                let mut out: Vec<Write> = Vec::new();
                if w.local_copy {
                    out = self.output_writes(p, (slice_of(sched, w.rank), lo, n), d, sched.page);
                }
                if let Some(r) = router.filter(|_| range > 0) {
                    out.extend([(r, n * sched.page, None), (r, self.header, None), (r, 4, None)]);
                }
                out
            });
            let dram = t.input.memory == Memory::Dram;
            stepper_of[i] = Some(steppers.len());
            let rings = writes.iter().map(|w| w.len().checked_sub(1).into_iter().collect()).collect();
            let (page, ahead, slots) = (sched.page, false, None);
            steppers.push(Stepper {
                chip: w.rank,
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
        }
        let feeds = self.multicast_feeds(p, (sched, kernels), &stepper_of, hop);
        let waits = waits(params, soc, &steppers, &feeds);
        for (i, s) in stepper_of.iter().enumerate() {
            if let Some(s) = *s {
                out[i] = waits[s];
            }
        }
        out
    }

    /// What the ranks' routers' receivers write and forward on their NoC1 as the multicast
    /// kernels send ([`Feed`]): each kernel's packets reach the ranks its multicast covers,
    /// `hop` ps a hop later each after the kernel (its stepper in `stepper_of`) rang its router.
    fn multicast_feeds(
        &mut self,
        p: &Phase,
        (sched, kernels): (&Schedule, &[Multicaster]),
        stepper_of: &[Option<usize>],
        hop: f64,
    ) -> Vec<Feed> {
        let chips = self.s.ops[p.op].comm.chips().to_vec();
        let n = chips.len();
        let bytes = (self.header + sched.ppp * sched.page).next_multiple_of(16);
        let mut feeds = Vec::new();
        for (w, follows) in kernels.iter().zip(stepper_of) {
            let Some(follows) = follows.filter(|_| !w.sends.is_empty()) else {
                continue;
            };
            let reach = w.ranges.iter().copied().max().unwrap_or(0) as usize;
            let slice = slice_of(sched, w.rank);
            let (mut from, mut at) = (w.rank, neighbour(w.rank, w.dir, n));
            for h in 1..=reach {
                let next = neighbour(at, w.dir, n);
                let core = self.router_core(chips[at], chips[from], w.plane);
                let onward = (h < reach).then(|| self.router_core(chips[at], chips[next], w.plane));
                let writes = per_packet(w, |lo, pages, range| {
                    let mut out: Vec<Write> = Vec::new();
                    if range as usize >= h {
                        out = self.output_writes(p, (slice, lo, pages), 1, sched.page);
                    }
                    if let Some(to) = onward.filter(|_| range as usize > h) {
                        out.extend([(to, bytes, None), (to, 4, None)]);
                    }
                    out
                });
                let lag = Time((h as f64 * hop).round() as u64);
                feeds.push(Feed { chip: at, follows, lag, core, writes });
                (from, at) = (at, next);
            }
        }
        feeds
    }

    /// The writes of pages `lo..lo + pages` of slice `slice` into phase `p`'s output on `noc`,
    /// `page` bytes each: each page to its bank (and into that DRAM bank, if the output is in
    /// DRAM).
    fn output_writes(
        &self,
        p: &Phase,
        (slice, lo, pages): (u64, u64, u64),
        noc: usize,
        page: u64,
    ) -> Vec<Write> {
        let t = p.tensors;
        let into_dram = t.output.memory == Memory::Dram;
        (lo..lo + pages)
            .map(|q| {
                let bank = t.output.page(t.slice.page_in_whole(t.dim, t.n, slice, q)).0;
                (self.bank_core(t.output.memory, noc, bank), page, into_dram.then_some(bank as usize))
            })
            .collect()
    }

    /// The core holding bank `bank` of a tensor interleaved over `memory`'s banks, as `noc`
    /// sees it.
    fn bank_core(&self, memory: Memory, noc: usize, bank: u64) -> CoreCoord {
        let soc = self.s.cluster.soc();
        match memory {
            Memory::Dram => soc.dram_endpoint(bank as usize % soc.dram.len(), noc),
            Memory::L1 => soc.workers[bank as usize % soc.workers.len()],
        }
    }
}

/// What a router receiver of rank `chip` writes on its NoC1 as an upstream multicast kernel's
/// packets arrive: per packet (taken in turn) the pages into the output and, if the multicast
/// goes on, the packet and its doorbell into the next router. Its packets arrive `lag` after
/// the stepped kernel `follows` has rung its router for the same packet.
pub(super) struct Feed {
    pub chip: usize,
    pub follows: usize,
    pub lag: Time,
    pub core: CoreCoord,
    pub writes: Vec<Vec<Write>>,
}

/// Where a stepped worker is in its packet.
#[derive(Clone, Copy)]
enum Stage {
    /// Sending read `i`'s request.
    Read(usize),
    /// Waiting for its reads' answers.
    Landed,
    /// Sending the next packet's read `i` (a kernel reading ahead).
    ReadAhead(usize),
    /// Sending write `i`.
    Write(usize),
    /// Waiting for its writes to leave its L1.
    Flushed,
}

/// One worker's progress.
struct State {
    stage: Stage,
    packet: usize,
    /// When its reads' last answer lands, and its writes' last flit leaves, this packet.
    landed: Time,
    flushed: Time,
    /// When the next packet's reads land (a kernel reading ahead).
    ahead: Time,
    /// How many times it has rung its router, and when its last payload landed there.
    rung: usize,
    landing: Time,
    /// When each of its router channel's slots is next free (`Time::MAX` until its credit
    /// is sent), and whether it waits for one.
    free: Vec<Time>,
    blocked: bool,
    /// The NoC legs of its slots' loops: the payloads' ways in and the credits' back (sum, count).
    legs: (f64, f64),
    /// When each packet began.
    began: Vec<Time>,
}

/// Each worker's added time per packet, ps, for running in step with the others: its period
/// stepped together with them less its period stepped alone (never below 0).
pub(super) fn waits(p: &Params, soc: &SocDescriptor, workers: &[Stepper], feeds: &[Feed]) -> Vec<f64> {
    if workers.len() < 2 && feeds.is_empty() {
        return vec![0.0; workers.len()];
    }
    let together = periods(p, soc, workers.iter().collect(), feeds);
    workers.iter().zip(together).map(|(w, t)| (t - periods(p, soc, vec![w], &[])[0]).max(0.0)).collect()
}

/// The steady period per packet, ps, of each of `workers` stepped together from the same
/// moment through one chip's NoCs and DRAM banks.
fn periods(p: &Params, soc: &SocDescriptor, workers: Vec<&Stepper>, feeds: &[Feed]) -> Vec<f64> {
    stepped(p, soc, workers, feeds).into_iter().map(|x| x.0).collect()
}

/// [`periods`], with each worker's mean NoC legs of its slots' loops per packet (ps).
fn stepped(p: &Params, soc: &SocDescriptor, workers: Vec<&Stepper>, feeds: &[Feed]) -> Vec<(f64, f64)> {
    let ranks = workers.iter().map(|w| w.chip).chain(feeds.iter().map(|f| f.chip)).max().unwrap_or(0) + 1;
    let mut chips: Vec<Chip> = (0..ranks)
        .map(|_| Chip {
            noc: Noc::new(soc.grid_x, soc.grid_y),
            banks: vec![Time::ZERO; soc.dram.len()],
            endpoints: vec![Time::ZERO; 2 * soc.dram.len()],
        })
        .collect();
    let mut states: Vec<State> = workers
        .iter()
        .map(|w| State {
            stage: Stage::Read(0),
            packet: 0,
            landed: Time::ZERO,
            flushed: Time::ZERO,
            ahead: Time::ZERO,
            rung: 0,
            landing: Time::ZERO,
            free: vec![Time::ZERO; w.slots.map_or(0, |s| s.count)],
            blocked: false,
            legs: (0.0, 0.0),
            began: vec![Time::ZERO],
        })
        .collect();
    // Events in time order (ties by worker): each is a worker's next command, at its time.
    // A receiver's packet is (time, workers + feed, packet).
    let mut due: BinaryHeap<Reverse<(Time, usize, usize)>> =
        (0..workers.len()).map(|w| Reverse((p.cycles(p.noc_read_issue_cycles), w, 0))).collect();
    // Events past the workers and the feeds: a router's credit back to worker `i - credits`.
    let credits = workers.len() + feeds.len();
    while let Some(Reverse((t, i, j))) = due.pop() {
        if let Some(w) = i.checked_sub(credits) {
            // The router sends slot `j`'s credit back over NoC1; the worker has the slot once
            // it has arrived and been polled, and goes on if it was waiting for it.
            let (stepper, st) = (workers[w], &mut states[w]);
            let Some(slots) = stepper.slots else { continue };
            let at = chips[stepper.chip].noc.send(p, 1, slots.router, stepper.core, 4, t);
            st.free[j] = at + p.cycles(p.core_poll_cycles);
            st.legs.0 += (st.free[j].0 - t.0) as f64;
            st.legs.1 += 1.0;
            if std::mem::take(&mut st.blocked) {
                due.push(Reverse((st.free[j], w, 0)));
            }
            continue;
        }
        if let Some(f) = i.checked_sub(workers.len()).map(|f| &feeds[f]) {
            for &(to, bytes, bank) in &f.writes[j % f.writes.len()] {
                chips[f.chip].write(p, (1, f.core), (to, bytes, bank), t);
            }
            continue;
        }
        let (w, st) = (workers[i], &mut states[i]);
        let (next, rang) = advance(p, soc, (&mut chips[w.chip], w), st, t);
        if let Some(packet) = rang {
            // Its router sends the packet on: the ranks downstream receive it.
            for (f, feed) in feeds.iter().enumerate().filter(|(_, f)| f.follows == i) {
                due.push(Reverse((t + feed.lag, workers.len() + f, packet)));
            }
            // And the slot's credit back, a while after the packet landed in it.
            if let Some(slots) = w.slots {
                due.push(Reverse((st.landing + slots.back, credits + i, packet % slots.count)));
            }
        }
        if let Some(at) = next {
            due.push(Reverse((at, i, 0)));
        }
    }
    states
        .iter()
        .map(|s| {
            let half = s.began.len() / 2;
            let last = s.began.len() - 1;
            let period = (s.began[last].0 - s.began[half].0) as f64 / (last - half).max(1) as f64;
            (period, if s.legs.1 > 0.0 { s.legs.0 / s.legs.1 } else { 0.0 })
        })
        .collect()
}

/// Takes worker `w`'s next command at `t` on its chip: returns when it takes the one after (none
/// once it has stepped its packets), and the number of the packet it has just rung its router
/// for (counted over its rings), if so.
fn advance(
    p: &Params,
    soc: &SocDescriptor,
    (chip, w): (&mut Chip, &Stepper),
    st: &mut State,
    t: Time,
) -> (Option<Time>, Option<usize>) {
    let packet = st.packet;
    let next = match st.stage {
        Stage::Read(r) | Stage::ReadAhead(r) => {
            let ahead = matches!(st.stage, Stage::ReadAhead(_));
            let reads = &w.reads[(packet + usize::from(ahead)) % w.reads.len()];
            if let Some(&bank) = reads.get(r) {
                let landed = chip.read(p, soc, w, bank, t);
                let into = if ahead { &mut st.ahead } else { &mut st.landed };
                *into = (*into).max(landed);
            }
            if r + 1 < reads.len() {
                st.stage = if ahead { Stage::ReadAhead(r + 1) } else { Stage::Read(r + 1) };
                Some(t + p.cycles(p.noc_read_issue_cycles))
            } else if ahead {
                st.stage = Stage::Write(0);
                Some(t + p.cycles(p.noc_issue_cycles))
            } else {
                st.stage = Stage::Landed;
                // Its read barrier notices the last answer a polling pass later.
                Some(st.landed.max(t) + p.cycles(p.core_poll_cycles))
            }
        }
        Stage::Landed if w.ahead => {
            st.stage = Stage::ReadAhead(0);
            Some(t + p.cycles(p.noc_read_issue_cycles))
        }
        Stage::Landed => {
            st.stage = Stage::Write(0);
            Some(t + p.cycles(p.noc_issue_cycles))
        }
        Stage::Write(k) => return write(p, (chip, w), st, (t, k)),
        Stage::Flushed => {
            st.packet += 1;
            st.began.push(t);
            if st.packet == if w.ahead { STEPPED_WINDOWS } else { STEPPED_PACKETS } {
                None
            } else if w.ahead {
                // Its next packet's reads were sent before these writes.
                st.landed = std::mem::replace(&mut st.ahead, Time::ZERO);
                st.stage = Stage::Landed;
                Some(st.landed.max(t) + p.cycles(p.core_poll_cycles))
            } else {
                st.stage = Stage::Read(0);
                Some(t + p.cycles(p.noc_read_issue_cycles))
            }
        }
    };
    (next, None)
}

/// Worker `w`'s write `k` of its packet at `t` ([`advance`]): a send's payload (the write two
/// before its ring) first waits for a slot of its router's channel, if the worker waits for
/// them; its ring books that slot's credit, which the router sends back a while after the
/// payload has landed, through the NoC.
fn write(
    p: &Params,
    (chip, w): (&mut Chip, &Stepper),
    st: &mut State,
    (t, k): (Time, usize),
) -> (Option<Time>, Option<usize>) {
    let packet = st.packet;
    let rings = &w.rings[packet % w.rings.len()];
    if let Some(slots) = w.slots
        && rings.contains(&(k + 2))
        && st.free[st.rung % slots.count] > t
    {
        // Its credit not sent yet: the router's credit wakes it.
        let free = st.free[st.rung % slots.count];
        st.blocked = free == Time::MAX;
        return ((!st.blocked).then_some(free), None);
    }
    let writes = &w.writes[packet % w.writes.len()];
    if let Some(&(to, bytes, bank)) = writes.get(k) {
        let (flushed, landed) = chip.write(p, (w.noc, w.core), (to, bytes, bank), t);
        st.flushed = st.flushed.max(flushed);
        if rings.contains(&(k + 2)) {
            st.landing = landed;
            st.legs.0 += (landed.0 - t.0) as f64;
        }
    }
    let mut rang = None;
    if rings.contains(&k) {
        if let Some(slots) = w.slots {
            // Taken until its credit comes back ([`periods`] sends it).
            st.free[st.rung % slots.count] = Time::MAX;
        }
        rang = Some(st.rung);
        st.rung += 1;
    }
    let next = if k + 1 < writes.len() {
        st.stage = Stage::Write(k + 1);
        Some(t + p.cycles(p.noc_issue_cycles))
    } else {
        st.stage = Stage::Flushed;
        Some(st.flushed.max(t))
    };
    (next, rang)
}

/// The slice a multicast kernel of rank `rank` moves: a broadcast's root's only chunk, else
/// the rank's own.
fn slice_of(sched: &Schedule, rank: usize) -> u64 {
    if matches!(sched.work, Work::Multicast { root: Some(_), .. }) { 0 } else { rank as u64 }
}

/// Per packet of `w`'s that is stepped, the writes `f` gives for its first page, pages and
/// multicast reach.
fn per_packet(w: &Multicaster, mut f: impl FnMut(u64, u64, u32) -> Vec<Write>) -> Vec<Vec<Write>> {
    w.packets.iter().zip(&w.ranges).take(STEPPED_PACKETS).map(|(&(lo, n), &range)| f(lo, n, range)).collect()
}

/// The chip's NoCs and DRAM banks as the stepped workers find them: when each bank, and each
/// bank's endpoint on each NoC, is next free.
struct Chip {
    noc: Noc,
    banks: Vec<Time>,
    endpoints: Vec<Time>,
}

impl Chip {
    /// `w`'s read of a page from `bank`, its request sent at `t`, as the packet model's
    /// `noc_async_read` times it: the request's way, the bank's answer (a DRAM bank streams it
    /// out through its endpoint on the worker's NoC) and the answer's way back. Returns when
    /// the page has landed.
    fn read(&mut self, p: &Params, soc: &SocDescriptor, w: &Stepper, bank: usize, t: Time) -> Time {
        let at = bank_core(soc, w, bank);
        let mut ready = self.noc.send(p, w.noc, w.core, at, 0, t);
        if w.dram {
            let b = bank % soc.dram.len();
            let first = ready + p.cycles(p.dram_latency_cycles);
            let ends = (&mut self.banks[b], Some(&mut self.endpoints[2 * b + w.noc]));
            let done = dram_serve(p, ends, w.page, ready);
            let flits = p.cycles(packet_flits(p, w.page));
            ready = first.max(Time(done.0.saturating_sub(flits.0)));
        }
        self.noc.send_later(p, w.noc, at, w.core, w.page, ready)
    }

    /// A write from `from` on `noc` of `bytes` to `to` (into DRAM bank `bank`, if any), sent at `t`, as the
    /// packet model's `noc_async_write` times it: its way, and the bank's service once it has
    /// arrived. Returns when its last flit has left the worker, and when it has arrived.
    fn write(
        &mut self,
        p: &Params,
        (noc, from): (usize, CoreCoord),
        (to, bytes, bank): (CoreCoord, u64, Option<usize>),
        t: Time,
    ) -> (Time, Time) {
        let sent = self.noc.send_packet(p, noc, from, to, bytes, t);
        if let Some(b) = bank {
            let b = b % self.banks.len();
            dram_serve(p, (&mut self.banks[b], None), bytes, sent.arrive);
        }
        (sent.flushed, sent.arrive)
    }
}

/// The core that holds bank `bank` of the worker's reads: a DRAM bank's endpoint on the
/// worker's NoC, or a worker's L1.
fn bank_core(soc: &SocDescriptor, w: &Stepper, bank: usize) -> CoreCoord {
    if w.dram {
        soc.dram_endpoint(bank % soc.dram.len(), w.noc)
    } else {
        soc.workers[bank % soc.workers.len()]
    }
}

#[cfg(test)]
mod tests {
    use super::{Feed, Slots, Stepper, Write, periods, waits};
    use meshsim_engine::Time;
    use meshsim_hw::Params;
    use meshsim_topology::Arch;
    use meshsim_topology::soc::CoreCoord;

    /// A Wormhole multicast reader on `(x, 1)` and `noc`: two DRAM pages a packet from banks
    /// `first` and `first + 1`, then a 4 KiB packet, its header and doorbell into the router
    /// on `router`.
    fn reader(x: u32, noc: usize, first: usize, router: CoreCoord) -> Stepper {
        Stepper {
            chip: 0,
            noc,
            core: CoreCoord { x, y: 1 },
            reads: vec![vec![first, first + 1], vec![(first + 2) % 6, (first + 3) % 6]],
            page: 2048,
            dram: true,
            writes: vec![vec![(router, 4096, None), (router, 48, None), (router, 4, None)]],
            rings: vec![vec![2]],
            ahead: false,
            slots: None,
        }
    }

    /// Two readers whose bursts run down the same NoC0 row wait for each other's: each period
    /// grows by a good part of the other's burst (4096 B is 129 flits), where one alone, or two
    /// on different NoCs, wait for nothing but the banks they share.
    #[test]
    fn readers_whose_bursts_share_a_row_wait_for_each_other() {
        let p = Params::default();
        let soc = Arch::WormholeB0.soc().unwrap();
        let far = CoreCoord { x: 9, y: 0 };
        let alone = periods(&p, soc, vec![&reader(1, 0, 0, far)], &[])[0];
        assert!(alone > 0.0);
        let row = waits(&p, soc, &[reader(1, 0, 0, far), reader(2, 0, 2, far)], &[]);
        let flit_ps = p.cycles(1).0 as f64;
        assert!(row.iter().all(|&w| w > 80.0 * flit_ps), "{row:?} ({alone} ps alone)");
        let apart = waits(&p, soc, &[reader(1, 0, 0, far), reader(2, 1, 2, CoreCoord { x: 9, y: 6 })], &[]);
        assert!(apart.iter().all(|&w| w < 10.0 * flit_ps), "{apart:?}");
        assert_eq!(waits(&p, soc, &[reader(1, 0, 0, far)], &[]), vec![0.0]);
    }

    /// The step is deterministic: the same readers give the same periods.
    #[test]
    fn the_same_readers_step_alike() {
        let p = Params::default();
        let soc = Arch::WormholeB0.soc().unwrap();
        let far = CoreCoord { x: 9, y: 0 };
        let r = || [reader(1, 0, 0, far), reader(2, 0, 2, far), reader(3, 1, 4, far)];
        assert_eq!(waits(&p, soc, &r(), &[]), waits(&p, soc, &r(), &[]));
    }

    /// A receiver's writes into the banks a reader reads, on the reader's NoC, arriving as the
    /// reader reads its next packet (50 ns after it rang its router), slow it; a receiver that
    /// writes nothing does not. (Arriving 300 ns later, in this reader's wait for its answers,
    /// the same writes cross nothing of its: the step is about when as much as how much.)
    #[test]
    fn a_receiver_s_writes_slow_the_reader_they_cross() {
        let p = Params::default();
        let soc = Arch::WormholeB0.soc().unwrap();
        let r = [reader(1, 1, 0, CoreCoord { x: 9, y: 6 })];
        let banks: Vec<Write> = (0..6).map(|b| (soc.dram_endpoint(b, 1), 2048, Some(b))).collect();
        let feed = |writes| Feed {
            chip: 0,
            follows: 0,
            lag: Time::from_ns(50),
            core: CoreCoord { x: 9, y: 0 },
            writes,
        };
        let busy = waits(&p, soc, &r, &[feed(vec![banks])]);
        assert!(busy[0] > 0.0, "{busy:?}");
        assert_eq!(waits(&p, soc, &r, &[feed(vec![vec![]])]), vec![0.0]);
    }

    /// A worker that waits for its router's slots goes no faster than they come back: with
    /// two slots whose credits leave two microseconds after each packet lands, a packet a
    /// microsecond at best (it takes about 0.72 µs with a free channel).
    #[test]
    fn a_worker_waiting_for_slots_goes_at_their_pace() {
        let p = Params::default();
        let soc = Arch::WormholeB0.soc().unwrap();
        let router = CoreCoord { x: 9, y: 6 };
        let free = reader(1, 1, 0, router);
        let mut slotted = reader(1, 1, 0, router);
        slotted.slots = Some(Slots { count: 2, back: Time::from_ns(2000), router });
        let fast = periods(&p, soc, vec![&free], &[])[0];
        let slow = periods(&p, soc, vec![&slotted], &[])[0];
        assert!(slow >= 1_000_000.0 && fast < 1_000_000.0, "{slow} ps with slots, {fast} ps without");
    }
}
