//! Communicators (oneCCL's shape): an ordered set of ranks mapped to chips, connected as a ring
//! or a line over usable links. Made from the whole cluster, a chip list, a mesh axis, a
//! strided subset of another communicator (LPF), or by splitting one by colour and key.

use meshsim_topology::{ChipIdx, Cluster};

use crate::op::{OpError, Topology};

/// Ranks `0..size()` mapped to chips, as a ring or a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Communicator {
    chips: Vec<ChipIdx>,
    topology: Topology,
}

impl Communicator {
    /// A communicator over `chips` in rank order. Every hop of the ring or line must have a
    /// usable (not reserved) link; a chip may appear only once.
    pub fn new(cluster: &Cluster, chips: Vec<ChipIdx>, topology: Topology) -> Result<Communicator, OpError> {
        let id = |c: ChipIdx| cluster.chip(c).id;
        if chips.is_empty() {
            return Err(OpError("a communicator needs at least one chip".into()));
        }
        let mut seen = chips.clone();
        seen.sort();
        if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
            return Err(OpError(format!("a communicator names chip {} twice", id(w[0]))));
        }
        let n = chips.len();
        let hops = match topology {
            Topology::Ring if n > 1 => n,
            _ => n - 1,
        };
        for h in 0..hops {
            let (a, b) = (chips[h], chips[(h + 1) % n]);
            if cluster.usable_links_between(a, b).is_empty() {
                let ids: Vec<String> = chips.iter().map(|&c| id(c).to_string()).collect();
                return Err(OpError(format!(
                    "chips [{}] cannot form a {topology}: chips {} and {} are not linked (reserved links excluded)",
                    ids.join(", "),
                    id(a),
                    id(b)
                )));
            }
        }
        Ok(Communicator { chips, topology })
    }

    /// Every chip of the cluster, as a ring (through every chip) or a line (a row, column or
    /// chain of the whole cluster), or `count` of them (a mesh row or column first).
    pub fn world(
        cluster: &Cluster,
        topology: Topology,
        count: Option<usize>,
    ) -> Result<Communicator, OpError> {
        Communicator::choose(cluster, topology, count, None)
    }

    /// The chips with these file ids, in this order.
    pub fn from_ids(cluster: &Cluster, ids: &[u64], topology: Topology) -> Result<Communicator, OpError> {
        Communicator::choose(cluster, topology, None, Some(ids))
    }

    /// The chips named by `ids` in order, or else `count` chips (all by default) forming the
    /// topology, as [`crate::group::select`] picks them: what `--chip-ids` and `--chips` ask.
    pub fn choose(
        cluster: &Cluster,
        topology: Topology,
        count: Option<usize>,
        ids: Option<&[u64]>,
    ) -> Result<Communicator, OpError> {
        Communicator::new(cluster, crate::group::select(cluster, topology, count, ids)?, topology)
    }

    /// As [`Communicator::choose`], on the topology the caller gave or, if none, the one the
    /// chips allow: a ring where they close one, else a line — on a machine without a ring, or
    /// named chips that do not close, as on any line of a bigger machine.
    pub fn choose_default(
        cluster: &Cluster,
        topology: Option<Topology>,
        count: Option<usize>,
        ids: Option<&[u64]>,
    ) -> Result<Communicator, OpError> {
        match topology {
            Some(t) => Communicator::choose(cluster, t, count, ids),
            None => Communicator::choose(cluster, Topology::Ring, count, ids)
                .or_else(|ring| Communicator::choose(cluster, Topology::Line, count, ids).map_err(|_| ring)),
        }
    }

    /// One communicator per column (`axis` 0: groups of R chips of an R x C mesh) or per row
    /// (`axis` 1: groups of C chips), as ttnn's `cluster_axis`. `topology` defaults to a ring
    /// on a torus and a line on a mesh.
    pub fn axis(
        cluster: &Cluster,
        axis: usize,
        topology: Option<Topology>,
    ) -> Result<Vec<Communicator>, OpError> {
        let grid = cluster.grid().ok_or_else(|| {
            OpError(format!(
                "cluster '{}' is not a mesh or torus ({}), so it has no axis {axis}",
                cluster.origin(),
                cluster.shape()
            ))
        })?;
        let topology = topology.unwrap_or(if grid.torus { Topology::Ring } else { Topology::Line });
        let groups: Vec<Vec<ChipIdx>> = match axis {
            0 => (0..grid.cols).map(|c| (0..grid.rows).map(|r| grid.chip(r, c)).collect()).collect(),
            1 => (0..grid.rows).map(|r| (0..grid.cols).map(|c| grid.chip(r, c)).collect()).collect(),
            _ => return Err(OpError(format!("axis {axis} is not 0 (columns) or 1 (rows)"))),
        };
        groups.into_iter().map(|g| Communicator::new(cluster, g, topology)).collect()
    }

    /// Ranks `start, start + stride, ...` of this communicator (`count` of them, or as many as
    /// there are), as a new communicator with `topology` (LPF's strided subsets).
    pub fn strided(
        &self,
        cluster: &Cluster,
        start: usize,
        stride: usize,
        count: Option<usize>,
        topology: Topology,
    ) -> Result<Communicator, OpError> {
        if stride == 0 || start >= self.size() {
            return Err(OpError(format!(
                "a strided subset needs stride >= 1 and start < {} (got start {start}, stride {stride})",
                self.size()
            )));
        }
        let chips: Vec<ChipIdx> = self.chips.iter().copied().skip(start).step_by(stride).collect();
        let count = count.unwrap_or(chips.len());
        if count == 0 || count > chips.len() {
            return Err(OpError(format!(
                "a strided subset of {count} ranks does not fit in {} ranks",
                chips.len()
            )));
        }
        Communicator::new(cluster, chips[..count].to_vec(), topology)
    }

    /// oneCCL's `split(color, key)`: ranks with the same colour form a new communicator,
    /// ordered by `(key, rank)`; ranks whose colour is `None` join none. One communicator per
    /// colour, in colour order, each with this communicator's topology.
    pub fn split(
        &self,
        cluster: &Cluster,
        color_key: impl Fn(usize) -> Option<(u32, u32)>,
    ) -> Result<Vec<Communicator>, OpError> {
        let mut by: std::collections::BTreeMap<u32, Vec<(u32, usize)>> = Default::default();
        for r in 0..self.size() {
            if let Some((color, key)) = color_key(r) {
                by.entry(color).or_default().push((key, r));
            }
        }
        by.into_values()
            .map(|mut v| {
                v.sort();
                Communicator::new(cluster, v.into_iter().map(|(_, r)| self.chips[r]).collect(), self.topology)
            })
            .collect()
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.chips.len()
    }

    /// The rank of `chip`, if it is in this communicator.
    pub fn rank(&self, chip: ChipIdx) -> Option<usize> {
        self.chips.iter().position(|&c| c == chip)
    }

    /// The chip of rank `r`.
    pub fn chip(&self, r: usize) -> ChipIdx {
        self.chips[r]
    }

    /// The chips in rank order.
    pub fn chips(&self) -> &[ChipIdx] {
        &self.chips
    }

    /// Ring or line.
    pub fn topology(&self) -> Topology {
        self.topology
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshsim_topology::builtin;

    fn ids(c: &Cluster, comm: &Communicator) -> Vec<u64> {
        comm.chips().iter().map(|&x| c.chip(x).id).collect()
    }

    #[test]
    fn axes_give_rows_and_columns() {
        let g = builtin::cluster("galaxy").unwrap();
        let rows = Communicator::axis(&g, 1, None).unwrap();
        let cols = Communicator::axis(&g, 0, None).unwrap();
        assert_eq!((rows.len(), rows[0].size(), cols.len(), cols[0].size()), (4, 8, 8, 4));
        assert_eq!(rows[0].topology(), Topology::Line);
        let t = builtin::cluster("galaxy_torus").unwrap();
        assert_eq!(Communicator::axis(&t, 1, None).unwrap()[0].topology(), Topology::Ring);
        let err = Communicator::axis(&g, 1, Some(Topology::Ring)).unwrap_err().to_string();
        assert!(err.contains("cannot form a ring"), "{err}");
        assert!(Communicator::axis(&g, 2, None).is_err());
        let n300 = builtin::cluster("n300").unwrap();
        assert!(Communicator::axis(&n300, 0, None).unwrap_err().0.contains("not a mesh or torus"));
    }

    #[test]
    fn ranks_strides_and_splits() {
        let t = builtin::cluster("t3000").unwrap();
        let world = Communicator::world(&t, Topology::Ring, None).unwrap();
        assert_eq!(ids(&t, &world), [0, 2, 6, 7, 3, 1, 5, 4]);
        assert_eq!(world.rank(world.chip(5)), Some(5));
        // Even ranks of the ring: chips 0, 6, 3, 5 are not all neighbours, so no line forms.
        assert!(world.strided(&t, 0, 2, None, Topology::Line).is_err());
        let first = world.strided(&t, 0, 1, Some(4), Topology::Line).unwrap();
        assert_eq!(ids(&t, &first), [0, 2, 6, 7]);
        // Split into the two halves of the ring, the second reversed by key.
        let line = Communicator::new(&t, world.chips().to_vec(), Topology::Line).unwrap();
        let halves =
            line.split(&t, |r| Some(((r / 4) as u32, if r < 4 { r } else { 7 - r } as u32))).unwrap();
        assert_eq!(ids(&t, &halves[0]), [0, 2, 6, 7]);
        assert_eq!(ids(&t, &halves[1]), [4, 5, 1, 3]);
        assert!(Communicator::from_ids(&t, &[0, 0], Topology::Line).is_err());
    }
}
