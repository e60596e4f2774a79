//! Choosing the chips of an op: the whole cluster, `n` chips forming a ring or a line (on a
//! mesh, a row or a column first), or chips named in order.

use meshsim_topology::{ChipIdx, Cluster};

use crate::op::{OpError, Topology};

/// Node expansions allowed to the cycle search.
const BUDGET: usize = 100_000;

/// The chips an op runs on, in ring or line order.
pub fn select(
    cluster: &Cluster,
    topology: Topology,
    count: Option<usize>,
    ids: Option<&[u64]>,
) -> Result<Vec<ChipIdx>, OpError> {
    if let Some(ids) = ids {
        // A chip named twice is refused by the communicator made from these.
        return ids
            .iter()
            .map(|&id| {
                cluster
                    .chip_by_id(id)
                    .ok_or_else(|| OpError(format!("chip {id} is not in cluster '{}'", cluster.origin())))
            })
            .collect();
    }
    let n = cluster.chips().len();
    let want = count.unwrap_or(n);
    if n < 2 {
        return Err(OpError(format!(
            "cluster '{}' has one chip: a collective runs on 2 or more",
            cluster.origin()
        )));
    }
    if want < 2 || want > n {
        return Err(OpError(format!(
            "{want} chips asked for (--chips, count): cluster '{}' has {n}, and a communicator takes 2 to {n}",
            cluster.origin()
        )));
    }
    let usable = |a: ChipIdx, b: ChipIdx| !cluster.usable_links_between(a, b).is_empty();
    let closes = |c: &[ChipIdx]| usable(c[c.len() - 1], c[0]);
    let line_ok = |c: &[ChipIdx]| c.windows(2).all(|w| usable(w[0], w[1]));
    // Rows and columns of a mesh or torus first, then the ring (or a stretch of it), then a search;
    // a line may also be the start of a longer row, column or chain.
    let lines: Vec<Vec<ChipIdx>> = cluster.lines().into_iter().map(|l| l.chips).collect();
    let rows: Vec<Vec<ChipIdx>> = lines.iter().filter(|c| c.len() == want).cloned().collect();
    let ring = cluster.ring().map(|r| r.chips);
    let found = match topology {
        Topology::Line => rows
            .into_iter()
            .find(|c| line_ok(c))
            .or_else(|| ring.as_ref().map(|r| r[..want].to_vec()).filter(|c| line_ok(c)))
            .or_else(|| {
                lines.iter().filter(|c| c.len() > want).map(|c| c[..want].to_vec()).find(|c| line_ok(c))
            })
            .or_else(|| walk(cluster, want, false)),
        Topology::Ring => rows
            .into_iter()
            .find(|c| line_ok(c) && (want == 2 || closes(c)))
            .or_else(|| ring.filter(|r| r.len() == want))
            .or_else(|| cycle(cluster, want)),
    };
    found.ok_or_else(|| {
        let what = if topology == Topology::Ring { "ring" } else { "line" };
        OpError(format!("cluster '{}' has no {what} of {want} chips over usable links", cluster.origin()))
    })
}

/// A simple cycle of `n` chips over usable links, by bounded depth-first search.
fn cycle(cluster: &Cluster, n: usize) -> Option<Vec<ChipIdx>> {
    if n == 2 {
        return cluster
            .links()
            .iter()
            .find(|l| !l.reserved && l.a.chip != l.b.chip)
            .map(|l| vec![l.a.chip, l.b.chip]);
    }
    walk(cluster, n, true)
}

/// A simple path of `n` chips over usable links — closed into a cycle if `closed` — by
/// bounded depth-first search from each chip in turn (a cycle from its lowest chip).
fn walk(cluster: &Cluster, n: usize, closed: bool) -> Option<Vec<ChipIdx>> {
    let mut budget = BUDGET;
    for start in 0..cluster.chips().len() {
        let mut path = vec![ChipIdx(start as u32)];
        if extend(cluster, (n, closed), &mut path, &mut budget) {
            return Some(path);
        }
    }
    None
}

fn extend(
    cluster: &Cluster,
    (n, closed): (usize, bool),
    path: &mut Vec<ChipIdx>,
    budget: &mut usize,
) -> bool {
    let usable = |a: ChipIdx, b: ChipIdx| !cluster.usable_links_between(a, b).is_empty();
    let last = *path.last().expect("non-empty");
    if path.len() == n {
        return !closed || usable(last, path[0]);
    }
    for &nb in cluster.neighbours(last) {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        if (!closed || nb > path[0]) && !path.contains(&nb) && usable(last, nb) {
            path.push(nb);
            if extend(cluster, (n, closed), path, budget) {
                return true;
            }
            path.pop();
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshsim_topology::builtin;

    fn ids(c: &Cluster, v: &[ChipIdx]) -> Vec<u64> {
        v.iter().map(|&x| c.chip(x).id).collect()
    }

    #[test]
    fn whole_clusters_rows_columns_and_named_chips() {
        let t = builtin::cluster("t3000").unwrap();
        assert_eq!(ids(&t, &select(&t, Topology::Ring, None, None).unwrap()), [0, 2, 6, 7, 3, 1, 5, 4]);
        assert_eq!(ids(&t, &select(&t, Topology::Line, Some(4), None).unwrap()), [4, 0, 2, 6]);
        assert_eq!(ids(&t, &select(&t, Topology::Ring, Some(4), None).unwrap()), [0, 1, 3, 2]);
        let g = builtin::cluster("galaxy_torus").unwrap();
        assert_eq!(select(&g, Topology::Ring, Some(8), None).unwrap().len(), 8);
        assert_eq!(ids(&t, &select(&t, Topology::Ring, None, Some(&[3, 7, 6, 2])).unwrap()), [3, 7, 6, 2]);
        assert!(select(&t, Topology::Ring, None, Some(&[3, 9])).is_err());
        let line = builtin::cluster("line:35").unwrap();
        assert_eq!(
            select(&line, Topology::Line, Some(5), None).unwrap(),
            (0..5).map(ChipIdx).collect::<Vec<_>>()
        );
        // A mesh of odd sides closes no ring through every chip, but a line snakes through them.
        let odd = builtin::cluster("mesh:5x7").unwrap();
        assert!(select(&odd, Topology::Ring, None, None).is_err());
        let snake = select(&odd, Topology::Line, None, None).unwrap();
        assert_eq!(snake.len(), 35);
        assert!(snake.windows(2).all(|w| !odd.usable_links_between(w[0], w[1]).is_empty()));
        let err = select(&t, Topology::Ring, Some(3), None).unwrap_err().to_string();
        assert_eq!(err, "cluster 't3000' has no ring of 3 chips over usable links");
    }
}
