//! `meshsim sweep`: series of size sweeps, nccl-tests' table, flat CSV/JSON and busbw plots.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use meshsim_bench::plot::{Plot, Series};
use meshsim_bench::report;
use meshsim_ccl::sweep::SweepRow;
use meshsim_topology::Cluster;

use crate::cli::{Format, Output, SweepArgs};
use crate::out::out;
use crate::sweep_series::{Job, each, jobs};
pub(crate) use crate::sweep_series::{SeriesKnobs, SweepHeader, SweepKnobs};
use crate::{BadInput, progress};
use meshsim_bench::plot;
use meshsim_ccl::op::Stack;
use std::process::ExitCode;

/// Where a sweep's points go and which of them it runs: `--out`, `--resume`, `--shard`, and
/// the flag that stops it (Ctrl-C).
pub(crate) struct SweepIo<'a> {
    /// Each point is appended to this JSONL file as it finishes.
    pub(crate) out: Option<PathBuf>,
    /// Points already in this JSONL file are not run again (their rows are kept); new points
    /// are appended to it unless `out` names another file.
    pub(crate) resume: Option<PathBuf>,
    /// `(i, n)`: run only the points whose index in the sweep is `i` modulo `n`.
    pub(crate) shard: Option<(usize, usize)>,
    /// Once set, no further point starts.
    pub(crate) stop: &'a AtomicBool,
}

/// One finished point as a line of a sweep's JSONL file: the sweep's JSON row keys, and what
/// `merge` needs to rebuild the whole sweep's table (the op, the sizes asked for, the series'
/// place and layout).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct PointRecord {
    series: String,
    cluster: String,
    chips: usize,
    num_links: usize,
    /// The series' workers knob (`None`: tt-metal's default by size; what ran is the row's
    /// `workers`).
    #[serde(default)]
    series_workers: Option<usize>,
    #[serde(flatten)]
    row: SweepRow,
    op: String,
    layout: String,
    /// The first communicator's chips, in rank order (points written before it had none).
    #[serde(default)]
    chip_ids: Vec<u64>,
    series_index: usize,
    min_bytes: u64,
    max_bytes: u64,
    factor: u64,
    /// The model that simulated it (points written before models had one are the packet
    /// model's).
    #[serde(default)]
    model: meshsim_ccl::op::SimModel,
}

impl PointRecord {
    /// The header of the sweep it is a point of.
    fn header(&self) -> SweepHeader {
        SweepHeader {
            op: self.op.clone(),
            min: self.min_bytes,
            max: self.max_bytes,
            factor: self.factor,
            model: self.model,
        }
    }
}

/// Reads a sweep's JSONL file. A last line cut short (the process was killed mid-write) is
/// left out; any other line that is not a point is bad input naming it.
pub(crate) fn read_points(path: &Path) -> Result<Vec<PointRecord>, String> {
    let here = path.display();
    let text = meshsim_topology::input::read_input_text(path).map_err(|e| format!("{here}: {e}"))?;
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<PointRecord>(line) {
            Ok(r) => out.push(r),
            // The last line without its newline: a write the interruption cut.
            Err(_) if i + 1 == lines.len() => {}
            Err(e) => return Err(format!("{here}:{}: not a sweep point: {e}", i + 1)),
        }
    }
    Ok(out)
}

/// The series a set of points belongs to, in sweep order, each with its rows in size order (a
/// point listed twice is kept once), and the header they share.
pub(crate) fn series_of(
    points: Vec<PointRecord>,
    from: &str,
) -> Result<(Vec<SweepSeries>, SweepHeader), String> {
    let Some(first) = points.first() else {
        return Err(format!("{from}: no sweep points"));
    };
    let header = first.header();
    let mut by_index: std::collections::BTreeMap<usize, SweepSeries> = std::collections::BTreeMap::new();
    for p in points {
        let h = p.header();
        if h != header {
            return Err(format!(
                "{from}: points of different sweeps ({} -b {} -e {} -f {} --model {} and {} -b {} -e {} -f {} --model {})",
                header.op,
                header.min,
                header.max,
                header.factor,
                header.model,
                h.op,
                h.min,
                h.max,
                h.factor,
                h.model
            ));
        }
        let se = by_index.entry(p.series_index).or_insert_with(|| SweepSeries {
            label: p.series.clone(),
            cluster: p.cluster.clone(),
            chips: p.chips,
            layout: p.layout.clone(),
            chip_ids: p.chip_ids.clone(),
            dtype: p.row.dtype.clone(),
            num_links: p.num_links,
            workers: p.series_workers,
            arch: crate::load_cluster(&p.cluster).ok().map(|c| c.arch()),
            rows: Vec::new(),
        });
        if se.label != p.series {
            return Err(format!(
                "{from}: series {} is both '{}' and '{}'",
                p.series_index, se.label, p.series
            ));
        }
        if !se.rows.iter().any(|r| r.size_bytes == p.row.size_bytes) {
            se.rows.push(p.row);
        }
    }
    let mut series: Vec<SweepSeries> = by_index.into_values().collect();
    for se in &mut series {
        se.rows.sort_by_key(|r| r.size_bytes);
    }
    Ok((series, header))
}

/// Appends points to a JSONL file, one flushed line each, from any thread; the first write
/// error is kept (and stops the sweep).
struct PointSink {
    file: Mutex<Option<std::io::BufWriter<std::fs::File>>>,
    error: Mutex<Option<String>>,
}

impl PointSink {
    fn open(path: Option<&Path>) -> anyhow::Result<PointSink> {
        let file = match path {
            Some(p) => Some(std::io::BufWriter::new(
                std::fs::OpenOptions::new().create(true).append(true).open(p).map_err(|e| {
                    BadInput(format!("{}: cannot write the sweep's points: {e}", p.display()))
                })?,
            )),
            None => None,
        };
        Ok(PointSink { file: Mutex::new(file), error: Mutex::new(None) })
    }

    fn write(&self, record: &PointRecord, stop: &AtomicBool) {
        use std::io::Write;
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let Some(f) = file.as_mut() else { return };
        let line = serde_json::to_string(record).expect("a point serialises");
        if let Err(e) = writeln!(f, "{line}").and_then(|()| f.flush()) {
            self.error.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e.to_string());
            stop.store(true, Ordering::SeqCst);
        }
    }
}

/// One series of a sweep: its knob values and its rows.
pub(crate) struct SweepSeries {
    label: String,
    cluster: String,
    chips: usize,
    /// `ring`, `line`, or with --axis `4 rows x line`.
    layout: String,
    /// The (first) communicator's chip ids, in rank order.
    chip_ids: Vec<u64>,
    dtype: String,
    num_links: usize,
    /// Workers per link and direction; `None`: tt-metal's default.
    workers: Option<usize>,
    /// The architecture of its machine (`None`: a merged file's machine that does not load).
    arch: Option<meshsim_topology::Arch>,
    rows: Vec<meshsim_ccl::sweep::SweepRow>,
}

/// A sweep row with the series it belongs to, for CSV and JSON.
#[derive(serde::Serialize)]
struct SeriesRow<'a> {
    series: &'a str,
    cluster: &'a str,
    /// The model that simulated it (`packet`, `flow`).
    model: &'static str,
    chips: usize,
    /// `ring`, `line`, or with --axis `4 rows x line`; and the (first) communicator's chips.
    topology: &'a str,
    chip_ids: String,
    num_links: usize,
    /// The row's own columns, the workers and packet size that ran among them.
    #[serde(flatten)]
    row: &'a meshsim_ccl::sweep::SweepRow,
}

/// `meshsim sweep`: runs the sweep, prints its table and plot; 130 when interrupted, 1 when a
/// point failed.
pub(crate) fn run(a: SweepArgs) -> anyhow::Result<ExitCode> {
    crate::check_outputs(a.plot.as_deref(), None)?;
    if let Some(o) = &a.out {
        plot::writable(o)
            .map_err(|e| BadInput(format!("{}: cannot write the sweep's points: {e}", o.display())))?;
    }
    let knobs = SweepKnobs {
        op: a.op,
        axis: a.axis,
        stack: a.stack.unwrap_or(Stack::DEFAULT),
        model: a.sim.sim_model,
        select: a.select.as_deref().map(crate::scenario::load_select).transpose().map_err(BadInput)?,
        in_place: a.in_place,
        chips: a.chips,
        chip_ids: a.chip_ids,
        min: a.min,
        max: a.max,
        factor: a.factor,
        faults: a.faults.knobs(),
        knobs: a.knobs,
    };
    let p = a.model.load()?;
    let mut archs = Vec::new();
    for c in &a.cluster {
        archs.push(crate::load_cluster(c)?.arch());
    }
    p.check(&archs).map_err(|e| crate::BadInput(e.to_string()))?;
    let io = SweepIo { out: a.out, resume: a.resume, shard: a.shard, stop: crate::interrupt_on_ctrl_c() };
    let k = &knobs.knobs;
    let series = SeriesKnobs {
        clusters: a.cluster,
        topologies: each(&a.topology),
        dtypes: a.dtype,
        num_links: each(&a.num_links),
        workers: each(a.workers.as_deref().unwrap_or_default()),
        packet_sizes: each(&k.packet_size),
        pages_per_packet: each(&k.pages_per_packet),
        buffers: each(&k.buffers),
        memory: each(&k.memory),
        bidir: each(&a.bidir),
        redop: each(&a.redop),
        root: each(&a.root),
    };
    let run = run_sweep(&knobs, &series, &p, &io)?;
    let header = knobs.header();
    out!("{}", render_sweep(&run.series, &header, a.output.format))?;
    if let Some(path) = a.plot {
        plot::write(&path, &busbw_plot(&header.op, &run.series)).map_err(|e| BadInput(e.to_string()))?;
    }
    if run.interrupted {
        let saved = io.out.as_ref().or(io.resume.as_ref());
        eprintln!(
            "meshsim: interrupted: {} of {} points ran{}",
            run.ran,
            run.planned,
            saved.map_or(String::new(), |f| format!("; --resume {} runs the rest", f.display()))
        );
        return Ok(ExitCode::from(130));
    }
    Ok(failed(&run.series))
}

/// `meshsim merge`: a sweep's table and plot from the JSONL files of its runs.
pub(crate) fn merge(files: &[PathBuf], output: Output, plot_path: Option<&Path>) -> anyhow::Result<ExitCode> {
    crate::check_outputs(plot_path, None)?;
    let mut points = Vec::new();
    for f in files {
        points.extend(read_points(f).map_err(BadInput)?);
    }
    let from = files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ");
    let (series, header) = series_of(points, &from).map_err(BadInput)?;
    out!("{}", render_sweep(&series, &header, output.format))?;
    if let Some(path) = plot_path {
        plot::write(path, &busbw_plot(&header.op, &series)).map_err(|e| BadInput(e.to_string()))?;
    }
    Ok(failed(&series))
}

/// 1, with the first failed point's error, when a point failed; 0 otherwise.
fn failed(series: &[SweepSeries]) -> ExitCode {
    match first_error(series) {
        Some(e) => {
            eprintln!("meshsim: {e}");
            ExitCode::FAILURE
        }
        None => ExitCode::SUCCESS,
    }
}

/// Runs every combination of the listed knobs as a series.
pub(crate) fn run_sweep(
    k: &SweepKnobs,
    series: &SeriesKnobs,
    model: &crate::scenario::ParamSource,
    io: &SweepIo,
) -> anyhow::Result<SweepOutcome> {
    let stop = io.stop;
    let bad = |m: String| anyhow::Error::new(BadInput(m));
    let sizes = meshsim_ccl::sweep::sizes(k.min, k.max, k.factor).map_err(|e| bad(e.0))?;
    // Resolve everything first so bad input is reported before any simulation runs.
    let jobs = jobs(k, series)?;
    let header = k.header();
    let resumed = resumed(io, &header).map_err(bad)?;
    let plans = plans(&jobs, &sizes, io, &resumed);
    let sink = PointSink::open(io.out.as_deref().or(io.resume.as_deref()))?;
    let total: usize = plans.iter().map(Vec::len).sum();
    let pb = progress(total as u64, &k.op_name());
    let _ = crate::SWEEP_BAR.set(pb.clone());
    let mut out = Vec::new();
    let mut ran = 0;
    for ((j, job), tiles) in jobs.into_iter().enumerate().zip(plans) {
        let Job { name, cluster: c, spec, label } = job;
        let (layout, num_links) = layout_and_links(k, &c, &spec);
        let record = |row: &SweepRow| PointRecord {
            series: label.clone(),
            cluster: name.clone(),
            chips: spec.ranks(),
            num_links,
            series_workers: spec.workers,
            row: row.clone(),
            op: header.op.clone(),
            layout: layout.clone(),
            chip_ids: crate::ids(&c, spec.comms[0].chips()),
            series_index: j,
            min_bytes: header.min,
            max_bytes: header.max,
            factor: header.factor,
            model: header.model,
        };
        let p = model.on(&c);
        let new = meshsim_ccl::sweep::sweep_points(&c, &p, &spec, &tiles, stop, &|row| {
            sink.write(&record(row), stop);
            pb.inc(1);
        })
        .map_err(|e| if e.is_bad_input() { bad(e.to_string()) } else { anyhow::anyhow!("{e}") })?;
        ran += new.len();
        let mut rows: Vec<SweepRow> =
            resumed.iter().filter(|r| r.series_index == j).map(|r| r.row.clone()).chain(new).collect();
        rows.sort_by_key(|r| r.size_bytes);
        rows.dedup_by_key(|r| r.size_bytes);
        out.push(SweepSeries {
            label,
            cluster: name,
            chips: spec.ranks(),
            layout,
            chip_ids: crate::ids(&c, spec.comms[0].chips()),
            dtype: spec.dtype.to_string(),
            num_links,
            workers: spec.workers,
            arch: Some(c.arch()),
            rows,
        });
    }
    pb.finish_and_clear();
    if let Some(e) = sink.error.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let path =
            io.out.as_deref().or(io.resume.as_deref()).map(|p| p.display().to_string()).unwrap_or_default();
        return Err(anyhow::anyhow!("{path}: cannot write the sweep's points: {e}"));
    }
    Ok(SweepOutcome { series: out, interrupted: stop.load(Ordering::SeqCst), ran, planned: total })
}

/// How a series' ranks are laid out (its topology, or how many rows or columns on an axis) and
/// its links per hop (given, or tt-metal's default on its communicator).
fn layout_and_links(k: &SweepKnobs, c: &Cluster, spec: &meshsim_ccl::sweep::SweepSpec) -> (String, usize) {
    let layout = match k.axis {
        Some(a) => format!(
            "{} {} x {}",
            spec.comms.len(),
            if a == 0 { "columns" } else { "rows" },
            spec.comms[0].topology()
        ),
        None => spec.comms[0].topology().to_string(),
    };
    let num_links = spec.links.unwrap_or_else(|| {
        let collective = spec.op.collective();
        meshsim_ccl::session::default_links(c, spec.stack, collective, &spec.comms[0])
    });
    (layout, num_links)
}

/// The points a `--resume` file holds, refused when they are of another sweep; none when the
/// file does not exist yet (so a script can always pass --resume).
fn resumed(io: &SweepIo, header: &SweepHeader) -> Result<Vec<PointRecord>, String> {
    let Some(path) = &io.resume else {
        return Ok(Vec::new());
    };
    if !path.exists() {
        return Ok(Vec::new());
    }
    let points = read_points(path)?;
    if let Some(r) = points.iter().find(|r| r.header() != *header) {
        return Err(format!(
            "{}: its points are of another sweep ({} -b {} -e {} -f {} --model {}, not {} -b {} -e {} -f {} --model {})",
            path.display(),
            r.op,
            r.min_bytes,
            r.max_bytes,
            r.factor,
            r.model,
            header.op,
            header.min,
            header.max,
            header.factor,
            header.model
        ));
    }
    Ok(points)
}

/// The tiles each series runs: its sizes in order, this shard's share (counted over the whole
/// sweep's points), less the points already resumed.
fn plans(jobs: &[Job], sizes: &[u64], io: &SweepIo, resumed: &[PointRecord]) -> Vec<Vec<u64>> {
    let done: std::collections::BTreeSet<(usize, u64)> =
        resumed.iter().map(|r| (r.series_index, r.row.size_bytes)).collect();
    let mut index = 0;
    jobs.iter()
        .enumerate()
        .map(|(j, job)| {
            let spec = &job.spec;
            let mut tiles = meshsim_ccl::sweep::points(sizes, spec.chunks(), spec.dtype);
            tiles.sort_unstable();
            tiles
                .into_iter()
                .filter(|&t| {
                    let mine = io.shard.is_none_or(|(i, n)| index % n == i);
                    index += 1;
                    mine && !done.contains(&(j, t * spec.dtype.tile_bytes()))
                })
                .collect()
        })
        .collect()
}

/// What a sweep run gave: its series (the points that ran, and those resumed), and whether
/// Ctrl-C stopped it before every planned point ran.
pub(crate) struct SweepOutcome {
    pub(crate) series: Vec<SweepSeries>,
    pub(crate) interrupted: bool,
    /// Points run now, of those planned (the resumed ones are not planned again).
    pub(crate) ran: usize,
    pub(crate) planned: usize,
}

/// nccl-tests' time column: fewer decimals as the number grows, seven characters wide.
fn nccl_time(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{us:7.0}")
    } else if us >= 100.0 {
        format!("{us:7.1}")
    } else {
        format!("{us:7.2}")
    }
}

/// A series' text header: the op, machine, communicator and knobs, then nccl-tests' sizes line.
fn series_header(k: &SweepHeader, se: &SweepSeries) -> String {
    let chips = if se.chip_ids.is_empty() {
        "not recorded".to_owned()
    } else {
        se.chip_ids.iter().map(u64::to_string).collect::<Vec<_>>().join(" ")
    };
    format!(
        "# meshsim {} on {} ({} chips, {}), {}, num_links {}, workers {}\n\
         # chips {chips}\n\
         # minBytes {} maxBytes {} step: {}(factor) simulated: 1 run per size, {} model, timing mode, no data check\n#\n",
        k.op,
        se.cluster,
        se.chips,
        se.layout,
        se.dtype,
        se.num_links,
        se.workers.map_or("default (by size)".into(), |w| w.to_string()),
        k.min,
        k.max,
        k.factor,
        k.model
    ) + &accuracy_line(k, se)
}

/// A series' `# accuracy` line: the accuracy record's word on its op, architecture, topology
/// and chips (none for a merged series whose machine does not load).
fn accuracy_line(k: &SweepHeader, se: &SweepSeries) -> String {
    let Some(arch) = se.arch else { return String::new() };
    let topology = se.layout.rsplit(' ').next().unwrap_or(&se.layout);
    let trust = crate::trust::Trust::of(arch, &k.op, (topology, se.chips), k.model);
    format!("# accuracy {}\n#\n", trust.line(arch, &k.op))
}

/// Renders a sweep: nccl-tests' table per series as text; one flat table with series columns
/// as CSV or JSON.
pub(crate) fn render_sweep(series: &[SweepSeries], k: &SweepHeader, format: Format) -> String {
    if !matches!(format, Format::Text) {
        let rows: Vec<SeriesRow> = series
            .iter()
            .flat_map(|s| {
                s.rows.iter().map(move |row| SeriesRow {
                    series: &s.label,
                    cluster: &s.cluster,
                    model: k.model.as_str(),
                    chips: s.chips,
                    topology: &s.layout,
                    chip_ids: s.chip_ids.iter().map(u64::to_string).collect::<Vec<_>>().join(" "),
                    num_links: s.num_links,
                    row,
                })
            })
            .collect();
        return report::render(&rows, format.into());
    }
    let mut s = String::new();
    for se in series {
        if series.len() > 1 {
            // What sets this series apart from the others (the CSV and JSON `series` column).
            let _ = writeln!(s, "# series {}", se.label);
        }
        s.push_str(&series_header(k, se));
        s.push_str(&rounding_note(k, se));
        s.push_str("#                                                              out-of-place                       in-place          
");
        s.push_str("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
");
        s.push_str("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
");
        for r in &se.rows {
            // meshsim checks data only in functional runs (`op --verify`): #wrong is N/A.
            let in_place = match r.in_place {
                Some(ip) if r.error.is_none() => format!(
                    "{}  {:6.2}  {:6.2}  {:>5}",
                    nccl_time(ip.in_place_time_us),
                    ip.in_place_algbw_gbps,
                    ip.in_place_busbw_gbps,
                    "N/A"
                ),
                _ => format!("{:>7}  {:>6}  {:>6}  {:>5}", "N/A", "N/A", "N/A", "N/A"),
            };
            let _ = writeln!(
                s,
                "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {}  {:6.2}  {:6.2}  {:>5}  {in_place}",
                r.size_bytes,
                r.count,
                r.dtype,
                r.redop,
                r.root,
                if r.error.is_some() { format!("{:>7}", "error") } else { nccl_time(r.time_us) },
                r.algbw_gbps,
                r.busbw_gbps,
                "N/A",
            );
        }
        s.push_str(&what_ran(se));
        let ok: Vec<f64> = se.rows.iter().filter(|r| r.error.is_none()).map(|r| r.busbw_gbps).collect();
        let avg = ok.iter().sum::<f64>() / ok.len().max(1) as f64;
        let _ = writeln!(
            s,
            "# Avg bus bandwidth    : {avg:.4} 
#"
        );
    }
    s
}

/// What ran at each size of a series, as comment lines under its table: the sizes each
/// algorithm, worker count and packet ran at, in runs of equal ones.
fn what_ran(se: &SweepSeries) -> String {
    // Rows merged from files written before meshsim recorded what ran say nothing.
    let ran: Vec<&meshsim_ccl::sweep::SweepRow> =
        se.rows.iter().filter(|r| r.error.is_none() && !r.algorithm.is_empty()).collect();
    let mut runs: Vec<(String, u64, u64)> = Vec::new();
    for r in &ran {
        let what = format!(
            "{}, {} worker(s), packets of up to {} B ({} page(s))",
            r.algorithm,
            r.workers.unwrap_or_default(),
            r.packet_size,
            r.pages_per_packet
        );
        match runs.last_mut() {
            Some(last) if last.0 == what => last.2 = r.size_bytes,
            _ => runs.push((what, r.size_bytes, r.size_bytes)),
        }
    }
    runs.iter()
        .map(|(what, lo, hi)| {
            let sizes = if lo == hi { format!("{lo} B") } else { format!("{lo}-{hi} B") };
            format!("# ran {sizes}: {what}\n")
        })
        .collect()
}

/// The first failed point of a sweep, as one line: how many failed and why the first did.
pub(crate) fn first_error(series: &[SweepSeries]) -> Option<String> {
    let failed: Vec<&meshsim_ccl::sweep::SweepRow> =
        series.iter().flat_map(|s| &s.rows).filter(|r| r.error.is_some()).collect();
    let first = failed.first()?;
    Some(format!(
        "{} sweep point(s) failed; at {} B: {}",
        failed.len(),
        first.size_bytes,
        first.error.as_deref().unwrap_or_default()
    ))
}

/// busbw against size, one line per series.
pub(crate) fn busbw_plot(op: &str, series: &[SweepSeries]) -> Plot {
    let systems: Vec<String> = {
        let mut v: Vec<String> =
            series.iter().map(|s| format!("{} ({} chips)", s.cluster, s.chips)).collect();
        v.dedup();
        v
    };
    Plot {
        title: format!("{} busbw, {}", op.replace('_', "-"), systems.join(", ")),
        x_desc: "size (bytes)".into(),
        y_desc: "busbw (GB/s)".into(),
        series: series
            .iter()
            .map(|s| Series {
                label: s.label.clone(),
                points: s
                    .rows
                    .iter()
                    .filter(|r| r.error.is_none())
                    .map(|r| (r.size_bytes as f64, r.busbw_gbps))
                    .collect(),
            })
            .collect(),
        log_y: false,
    }
}

/// A header line saying which sizes asked for ran as larger ones (whole tiles, an equal number
/// per chip), or nothing when every size ran as asked.
fn rounding_note(k: &SweepHeader, se: &SweepSeries) -> String {
    let (Ok(dtype), Ok(sizes)) =
        (se.dtype.parse::<meshsim_ccl::tensor::DType>(), meshsim_ccl::sweep::sizes(k.min, k.max, k.factor))
    else {
        return String::new();
    };
    // Runs of consecutive sizes that round to the same size.
    let mut groups: Vec<(u64, u64, u64)> = Vec::new();
    // Broadcast and send/receive tensors are whole on every chip: whole tiles suffice (a
    // reduce's split over the ranks, so that it may reduce-scatter then gather).
    let chunks = if matches!(k.op.as_str(), "broadcast" | "sendrecv") { 1 } else { se.chips };
    for size in sizes {
        let run = meshsim_ccl::sweep::size_run(size, chunks, dtype);
        match groups.last_mut() {
            Some(g) if g.2 == run => g.1 = size,
            _ => groups.push((size, size, run)),
        }
    }
    let moved: Vec<String> = groups
        .iter()
        .filter(|&&(lo, hi, run)| lo != run || hi != run)
        .map(|&(lo, hi, run)| if lo == hi { format!("{lo} as {run}") } else { format!("{lo}-{hi} as {run}") })
        .collect();
    if moved.is_empty() {
        return String::new();
    }
    format!(
        "# sizes run (B): {} (whole {dtype} tiles of {} B, an equal number per chip)\n#\n",
        moved.join(", "),
        dtype.tile_bytes()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::OpKnobs;
    use meshsim_ccl::sweep::SweepRow;

    fn series(label: &str, busbw: &[f64]) -> SweepSeries {
        let rows = busbw
            .iter()
            .enumerate()
            .map(|(i, &b)| SweepRow {
                size_bytes: 1024 << (2 * i),
                count: 1024 << (2 * i),
                dtype: "bfp8".into(),
                redop: "none".into(),
                root: -1,
                time_us: 12.5 * (i + 1) as f64,
                algbw_gbps: b * 8.0 / 7.0,
                busbw_gbps: b,
                algorithm: "ring".into(),
                workers: Some(1),
                packet_size: 4352,
                pages_per_packet: 2,
                error: None,
                in_place: None,
            })
            .collect();
        SweepSeries {
            label: label.into(),
            cluster: "t3000".into(),
            chips: 8,
            layout: "ring".into(),
            chip_ids: vec![0, 2, 6, 7, 3, 1, 5, 4],
            dtype: "bfp8".into(),
            num_links: 1,
            workers: Some(1),
            arch: None,
            rows,
        }
    }

    fn knobs() -> SweepKnobs {
        SweepKnobs {
            op: crate::spec::OpKind::AllGather,
            axis: None,
            stack: meshsim_ccl::op::Stack::Edm,
            model: meshsim_ccl::op::SimModel::Packet,
            select: None,
            in_place: false,
            chips: None,
            chip_ids: None,
            min: 1024,
            max: 16384,
            factor: 4,
            faults: Default::default(),
            knobs: OpKnobs {
                packet_size: Vec::new(),
                pages_per_packet: Vec::new(),
                buffers: Vec::new(),
                memory: Vec::new(),
                skew_ns: 0,
            },
        }
    }

    /// A point whose simulation failed prints `error` where its time goes, stays out of the
    /// average and the plot, and makes the sweep's one-line failure.
    #[test]
    fn failed_points_are_marked_and_the_sweep_goes_on() {
        let mut se = series("1 worker", &[2.0, 4.0, 6.0]);
        se.rows[1].error = Some("simulation failed: deadlock at 5 us".into());
        se.rows[1].busbw_gbps = 0.0;
        let text = render_sweep(std::slice::from_ref(&se), &knobs().header(), Format::Text);
        let data: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(data.len(), 3);
        assert_eq!(data[1].split_whitespace().nth(5), Some("error"));
        assert!(text.contains("# Avg bus bandwidth    : 4.0000"), "{text}");
        assert_eq!(busbw_plot("all_gather", std::slice::from_ref(&se)).series[0].points.len(), 2);
        assert_eq!(
            first_error(&[se]).unwrap(),
            "1 sweep point(s) failed; at 4096 B: simulation failed: deadlock at 5 us"
        );
    }

    #[test]
    fn the_plot_has_one_line_per_series_with_the_rows_sizes_and_busbw() {
        let s = [series("1 worker", &[0.5, 2.0, 7.0]), series("4 workers", &[0.5, 3.0, 11.5])];
        let plot = busbw_plot("all_gather", &s);
        assert_eq!(plot.title, "all-gather busbw, t3000 (8 chips)");
        assert_eq!(plot.y_desc, "busbw (GB/s)");
        let labels: Vec<&str> = plot.series.iter().map(|x| x.label.as_str()).collect();
        assert_eq!(labels, ["1 worker", "4 workers"]);
        assert_eq!(plot.series[1].points, [(1024.0, 0.5), (4096.0, 3.0), (16384.0, 11.5)]);
    }

    /// What the common nccl-tests parsers do: skip `#` lines, split data lines on whitespace,
    /// read size, count, type, redop, root, time, algbw, busbw from columns 0..8, and take the
    /// average from the `# Avg bus bandwidth` line.
    #[test]
    fn the_text_table_parses_the_way_nccl_tests_output_does() {
        let text = render_sweep(&[series("t3000", &[0.5, 2.0, 7.25])], &knobs().header(), Format::Text);
        let data: Vec<Vec<&str>> =
            text.lines().filter(|l| !l.starts_with('#')).map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(data.len(), 3);
        for (i, cols) in data.iter().enumerate() {
            assert_eq!(cols.len(), 13, "{cols:?}");
            assert_eq!(cols[0].parse::<u64>().unwrap(), 1024 << (2 * i));
            assert_eq!(&cols[2..5], ["bfp8", "none", "-1"]);
            assert_eq!(cols[5].parse::<f64>().unwrap(), 12.5 * (i + 1) as f64);
            assert_eq!(cols[8], "N/A");
        }
        assert_eq!(data[2][7], "7.25");
        let header = text.lines().find(|l| l.contains("busbw #wrong")).unwrap();
        let names: Vec<&str> = header.trim_start_matches('#').split_whitespace().collect();
        assert_eq!(
            &names[..9],
            ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"]
        );
        let avg = text.lines().find_map(|l| l.strip_prefix("# Avg bus bandwidth    : ")).unwrap();
        assert_eq!(avg.trim().parse::<f64>().unwrap(), (0.5 + 2.0 + 7.25) / 3.0);
        // nccl-tests' time column: two decimals below 100 us, one below 10 ms, none above.
        assert_eq!(
            [nccl_time(12.345), nccl_time(123.45), nccl_time(12345.6)],
            ["  12.35", "  123.5", "  12346"]
        );
    }
}
