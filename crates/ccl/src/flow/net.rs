//! Fluid flows sharing resources max-min fairly: the solver under meshsim's flow-level model.
//!
//! A [`FlowNet`] holds resources, each with a capacity in units per second (a link direction's
//! bytes/s, a router ERISC's packets/s), and flows, each moving an amount (bytes) after a fixed
//! latency, with a demand on each resource it uses per unit it moves (1 byte of link per byte;
//! 1/packet of an ERISC's packets per byte) and an optional rate cap of its own (a channel's
//! slots over its credit round trip, a worker's serial path). Rates are the weighted max-min
//! fair allocation, found by progressive filling as SimGrid does: every unfrozen flow's rate
//! rises together until a resource saturates or a flow meets its cap; the flows that can rise no
//! further freeze; repeat until none is left. Rates change only when a flow becomes active or
//! ends, so the net advances from one such event to the next (a heap of activations and
//! predicted ends): its cost grows with the number of flows, never with the bytes they move.
//! Max-min fair shares of flows that share no resource, directly or through other flows, are
//! independent, so an activation or an end re-solves only the flows connected to it — a ring
//! of a torus's row does not re-solve the other rows — and a flow's progress is brought up to
//! date only when its rate changes.
//!
//! Time is in picoseconds as `f64` during a run (rates need fractions); every event time the
//! caller sees is rounded to an integer [`Time`]. Everything iterates in index order, so a run
//! is deterministic.
//!
//! ```
//! use meshsim_ccl::flow::FlowNet;
//! use meshsim_engine::Time;
//!
//! let mut net = FlowNet::new();
//! let link = net.resource(10e9); // 10 GB/s
//! let a = net.start(Time::ZERO, 1e6, Time::from_ns(500), &[(link, 1.0)], None);
//! let b = net.start(Time::ZERO, 1e6, Time::from_ns(500), &[(link, 1.0)], None);
//! // Both share the link: 2 MB at 10 GB/s after 500 ns.
//! let (t, first) = net.next_end().unwrap();
//! assert_eq!((t, first), (Time::from_ns(200_500), a));
//! assert_eq!(net.next_end().unwrap(), (Time::from_ns(200_500), b));
//! assert!(net.next_end().is_none());
//! ```

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use meshsim_engine::Time;

/// A resource of a [`FlowNet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceId(pub u32);

/// A flow of a [`FlowNet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowId(pub u32);

/// Relative slack under which a resource counts as saturated, and a flow as finished.
const EPS: f64 = 1e-9;

struct Resource {
    /// Units per picosecond.
    capacity: f64,
    /// The active flows through it, and flows that ended since the list was last swept of
    /// them (a solve skips those): ending a flow costs its resources no search.
    flows: Vec<u32>,
    /// How many of `flows` have ended.
    ended: u32,
}

struct Flow {
    /// Units still to move at `since`.
    remaining: f64,
    /// When `remaining` was last brought up to date (ps).
    since: f64,
    /// (resource, units of it per unit moved).
    uses: Vec<(ResourceId, f64)>,
    /// Its own rate cap, units per ps.
    cap: f64,
    /// Current rate, units per ps (0 until active).
    rate: f64,
    /// Whether it is moving (its latency has passed), and whether it has ended.
    active: bool,
    done: bool,
    /// Bumped whenever its rate changes: an end predicted at an older rate is stale.
    version: u32,
}

/// What happens to a flow at a time: it becomes active, or (at its rate then) it ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Happens {
    Activates,
    Ends,
}

/// An event: its time as the bits of a non-negative `f64` (which order as the numbers do),
/// what happens, the flow and the flow's version it was predicted at.
type Event = Reverse<(u64, Happens, u32, u32)>;

/// Resources and the flows sharing them; see the module documentation.
#[derive(Default)]
pub struct FlowNet {
    resources: Vec<Resource>,
    flows: Vec<Flow>,
    /// Flows not yet ended.
    live: usize,
    /// Now, in picoseconds.
    now: f64,
    /// Activations and predicted ends ahead, earliest first.
    events: BinaryHeap<Event>,
    /// Flows that ended now and have not been handed out yet, in start order.
    ended: BTreeSet<u32>,
    /// Where rates must be solved again before the net advances: flows that became active,
    /// and resources a flow left.
    new_flows: Vec<u32>,
    left_resources: Vec<u32>,
    /// Rate solves so far (each activation or end costs one, of the flows it shares with).
    solves: u64,
    /// Flows those solves rated, summed: what they cost.
    rated: u64,
    /// A solve's working space.
    scratch: Scratch,
}

impl FlowNet {
    /// An empty net at time zero.
    pub fn new() -> FlowNet {
        FlowNet::default()
    }

    /// Makes room for `flows` more flows (a caller that knows how many it will start saves
    /// the net growing its tables as they come).
    pub fn reserve(&mut self, flows: usize) {
        self.flows.reserve(flows);
        self.scratch.flow_mark.reserve(flows);
    }

    /// Adds a resource of `per_second` units per second.
    pub fn resource(&mut self, per_second: f64) -> ResourceId {
        assert!(per_second > 0.0, "a resource's capacity must be positive");
        self.resources.push(Resource { capacity: per_second * 1e-12, flows: Vec::new(), ended: 0 });
        ResourceId(self.resources.len() as u32 - 1)
    }

    /// Starts a flow of `amount` units at `at` (not before now), moving after `latency` and
    /// using `uses` (resource, units of it per unit moved), its rate at most `cap` units per
    /// second. A flow of nothing ends once its latency has passed.
    pub fn start(
        &mut self,
        at: Time,
        amount: f64,
        latency: Time,
        uses: &[(ResourceId, f64)],
        cap: Option<f64>,
    ) -> FlowId {
        let at = (at.0 as f64).max(self.now);
        let active_at = at + latency.0 as f64;
        let mut used = Vec::with_capacity(uses.len());
        used.extend(uses.iter().copied().filter(|u| u.1 > 0.0));
        self.flows.push(Flow {
            remaining: amount.max(0.0),
            since: active_at,
            uses: used,
            cap: cap.map_or(f64::INFINITY, |c| c * 1e-12),
            rate: 0.0,
            active: false,
            done: false,
            version: 0,
        });
        let id = self.flows.len() as u32 - 1;
        self.live += 1;
        if active_at <= self.now {
            self.activate(id);
        } else {
            self.events.push(Reverse((active_at.to_bits(), Happens::Activates, id, 0)));
        }
        FlowId(id)
    }

    /// Resources so far (numbered from 0 as [`FlowNet::resource`] adds them).
    pub fn resource_count(&self) -> usize {
        self.resources.len()
    }

    /// Now.
    pub fn now(&self) -> Time {
        Time(self.now.round() as u64)
    }

    /// Rate solves so far: the model's events.
    pub fn solves(&self) -> u64 {
        self.solves
    }

    /// Flows the solves so far rated, summed over the solves: their cost, which grows with the
    /// flows that share resources with the ones that started or ended, not with the net.
    pub fn rated(&self) -> u64 {
        self.rated
    }

    /// The current rate of `flow`, units per second (0 before it is active and once done).
    pub fn rate(&self, flow: FlowId) -> f64 {
        self.flows[flow.0 as usize].rate * 1e12
    }

    /// Advances to the next flow's end and returns it with its time; `None` once no flow is
    /// left. Flows that end together come out in start order.
    pub fn next_end(&mut self) -> Option<(Time, FlowId)> {
        loop {
            if let Some(i) = self.ended.pop_first() {
                self.finish(i);
                return Some((self.now(), FlowId(i)));
            }
            if self.live == 0 {
                return None;
            }
            if !self.new_flows.is_empty() || !self.left_resources.is_empty() {
                self.solve();
                continue;
            }
            let Reverse((bits, _, _, _)) = *self
                .events
                .peek()
                .expect("flow net stalled: a live flow has no rate and no activation ahead");
            self.now = self.now.max(f64::from_bits(bits));
            self.happen_now();
        }
    }

    /// Takes every event due now: activations at now, and the ends predicted within a
    /// rounding's slack of it (flows that end together end together).
    fn happen_now(&mut self) {
        let slack = EPS * self.now.max(1.0);
        while let Some(&Reverse((bits, what, i, version))) = self.events.peek() {
            let t = f64::from_bits(bits);
            let due = match what {
                Happens::Activates => t <= self.now,
                Happens::Ends => t <= self.now + slack,
            };
            if !due {
                break;
            }
            self.events.pop();
            let f = &self.flows[i as usize];
            match what {
                Happens::Activates => self.activate(i),
                Happens::Ends if !f.done && f.version == version => {
                    self.ended.insert(i);
                }
                Happens::Ends => {}
            }
        }
    }

    /// A flow whose latency has passed starts moving: it takes a share of its resources (a
    /// flow of nothing ends at once).
    fn activate(&mut self, i: u32) {
        let f = &mut self.flows[i as usize];
        f.active = true;
        f.since = self.now;
        if f.remaining <= 0.0 {
            self.ended.insert(i);
            return;
        }
        for &(r, _) in &f.uses {
            self.resources[r.0 as usize].flows.push(i);
        }
        self.new_flows.push(i);
    }

    fn finish(&mut self, i: u32) {
        let f = &mut self.flows[i as usize];
        f.done = true;
        f.rate = 0.0;
        f.remaining = 0.0;
        f.version += 1;
        self.live -= 1;
        // An ended flow uses nothing any more. It leaves its resources' lists lazily: each is
        // swept once half of it has ended, so an end costs no search of a long list.
        let flows = &self.flows;
        for &(ResourceId(r), _) in &flows[i as usize].uses {
            let res = &mut self.resources[r as usize];
            res.ended += 1;
            if 2 * res.ended as usize > res.flows.len() {
                res.flows.retain(|&j| !flows[j as usize].done);
                res.ended = 0;
            }
            self.left_resources.push(r);
        }
        self.flows[i as usize].uses = Vec::new();
    }

    /// Weighted max-min fair rates, by progressive filling, of the flows whose share may have
    /// changed: those connected through shared resources to a flow that became active or a
    /// resource a flow left. Max-min fair shares of flows that share nothing are independent,
    /// so the rest keep theirs: a solve costs the flows it touches, not the net.
    fn solve(&mut self) {
        self.solves += 1;
        let active = self.component();
        self.rated += active.len() as u64;
        // Bring every touched flow up to now at its old rate.
        for &i in &active {
            let f = &mut self.flows[i as usize];
            let moved = f.rate * (self.now - f.since);
            f.remaining = (f.remaining - moved).max(0.0);
            if f.remaining <= EPS * moved.max(1.0) {
                f.remaining = 0.0;
            }
            f.since = self.now;
            f.rate = 0.0;
        }
        self.fill(&active);
        for &i in &active {
            let f = &mut self.flows[i as usize];
            f.version += 1;
            if f.remaining <= 0.0 {
                self.ended.insert(i);
            } else if f.rate > 0.0 {
                let end = self.now + f.remaining / f.rate;
                self.events.push(Reverse((end.to_bits(), Happens::Ends, i, f.version)));
            }
        }
    }

    /// The active flows to solve, in start order: every flow reachable from a newly active
    /// flow or a left resource through the resources they share. Marks their resources in
    /// the scratch with their whole capacity.
    fn component(&mut self) -> Vec<u32> {
        let stamp = self.solves;
        let (nr, nf) = (self.resources.len(), self.flows.len());
        let Scratch { mark, left, weight, count, touched, flow_mark, frozen } = &mut self.scratch;
        mark.resize(nr, 0);
        left.resize(nr, 0.0);
        weight.resize(nr, 0.0);
        count.resize(nr, 0);
        flow_mark.resize(nf, 0);
        frozen.resize(nf, 0);
        touched.clear();
        let mut active = Vec::new();
        let mut queue: Vec<u32> = std::mem::take(&mut self.new_flows);
        for r in std::mem::take(&mut self.left_resources) {
            queue.extend(self.resources[r as usize].flows.iter().copied());
        }
        while let Some(i) = queue.pop() {
            let f = &self.flows[i as usize];
            if flow_mark[i as usize] == stamp || f.done || !f.active {
                continue;
            }
            flow_mark[i as usize] = stamp;
            active.push(i);
            for &(r, _) in &f.uses {
                let r = r.0 as usize;
                if mark[r] != stamp {
                    mark[r] = stamp;
                    left[r] = self.resources[r].capacity;
                    touched.push(r as u32);
                    queue.extend(self.resources[r].flows.iter().copied());
                }
            }
        }
        // In start order, as the whole net's solve took them: the same sums, the same rates.
        // (Each resource's arithmetic is its own, so the resources' order does not matter.)
        active.sort_unstable();
        active
    }

    /// Progressive filling of the component `active` (its resources marked by
    /// [`FlowNet::component`]): every unfrozen rate rises together until a resource saturates
    /// or a flow meets its cap; the flows through a saturated resource and those at their cap
    /// freeze at the level reached. Each resource keeps the weight and the count of its
    /// unfrozen flows, taken down as they freeze, so a level costs the resources still in play
    /// and the flows it freezes, not every flow of the component.
    fn fill(&mut self, active: &[u32]) {
        let stamp = self.solves;
        let Scratch { left, weight, count, touched, flow_mark, frozen, .. } = &mut self.scratch;
        for &r in touched.iter() {
            weight[r as usize] = 0.0;
            count[r as usize] = 0;
        }
        for &i in active {
            for &(r, w) in &self.flows[i as usize].uses {
                weight[r.0 as usize] += w;
                count[r.0 as usize] += 1;
            }
        }
        let mut live: Vec<u32> = touched.iter().copied().filter(|&r| count[r as usize] > 0).collect();
        let mut capped: Vec<u32> =
            active.iter().copied().filter(|&i| self.flows[i as usize].cap.is_finite()).collect();
        let mut unfrozen = active.len();
        let mut level = 0.0f64;
        let mut freezing = Vec::new();
        while unfrozen > 0 {
            let mut rise = f64::INFINITY;
            for &r in &live {
                rise = rise.min(left[r as usize].max(0.0) / weight[r as usize]);
            }
            for &i in &capped {
                rise = rise.min(self.flows[i as usize].cap - level);
            }
            if !rise.is_finite() {
                // Flows that use nothing and have no cap: move instantly.
                for &i in active {
                    if frozen[i as usize] != stamp {
                        self.flows[i as usize].rate = f64::MAX;
                    }
                }
                break;
            }
            let rise = rise.max(0.0);
            level += rise;
            freezing.clear();
            for &r in &live {
                let r = r as usize;
                left[r] -= weight[r] * rise;
                if left[r] <= EPS * self.resources[r].capacity {
                    freezing.extend(
                        self.resources[r]
                            .flows
                            .iter()
                            .copied()
                            .filter(|&i| flow_mark[i as usize] == stamp && frozen[i as usize] != stamp),
                    );
                }
            }
            freezing.extend(
                capped.iter().copied().filter(|&i| level >= self.flows[i as usize].cap * (1.0 - EPS)),
            );
            for &i in &freezing {
                if frozen[i as usize] == stamp {
                    continue;
                }
                frozen[i as usize] = stamp;
                unfrozen -= 1;
                let f = &mut self.flows[i as usize];
                f.rate = level.min(f.cap);
                for &(r, w) in &f.uses {
                    weight[r.0 as usize] -= w;
                    count[r.0 as usize] -= 1;
                }
            }
            live.retain(|&r| count[r as usize] > 0);
            capped.retain(|&i| frozen[i as usize] != stamp);
        }
    }
}

/// What a solve reuses: per resource the solve that last touched it, its capacity left, and
/// the weight and count of its unfrozen flows; the resources this solve touched; per flow the
/// solve that last took it in and the solve that last froze it.
#[derive(Default)]
struct Scratch {
    mark: Vec<u64>,
    left: Vec<f64>,
    weight: Vec<f64>,
    count: Vec<u32>,
    touched: Vec<u32>,
    flow_mark: Vec<u64>,
    frozen: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ends(net: &mut FlowNet) -> Vec<(u64, u32)> {
        std::iter::from_fn(|| net.next_end()).map(|(t, f)| (t.0 / 1000, f.0)).collect()
    }

    #[test]
    fn a_lone_flow_takes_its_latency_then_its_bytes_at_the_rate() {
        let mut net = FlowNet::new();
        let l = net.resource(12.5e9);
        net.start(Time::from_ns(100), 12_500.0, Time::from_ns(700), &[(l, 1.0)], None);
        assert_eq!(ends(&mut net), vec![(100 + 700 + 1000, 0)]);
    }

    #[test]
    fn flows_share_a_bottleneck_max_min_fairly_and_the_rest_take_what_is_left() {
        // a and b share link x (10 GB/s); b also crosses y (4 GB/s), so b gets 4 and a 6.
        let mut net = FlowNet::new();
        let x = net.resource(10e9);
        let y = net.resource(4e9);
        let a = net.start(Time::ZERO, 6e6, Time::ZERO, &[(x, 1.0)], None);
        let b = net.start(Time::ZERO, 4e6, Time::ZERO, &[(x, 1.0), (y, 1.0)], None);
        net.solve();
        assert!((net.rate(a) - 6e9).abs() < 1.0 && (net.rate(b) - 4e9).abs() < 1.0);
        // Both end at 1 ms.
        assert_eq!(ends(&mut net), vec![(1_000_000, 0), (1_000_000, 1)]);
    }

    #[test]
    fn an_ended_flow_frees_its_share() {
        let mut net = FlowNet::new();
        let x = net.resource(10e9);
        net.start(Time::ZERO, 1e6, Time::ZERO, &[(x, 1.0)], None);
        net.start(Time::ZERO, 3e6, Time::ZERO, &[(x, 1.0)], None);
        // 5 GB/s each until the first ends at 200 us, then the second alone at 10 GB/s: 2 MB
        // left, 200 us more.
        assert_eq!(ends(&mut net), vec![(200_000, 0), (400_000, 1)]);
    }

    #[test]
    fn weights_count_packets_and_caps_bind_alone() {
        // An ERISC of 4 M packets/s carries two flows of 4 KiB packets (1/4096 packet per
        // byte): 2 M packets/s each, 8.192 GB/s; a capped third flow takes only its cap.
        let mut net = FlowNet::new();
        let erisc = net.resource(4e6);
        let a = net.start(Time::ZERO, 1e9, Time::ZERO, &[(erisc, 1.0 / 4096.0)], None);
        let b = net.start(Time::ZERO, 1e9, Time::ZERO, &[(erisc, 1.0 / 4096.0)], Some(1e9));
        net.solve();
        assert!((net.rate(b) - 1e9).abs() < 1.0, "{}", net.rate(b));
        assert!((net.rate(a) - (4e6 * 4096.0 - 1e9)).abs() < 10.0, "{}", net.rate(a));
    }

    #[test]
    fn rates_freeze_level_by_level_and_what_a_frozen_flow_leaves_goes_to_the_rest() {
        // x (6 GB/s) carries a, b, c; y (10 GB/s) carries c and d; d is capped at 1 GB/s.
        // Level 1: d meets its cap at 1. Level 2: x saturates at 2 each (a, b, c). y then has
        // 10 - 2 - 1 = 7 left and nothing unfrozen: rates 2, 2, 2, 1.
        let mut net = FlowNet::new();
        let x = net.resource(6e9);
        let y = net.resource(10e9);
        let a = net.start(Time::ZERO, 1e6, Time::ZERO, &[(x, 1.0)], None);
        let b = net.start(Time::ZERO, 1e6, Time::ZERO, &[(x, 1.0)], None);
        let c = net.start(Time::ZERO, 1e6, Time::ZERO, &[(x, 1.0), (y, 1.0)], None);
        let d = net.start(Time::ZERO, 1e6, Time::ZERO, &[(y, 1.0)], Some(1e9));
        net.solve();
        for (f, want) in [(a, 2e9), (b, 2e9), (c, 2e9), (d, 1e9)] {
            assert!((net.rate(f) - want).abs() < 1.0, "{f:?}: {}", net.rate(f));
        }
        // Once a, b and c end (500 us), d is still held to its cap.
        assert_eq!(ends(&mut net), vec![(500_000, 0), (500_000, 1), (500_000, 2), (1_000_000, 3)]);
    }

    #[test]
    fn a_flow_waiting_out_its_latency_takes_no_share() {
        let mut net = FlowNet::new();
        let x = net.resource(1e9);
        net.start(Time::ZERO, 1e6, Time::ZERO, &[(x, 1.0)], None); // alone: 1 ms
        net.start(Time::ZERO, 0.5e6, Time::from_us(500), &[(x, 1.0)], None);
        // First alone for 500 us (0.5 MB), then half each: both have 0.5 MB left at 0.5 GB/s.
        assert_eq!(ends(&mut net), vec![(1_500_000, 0), (1_500_000, 1)]);
        assert!(net.solves() <= 4, "{}", net.solves());
    }

    #[test]
    fn flows_that_share_nothing_are_solved_apart() {
        // 100 flows on 100 links of their own, ending one after another: each is rated once,
        // when it starts; one ending re-rates no other.
        let mut net = FlowNet::new();
        for k in 0..100u32 {
            let link = net.resource(1e9);
            net.start(Time::ZERO, 1e3 * (k + 1) as f64, Time::ZERO, &[(link, 1.0)], None);
        }
        assert_eq!(ends(&mut net).len(), 100);
        assert_eq!(net.rated(), 100);
        // Two flows on one link: the end of the first re-rates the second.
        let mut net = FlowNet::new();
        let link = net.resource(1e9);
        let lone = net.resource(1e9);
        net.start(Time::ZERO, 1e3, Time::ZERO, &[(link, 1.0)], None);
        net.start(Time::ZERO, 2e3, Time::ZERO, &[(link, 1.0)], None);
        net.start(Time::ZERO, 5e3, Time::ZERO, &[(lone, 1.0)], None);
        // 1 kB each at 0.5 GB/s: 2 us; then 1 kB alone at 1 GB/s: 1 us more.
        assert_eq!(ends(&mut net), vec![(2000, 0), (3000, 1), (5000, 2)]);
        assert_eq!(net.rated(), 3 + 1);
    }

    #[test]
    fn the_same_flows_give_the_same_times() {
        let run = || {
            let mut net = FlowNet::new();
            let r: Vec<ResourceId> = (0..5).map(|i| net.resource(1e9 + i as f64 * 1e8)).collect();
            for f in 0..20u32 {
                let uses: Vec<(ResourceId, f64)> = (0..3).map(|k| (r[((f + k) % 5) as usize], 1.0)).collect();
                net.start(
                    Time::from_ns(f as u64 * 37),
                    1e5 * (1 + f % 7) as f64,
                    Time::from_ns(300),
                    &uses,
                    None,
                );
            }
            ends(&mut net)
        };
        assert_eq!(run(), run());
    }
}
