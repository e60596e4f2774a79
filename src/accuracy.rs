//! The accuracy record: every calibration point of every set, on both models, against its
//! published measurement, and the flow model against the packet model on every regression
//! scenario it runs. `configs/accuracy.csv` holds the points; docs/guide.md's accuracy
//! table sums them up by architecture, benchmark or op and topology, and model.
//! `meshsim calibrate --update-accuracy` runs the sets and writes both. The tests below hold
//! the table to the file (re-rendered) and the file to the model (its cheap points
//! re-simulated), so neither can drift. `trust.rs` reads the record back for each result.

use std::path::{Path, PathBuf};

use meshsim_bench::calibration::CalibrationRow;
use meshsim_bench::{Setup, bh_calibration, calibration, ccl_calibration};
use meshsim_ccl::op::SimModel;

use crate::BadInput;
use crate::trust::{FLOW_SET, Point, arch_name, spread};

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

/// A calibration row as a point of the record.
fn point(set: &str, model: SimModel, row: CalibrationRow) -> Point {
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
            points.extend(rows.into_iter().map(|r| point(set, sim, r)));
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
    let suites = crate::regress::default_suites().map_err(BadInput)?;
    points.extend(flow_against_packet(&suites).map_err(BadInput)?);
    Ok(points)
}

/// The flow model against the packet model on every regression scenario it runs (`regress
/// --model flow`): a point each, the packet model's baseline as the reference and the flow
/// model's bound as the tolerance, grouped by op.
fn flow_against_packet(suites_path: &Path) -> Result<Vec<Point>, String> {
    use crate::regress;
    let suites = regress::load_suites(suites_path)?;
    let baselines =
        suites.iter().map(|s| regress::read_baseline(&s.baseline_path())).collect::<Result<Vec<_>, _>>()?;
    let rows = regress::run_flow(&suites, &baselines, None, None, &|| {});
    let mut points = Vec::new();
    for r in rows {
        let (Some(packet), Some(flow), Some(error_pct)) = (r.packet_us, r.flow_us, r.error_pct) else {
            continue;
        };
        let Some((suite, sc)) = suites
            .iter()
            .filter(|s| s.name == r.suite)
            .find_map(|s| s.scenarios.iter().find(|sc| sc.name == r.scenario).map(|sc| (s, sc)))
        else {
            continue;
        };
        let op = match sc.op {
            crate::spec::Kind::Op(k) => k.name().to_owned(),
            _ => "workload".to_owned(),
        };
        let cluster = crate::load_cluster(&sc.cluster_spec(suite.base_dir()))
            .map_err(|e| format!("{}/{}: {e}", r.suite, r.scenario))?;
        points.push(Point {
            set: FLOW_SET.into(),
            model: SimModel::Flow.to_string(),
            arch: arch_name(cluster.arch()).into(),
            group: format!("{op} (against the packet model)"),
            measure: format!("{}/{}", r.suite, r.scenario),
            size_bytes: r.per_rank_bytes.unwrap_or(0),
            published: packet,
            simulated: flow,
            error_pct,
            tolerance_pct: r.bound_pct,
            ok: r.status == "ok",
        });
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
        let (mean, worst) = spread(&ps);
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
                fresh.extend(rows.into_iter().map(|r| point("link", sim, r)));
            }
            let rows = ccl_calibration::run_ccl_sweep(&setup("t3000"), 64 << 10).unwrap();
            fresh.extend(rows.into_iter().map(|r| point("ccl", sim, r)));
            let rows = bh_calibration::run_blackhole_sweep(&setup("bh_galaxy"), 64 << 10).unwrap();
            fresh.extend(rows.into_iter().map(|r| point("blackhole", sim, r)));
        }
        let suites = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/regress");
        let flow = flow_against_packet(&suites).unwrap();
        assert!(flow.len() >= 29, "{} flow scenarios", flow.len());
        fresh.extend(flow);
        let record = recorded();
        assert!(fresh.len() > 90, "{} cheap points", fresh.len());
        for p in &fresh {
            let same = |r: &&Point| {
                (&r.set, &r.model, &r.measure, r.size_bytes) == (&p.set, &p.model, &p.measure, p.size_bytes)
            };
            let r = record.iter().find(same).unwrap_or_else(|| panic!("{p:?} is not in the record"));
            assert_eq!(r, p, "run `meshsim calibrate --update-accuracy`");
        }
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
        let (sweep_mean, _) = spread(&sweep);
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
