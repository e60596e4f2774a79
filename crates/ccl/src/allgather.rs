//! All-gather on a ring or a line of chips, built from EDMs and worker kernels.
//!
//! ```text
//!  chip i:  input ─(DRAM read)─► sender worker ─► EDM ══► chip i+1 EDM ─► receiver worker ─(DRAM write)─► output
//!                                    ▲                                         │
//!                                    └──── forward: semaphore per packet ◄─────┘  (read back from output)
//! ```
//!
//! Every chip holds one slice of the gathered tensor. A slice travels in packets of
//! `pages_per_packet` pages: the sender worker of a chip sends its own slice (and writes it into
//! its own output), then forwards each slice its receiver worker has written into the output,
//! until a slice has visited every chip. Packets are dealt round-robin over the hop's links
//! (reserved links are never used), and over `workers` worker pairs per link, each with its own
//! EDM channel. On a ring a slice travels `n - 1` hops one way; on a line it
//! travels both ways to both ends; with `Bidir::Split` a ring sends half of each slice each way
//! around, with `Bidir::Full` the whole slice goes half-way round each way.

use std::collections::BTreeMap;

use meshsim_engine::{Stats, Time};
use meshsim_hw::{CoreRef, Kernel, Machine, Params};
use meshsim_topology::soc::CoreCoord;
use meshsim_topology::{ChipIdx, Cluster, LinkId};

use crate::build::{Lane, OpBuild, Verify, read_pages, write_pages};
use crate::tensor::{Memory, Placement, TensorSpec};
use crate::worker::{ReceiverWorker, SenderWorker};

/// How slices move around a ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bidir {
    /// One direction only.
    None,
    /// Each slice split in two halves, one going each way around.
    Split,
    /// The whole slice goes half-way round each way.
    Full,
}

/// The chips an op runs on and how they connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// A closed ring.
    Ring,
    /// An open line.
    Line,
}

/// An all-gather to run.
#[derive(Clone, Debug)]
pub struct AllGatherSpec {
    /// The gathered (output) tensor on every chip.
    pub output: TensorSpec,
    /// The dimension gathered along.
    pub dim: usize,
    /// The chips in ring or line order.
    pub chips: Vec<ChipIdx>,
    /// Ring or line.
    pub topology: Topology,
    /// Links used per hop.
    pub links: usize,
    /// Worker pairs (and EDM channels) per link.
    pub workers: usize,
    /// Bidirectional mode (rings).
    pub bidir: Bidir,
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
    pub memory: Memory,
}

impl AllGatherSpec {
    /// A unidirectional ring all-gather of `output` along `dim` over `chips` with the defaults
    /// the CLI uses: one link and one worker pair per hop, 16 KiB packets, two buffers per EDM
    /// channel, tensors in DRAM, timing mode, no start skew, no trace.
    pub fn new(output: TensorSpec, dim: usize, chips: Vec<ChipIdx>) -> AllGatherSpec {
        AllGatherSpec {
            output,
            dim,
            chips,
            topology: Topology::Ring,
            links: 1,
            workers: 1,
            bidir: Bidir::None,
            pages_per_packet: None,
            buffers_per_channel: 2,
            verify: false,
            skew_ns: 0,
            trace: false,
            memory: Memory::Dram,
        }
    }
}

/// A problem with an op's arguments.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{0}")]
pub struct OpError(pub String);

/// What a run of an op measured.
#[derive(Clone, Debug)]
pub struct OpRun {
    /// The op's time, measured on the last chip to start: from its start to its end.
    pub time: Time,
    /// `(chip, start, end)` per chip, in `chips` order.
    pub per_chip: Vec<(ChipIdx, Time, Time)>,
    /// `Some(Ok)` when verified, `Some(Err(message))` on the first mismatch, `None` in timing mode.
    pub verified: Option<Result<(), String>>,
    /// Engine counters.
    pub stats: Stats,
    /// Use of every Ethernet link direction that carried a packet.
    pub links: Vec<meshsim_hw::LinkUse>,
    /// Kernel marks (EDM handshakes done, ...), in time order.
    pub marks: Vec<meshsim_hw::Mark>,
    /// The busiest NoC link or port and DRAM bank.
    pub resources: meshsim_hw::trace::ResourceUse,
    /// The full trace, when the spec asked for one.
    pub trace: Option<meshsim_hw::TraceData>,
}

/// One directed hop with the links it uses.
#[derive(Clone, Debug)]
struct Hop {
    from: usize,
    to: usize,
    links: Vec<LinkId>,
}

/// A flow of slices: which slices enter at which position, how far they go, along which hops.
#[derive(Clone, Debug)]
struct Flow {
    /// Hops in travel order: `hops[k]` goes from position `k` to the next.
    next: Vec<Option<Hop>>,
    /// For each chip position, the slices its sender sends (own first, then forwarded), with
    /// whether each is forwarded (`true`) or own.
    sends: Vec<Vec<(usize, bool)>>,
    /// For each chip position, the slices its receiver receives, with whether it forwards them.
    receives: Vec<Vec<(usize, bool)>>,
    /// The page range of each slice this flow carries.
    pages: (u64, u64),
}

/// Pages per packet: as asked (if it fits the smallest EDM buffer), or else 16 KiB worth, or as
/// many as the smallest buffer holds.
pub(crate) fn packet_pages(asked: Option<u64>, page: u64, min_buffer: Option<u64>) -> Result<u64, OpError> {
    let buffer = min_buffer.unwrap_or(u64::MAX);
    let ppp = asked.unwrap_or((16384.min(buffer) / page).max(1));
    if ppp == 0 || ppp * page > buffer {
        return Err(OpError(format!(
            "packets of {ppp} pages ({} B) do not fit the EDM buffers ({buffer} B); use fewer pages per packet, buffers or workers",
            ppp * page
        )));
    }
    Ok(ppp)
}

/// Per-packet page ranges of a slice's page range `[lo, hi)`.
pub(crate) fn packets(lo: u64, hi: u64, ppp: u64) -> Vec<(u64, u64)> {
    (lo..hi).step_by(ppp as usize).map(|p| (p, (p + ppp).min(hi))).collect()
}

/// Checks an all-gather's arguments against the cluster.
pub fn validate(cluster: &Cluster, spec: &AllGatherSpec) -> Result<TensorSpec, OpError> {
    let n = spec.chips.len();
    if n < 2 {
        return Err(OpError(format!("an all-gather needs at least 2 chips, got {n}")));
    }
    let slice = spec.output.split(spec.dim, n as u64).map_err(|e| OpError(e.0))?;
    if spec.links == 0 {
        return Err(OpError("links must be at least 1".into()));
    }
    if spec.workers == 0 || spec.workers > crate::edm::MAX_CHANNELS / 2 {
        return Err(OpError(format!("workers per link must be 1..{}", crate::edm::MAX_CHANNELS / 2)));
    }
    let hops = n - if spec.topology == Topology::Line { 1 } else { 0 };
    for h in 0..hops {
        let (a, b) = (spec.chips[h], spec.chips[(h + 1) % n]);
        let have = cluster.usable_links_between(a, b).len();
        if have == 0 {
            return Err(OpError(format!(
                "chips {} and {} are not linked (reserved links excluded)",
                cluster.chip(a).id,
                cluster.chip(b).id
            )));
        }
        if spec.links > have {
            return Err(OpError(format!(
                "{} links requested, but the hop from chip {} to chip {} has {have} usable (reserved links excluded)",
                spec.links,
                cluster.chip(a).id,
                cluster.chip(b).id
            )));
        }
    }
    if spec.topology == Topology::Line && spec.bidir != Bidir::None {
        return Err(OpError("a line all-gather is bidirectional by nature; --bidir applies to rings".into()));
    }
    Ok(slice)
}

/// Builds, runs and (optionally) verifies an all-gather on `cluster`.
pub fn all_gather(cluster: &Cluster, params: &Params, spec: &AllGatherSpec) -> Result<OpRun, OpError> {
    let slice = validate(cluster, spec)?;
    let n = spec.chips.len();
    let page = slice.page_bytes();
    let pages = slice.pages();
    let mut op = OpBuild::new(cluster, params, spec.verify, spec.trace);
    let input = Placement::first(spec.memory, page);
    let output = input.after(pages);
    if output.base + output.bank_bytes(pages * n as u64) > output.capacity(params) {
        return Err(OpError(format!(
            "input and output ({} B per chip) do not fit in {:?}",
            (n as u64 + 1) * slice.bytes(),
            spec.memory
        )));
    }

    // Flows: each a direction of travel with the page range of every slice it carries.
    let fwd: Vec<Option<Hop>> = (0..n)
        .map(|k| {
            let to = (k + 1) % n;
            (spec.topology == Topology::Ring || k + 1 < n).then(|| Hop {
                from: k,
                to,
                links: cluster.usable_links_between(spec.chips[k], spec.chips[to])[..spec.links].to_vec(),
            })
        })
        .collect();
    let bwd: Vec<Option<Hop>> = (0..n)
        .map(|k| {
            let to = (k + n - 1) % n;
            (spec.topology == Topology::Ring || k > 0).then(|| Hop {
                from: k,
                to,
                links: cluster.usable_links_between(spec.chips[k], spec.chips[to])[..spec.links].to_vec(),
            })
        })
        .collect();
    let flow =
        |next: &Vec<Option<Hop>>, dir: i64, reach: &dyn Fn(usize) -> usize, pages: (u64, u64)| -> Flow {
            let mut sends = vec![Vec::new(); n];
            let mut receives = vec![Vec::new(); n];
            for s in 0..n {
                let hops = reach(s);
                for h in 0..hops {
                    let at = (s as i64 + dir * h as i64).rem_euclid(n as i64) as usize;
                    sends[at].push((s, h > 0));
                    let to = (s as i64 + dir * (h as i64 + 1)).rem_euclid(n as i64) as usize;
                    receives[to].push((s, h + 1 < hops));
                }
            }
            // Senders send their own slice first, then forward in arrival order.
            for k in 0..n {
                sends[k].sort_by_key(|&(s, fwd)| {
                    (fwd, (k as i64 - s as i64).rem_euclid(n as i64) * dir.signum())
                });
                receives[k].sort_by_key(|&(s, _)| (k as i64 - s as i64).rem_euclid(n as i64) * dir.signum());
            }
            Flow { next: next.clone(), sends, receives, pages }
        };
    let flows: Vec<Flow> = match (spec.topology, spec.bidir) {
        (Topology::Ring, Bidir::None) => vec![flow(&fwd, 1, &|_| n - 1, (0, pages))],
        (Topology::Ring, Bidir::Split) => {
            let half = pages / 2;
            let mut f = vec![flow(&fwd, 1, &|_| n - 1, (0, half.max(1).min(pages)))];
            if half < pages && half > 0 {
                f.push(flow(&bwd, -1, &|_| n - 1, (half, pages)));
            }
            f
        }
        (Topology::Ring, Bidir::Full) => {
            let right = n / 2;
            let left = n - 1 - right;
            let mut f = vec![flow(&fwd, 1, &|_| right, (0, pages))];
            if left > 0 {
                f.push(flow(&bwd, -1, &|_| left, (0, pages)));
            }
            f
        }
        (Topology::Line, _) => {
            vec![flow(&fwd, 1, &|s| n - 1 - s, (0, pages)), flow(&bwd, -1, &|s| s, (0, pages))]
        }
    };

    // EDM channels per physical link, in the order they are added.
    let mut uses: BTreeMap<LinkId, usize> = BTreeMap::new();
    for f in &flows {
        for hop in f.next.iter().flatten() {
            for &l in &hop.links {
                *uses.entry(l).or_default() += spec.workers;
            }
        }
    }
    op.edms(params, &uses, spec.buffers_per_channel, page)?;
    let ppp = packet_pages(spec.pages_per_packet, page, op.min_buffer())?;
    let (n64, dim) = (n as u64, spec.dim);

    // Pass 1: a lane (worker pair and EDM channel) per (flow, hop, link x worker).
    struct Plan {
        flow: usize,
        from: usize,
        to: usize,
        j: usize,
        mine: Vec<(u64, u64)>,
        lane: Lane,
    }
    let mut plans: Vec<Plan> = Vec::new();
    for (fi, f) in flows.iter().enumerate() {
        for hop in f.next.iter().flatten() {
            // Packets are dealt round-robin over every lane of the hop.
            let lanes = hop.links.len() * spec.workers;
            for j in 0..lanes {
                let mine: Vec<(u64, u64)> =
                    packets(f.pages.0, f.pages.1, ppp).into_iter().skip(j).step_by(lanes).collect();
                let sizes: Vec<u64> = f.sends[hop.from]
                    .iter()
                    .flat_map(|_| mine.iter().map(|&(lo, hi)| (hi - lo) * page))
                    .collect();
                if sizes.is_empty() {
                    continue;
                }
                let (a, b) = (spec.chips[hop.from], spec.chips[hop.to]);
                let lane = op.lane(a, b, hop.links[j % hop.links.len()], sizes)?;
                plans.push(Plan { flow: fi, from: hop.from, to: hop.to, j, mine, lane });
            }
        }
    }

    // Pass 2: the kernels. A receiver that forwards feeds the sender of the next hop of its flow
    // on its chip, on the same lane.
    for plan in &plans {
        let f = &flows[plan.flow];
        let (a, b) = (spec.chips[plan.from], spec.chips[plan.to]);
        let forward_to = plans
            .iter()
            .find(|q| q.flow == plan.flow && q.from == plan.to && q.j == plan.j)
            .map(|q| q.lane.fwd);
        let (sends, receives) = (f.sends[plan.from].clone(), f.receives[plan.to].clone());
        let (tx, rx) = plan.lane.channel.clone();
        let (mine, e, s_slot, fwd_addr) =
            (plan.mine.clone(), op.ends.clone(), plan.lane.s_slot, plan.lane.fwd.1);
        op.programs[a.0 as usize].create_kernel(
            plan.lane.s_core,
            "ag_sender",
            0,
            vec![],
            move |k| async move {
                let mut w = SenderWorker::new(tx, s_slot.semaphore, 0);
                let mut forwarded = 0u32;
                for &(s, fwd) in &sends {
                    for &(lo, hi) in &mine {
                        let in_output = (lo..hi).map(|p| slice.page_in_whole(dim, n64, s as u64, p));
                        if fwd {
                            forwarded += 1;
                            k.noc_semaphore_wait_min(fwd_addr, forwarded).await?;
                            read_pages(&k, &output, in_output, STAGING).await?;
                        } else {
                            read_pages(&k, &input, lo..hi, STAGING).await?;
                            write_pages(&k, &output, in_output, STAGING).await?;
                        }
                        w.send(&k, STAGING).await?;
                        k.noc_async_write_barrier().await?;
                    }
                }
                e.borrow_mut().push((k.chip(), k.now()));
                Ok(())
            },
        );
        let (mine, e, r_slot) = (plan.mine.clone(), op.ends.clone(), plan.lane.r_slot);
        op.programs[b.0 as usize].create_kernel(
            plan.lane.r_core,
            "ag_receiver",
            1,
            vec![],
            move |k| async move {
                let mut w = ReceiverWorker::new(rx, r_slot.semaphore, 0);
                for &(s, forward) in &receives {
                    for &(lo, hi) in &mine {
                        w.receive(&k, STAGING).await?;
                        let in_output = (lo..hi).map(|p| slice.page_in_whole(dim, n64, s as u64, p));
                        write_pages(&k, &output, in_output, STAGING).await?;
                        k.noc_async_write_barrier().await?;
                        if forward {
                            let (at, addr) = forward_to.expect("a forwarding receiver has a next hop");
                            k.noc_semaphore_inc(k.get_noc_addr(at.x, at.y, addr), 1).await?;
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
            for p in 0..pages {
                let (bank, addr) = input.page(p);
                host_write(&op.m, chip, &input, bank, addr, &page_bytes(k as u64, p, page))?;
            }
        }
    }
    let check = |m: &Machine| verify(m, spec, &slice, &output);
    op.run(&spec.chips, spec.skew_ns, spec.verify.then_some(&check as Verify<'_>))
}

/// L1 staging buffer of the worker kernels.
pub(crate) const STAGING: u64 = 0x10000;

/// The bytes of page `p` of chip `k`'s input slice: distinct words per chip, page and offset.
pub fn page_bytes(k: u64, p: u64, page: u64) -> Vec<u8> {
    (0..page / 4).flat_map(|i| (((k << 24) ^ (p << 10) ^ i) as u32).to_le_bytes()).collect()
}

/// NoC coordinates of bank `bank` of a placement: a DRAM endpoint or a worker core.
pub(crate) fn endpoint(k: &Kernel, place: &Placement, bank: u64) -> CoreCoord {
    match place.memory {
        Memory::Dram => k.dram_endpoint(bank as usize),
        Memory::L1 => k.worker_noc_coord(bank as usize),
    }
}

/// Host write of one page (before a run).
pub(crate) fn host_write(
    m: &Machine,
    chip: ChipIdx,
    place: &Placement,
    bank: u64,
    addr: u64,
    data: &[u8],
) -> Result<(), OpError> {
    match place.memory {
        Memory::Dram => m.write_dram(chip, bank as usize, addr, data),
        Memory::L1 => m.write_l1(
            chip,
            CoreRef::Worker(CoreCoord { x: (bank % 8) as u32, y: (bank / 8) as u32 }),
            addr,
            data,
        ),
    }
    .map_err(|e| OpError(e.to_string()))
}

/// Host read of one page (after a run).
pub(crate) fn host_read(
    m: &Machine,
    chip: ChipIdx,
    place: &Placement,
    bank: u64,
    addr: u64,
    len: u64,
) -> Result<Vec<u8>, String> {
    match place.memory {
        Memory::Dram => m.read_dram(chip, bank as usize, addr, len),
        Memory::L1 => m.read_l1(
            chip,
            CoreRef::Worker(CoreCoord { x: (bank % 8) as u32, y: (bank / 8) as u32 }),
            addr,
            len,
        ),
    }
    .map_err(|e| e.to_string())
}

/// Checks every chip's output against the concatenation of all input slices.
fn verify(m: &Machine, spec: &AllGatherSpec, slice: &TensorSpec, output: &Placement) -> Result<(), String> {
    let n = spec.chips.len() as u64;
    let page = slice.page_bytes();
    for &chip in &spec.chips {
        for s in 0..n {
            for p in 0..slice.pages() {
                let q = slice.page_in_whole(spec.dim, n, s, p);
                let (bank, addr) = output.page(q);
                let got = host_read(m, chip, output, bank, addr, page)?;
                let want = page_bytes(s, p, page);
                if let Some(i) = (0..page as usize).step_by(4).find(|&i| got[i..i + 4] != want[i..i + 4]) {
                    let word = |b: &[u8]| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
                    return Err(format!(
                        "chip {}: output byte offset {} (page {q}): expected {:#010x}, got {:#010x}",
                        m.cluster().chip(chip).id,
                        q * page + i as u64,
                        word(&want),
                        word(&got)
                    ));
                }
            }
        }
    }
    Ok(())
}
