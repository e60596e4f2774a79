//! `meshsim tune`: sweeps the candidate algorithms and knobs of one collective on one
//! communicator over sizes and writes the selection tree that picks the fastest at each.
//!
//! Every candidate is measured as the tree it would become applies it — a session whose tree
//! gives that leaf for the collective — so the tuned tree reproduces each winner's time
//! exactly. The base tree's own choice is a candidate and wins ties, so a tuned tree is never
//! slower than its base at the points it was tuned on.
//!
//! With a screen ([`TuneSpec::screen`]) every candidate first runs on the flow model, and only
//! the best few at each size (and the base) run on the packet model, which picks the winner:
//! the tree's times are still the packet model's.

use meshsim_engine::Time;
use meshsim_hw::Params;
use meshsim_topology::Cluster;
use rayon::prelude::*;

use crate::comm::Communicator;
use crate::op::{Bidir, CclError, Collective, Knobs, Stack, Topology};
use crate::select::{Algorithm, Choice, Select};
use crate::session::{OpRequest, Session};
use crate::tensor::{DType, Layout, TensorSpec};

/// What to tune.
#[derive(Clone, Debug)]
pub struct TuneSpec {
    /// The collective.
    pub collective: Collective,
    /// The communicator.
    pub comm: Communicator,
    /// Element type.
    pub dtype: DType,
    /// The transport.
    pub stack: Stack,
    /// Tile counts of the points (as [`crate::sweep::points`] gives them).
    pub tiles: Vec<u64>,
    /// The tree tuned from (its choices are candidates, and other collectives keep it).
    pub base: Select,
    /// The knobs every run takes as given (packet size, pages per packet, buffers, memory): a
    /// given packet size is the only one tried.
    pub knobs: Knobs,
    /// Program start skew: the k-th chip of the communicator starts k x this many ns after
    /// the first.
    pub skew_ns: u64,
    /// The model that measures the candidates (and the tree's times).
    pub model: crate::op::SimModel,
    /// Screen every candidate on the flow model and confirm only this many of the fastest at
    /// each size with `model` (`None`: every candidate on `model`).
    pub screen: Option<usize>,
}

/// Candidates confirmed with the packet model at each size after a flow screen, by default.
pub const SCREEN_CONFIRMS: usize = 3;

/// One point: the base tree's time, and the fastest candidate's.
#[derive(Clone, Debug)]
pub struct TunePoint {
    /// nccl-tests' size, bytes.
    pub size_bytes: u64,
    /// The base tree's choice and time.
    pub base: (Choice, Time),
    /// The fastest choice and its time.
    pub best: (Choice, Time),
    /// Candidates run.
    pub candidates: usize,
    /// Of those, how many ran on the spec's model (all of them without a screen).
    pub confirmed: usize,
}

/// Workers per link a fabric reduction may take (its mux's clients).
const FABRIC_WORKERS: [usize; 4] = [1, 2, 4, 8];
/// The smallest router payload tried: one bf16 page.
const SMALLEST_PACKET: u64 = 2048;

/// The candidates for `collective` on `comm` over `stack`: every algorithm it runs, links per
/// hop up to what every hop has, workers where they apply, packet sizes on the fabric and
/// bidirectional modes where they apply.
pub fn candidates(
    cluster: &Cluster,
    params: &Params,
    stack: Stack,
    collective: Collective,
    comm: &Communicator,
) -> Vec<Choice> {
    let n = comm.size();
    let hops = n - usize::from(comm.topology() == Topology::Line);
    let max_links = (0..hops)
        .map(|h| cluster.usable_links_between(comm.chip(h), comm.chip((h + 1) % n)).len())
        .min()
        .unwrap_or(1)
        .max(1);
    let links: Vec<Option<usize>> = match stack {
        Stack::Fabric if crate::fabric::on_link_zero(collective) => vec![None],
        _ => (1..=max_links).map(Some).collect(),
    };
    let reduces = collective.redop().is_some();
    let workers: Vec<Option<usize>> = match stack {
        Stack::Fabric if reduces => FABRIC_WORKERS.iter().copied().map(Some).collect(),
        Stack::Fabric => vec![None],
        Stack::Edm => (1..=crate::edm::MAX_CHANNELS / 2).map(Some).collect(),
    };
    let packets: Vec<Option<u64>> = match stack {
        // A page, tt-metal's default and the architecture's largest payload.
        Stack::Fabric => {
            [SMALLEST_PACKET, params.fabric_default_payload_bytes, params.fabric_max_payload_bytes]
                .into_iter()
                .map(Some)
                .collect()
        }
        Stack::Edm => vec![None],
    };
    let bidirectional = comm.topology() == Topology::Ring
        && match stack {
            Stack::Edm => matches!(
                collective,
                Collective::AllGather | Collective::AllReduce(_) | Collective::Broadcast { .. }
            ),
            Stack::Fabric => matches!(collective, Collective::Broadcast { .. }),
        };
    let bidirs: Vec<Option<Bidir>> = if bidirectional {
        vec![Some(Bidir::None), Some(Bidir::Split), Some(Bidir::Full)]
    } else {
        vec![None]
    };
    let mut out = Vec::new();
    for &algorithm in crate::stacks::transport(stack).algorithms(collective) {
        for &l in &links {
            for &w in &workers {
                for &p in &packets {
                    for &b in &bidirs {
                        out.push(Choice {
                            algorithm: (algorithm != Algorithm::Auto).then_some(algorithm),
                            links: l,
                            workers: w,
                            packet_bytes: p,
                            bidir: b,
                        });
                    }
                }
            }
        }
    }
    out
}

/// The tree that gives `choice` to the spec's collective on its communicator, and the base's
/// choices elsewhere.
fn tree_with(spec: &TuneSpec, steps: &[(u64, Choice)]) -> Select {
    let name = spec.collective.name();
    let (n, topo) = (spec.comm.size(), spec.comm.topology());
    spec.base.with_collective(name, Select::tuned(n, topo, spec.stack, steps, &spec.base.collective(name)))
}

/// Runs the spec's collective on a tensor of `tiles` tiles under `tree`: its time, or `None`
/// when the candidate cannot run (bad input such as a packet a page does not fit, or a
/// simulation that failed).
fn time_of(
    cluster: &Cluster,
    params: &Params,
    spec: &TuneSpec,
    tiles: u64,
    (tree, model): (Select, crate::op::SimModel),
) -> Result<Option<Time>, CclError> {
    Ok(run_one(cluster, params, spec, tiles, (tree, model))?.ok())
}

/// Runs the op at `tiles` with `tree` on `model`: its time, or why it did not run (the outer
/// error: a spec that cannot be submitted at all).
fn run_one(
    cluster: &Cluster,
    params: &Params,
    spec: &TuneSpec,
    tiles: u64,
    (tree, model): (Select, crate::op::SimModel),
) -> Result<Result<Time, CclError>, CclError> {
    let tensor = TensorSpec::new([1, 1, 32, 32 * tiles], spec.dtype, Layout::Tile)
        .map_err(|e| CclError::Invalid(e.0))?;
    let mut s = Session::new(cluster, params);
    s.set_stack(spec.stack);
    s.set_model(model);
    s.set_select(tree);
    if spec.skew_ns > 0 {
        s.set_skew(spec.comm.chips().to_vec(), spec.skew_ns)?;
    }
    let mut req = OpRequest::new(spec.collective.name(), spec.comm.clone(), spec.collective, tensor, 3);
    req.knobs = spec.knobs;
    s.submit(req)?;
    Ok(s.run().map(|r| r.ops[0].time))
}

/// Tunes `spec`: every candidate at every point, in parallel. Returns the tuned tree (the base
/// with the collective's subtree replaced) and what each point measured.
pub fn tune(
    cluster: &Cluster,
    params: &Params,
    spec: &TuneSpec,
) -> Result<(Select, Vec<TunePoint>), CclError> {
    let mut cands = candidates(cluster, params, spec.stack, spec.collective, &spec.comm);
    if let Some(given) = spec.knobs.packet_bytes {
        at_packet_size(&mut cands, given);
    }
    let mut tiles = spec.tiles.clone();
    tiles.sort_unstable();
    use crate::op::SimModel;
    // Runs (point, candidate or the base) on `model`, in parallel.
    let run = |jobs: &[(usize, Option<usize>)], model: SimModel| {
        jobs.par_iter()
            .with_max_len(1)
            .map(|&(i, c)| {
                let tree = match c {
                    None => spec.base.clone(),
                    Some(c) => tree_with(spec, &[(u64::MAX, cands[c])]),
                };
                time_of(cluster, params, spec, tiles[i], (tree, model))
            })
            .collect::<Result<Vec<Option<Time>>, CclError>>()
    };
    let every: Vec<(usize, Option<usize>)> = (0..tiles.len())
        .flat_map(|i| std::iter::once((i, None)).chain((0..cands.len()).map(move |c| (i, Some(c)))))
        .collect();
    // Which candidates run on the packet model at each point: all, or the screen's best few.
    let packet_jobs: Vec<(usize, Option<usize>)> = match spec.screen {
        None => every.clone(),
        Some(keep) => {
            let flow = run(&every, SimModel::Flow)?;
            (0..tiles.len())
                .flat_map(|i| {
                    let at = |c: usize| flow[i * (cands.len() + 1) + c + 1];
                    let mut ranked: Vec<(Time, usize)> =
                        (0..cands.len()).filter_map(|c| at(c).map(|t| (t, c))).collect();
                    ranked.sort();
                    std::iter::once((i, None))
                        .chain(ranked.into_iter().take(keep).map(move |(_, c)| (i, Some(c))))
                })
                .collect()
        }
    };
    let packet = run(&packet_jobs, spec.model)?;
    let mut times: Vec<Option<Time>> = vec![None; every.len()];
    for (&(i, c), t) in packet_jobs.iter().zip(packet) {
        times[i * (cands.len() + 1) + c.map_or(0, |c| c + 1)] = t;
    }
    // Why the base tree's choice does not run at a point, if it does not.
    let why = |t: u64| match run_one(cluster, params, spec, t, (spec.base.clone(), spec.model)) {
        Ok(Err(e)) | Err(e) => e.to_string(),
        Ok(Ok(_)) => "it ran once and not again".into(),
    };
    let points = best_per_point(spec, (&tiles, &cands), &times, &packet_jobs, &why)?;
    // Consecutive sizes with one winner share a leaf; the last covers every larger size.
    let mut steps: Vec<(u64, Choice)> = Vec::new();
    for p in &points {
        match steps.last_mut() {
            Some(last) if last.1 == p.best.0 => last.0 = p.size_bytes,
            _ => steps.push((p.size_bytes, p.best.0)),
        }
    }
    Ok((tree_with(spec, &steps), points))
}

/// A given packet size is the one every run takes: candidates that differed only in it are one.
fn at_packet_size(cands: &mut Vec<Choice>, given: u64) {
    let mut seen: Vec<Choice> = Vec::new();
    for c in cands.iter_mut() {
        c.packet_bytes = c.packet_bytes.map(|_| given);
    }
    cands.retain(|c| {
        !seen.contains(c) && {
            seen.push(*c);
            true
        }
    });
}

/// Per point (`tiles`), the base tree's choice and time and the fastest of it and the
/// candidates (`cands`) that ran there (`times`, indexed point by point, the base first; the
/// packet model's `jobs`); `why` says why the base did not run at a point.
fn best_per_point(
    spec: &TuneSpec,
    (tiles, cands): (&[u64], &[Choice]),
    times: &[Option<Time>],
    packet_jobs: &[(usize, Option<usize>)],
    why: &dyn Fn(u64) -> String,
) -> Result<Vec<TunePoint>, CclError> {
    let (n, topo) = (spec.comm.size(), spec.comm.topology());
    let mut points = Vec::new();
    for (i, &t) in tiles.iter().enumerate() {
        let size = t * spec.dtype.tile_bytes();
        let confirmed = packet_jobs.iter().filter(|j| j.0 == i && j.1.is_some()).count();
        let at = |j: usize| times[i * (cands.len() + 1) + j];
        let base_choice = spec.base.choose(spec.collective, n, size, topo, spec.stack);
        let base_time = at(0).ok_or_else(|| {
            CclError::Invalid(format!(
                "{} of {size} B does not run with the base tree's choice: {}",
                spec.collective.name(),
                why(t)
            ))
        })?;
        let mut best = (base_choice, base_time);
        for (c, cand) in cands.iter().enumerate() {
            if let Some(time) = at(c + 1).filter(|&time| time < best.1) {
                best = (*cand, time);
            }
        }
        points.push(TunePoint {
            size_bytes: size,
            base: (base_choice, base_time),
            best,
            candidates: cands.len(),
            confirmed,
        });
    }
    Ok(points)
}
