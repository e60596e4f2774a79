//! The credit loops' queueing on the flow model: each loop of a sender channel's slots, a
//! receiver's slots or its transaction ids is a closed network whose packets queue at the
//! hop's link, tx DMA and ERISCs; its throughput, by mean value analysis, raises what a packet
//! costs the loop where the network is slower than the loop's own bound.

use std::rc::Rc;

use rustc_hash::FxHashMap as HashMap;

use super::{Network, ResourceId, Uses};

/// A credit loop's network without its NoC routes as stations (their demand counted as
/// latency instead), for a step that times those routes itself ([`Network::relays_in_step`]).
#[derive(Clone)]
pub(super) struct Bare {
    /// Its period so.
    pub period: f64,
    /// Its credits.
    pub customers: usize,
    /// Its router stations: (demand per visit, the other traffic's per round), as
    /// [`crate::flow::mva::period`] takes them.
    pub stations: Vec<(f64, f64)>,
    /// Its latency outside the stations, ps.
    pub think: f64,
}

/// A credit loop: its credits, the resources its packets queue at, and the NoC routes on its
/// way (each the ports one of its packets' NoC transfers holds: they hold them at once, a
/// worm, so a route queues as one station, its busiest port).
pub(super) struct Loop {
    credits: f64,
    stations: Vec<ResourceId>,
    routes: Vec<super::noc::Ports>,
}

impl Network<'_, '_> {
    /// Records `r` as a credit loop of `credits` credits whose packets queue at `stations`
    /// (keeping the NoC routes already on its way).
    pub(super) fn set_loop(&mut self, r: ResourceId, (credits, stations): (f64, Vec<ResourceId>)) {
        let i = r.0 as usize;
        if self.loops.len() <= i {
            self.loops.resize_with(i + 1, || None);
        }
        let routes = self.loops[i].take().map_or_else(Vec::new, |l| l.routes);
        self.loops[i] = Some(Loop { credits, stations, routes });
    }

    /// Puts a NoC route (its ports) on loop `r`'s way, once.
    pub(super) fn loop_route(&mut self, r: ResourceId, route: super::noc::Ports) {
        if let Some(Some(l)) = self.loops.get_mut(r.0 as usize)
            && !route.is_empty()
            && !l.routes.iter().any(|x| x[..] == route[..])
        {
            l.routes.push(route);
        }
    }

    /// Charges each credit loop its queueing. A loop of N credits is a closed network: N
    /// packets go round it, each queueing at the resources on its way (its hop's link, tx DMA
    /// and ERISCs, and for a forwarding channel the previous hop's receiver that fills it, each
    /// with its load from every flow of the phase the loop's packets meet) and
    /// spending the rest of the loop's time in latencies. Its throughput is exact mean value
    /// analysis of that network (Reiser and Lavenberg's recursion over 1..N packets), which
    /// sits below both the loop's own bound (N over the loop's time) and the busiest station's
    /// where the two meet: the packets of a loop wait for each other at a busy router. The loop
    /// resource then costs a packet one over that throughput, where that is dearer.
    pub(super) fn queue_in_loops(&mut self) {
        let resources = self.net.resource_count();
        // Per phase, each resource's work (cost x packets) over its units, and the packets
        // that go round each loop; zeroed again after each phase.
        let mut work = vec![0.0f64; resources];
        let mut packets = vec![0.0f64; resources];
        let mut touched: Vec<usize> = Vec::new();
        // Symmetric sessions meet the same loop many times: solve each network once.
        let mut solved: HashMap<Vec<u64>, f64> = HashMap::default();
        // The bare networks of the loops a relay step will ask for, and no others.
        let mut sans_noc: HashMap<ResourceId, Option<Bare>> = self.relay_loops().map(|r| (r, None)).collect();
        for pi in 0..self.phases.len() {
            let units = std::mem::take(&mut self.phases[pi].units);
            for &u in &units {
                let u = &self.units[u];
                for &(r, c) in u.uses.iter() {
                    let r = r.0 as usize;
                    if work[r] == 0.0 && packets[r] == 0.0 {
                        touched.push(r);
                    }
                    work[r] += c * u.packets;
                    if self.is_loop(r) {
                        packets[r] += u.packets;
                    }
                }
            }
            // Units sharing their uses (a kernel's stripes of one hop) are charged alike: the
            // charge is a function of the phase and the uses. The old uses are kept so that
            // no new allocation takes their address.
            let mut charged: HashMap<*const (ResourceId, f64), (Uses, Uses)> = HashMap::default();
            for &u in &units {
                let key = self.units[u].uses.as_ptr();
                let uses = match charged.get(&key) {
                    Some((_, new)) => new.clone(),
                    None => {
                        let old = self.units[u].uses.clone();
                        let new = self.charge(&old, (&work, &packets), &mut solved, &mut sans_noc);
                        charged.insert(key, (old, new.clone()));
                        new
                    }
                };
                self.units[u].uses = uses;
            }
            self.phases[pi].units = units;
            for r in touched.drain(..) {
                work[r] = 0.0;
                packets[r] = 0.0;
            }
        }
        self.loop_sans_noc = sans_noc.into_iter().filter_map(|(r, b)| Some((r, b?))).collect();
    }

    /// Whether resource `r` is a credit loop.
    fn is_loop(&self, r: usize) -> bool {
        self.loops.get(r).is_some_and(Option::is_some)
    }

    /// `uses` with each credit loop's demand raised to its queueing period ([`Network::
    /// queue_in_loops`]), given the phase's `work` at each resource and `packets` round each
    /// loop.
    fn charge(
        &self,
        uses: &Uses,
        (work, packets): (&[f64], &[f64]),
        solved: &mut HashMap<Vec<u64>, f64>,
        sans_noc: &mut HashMap<ResourceId, Option<Bare>>,
    ) -> Uses {
        let mut out: Vec<(ResourceId, f64)> = uses.to_vec();
        for (i, &(r, c)) in uses.iter().enumerate() {
            let Some(Some(Loop { credits: n, stations, routes })) = self.loops.get(r.0 as usize) else {
                continue;
            };
            let through = packets[r.0 as usize];
            // Each NoC route queues at its busiest port (the first such on a tie).
            let busiest = |route: &Rc<[ResourceId]>| {
                route.iter().copied().fold(None, |best: Option<(ResourceId, f64)>, p| {
                    let w = work.get(p.0 as usize).copied().unwrap_or(0.0);
                    if best.is_some_and(|b| b.1 >= w) { best } else { Some((p, w)) }
                })
            };
            // A loop several senders share (their workers' writes into one channel, a
            // receiver's from several) has a route per sender: a packet takes its own, the one
            // whose first port (its source's injection port) it uses.
            let own = |x: &&Rc<[ResourceId]>| x.first().is_some_and(|p| uses.iter().any(|u| u.0 == *p));
            let ports = routes.iter().filter(own).filter_map(|x| busiest(x).map(|b| b.0));
            // Per station: this packet's own demand, and the rest of the phase's work there
            // per packet of the loop (the other flows it meets).
            let net: Vec<(f64, f64)> = stations
                .iter()
                .copied()
                .chain(ports)
                .collect::<Vec<_>>()
                .iter()
                .map(|&st| {
                    let mine = uses.iter().find(|x| x.0 == st).map_or(0.0, |x| x.1);
                    let all = work.get(st.0 as usize).copied().unwrap_or(0.0) / through;
                    (mine, (all - mine).max(0.0))
                })
                .collect();
            let n = *n;
            let queued: f64 = net.iter().map(|d| d.0).sum();
            let think = (c * n - queued).max(0.0);
            let customers = n.round().max(1.0) as usize;
            let mut key = vec![customers as u64, think.to_bits()];
            key.extend(net.iter().flat_map(|d| [d.0.to_bits(), d.1.to_bits()]));
            let period =
                *solved.entry(key).or_insert_with(|| crate::flow::mva::period(customers, &net, think));
            out[i].1 = c.max(period);
            if let Some(kept) = sans_noc.get_mut(&r) {
                // The same loop with its NoC routes as plain latency; the dearest the loop's
                // units give is kept.
                let (routers, noc) = net.split_at(stations.len());
                let think = think + noc.iter().map(|d| d.0).sum::<f64>();
                let mut key = vec![u64::MAX, customers as u64, think.to_bits()];
                key.extend(routers.iter().flat_map(|d| [d.0.to_bits(), d.1.to_bits()]));
                let bare =
                    *solved.entry(key).or_insert_with(|| crate::flow::mva::period(customers, routers, think));
                let period = c.max(bare);
                if kept.as_ref().is_none_or(|k| period >= k.period) {
                    *kept = Some(Bare { period, customers, stations: routers.to_vec(), think });
                }
            }
        }
        out.into()
    }
}
