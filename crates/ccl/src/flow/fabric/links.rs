//! The flow model's link report: what its flows put on each link direction, summed.

use meshsim_engine::Time;
use meshsim_topology::ChipIdx;
use rustc_hash::FxHashMap as HashMap;

use super::{Key, Network, ResourceId, ps};

/// One link direction's use in a flow run: the chips and plane (`Key::Link`), what crossed
/// it, how long its wire was busy, when its first packet landed and its last flow ended, and
/// the ops whose flows crossed it.
pub(crate) struct FlowLink {
    pub from: ChipIdx,
    pub to: ChipIdx,
    pub plane: usize,
    pub bytes: u64,
    pub packets: u64,
    pub busy: Time,
    pub first: Time,
    pub last: Time,
    pub ops: Vec<usize>,
}

/// A link direction's use as [`Network::links`] sums it.
struct LinkTally {
    bytes: f64,
    packets: f64,
    busy: f64,
    first: f64,
    last: f64,
    ops: Vec<usize>,
}

impl Default for LinkTally {
    fn default() -> LinkTally {
        LinkTally { bytes: 0.0, packets: 0.0, busy: 0.0, first: f64::INFINITY, last: 0.0, ops: Vec::new() }
    }
}

impl Network<'_, '_> {
    /// Every link direction the part's flows crossed, with what crossed it (each unit's
    /// packets times what one puts on the wire), its busy time (their demands on it), when
    /// the first packet landed and the last flow ended, and the ops whose flows crossed it.
    pub(super) fn links(&self) -> Vec<FlowLink> {
        // The units of a kernel's hop share their wire, and their demands on its links: sum
        // their packets per wire and op, then spread each sum over the wire's link directions.
        let mut groups: HashMap<(*const (ResourceId, u64, u64), usize), usize> = HashMap::default();
        let mut sums: Vec<(usize, usize, f64, f64, f64)> = Vec::new();
        for (i, u) in self.units.iter().enumerate() {
            if u.wire.is_empty() {
                continue;
            }
            let op = self.s.phases[u.phase as usize].op;
            let g = *groups.entry((u.wire.as_ptr(), op)).or_insert_with(|| {
                sums.push((i, op, 0.0, f64::INFINITY, 0.0));
                sums.len() - 1
            });
            let sum = &mut sums[g];
            sum.2 += u.packets;
            sum.3 = sum.3.min(u.began);
            sum.4 = sum.4.max(u.ended);
        }
        let mut tally: HashMap<ResourceId, LinkTally> = HashMap::default();
        for &(i, op, packets, first, last) in &sums {
            let u = &self.units[i];
            for (j, &(r, bytes, sent)) in u.wire.iter().enumerate() {
                let t = tally.entry(r).or_default();
                t.bytes += bytes as f64 * packets;
                t.packets += sent as f64 * packets;
                t.first = t.first.min(first);
                t.last = t.last.max(last);
                if !t.ops.contains(&op) {
                    t.ops.push(op);
                }
                // Its demand there (merged over a route that crosses it twice), once.
                if u.wire[..j].iter().all(|w| w.0 != r) {
                    t.busy += u.uses.iter().find(|x| x.0 == r).map_or(0.0, |x| x.1) * packets;
                }
            }
        }
        self.keys
            .iter()
            .filter_map(|(&key, r)| {
                let Key::Link(from, to, plane) = key else { return None };
                let mut t = tally.remove(r)?;
                t.ops.sort_unstable();
                Some(FlowLink {
                    from,
                    to,
                    plane,
                    bytes: t.bytes.round() as u64,
                    packets: t.packets.round() as u64,
                    busy: ps(t.busy),
                    first: ps(t.first),
                    last: ps(t.last),
                    ops: t.ops,
                })
            })
            .collect()
    }
}
