//! Size sweeps of an op in the manner of nccl-tests: sizes from `min` to `max` by a factor,
//! each point an independent simulation (in parallel), reported as size, count, type, redop,
//! root, time, algbw and busbw.
//!
//! A point of `size` bytes gathers (or reduce-scatters) a `[1, 1, 32, 32 * t]` tile tensor whose
//! `t` tiles are the fewest that hold `size` bytes and divide evenly over the chips, so the
//! reported `size_bytes` may round up (sizes that round to the same tensor are run once). busbw uses nccl-tests' factors ([`Collective::busbw_factor`]). Tensors divide evenly over the chips, except broadcast and send/receive tensors, which need only whole tiles ([`Collective::sweep_chunks`]).

use std::sync::atomic::{AtomicBool, Ordering};

use meshsim_hw::Params;
use meshsim_topology::{ChipIdx, Cluster};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::comm::Communicator;
use crate::op::{Bidir, CclError, Collective, Knobs, OpError};
use crate::session::{OpRequest, Session};
use crate::tensor::{DType, Layout, TensorSpec};

/// The op a sweep runs: a collective (with its reduction and root) and, for those that take
/// one, its bidirectional mode (`None`: tt-metal's choice).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepOp {
    /// The collective.
    pub collective: Collective,
    /// The bidirectional mode.
    pub bidir: Option<Bidir>,
}

impl SweepOp {
    /// The collective it runs.
    pub fn collective(self) -> Collective {
        self.collective
    }
}

/// One point of a sweep, as nccl-tests prints it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SweepRow {
    /// Total bytes (gathered output, or reduced input).
    pub size_bytes: u64,
    /// Elements.
    pub count: u64,
    /// Element type.
    #[serde(rename = "type")]
    pub dtype: String,
    /// Reduction, or `none`.
    pub redop: String,
    /// Root rank (`-1`: none).
    pub root: i64,
    /// Op time, µs.
    pub time_us: f64,
    /// size / time, GB/s.
    pub algbw_gbps: f64,
    /// algbw × nccl-tests' bus factor, GB/s.
    pub busbw_gbps: f64,
    /// The algorithm of each phase that ran, joined by " + " (the first communicator's op's,
    /// as the selection chose it).
    #[serde(default)]
    pub algorithm: String,
    /// Workers per link and direction it ran with (the knob, or the default resolved; `None`
    /// only in rows read from files written before meshsim recorded it).
    #[serde(default)]
    pub workers: Option<usize>,
    /// Its packets' size in bytes at most: a fabric router's payload, an EDM buffer's bytes.
    #[serde(default)]
    pub packet_size: u64,
    /// Pages per packet it ran with.
    #[serde(default)]
    pub pages_per_packet: u64,
    /// Why this point's simulation failed (a deadlock, a protocol error); its times are 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The in-place variant's time, algbw and busbw (µs, GB/s, GB/s), when the sweep ran it
    /// (nccl-tests' in-place columns).
    #[serde(default, flatten)]
    pub in_place: Option<InPlace>,
}

/// A point's in-place run.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct InPlace {
    /// Op time, µs.
    pub in_place_time_us: f64,
    /// size / time, GB/s.
    pub in_place_algbw_gbps: f64,
    /// algbw × nccl-tests' bus factor, GB/s.
    pub in_place_busbw_gbps: f64,
}

/// The sizes from `min` to `max` (inclusive) multiplying by `factor`.
pub fn sizes(min: u64, max: u64, factor: u64) -> Result<Vec<u64>, OpError> {
    if min == 0 || max < min || factor < 2 {
        return Err(OpError(format!(
            "a sweep needs 0 < -b ({min}) <= -e ({max}) and -f >= 2 (got {factor})"
        )));
    }
    let mut v = vec![min];
    while let Some(next) = v.last().and_then(|s| s.checked_mul(factor)).filter(|&s| s <= max) {
        v.push(next);
    }
    Ok(v)
}

/// What a sweep runs at every size.
#[derive(Clone, Debug)]
pub struct SweepSpec {
    /// The op.
    pub op: SweepOp,
    /// The communicators it runs on at once (one, or every row or column of a mesh); every
    /// point's time is the makespan.
    pub comms: Vec<Communicator>,
    /// Links per hop (`None`: tt-metal's default, [`crate::session::default_links`]).
    pub links: Option<usize>,
    /// Worker pairs per link and direction (`None`: tt-metal's default).
    pub workers: Option<usize>,
    /// Element type.
    pub dtype: DType,
    /// The transport.
    pub stack: crate::op::Stack,
    /// The model that simulates every point.
    pub model: crate::op::SimModel,
    /// Faults injected into every point.
    pub faults: Vec<crate::fault::Fault>,
    /// The selection tree (`None`: the embedded one).
    pub select: Option<crate::select::Select>,
    /// Also run every point in place (all-gather), for nccl-tests' in-place columns.
    pub in_place: bool,
    /// The knobs every point's op takes beyond its links, workers and bidirectional mode:
    /// packet size, pages per packet, buffers per channel, memory.
    pub knobs: Knobs,
    /// Program start skew: the k-th chip of the communicators starts k x this many ns after
    /// the first.
    pub skew_ns: u64,
}

impl SweepSpec {
    /// Ranks per communicator.
    pub fn ranks(&self) -> usize {
        self.comms.first().map_or(0, Communicator::size)
    }

    /// How many equal chunks a point's tensor is rounded to ([`Collective::sweep_chunks`]).
    pub fn chunks(&self) -> usize {
        self.op.collective.sweep_chunks(self.ranks()) as usize
    }
}

/// The bytes a point asked for as `size` runs: whole tiles, an equal number per chip.
pub fn size_run(size: u64, chips: usize, dtype: DType) -> u64 {
    points(&[size], chips, dtype)[0] * dtype.tile_bytes()
}

/// The tile counts a sweep over `sizes` runs, largest first: each size rounded up to whole tiles
/// that divide evenly over `chips` chips, duplicates removed.
pub fn points(sizes: &[u64], chips: usize, dtype: DType) -> Vec<u64> {
    let (n, tile) = (chips as u64, dtype.tile_bytes());
    let mut tiles: Vec<u64> = sizes.iter().map(|&size| size.div_ceil(tile).div_ceil(n).max(1) * n).collect();
    tiles.sort_unstable_by(|a, b| b.cmp(a));
    tiles.dedup();
    tiles
}

/// Runs `spec` at every size, in parallel, calling `tick` as each point finishes; rows in size
/// order.
pub fn sweep(
    cluster: &Cluster,
    params: &Params,
    spec: &SweepSpec,
    sizes: &[u64],
    tick: &(dyn Fn() + Sync),
) -> Result<Vec<SweepRow>, CclError> {
    let tiles = points(sizes, spec.chunks(), spec.dtype);
    sweep_points(cluster, params, spec, &tiles, &AtomicBool::new(false), &|_| tick())
}

/// Runs `spec` at each of `tiles` (tile counts, as [`points`] gives them), in parallel, the
/// largest first; calls `done` with each point's row as it finishes. Once `stop` is set no
/// further point starts (those running finish): the rows returned, in size order, are the
/// points that ran.
pub fn sweep_points(
    cluster: &Cluster,
    params: &Params,
    spec: &SweepSpec,
    tiles: &[u64],
    stop: &AtomicBool,
    done: &(dyn Fn(&SweepRow) + Sync),
) -> Result<Vec<SweepRow>, CclError> {
    // The largest points go first, one per task, so two cores share the big ones instead of
    // one core getting the whole top half.
    let mut tiles = tiles.to_vec();
    tiles.sort_unstable_by(|a, b| b.cmp(a));
    let mut rows = tiles
        .par_iter()
        .with_max_len(1)
        .filter(|_| !stop.load(Ordering::SeqCst))
        .map(|&tiles| {
            let row = point(cluster, params, spec, tiles)?;
            done(&row);
            Ok(row)
        })
        .collect::<Result<Vec<SweepRow>, CclError>>()?;
    rows.sort_by_key(|r| r.size_bytes);
    Ok(rows)
}

/// One point of a sweep: `[1, 1, 32, 32 x tiles]` per chip, out of place and, if asked, in
/// place. A point whose simulation fails is a row with its error; the sweep goes on.
fn point(cluster: &Cluster, params: &Params, spec: &SweepSpec, tiles: u64) -> Result<SweepRow, CclError> {
    let collective = spec.op.collective();
    let n = spec.ranks();
    let tensor = TensorSpec::new([1, 1, 32, 32 * tiles], spec.dtype, Layout::Tile)
        .map_err(|e| CclError::Invalid(e.0))?;
    let bytes = tensor.bytes();
    let row = SweepRow {
        size_bytes: bytes,
        count: tensor.shape.iter().product(),
        dtype: spec.dtype.to_string(),
        redop: collective.redop().map_or("none".to_owned(), |r| r.to_string()),
        root: collective.root().map_or(-1, |r| r as i64),
        time_us: 0.0,
        algbw_gbps: 0.0,
        busbw_gbps: 0.0,
        algorithm: String::new(),
        workers: None,
        packet_size: 0,
        pages_per_packet: 0,
        error: None,
        in_place: None,
    };
    let row = match point_session(cluster, params, spec, tensor, false)?.run() {
        Ok(run) => {
            let algbw = bytes as f64 / run.makespan.as_ns_f64();
            let o = &run.ops[0];
            SweepRow {
                time_us: run.makespan.as_us_f64(),
                algbw_gbps: algbw,
                busbw_gbps: algbw * collective.busbw_factor(n),
                algorithm: o.algorithm.clone(),
                workers: Some(o.workers),
                packet_size: o.packet_bytes,
                pages_per_packet: o.pages_per_packet,
                ..row
            }
        }
        Err(e) if !e.is_bad_input() => SweepRow { error: Some(e.to_string()), ..row },
        Err(e) => return Err(e),
    };
    if !spec.in_place {
        return Ok(row);
    }
    Ok(match point_session(cluster, params, spec, tensor, true)?.run() {
        Ok(run) => {
            let algbw = bytes as f64 / run.makespan.as_ns_f64();
            let ip = InPlace {
                in_place_time_us: run.makespan.as_us_f64(),
                in_place_algbw_gbps: algbw,
                in_place_busbw_gbps: algbw * collective.busbw_factor(n),
            };
            SweepRow { in_place: Some(ip), ..row }
        }
        Err(e) if !e.is_bad_input() => SweepRow { error: Some(format!("in place: {e}")), ..row },
        Err(e) => return Err(e),
    })
}

/// A point's session: the op on every communicator of the spec, out of place or in place.
fn point_session<'c>(
    cluster: &'c Cluster,
    params: &Params,
    spec: &SweepSpec,
    tensor: TensorSpec,
    in_place: bool,
) -> Result<Session<'c>, CclError> {
    let collective = spec.op.collective();
    let mut s = Session::new(cluster, params);
    s.set_stack(spec.stack);
    s.set_model(spec.model);
    if let Some(tree) = &spec.select {
        s.set_select(tree.clone());
    }
    for &f in &spec.faults {
        s.add_fault(f)?;
    }
    if spec.skew_ns > 0 {
        let chips: Vec<ChipIdx> = spec.comms.iter().flat_map(|c| c.chips().iter().copied()).collect();
        s.set_skew(chips, spec.skew_ns)?;
    }
    for (i, comm) in spec.comms.iter().enumerate() {
        let mut req =
            OpRequest::new(&format!("{}[{i}]", collective.name()), comm.clone(), collective, tensor, 3);
        req.knobs = Knobs { links: spec.links, workers: spec.workers, bidir: spec.op.bidir, ..spec.knobs };
        req.in_place = in_place;
        s.submit(req)?;
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_double_from_min_to_max() {
        assert_eq!(sizes(1024, 8192, 2).unwrap(), [1024, 2048, 4096, 8192]);
        assert_eq!(sizes(1000, 1000, 2).unwrap(), [1000]);
        assert!(sizes(0, 10, 2).is_err());
        assert!(sizes(10, 1, 2).is_err());
        assert!(sizes(1, 10, 1).is_err());
    }
}
