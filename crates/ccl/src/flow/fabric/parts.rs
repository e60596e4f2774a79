//! The session's independent parts, which the flow model solves apart.

use std::collections::BTreeMap;

use meshsim_topology::ChipIdx;

use crate::transport::LowerCx;

/// The session's independent parts: its phases grouped so that no two groups share a flow
/// resource (their communicators hop between no common pair of chips; with NoC ports, share
/// no chip) or a dependency, each group's phases in order, the groups in order of their first
/// phase. The ops of a `--axis` run on every row of a mesh are one part each; so are an
/// all-reduce on every row and one on every column running at once, unless the NoC ports are
/// resources (`noc`: rows and columns cross on every chip, on its NoCs).
pub(super) fn parts(s: &LowerCx, noc: bool) -> Vec<Vec<usize>> {
    let n = s.phases.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let join = |parent: &mut Vec<usize>, a: usize, b: usize| {
        let (ra, rb) = (root(parent, a), root(parent, b));
        parent[ra.max(rb)] = ra.min(rb);
    };
    // Every flow resource is a neighbouring pair's (a link direction, a router's ERISC, tx DMA,
    // mux, slots), a chip's (its NoC ports, when they are resources) or a phase's own
    // (workers, reducers): phases whose communicators hop between no common pair of chips (a
    // ring's closing hop counts even where it runs as a line) share none; with NoC ports,
    // phases whose communicators share no chip.
    let mut by_key: BTreeMap<(ChipIdx, ChipIdx), usize> = BTreeMap::new();
    for (pi, p) in s.phases.iter().enumerate() {
        for &d in &p.deps {
            join(&mut parent, pi, d);
        }
        let chips = s.ops[p.op].comm.chips();
        for (i, &a) in chips.iter().enumerate() {
            let b = if noc { a } else { chips[(i + 1) % chips.len()] };
            match by_key.get(&(a.min(b), a.max(b))) {
                Some(&other) => join(&mut parent, pi, other),
                None => {
                    by_key.insert((a.min(b), a.max(b)), pi);
                }
            }
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for pi in 0..n {
        let r = root(&mut parent, pi);
        groups.entry(r).or_default().push(pi);
    }
    groups.into_values().collect()
}
