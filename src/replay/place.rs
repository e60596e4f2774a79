//! Where a report's collectives run: the machine the file implies (its architecture and chip
//! count) or the one named, and for each instance the chip groups (rings or lines) it ran on —
//! from `cluster_axis` and the machine's own axes, or from a mesh the user gives (`--mesh RxC
//! --chip-ids ...`). The report names physical chip ids (`DEVICE ID`) but no mesh coordinates
//! (`shared/ops-report.md`, "Rows and grouping"), so a group is found as the axis line whose chips
//! are the instance's.

use std::collections::BTreeSet;

use meshsim_ccl::comm::Communicator;
use meshsim_topology::Cluster;

use super::ccl::CclOp;

/// The machine each architecture's files imply, by chip count.
const IMPLIED: [(&str, usize, &str); 8] = [
    ("wormhole_b0", 2, "n300"),
    ("wormhole_b0", 8, "t3000"),
    ("wormhole_b0", 32, "galaxy"),
    ("blackhole", 1, "p150"),
    ("blackhole", 2, "p300"),
    ("blackhole", 4, "bh_quietbox"),
    ("blackhole", 8, "bh_loudbox"),
    ("blackhole", 32, "bh_galaxy"),
];

/// The built-in machine a report of `arch` with `chips` chips ran on.
pub(crate) fn implied(arch: Option<&str>, chips: usize) -> Result<&'static str, String> {
    let Some(arch) = arch else {
        return Err("the report names no architecture (a 2025 layout, without DEVICE ARCH): name the machine with --cluster".into());
    };
    let arch = arch.trim().to_ascii_lowercase();
    IMPLIED.iter().find(|&&(a, n, _)| a == arch && n == chips).map(|x| x.2).ok_or_else(|| {
        format!(
            "no built-in {arch} machine has {chips} chips (the report's chip count): name one with --cluster (a built-in, a generated mesh:RxC or a cluster description file)"
        )
    })
}

/// A mesh the user says the file's chips sit in: R x C chip ids, row-major.
#[derive(Clone, Debug)]
pub(crate) struct Mesh {
    pub cols: usize,
    pub ids: Vec<u64>,
}

impl Mesh {
    /// `--mesh RxC` with `--chip-ids`.
    pub(crate) fn parse(mesh: &str, ids: Vec<u64>) -> Result<Mesh, String> {
        let bad = || format!("--mesh '{mesh}' is not RxC (such as 2x4)");
        let (r, c) = mesh.split_once(['x', 'X']).ok_or_else(bad)?;
        let (rows, cols): (usize, usize) =
            (r.trim().parse().map_err(|_| bad())?, c.trim().parse().map_err(|_| bad())?);
        if rows == 0 || cols == 0 || rows * cols != ids.len() {
            return Err(format!(
                "--mesh {rows}x{cols} needs {} --chip-ids (row-major), got {}",
                rows * cols,
                ids.len()
            ));
        }
        Ok(Mesh { cols, ids })
    }
}

/// Where the ops run: the cluster, and the grid its groups are read from.
pub(crate) struct Machine {
    pub cluster: Cluster,
    /// The cluster as given (a name or a path).
    pub spec: String,
    /// Rows of chip ids (the user's mesh, else the cluster's own mesh, if any).
    grid: Option<Vec<Vec<u64>>>,
}

impl Machine {
    pub(crate) fn new(spec: &str, mesh: Option<Mesh>) -> Result<Machine, String> {
        let cluster = meshsim_topology::builtin::cluster(spec).map_err(|e| e.to_string())?;
        let grid = match mesh {
            Some(m) => {
                if let Some(id) = m.ids.iter().find(|&&id| !cluster.chips().iter().any(|c| c.id == id)) {
                    return Err(format!("--chip-ids: chip {id} is not a chip of {spec}"));
                }
                Some(m.ids.chunks(m.cols).map(<[u64]>::to_vec).collect())
            }
            None => cluster.grid().map(|g| {
                (0..g.rows).map(|r| (0..g.cols).map(|c| cluster.chip(g.chip(r, c)).id).collect()).collect()
            }),
        };
        Ok(Machine { cluster, spec: spec.to_owned(), grid })
    }

    /// The chip id at row `r`, column `c` of the grid (ttnn's `MeshCoordinate`), if any.
    pub(crate) fn chip_at(&self, r: usize, c: usize) -> Option<u64> {
        self.grid.as_ref()?.get(r)?.get(c).copied()
    }

    /// The fewest usable links (reserved ones excluded) over the hops of `groups` as rings or
    /// lines of `topology`, if they form them.
    pub(crate) fn usable_links(
        &self,
        groups: &[Vec<u64>],
        topology: Option<meshsim_ccl::op::Topology>,
    ) -> Option<usize> {
        let mut fewest = None;
        for g in groups {
            let comm = Communicator::choose_default(&self.cluster, topology, None, Some(g)).ok()?;
            let chips = comm.chips();
            let n = chips.len();
            let hops = if comm.topology() == meshsim_ccl::op::Topology::Ring && n > 2 { n } else { n - 1 };
            for h in 0..hops {
                let links = self.cluster.usable_links_between(chips[h], chips[(h + 1) % n]).len();
                fewest = Some(fewest.map_or(links, |f: usize| f.min(links)));
            }
        }
        fewest
    }

    /// The grid's lines along `axis`: columns (0) or rows (1).
    fn axis_groups(&self, axis: usize) -> Vec<Vec<u64>> {
        let Some(g) = &self.grid else { return Vec::new() };
        match axis {
            0 => (0..g[0].len()).map(|c| g.iter().map(|row| row[c]).collect()).collect(),
            _ => g.clone(),
        }
    }

    /// The chip groups instance `op` ran on, given the chips its rows name. First the lines of
    /// an axis of the grid that hold those chips and no others (`cluster_axis` first, then the other:
    /// ttnn's mesh may be the transpose of the machine's); else, on another machine or one that
    /// numbers its chips otherwise, as many whole lines of the group size as the report has
    /// groups, by position; else one group in the machine's own ring or line order. Returns the
    /// groups and what the mapping assumed.
    pub(crate) fn groups(
        &self,
        op: &CclOp,
        devices: &BTreeSet<u64>,
    ) -> Result<(Vec<Vec<u64>>, Option<String>), String> {
        let axes: Vec<usize> = match op.cluster_axis {
            Some(a) => vec![a.min(1), 1 - a.min(1)],
            None => vec![1, 0],
        };
        let moved = |ax: usize| {
            op.cluster_axis
                .filter(|&a| a != ax)
                .map(|a| format!("cluster_axis {a} runs on the machine's axis {ax} (lines of {})", op.n))
        };
        // The lines holding the report's chips: every chip on one, every line holding one (a
        // chip whose row was left out does not lose its line).
        let lines_needed = devices.len().div_ceil(op.n.max(1));
        for &ax in &axes {
            let keep: Vec<Vec<u64>> = self
                .axis_groups(ax)
                .into_iter()
                .filter(|g| g.iter().any(|id| devices.contains(id)))
                .collect();
            let covered: BTreeSet<u64> = keep.iter().flatten().copied().collect();
            if !keep.is_empty()
                && keep.iter().all(|g| g.len() == op.n)
                && keep.len() == lines_needed
                && covered.is_superset(devices)
            {
                return Ok((keep, moved(ax)));
            }
        }
        let wanted = lines_needed.max(1);
        if wanted > 1 {
            for &ax in &axes {
                let lines = self.axis_groups(ax);
                if lines.len() == wanted && lines.iter().all(|g| g.len() == op.n) {
                    let note = format!(
                        "the report's {wanted} groups of {} placed on the machine's axis {ax} by position",
                        op.n
                    );
                    return Ok((lines, Some(note)));
                }
            }
        }
        let known = devices.iter().all(|&id| self.cluster.chips().iter().any(|c| c.id == id));
        if wanted == 1 {
            let ids: Vec<u64> = devices.iter().copied().collect();
            let named = (known && ids.len() == op.n && ids.len() < self.cluster.chips().len())
                .then(|| Communicator::choose_default(&self.cluster, op.topology, None, Some(&ids)).ok())
                .flatten();
            let comm = named.map(Ok).unwrap_or_else(|| {
                Communicator::choose_default(&self.cluster, op.topology, Some(op.n), None)
            });
            if let Ok(c) = comm {
                let group: Vec<u64> = c.chips().iter().map(|&x| self.cluster.chip(x).id).collect();
                let by_id = known && group.iter().all(|id| devices.contains(id));
                let note =
                    (!by_id).then(|| format!("the report's chips run as {} chips the machine picks", op.n));
                return Ok((vec![group], note));
            }
        }
        Err(format!(
            "its {} chips ({}) do not form groups of {} on {}: say how the report's chips sit on the machine with --mesh RxC --chip-ids",
            devices.len(),
            devices.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
            op.n,
            self.spec
        ))
    }
}
