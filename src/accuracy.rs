//! The accuracy record: every calibration point of every set, on both models, against its
//! published measurement. `configs/accuracy.csv` holds the points; docs/guide.md's accuracy
//! table sums them up by architecture, benchmark or op and topology, and model.
//! `meshsim calibrate --update-accuracy` runs the sets and writes both. The tests below hold
//! the table to the file (re-rendered) and the file to the model (its cheap points
//! re-simulated), so neither can drift.

use std::path::{Path, PathBuf};

use meshsim_bench::calibration::CalibrationRow;
use meshsim_bench::{Setup, bh_calibration, calibration, ccl_calibration};
use meshsim_ccl::op::SimModel;

use crate::BadInput;

/// The record's points, under the checkout's root.
pub(crate) const CSV: &str = "configs/accuracy.csv";
/// The page whose table the record writes, under the checkout's root.
pub(crate) const GUIDE: &str = "docs/guide.md";
/// The line before the generated table.
const BEGIN: &str = "<!-- accuracy table: written by `meshsim calibrate --update-accuracy` from configs/accuracy.csv; do not edit -->";
/// The line after it.
const END: &str = "<!-- end of the accuracy table -->";
/// The largest sweep point the record runs: the 64 MiB to 1 GiB points take minutes each.
pub(crate) const MAX_SWEEP_BYTES: u64 = 16 << 20;

/// One calibration point in the record.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Point {
    /// The calibration set: link, fabric, ccl or blackhole (`meshsim calibrate`'s flags).
    set: String,
    /// The model that simulated it: packet or flow.
    model: String,
    /// The architecture of the machine it ran on.
    arch: String,
    /// What the table sums it under: a benchmark, or an op and topology.
    group: String,
    /// The point's `measure` as `calibrate` prints it.
    measure: String,
    size_bytes: u64,
    published: f64,
    simulated: f64,
    error_pct: f64,
    tolerance_pct: f64,
    ok: bool,
}

impl Point {
    fn new(set: &str, model: SimModel, row: CalibrationRow) -> Point {
        let (arch, group) = group(&row.measure);
        Point {
            set: set.to_owned(),
            model: model.to_string(),
            arch: arch.to_owned(),
            group,
            measure: row.measure,
            size_bytes: row.size_bytes,
            published: row.published,
            simulated: row.simulated,
            error_pct: row.error_pct,
            tolerance_pct: row.tolerance_pct,
            ok: row.ok,
        }
    }
}

/// The architecture a calibration row measures and the group the table sums it under:
/// `ccl all-gather line-2 us` is Wormhole's all-gather on a line of 2; `bh fabric
/// NeighborExchangeLinear unicast_write 2-link GB/s` Blackhole's fabric bandwidth, neighbour
/// exchange on 2 links.
fn group(measure: &str) -> (&'static str, String) {
    let (arch, m) = match measure.strip_prefix("bh ") {
        Some(rest) => ("Blackhole", rest),
        None => ("Wormhole", measure),
    };
    let words: Vec<&str> = m.split_whitespace().collect();
    let group = match words.as_slice() {
        ["ccl", op, topology, ..] => format!("{} {topology}", op.replace('_', "-")),
        ["fabric", "latency", ..] => "fabric one-hop latency".to_owned(),
        ["fabric", "ring", "latency", ..] => "fabric one-hop ring latency".to_owned(),
        ["fabric", test, _, links, "GB/s"] => format!("fabric bandwidth {test} {links}"),
        ["fabric", test, ..] => format!("fabric bandwidth {test}"),
        ["dram", "read", ..] => "one core's DRAM reads".to_owned(),
        ["bandwidth", ..] => "ERISC bandwidth, one direction".to_owned(),
        ["bidir", ..] => "ERISC bandwidth, both directions".to_owned(),
        ["to-worker", ..] => "ERISC bandwidth to a worker".to_owned(),
        ["round", "trip", ..] => "ERISC round trip".to_owned(),
        ["guide", "one-way", ..] => "ERISC one-way latency".to_owned(),
        ["ring", "ping", ..] => "ERISC ring ping".to_owned(),
        _ => m.to_owned(),
    };
    (arch, group)
}

/// Runs every set the record holds — link, fabric, CCL and Blackhole on the packet model, the
/// CCL and Blackhole sweeps on the flow model — with the built-in parameters, sweeps up to
/// [`MAX_SWEEP_BYTES`].
pub(crate) fn record() -> anyhow::Result<Vec<Point>> {
    let bench = |e: meshsim_bench::BenchError| crate::bench_error(e);
    let model = crate::scenario::ParamSource::default();
    let mut points = Vec::new();
    for sim in [SimModel::Packet, SimModel::Flow] {
        let setup = |name: &str| -> anyhow::Result<Setup> {
            let c = crate::load_cluster(name)?;
            let p = model.on(&c);
            Ok(Setup { model: sim, ..Setup::new(c, p) })
        };
        let (n300, galaxy, t3000) = (setup("n300")?, setup("galaxy")?, setup("t3000")?);
        let (quietbox, bh_galaxy) = (setup("bh_quietbox")?, setup("bh_galaxy")?);
        let mut add = |set: &str, rows: Vec<CalibrationRow>| {
            points.extend(rows.into_iter().map(|r| Point::new(set, sim, r)));
        };
        if sim == SimModel::Packet {
            add("link", calibration::run(&n300, &t3000).map_err(bench)?);
            add("fabric", calibration::run_fabric(&t3000, &galaxy).map_err(bench)?);
        }
        add("ccl", ccl_calibration::run_ccl((&n300, &t3000, &galaxy), MAX_SWEEP_BYTES).map_err(bench)?);
        add(
            "blackhole",
            bh_calibration::run_blackhole(&quietbox, &bh_galaxy, MAX_SWEEP_BYTES).map_err(bench)?,
        );
    }
    Ok(points)
}

/// The accuracy table: one row per architecture, group and model, in the record's order, with
/// its points, how many are within their tolerance, the mean |error| and the worst error.
pub(crate) fn render(points: &[Point]) -> String {
    let mut groups: Vec<(&str, &str, &str, Vec<&Point>)> = Vec::new();
    for arch in ["Wormhole", "Blackhole"] {
        for p in points.iter().filter(|p| p.arch == arch) {
            match groups.iter_mut().find(|g| (g.0, g.1, g.2) == (arch, p.group.as_str(), p.model.as_str())) {
                Some(g) => g.3.push(p),
                None => groups.push((arch, &p.group, &p.model, vec![p])),
            }
        }
    }
    let mut out = String::from(
        "| architecture | benchmark or op | model | points | within tolerance | mean \\|error\\| | worst |\n|---|---|---|---:|---:|---:|---:|\n",
    );
    for (arch, group, model, ps) in groups {
        let mean = ps.iter().map(|p| p.error_pct.abs()).sum::<f64>() / ps.len() as f64;
        let worst =
            ps.iter().map(|p| p.error_pct).fold(0.0, |w: f64, e| if e.abs() > w.abs() { e } else { w });
        let ok = ps.iter().filter(|p| p.ok).count();
        let mut tolerances: Vec<String> = ps.iter().map(|p| format!("{:.0}", p.tolerance_pct)).collect();
        tolerances.sort_by_key(|t| t.parse::<u32>().unwrap_or(0));
        tolerances.dedup();
        out += &format!(
            "| {arch} | {group} | {model} | {} | {ok} (±{} %) | {mean:.1} % | {worst:+.1} % |\n",
            ps.len(),
            tolerances.join("/")
        );
    }
    out
}

/// `guide` with its accuracy table replaced by `table`.
fn splice(guide: &str, table: &str) -> Result<String, String> {
    let missing = || format!("{GUIDE}: no accuracy table (the lines '{BEGIN}' and '{END}')");
    let start = guide.find(BEGIN).ok_or_else(missing)? + BEGIN.len();
    let end = guide[start..].find(END).ok_or_else(missing)? + start;
    Ok(format!("{}\n\n{table}\n{}", &guide[..start], &guide[end..]))
}

/// The checkout `meshsim calibrate --update-accuracy` writes into: the working directory or
/// the nearest parent that has both files.
fn checkout() -> anyhow::Result<PathBuf> {
    let cwd = std::env::current_dir()?;
    cwd.ancestors()
        .find(|d| d.join(CSV).is_file() && d.join(GUIDE).is_file())
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            BadInput(format!(
                "--update-accuracy writes {CSV} and {GUIDE} of a meshsim checkout: none in {} or its parents",
                cwd.display()
            ))
            .into()
        })
}

/// `meshsim calibrate --update-accuracy`: runs the record, writes the points and the guide's
/// table, and says what it wrote. The record is of the built-in model on both simulation
/// models: other parameters or a `--model` are refused.
pub(crate) fn update(given: &crate::cli::ParamsFile, sim: SimModel) -> anyhow::Result<()> {
    if !given.params.is_empty() || given.link_gbps.is_some() || sim != SimModel::Packet {
        return Err(BadInput(
            "calibrate --update-accuracy records the built-in model on both simulation models: it takes no --params, --link-gbps or --model".into(),
        )
        .into());
    }
    let root = checkout()?;
    let points = record()?;
    let mut csv = csv::Writer::from_writer(Vec::new());
    for p in &points {
        csv.serialize(p)?;
    }
    let csv = csv.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?;
    let guide = std::fs::read_to_string(root.join(GUIDE))?;
    let guide = splice(&guide, &render(&points)).map_err(BadInput)?;
    std::fs::write(root.join(CSV), csv)?;
    std::fs::write(root.join(GUIDE), guide)?;
    eprintln!(
        "meshsim: {} calibration points written to {} and their table to {}",
        points.len(),
        root.join(CSV).display(),
        root.join(GUIDE).display()
    );
    Ok(())
}

/// A mean |error| at or above this is large: the prediction is read as trends and
/// bottlenecks rather than times (docs/guide.md, "How accurate it is").
pub(crate) const LARGE_ERROR_PCT: f64 = 10.0;

/// The record's name of an architecture.
fn arch_name(arch: meshsim_topology::Arch) -> &'static str {
    if arch == meshsim_topology::Arch::Blackhole { "Blackhole" } else { "Wormhole" }
}

/// The record as built into meshsim: `configs/accuracy.csv` at compile time.
fn built_in() -> &'static [Point] {
    static RECORD: std::sync::OnceLock<Vec<Point>> = std::sync::OnceLock::new();
    RECORD.get_or_init(|| {
        csv::Reader::from_reader(include_str!("../configs/accuracy.csv").as_bytes())
            .deserialize()
            .collect::<Result<_, _>>()
            .unwrap_or_default()
    })
}

/// How far to trust an op's prediction: the record's points nearest to it — tt-metal's published
/// measurements of the same op on the same architecture, on the same topology and number of
/// chips where there are some — and the model's error against them.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Trust {
    /// What the figures are of, e.g. `tt-metal's Wormhole sweep of all-gather on a ring of 8`;
    /// `None` when no published measurement of the op on the architecture is recorded.
    pub(crate) basis: Option<String>,
    /// How many published points.
    pub(crate) points: usize,
    /// How many of them the model meets within their tolerance.
    pub(crate) within_tolerance: usize,
    /// Their tolerance, percent (the largest, where they differ).
    pub(crate) tolerance_pct: Option<f64>,
    /// The model's mean |error| against them, percent.
    pub(crate) mean_abs_error_pct: Option<f64>,
    /// Its largest error, signed, percent.
    pub(crate) worst_error_pct: Option<f64>,
    /// Whether the mean |error| is large (at least [`LARGE_ERROR_PCT`]) or the op is not
    /// calibrated: the time is then an indication, not a figure to plan on.
    pub(crate) large: bool,
}

impl Trust {
    /// The record's word on `op` (its JSON name, `all_gather`) on `arch`'s chips, run as a
    /// `topology` of `chips` on `model`.
    pub(crate) fn of(
        arch: meshsim_topology::Arch,
        op: &str,
        (topology, chips): (&str, usize),
        model: SimModel,
    ) -> Trust {
        Self::from_record(built_in(), arch, op, (topology, chips), model)
    }

    fn from_record(
        record: &[Point],
        arch: meshsim_topology::Arch,
        op: &str,
        (topology, chips): (&str, usize),
        model: SimModel,
    ) -> Trust {
        let arch = arch_name(arch);
        let op = op.replace('_', "-");
        let model = model.to_string();
        let of_op: Vec<&Point> = record
            .iter()
            .filter(|p| p.arch == arch && p.model == model && p.group.starts_with(&format!("{op} ")))
            .collect();
        let exact = format!("{op} {topology}-{chips}");
        let same: Vec<&Point> = of_op.iter().copied().filter(|p| p.group == exact).collect();
        let (points, basis) = if !same.is_empty() {
            (same, format!("tt-metal's {arch} sweep of {op} on a {topology} of {chips}"))
        } else {
            let mut groups: Vec<&str> =
                of_op.iter().map(|p| p.group.trim_start_matches(&format!("{op} "))).collect();
            groups.dedup();
            (
                of_op,
                format!("tt-metal's {arch} sweep of {op} on {} (not this communicator)", groups.join(", ")),
            )
        };
        if points.is_empty() {
            return Trust {
                basis: None,
                points: 0,
                within_tolerance: 0,
                tolerance_pct: None,
                mean_abs_error_pct: None,
                worst_error_pct: None,
                large: true,
            };
        }
        let mean = points.iter().map(|p| p.error_pct.abs()).sum::<f64>() / points.len() as f64;
        let worst =
            points.iter().map(|p| p.error_pct).fold(0.0, |w: f64, e| if e.abs() > w.abs() { e } else { w });
        Trust {
            basis: Some(basis),
            points: points.len(),
            within_tolerance: points.iter().filter(|p| p.ok).count(),
            tolerance_pct: points.iter().map(|p| p.tolerance_pct).reduce(f64::max),
            mean_abs_error_pct: Some(mean),
            worst_error_pct: Some(worst),
            large: mean >= LARGE_ERROR_PCT,
        }
    }

    /// One line for a text header.
    pub(crate) fn line(&self, arch: meshsim_topology::Arch, op: &str) -> String {
        let (Some(basis), Some(mean), Some(worst), Some(tol)) =
            (&self.basis, self.mean_abs_error_pct, self.worst_error_pct, self.tolerance_pct)
        else {
            return format!(
                "not calibrated: no published {} measurement of {} is recorded; read the time as an indication (docs/guide.md)",
                arch_name(arch),
                op.replace('_', "-")
            );
        };
        let verdict = if self.large {
            "; large: read the time as trends and bottlenecks, not a figure to plan on"
        } else {
            ""
        };
        format!(
            "mean |error| {mean:.1} % (worst {worst:+.1} %, {} of {} within ±{tol:.0} %) against {basis}, up to 16 MiB{verdict} (docs/guide.md)",
            self.within_tolerance, self.points
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: &str) -> String {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn recorded() -> Vec<Point> {
        csv::Reader::from_reader(read(CSV).as_bytes())
            .deserialize()
            .collect::<Result<_, _>>()
            .expect("the record")
    }

    #[test]
    fn the_guides_table_is_the_record_rendered() {
        let guide = read(GUIDE);
        let points = recorded();
        assert!(points.iter().any(|p| p.arch == "Blackhole") && points.iter().any(|p| p.model == "flow"));
        assert_eq!(
            splice(&guide, &render(&points)).unwrap(),
            guide,
            "run `meshsim calibrate --update-accuracy`"
        );
    }

    /// The record is what the model gives now: every cheap point — the link set, and the CCL
    /// and Blackhole sweeps up to 64 KiB on both models — simulated again equals the record's
    /// to the last digit (simulation is deterministic). A model change that moves them fails
    /// here until the record is written again.
    #[test]
    fn the_record_is_what_the_model_gives_on_its_cheap_points() {
        let model = crate::scenario::ParamSource::default();
        let mut fresh = Vec::new();
        for sim in [SimModel::Packet, SimModel::Flow] {
            let setup = |name: &str| {
                let c = crate::load_cluster(name).unwrap();
                let p = model.on(&c);
                Setup { model: sim, ..Setup::new(c, p) }
            };
            if sim == SimModel::Packet {
                let rows = calibration::run(&setup("n300"), &setup("t3000")).unwrap();
                fresh.extend(rows.into_iter().map(|r| Point::new("link", sim, r)));
            }
            let rows = ccl_calibration::run_ccl_sweep(&setup("t3000"), 64 << 10).unwrap();
            fresh.extend(rows.into_iter().map(|r| Point::new("ccl", sim, r)));
            let rows = bh_calibration::run_blackhole_sweep(&setup("bh_galaxy"), 64 << 10).unwrap();
            fresh.extend(rows.into_iter().map(|r| Point::new("blackhole", sim, r)));
        }
        let record = recorded();
        assert!(fresh.len() > 60, "{} cheap points", fresh.len());
        for p in &fresh {
            let same = |r: &&Point| {
                (&r.set, &r.model, &r.measure, r.size_bytes) == (&p.set, &p.model, &p.measure, p.size_bytes)
            };
            let r = record.iter().find(same).unwrap_or_else(|| panic!("{p:?} is not in the record"));
            assert_eq!(r, p, "run `meshsim calibrate --update-accuracy`");
        }
    }

    #[test]
    fn an_op_is_trusted_as_far_as_its_nearest_published_points() {
        use meshsim_topology::Arch;
        let row = |arch: &str, model: &str, group: &str, error_pct: f64| Point {
            set: "ccl".into(),
            model: model.into(),
            arch: arch.into(),
            group: group.into(),
            measure: String::new(),
            size_bytes: 1 << 20,
            published: 100.0,
            simulated: 100.0 + error_pct,
            error_pct,
            tolerance_pct: 20.0,
            ok: error_pct.abs() <= 20.0,
        };
        let record = [
            row("Wormhole", "packet", "all-gather ring-8", -30.0),
            row("Wormhole", "packet", "all-gather ring-8", 10.0),
            row("Wormhole", "packet", "all-gather line-2", 4.0),
            row("Wormhole", "flow", "all-gather ring-8", -2.0),
            row("Blackhole", "packet", "all-gather ring-8", 80.0),
        ];
        let t = Trust::from_record(&record, Arch::WormholeB0, "all_gather", ("ring", 8), SimModel::Packet);
        assert_eq!(
            (t.points, t.within_tolerance, t.mean_abs_error_pct, t.worst_error_pct),
            (2, 1, Some(20.0), Some(-30.0))
        );
        assert!(
            t.large && t.basis.as_deref() == Some("tt-metal's Wormhole sweep of all-gather on a ring of 8")
        );
        // Another communicator: every point of the op on the architecture, said so.
        let t = Trust::from_record(&record, Arch::WormholeB0, "all_gather", ("line", 4), SimModel::Packet);
        assert_eq!(t.points, 3);
        assert!(t.basis.unwrap().ends_with("on ring-8, line-2 (not this communicator)"));
        // Each model its own points; an op with none is not calibrated.
        let t = Trust::from_record(&record, Arch::WormholeB0, "all_gather", ("ring", 8), SimModel::Flow);
        assert_eq!((t.points, t.large), (1, false));
        let t = Trust::from_record(&record, Arch::Blackhole, "all_reduce", ("ring", 8), SimModel::Packet);
        assert!(t.basis.is_none() && t.large);
        assert!(
            t.line(Arch::Blackhole, "all_reduce")
                .starts_with("not calibrated: no published Blackhole measurement of all-reduce")
        );
        // The built-in record has the CCL sweep's points.
        assert!(Trust::of(Arch::WormholeB0, "reduce_scatter", ("line", 4), SimModel::Packet).points > 0);
    }

    /// The README's accuracy figures are the record's: Wormhole's Ethernet microbenchmarks, and
    /// Blackhole's latency, DRAM, fabric bandwidth and all-gather sweep.
    #[test]
    fn the_readmes_accuracy_figures_are_the_records() {
        let record = recorded();
        let of = |arch: &str, model: &str, group: &dyn Fn(&str) -> bool| -> Vec<&Point> {
            record.iter().filter(|p| p.arch == arch && p.model == model && group(&p.group)).collect()
        };
        let worst = |ps: &[&Point]| ps.iter().map(|p| p.error_pct.abs()).fold(0.0, f64::max).ceil();
        let erisc = of("Wormhole", "packet", &|g| g.starts_with("ERISC"));
        let latency = of("Blackhole", "packet", &|g| g == "fabric one-hop latency");
        let dram = of("Blackhole", "packet", &|g| g == "one core's DRAM reads");
        let bandwidth = of("Blackhole", "packet", &|g| g.starts_with("fabric bandwidth"));
        let sweep = of("Blackhole", "packet", &|g| g.starts_with("all-gather"));
        let sweep_mean = sweep.iter().map(|p| p.error_pct.abs()).sum::<f64>() / sweep.len() as f64;
        let readme = read("README.md").split_whitespace().collect::<Vec<_>>().join(" ");
        for claim in [
            format!(
                "the Ethernet microbenchmarks, calibrated against published measurements to within {} %",
                worst(&erisc)
            ),
            format!("line latency within {} %", worst(&latency)),
            format!("one core's DRAM reads within {} %", worst(&dram)),
            format!(
                "{} of {} fabric bandwidth goldens within 10 %",
                bandwidth.iter().filter(|p| p.ok).count(),
                bandwidth.len()
            ),
            format!("the all-gather sweep at a mean |error| of {sweep_mean:.0} %"),
        ] {
            assert!(readme.contains(&claim), "README.md should say '{claim}' (configs/accuracy.csv)");
        }
    }

    #[test]
    fn measures_fall_into_their_groups() {
        assert_eq!(group("ccl all-gather line-2 us"), ("Wormhole", "all-gather line-2".into()));
        assert_eq!(group("bh ccl all_gather ring-8 us"), ("Blackhole", "all-gather ring-8".into()));
        assert_eq!(
            group("bh fabric NeighborExchangeLinear unicast_write 2-link GB/s"),
            ("Blackhole", "fabric bandwidth NeighborExchangeLinear 2-link".into())
        );
        assert_eq!(
            group("fabric LinearMulticast fused_atomic_inc GB/s"),
            ("Wormhole", "fabric bandwidth LinearMulticast".into())
        );
        assert_eq!(
            group("bh fabric latency p150_x4 unicast_write net avg ns"),
            ("Blackhole", "fabric one-hop latency".into())
        );
        assert_eq!(group("round trip ns"), ("Wormhole", "ERISC round trip".into()));
        assert_eq!(
            group("bidir GB/s per direction"),
            ("Wormhole", "ERISC bandwidth, both directions".into())
        );
        assert_eq!(group("bh dram read x4 cycles"), ("Blackhole", "one core's DRAM reads".into()));
    }
}
