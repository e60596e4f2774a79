//! Reduce-scatter on a ring: every chip ends with one slice of the element-wise reduction (sum or
//! max) of all chips' tensors.
//!
//! ```text
//!  chip c: receiver worker: partial from c-1 (EDM) + own slice (DRAM) ─reduce─► scratch ─► sender worker ─► EDM ─► c+1
//!                                                                   └─ last step ─► output
//! ```
//!
//! The partial of slice `s` starts at chip `s + 1` with that chip's own slice and travels `n - 1`
//! hops; each chip on the way adds its own slice, and chip `s` writes the final sum. The
//! receiver holds the incoming packet and the matching pages of its own slice side by side in
//! its L1 staging area, so a packet must fit twice in the worker's L1 and once in an EDM buffer;
//! a configuration that does not is refused before anything runs. Reduction arithmetic works on
//! 32-bit words (test data is integer-valued, so results are exact); timing charges
//! `tile_reduce_cycles` per page.

use std::collections::BTreeMap;
use std::str::FromStr;

use meshsim_engine::Time;
use meshsim_hw::{Machine, Params};
use meshsim_topology::{ChipIdx, Cluster, LinkId};

use crate::allgather::{OpError, OpRun, STAGING, packets};
use crate::build::{Lane, OpBuild, Verify, read_pages, write_pages};
use crate::tensor::{Placement, TensorSpec};
use crate::worker::{ReceiverWorker, SenderWorker};

/// The reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedOp {
    /// Element-wise sum.
    Sum,
    /// Element-wise maximum.
    Max,
}

impl FromStr for RedOp {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sum" => Ok(RedOp::Sum),
            "max" => Ok(RedOp::Max),
            _ => Err(format!("unknown reduction '{s}' (sum, max)")),
        }
    }
}

/// A reduce-scatter to run.
#[derive(Clone, Debug)]
pub struct ReduceScatterSpec {
    /// The tensor every chip holds (and reduces); chip `k` of `chips` gets slice `k` of it.
    pub input: TensorSpec,
    /// The dimension scattered along.
    pub dim: usize,
    /// The chips in ring order.
    pub chips: Vec<ChipIdx>,
    /// The reduction.
    pub op: RedOp,
    /// Links used per hop.
    pub links: usize,
    /// Worker pairs (and EDM channels) per link.
    pub workers: usize,
    /// Pages per EDM packet; `None` picks 16 KiB worth.
    pub pages_per_packet: Option<u64>,
    /// EDM buffers per channel.
    pub buffers_per_channel: u64,
    /// Move real bytes and check every output.
    pub verify: bool,
    /// Chip `k` of `chips` starts its program `k * skew_ns` after the first.
    pub skew_ns: u64,
    /// Record a full trace of the run into [`OpRun::trace`].
    pub trace: bool,
    /// Where the tensors are interleaved: DRAM banks or worker L1.
    pub memory: crate::tensor::Memory,
}

impl ReduceScatterSpec {
    /// A ring reduce-scatter of `input` along `dim` over `chips` reducing with `op`, with the
    /// defaults of [`crate::allgather::AllGatherSpec::new`].
    pub fn new(input: TensorSpec, dim: usize, chips: Vec<ChipIdx>, op: RedOp) -> ReduceScatterSpec {
        ReduceScatterSpec {
            input,
            dim,
            chips,
            op,
            links: 1,
            workers: 1,
            pages_per_packet: None,
            buffers_per_channel: 2,
            verify: false,
            skew_ns: 0,
            trace: false,
            memory: crate::tensor::Memory::Dram,
        }
    }
}

/// The bytes of page `q` of chip `k`'s input: small integers, so sums are exact.
pub fn input_page(k: u64, q: u64, page: u64) -> Vec<u8> {
    (0..page / 4).flat_map(|i| ((k + 1) * 1000 + (q * 7 + i) % 997).to_le_bytes()[..4].to_vec()).collect()
}

fn reduce_words(op: RedOp, acc: &mut [u8], other: &[u8]) {
    for (a, b) in acc.chunks_exact_mut(4).zip(other.chunks_exact(4)) {
        let (x, y) =
            (u32::from_le_bytes(a.try_into().expect("4")), u32::from_le_bytes(b.try_into().expect("4")));
        let r = match op {
            RedOp::Sum => x.wrapping_add(y),
            RedOp::Max => x.max(y),
        };
        a.copy_from_slice(&r.to_le_bytes());
    }
}

/// Checks a reduce-scatter's arguments; returns the slice spec and pages per packet.
pub fn validate(
    cluster: &Cluster,
    params: &Params,
    spec: &ReduceScatterSpec,
) -> Result<(TensorSpec, u64), OpError> {
    let n = spec.chips.len();
    if n < 2 {
        return Err(OpError(format!("a reduce-scatter needs at least 2 chips, got {n}")));
    }
    let slice = spec.input.split(spec.dim, n as u64).map_err(|e| OpError(e.0))?;
    if spec.links == 0 {
        return Err(OpError("links must be at least 1".into()));
    }
    if spec.workers == 0 || spec.workers > crate::edm::MAX_CHANNELS / 2 {
        return Err(OpError(format!("workers per link must be 1..{}", crate::edm::MAX_CHANNELS / 2)));
    }
    for h in 0..n {
        let (a, b) = (spec.chips[h], spec.chips[(h + 1) % n]);
        let have = cluster.usable_links_between(a, b).len();
        if have == 0 || spec.links > have {
            return Err(OpError(format!(
                "{} links requested, but the hop from chip {} to chip {} has {have} usable (reserved links excluded)",
                spec.links,
                cluster.chip(a).id,
                cluster.chip(b).id
            )));
        }
    }
    let page = slice.page_bytes();
    let ppp = spec.pages_per_packet.unwrap_or((16384 / page).max(1));
    let packet = ppp * page;
    let staging = params.worker_l1_bytes.saturating_sub(STAGING);
    if ppp == 0 || 2 * packet > staging {
        return Err(OpError(format!(
            "reduce-scatter packets of {ppp} pages ({packet} B) exceed the receiver's buffering: a packet and the matching own pages need {} B of worker L1, {staging} B are free",
            2 * packet
        )));
    }
    Ok((slice, ppp))
}

/// Builds, runs and (optionally) verifies a ring reduce-scatter on `cluster`.
pub fn reduce_scatter(
    cluster: &Cluster,
    params: &Params,
    spec: &ReduceScatterSpec,
) -> Result<OpRun, OpError> {
    let (slice, ppp) = validate(cluster, params, spec)?;
    let n = spec.chips.len();
    let n64 = n as u64;
    let page = slice.page_bytes();
    let whole_pages = spec.input.pages();
    let mut op = OpBuild::new(cluster, params, spec.verify, spec.trace);
    let input = Placement::first(spec.memory, page);
    let scratch = input.after(whole_pages);
    let output = scratch.after(whole_pages);
    if output.base + output.bank_bytes(slice.pages()) > output.capacity(params) {
        return Err(OpError(format!(
            "input, scratch and output ({} B per chip) do not fit in {:?}",
            2 * spec.input.bytes(),
            spec.memory
        )));
    }
    let hops: Vec<Vec<LinkId>> = (0..n)
        .map(|k| cluster.usable_links_between(spec.chips[k], spec.chips[(k + 1) % n])[..spec.links].to_vec())
        .collect();
    let mut uses: BTreeMap<LinkId, usize> = BTreeMap::new();
    for &l in hops.iter().flatten() {
        *uses.entry(l).or_default() += spec.workers;
    }
    op.edms(params, &uses, spec.buffers_per_channel, page)?;
    // The receiver's staging was checked in `validate` for at least this packet; it must also
    // fit an EDM buffer.
    let ppp = crate::allgather::packet_pages(spec.pages_per_packet, page, op.min_buffer())?.min(ppp);

    struct Plan {
        from: usize,
        j: usize,
        mine: Vec<(u64, u64)>,
        lane: Lane,
    }
    let mut plans = Vec::new();
    for (from, links) in hops.iter().enumerate() {
        let lanes = links.len() * spec.workers;
        for j in 0..lanes {
            let mine: Vec<(u64, u64)> =
                packets(0, slice.pages(), ppp).into_iter().skip(j).step_by(lanes).collect();
            if mine.is_empty() {
                continue;
            }
            let sizes: Vec<u64> =
                (0..n - 1).flat_map(|_| mine.iter().map(|&(lo, hi)| (hi - lo) * page)).collect();
            let (a, b) = (spec.chips[from], spec.chips[(from + 1) % n]);
            let lane = op.lane(a, b, links[j % links.len()], sizes)?;
            plans.push(Plan { from, j, mine, lane });
        }
    }
    let (dim, red) = (spec.dim, spec.op);
    for plan in &plans {
        let to = (plan.from + 1) % n;
        let (a, b) = (spec.chips[plan.from], spec.chips[to]);
        // The receiver on `b` feeds `b`'s sender (the next hop's lane with the same index).
        let forward_to = plans
            .iter()
            .find(|q| q.from == to && q.j == plan.j)
            .map(|q| q.lane.fwd)
            .expect("a ring has every hop");
        let (tx, rx) = plan.lane.channel.clone();
        let (mine, e, s_slot, fwd_addr, c) =
            (plan.mine.clone(), op.ends.clone(), plan.lane.s_slot, plan.lane.fwd.1, plan.from as u64);
        op.programs[a.0 as usize].create_kernel(
            plan.lane.s_core,
            "rs_sender",
            0,
            vec![],
            move |k| async move {
                let mut w = SenderWorker::new(tx, s_slot.semaphore, 0);
                let mut forwarded = 0u32;
                for r in 0..n64 - 1 {
                    let s = (c + 2 * n64 - 1 - r) % n64;
                    for &(lo, hi) in &mine {
                        let place = if r == 0 { &input } else { &scratch };
                        if r > 0 {
                            forwarded += 1;
                            k.noc_semaphore_wait_min(fwd_addr, forwarded).await?;
                        }
                        read_pages(&k, place, (lo..hi).map(|p| slice.page_in_whole(dim, n64, s, p)), STAGING)
                            .await?;
                        w.send(&k, STAGING).await?;
                        k.noc_async_write_barrier().await?;
                    }
                }
                e.borrow_mut().push((k.chip(), k.now()));
                Ok(())
            },
        );
        let (mine, e, r_slot, c) = (plan.mine.clone(), op.ends.clone(), plan.lane.r_slot, to as u64);
        op.programs[b.0 as usize].create_kernel(
            plan.lane.r_core,
            "rs_receiver",
            1,
            vec![],
            move |k| async move {
                let mut w = ReceiverWorker::new(rx, r_slot.semaphore, 0);
                let reduce = k.cycles(k.params().tile_reduce_cycles);
                for r in 0..n64 - 1 {
                    let s = (c + 2 * n64 - 2 - r) % n64;
                    let last = r == n64 - 2;
                    for &(lo, hi) in &mine {
                        let bytes = w.receive(&k, STAGING).await?;
                        let own = STAGING + bytes;
                        read_pages(&k, &input, (lo..hi).map(|p| slice.page_in_whole(dim, n64, s, p)), own)
                            .await?;
                        if k.is_functional() {
                            let mut acc = k.read_bytes(STAGING, bytes)?;
                            reduce_words(red, &mut acc, &k.read_bytes(own, bytes)?);
                            k.write_bytes(STAGING, &acc)?;
                        }
                        k.delay(Time(reduce.0 * (hi - lo))).await;
                        if last {
                            write_pages(&k, &output, lo..hi, STAGING).await?;
                            k.noc_async_write_barrier().await?;
                        } else {
                            write_pages(
                                &k,
                                &scratch,
                                (lo..hi).map(|p| slice.page_in_whole(dim, n64, s, p)),
                                STAGING,
                            )
                            .await?;
                            k.noc_async_write_barrier().await?;
                            k.noc_semaphore_inc(
                                k.get_noc_addr(forward_to.0.x, forward_to.0.y, forward_to.1),
                                1,
                            )
                            .await?;
                        }
                    }
                }
                e.borrow_mut().push((k.chip(), k.now()));
                Ok(())
            },
        );
    }
    if spec.verify {
        for (k, &chip) in spec.chips.iter().enumerate() {
            for q in 0..whole_pages {
                let (bank, addr) = input.page(q);
                crate::allgather::host_write(
                    &op.m,
                    chip,
                    &input,
                    bank,
                    addr,
                    &input_page(k as u64, q, page),
                )?;
            }
        }
    }
    let check = |m: &Machine| verify(m, spec, &slice, &output);
    op.run(&spec.chips, spec.skew_ns, spec.verify.then_some(&check as Verify<'_>))
}

/// Checks every chip's output slice against the reduction of all chips' inputs.
fn verify(
    m: &Machine,
    spec: &ReduceScatterSpec,
    slice: &TensorSpec,
    output: &Placement,
) -> Result<(), String> {
    let n = spec.chips.len() as u64;
    let page = slice.page_bytes();
    for (c, &chip) in spec.chips.iter().enumerate() {
        for p in 0..slice.pages() {
            let q = slice.page_in_whole(spec.dim, n, c as u64, p);
            let mut want = input_page(0, q, page);
            for k in 1..n {
                reduce_words(spec.op, &mut want, &input_page(k, q, page));
            }
            let (bank, addr) = output.page(p);
            let got = crate::allgather::host_read(m, chip, output, bank, addr, page)?;
            if let Some(i) = (0..page as usize).step_by(4).find(|&i| got[i..i + 4] != want[i..i + 4]) {
                let word = |b: &[u8]| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
                return Err(format!(
                    "chip {}: output byte offset {}: expected {}, got {}",
                    m.cluster().chip(chip).id,
                    p * page + i as u64,
                    word(&want),
                    word(&got)
                ));
            }
        }
    }
    Ok(())
}
