//! The CCL guide's ring ping: a packet travels around a ring of chips, and the master receiver
//! times its return.
//!
//! ```text
//!  chip i:  receiver ERISC ──NoC write + semaphore inc──► sender ERISC ──Ethernet──► chip i+1
//!  chip 0:  master receiver injects the packet into its own sender, then waits for it to
//!           arrive back from the last chip
//! ```
//!
//! As in the guide's walkthrough, every hop has its own receiver and sender kernels on the
//! Ethernet cores at the two ends of the hop's link; a receiver acknowledges its upstream sender
//! after forwarding; the first trip is not measured (it absorbs the programs' start skew). By
//! default payload and its sync record are sent as one packet ("merged"), the formulation of the
//! guide's ~650 ns per hop; `unmerged` runs the walkthrough's kernels as written
//! (`eth_send_bytes_over_channel`, `eth_receiver_channel_ack`/`done` on channel 0), the older
//! ~690 ns formulation. Rings of more hops than chips revisit chips over links not used before.

use std::cell::RefCell;
use std::rc::Rc;

use meshsim_engine::{Cond, TaskResult, Time};
use meshsim_hw::{CoreRef, Kernel, Program};
use meshsim_topology::soc::CoreCoord;
use meshsim_topology::{ChipIdx, Cluster, LinkId};
use rayon::prelude::*;
use serde::Serialize;

use crate::common::{BenchError, Layout, Measured, Setup};

/// What a ring point is asked to do.
#[derive(Clone, Copy, Debug)]
pub struct RingSpec {
    /// Payload bytes of the ping.
    pub size_bytes: u64,
    /// Hops around the ring.
    pub hops: usize,
    /// Measured trips (after one unmeasured).
    pub samples: u64,
    /// The walkthrough's kernels as written: payload and sync sent separately
    /// (`eth_send_bytes_over_channel`), receivers acknowledge and free channel 0.
    pub unmerged: bool,
    /// Program start skew: chip `i` (by index) starts `i * start_skew_ns` after chip 0, as when
    /// programs are compiled and launched one after another. The unmeasured first trip absorbs it.
    pub start_skew_ns: u64,
}

/// One measured point.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RingRow {
    /// Payload bytes.
    pub size_bytes: u64,
    /// Hops around the ring.
    pub hops: u64,
    /// Mean time for one trip around the ring, ns.
    pub round_trip_ns: f64,
    /// `round_trip_ns / hops`.
    pub ns_per_hop: f64,
}

/// One hop of a ring walk: from `chip` over `link` to the next chip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkHop {
    /// The sending chip.
    pub chip: ChipIdx,
    /// The link used.
    pub link: LinkId,
}

/// Finds a closed walk of `hops` hops starting at the lowest chip, using every link at most
/// once: the cluster's ring when `hops` equals the chip count, a simple cycle when fewer, and a
/// walk revisiting chips over unused links when more.
pub fn ring_walk(cluster: &Cluster, hops: usize) -> Option<Vec<WalkHop>> {
    let n = cluster.chips().len();
    if hops < 2 {
        return None;
    }
    if hops == n {
        // The cluster's ring, unless it goes both ways over one link (a 2-chip ring): a hop's
        // Ethernet cores run a receiver and a sender each, so every hop needs its own link.
        let ring = cluster.ring()?;
        let walk: Vec<WalkHop> =
            ring.hops.iter().map(|h| WalkHop { chip: h.from, link: h.links[0] }).collect();
        let mut links: Vec<LinkId> = walk.iter().map(|h| h.link).collect();
        links.sort();
        links.dedup();
        if links.len() == walk.len() {
            return Some(walk);
        }
    }
    let mut walk = Vec::new();
    let mut used = vec![false; cluster.links().len()];
    let mut visits = vec![0usize; n];
    visits[0] = 1;
    let mut budget = 100_000usize;
    dfs(cluster, hops, ChipIdx(0), &mut walk, &mut used, &mut visits, &mut budget).then_some(walk)
}

fn dfs(
    c: &Cluster,
    hops: usize,
    at: ChipIdx,
    walk: &mut Vec<WalkHop>,
    used: &mut [bool],
    visits: &mut [usize],
    budget: &mut usize,
) -> bool {
    if walk.len() == hops {
        return at == ChipIdx(0);
    }
    let n = c.chips().len();
    let mut options: Vec<(usize, ChipIdx, LinkId)> = Vec::new();
    for &nb in c.neighbours(at) {
        let last = walk.len() + 1 == hops;
        let fresh = visits[nb.0 as usize] == 0;
        let allowed = if last { nb == ChipIdx(0) } else { fresh || hops > n };
        if !allowed {
            continue;
        }
        if let Some(&l) = c.usable_links_between(at, nb).iter().find(|l| !used[l.0 as usize]) {
            options.push((visits[nb.0 as usize], nb, l));
        }
    }
    options.sort();
    for (_, nb, l) in options {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        used[l.0 as usize] = true;
        visits[nb.0 as usize] += 1;
        walk.push(WalkHop { chip: at, link: l });
        if dfs(c, hops, nb, walk, used, visits, budget) {
            return true;
        }
        walk.pop();
        visits[nb.0 as usize] -= 1;
        used[l.0 as usize] = false;
    }
    false
}

/// The most hops a ring ping takes.
pub const MAX_HOPS: usize = 4096;

/// Runs one ring point.
pub fn ring(setup: &Setup, spec: RingSpec) -> Result<Measured<RingRow>, BenchError> {
    if spec.hops > MAX_HOPS {
        return Err(BenchError::BadArgument(format!(
            "{} hops is more than the {MAX_HOPS} meshsim runs",
            spec.hops
        )));
    }
    let walk = ring_walk(&setup.cluster, spec.hops)
        .ok_or_else(|| BenchError::NoRing { cluster: setup.cluster.origin().to_owned(), hops: spec.hops })?;
    crate::common::check_count(("sample", "samples"), spec.samples, crate::common::MAX_SAMPLES)?;
    let p = &setup.params;
    let lay = Rc::new(Layout::new(p, spec.size_bytes, 1, 32)?);
    let size = spec.size_bytes;
    let (trips, unmerged) = (spec.samples + 1, spec.unmerged);
    let mut m = setup.machine();
    let times = Rc::new(RefCell::new(Vec::new()));
    let mut programs: Vec<Program> =
        (0..setup.cluster.chips().len()).map(|c| Program::new(ChipIdx(c as u32))).collect();
    let hops = walk.len();
    for i in 0..hops {
        let this = walk[i];
        let prev = walk[(i + hops - 1) % hops];
        let out = setup.cluster.link(this.link).ends_from(this.chip).expect("walk link").0;
        let inc = setup.cluster.link(prev.link).ends_from(this.chip).expect("walk link").0;
        let dev = m.device(this.chip);
        let sender_at = dev.noc_coord(CoreRef::Eth(out.chan));
        let hop = Rc::new(Hop { lay: lay.clone(), size, trips, unmerged, master: i == 0, sender_at });
        // Receiver of the previous hop's link: forwards to this chip's sender.
        let (h, t) = (hop.clone(), times.clone());
        programs[this.chip.0 as usize].create_kernel(
            CoreRef::Eth(inc.chan),
            "receiver",
            0,
            vec![],
            move |k| ring_receiver(k, h, t),
        );
        // Sender of this hop's link.
        programs[this.chip.0 as usize]
            .create_kernel(CoreRef::Eth(out.chan), "sender", 0, vec![], move |k| ring_sender(k, hop));
    }
    let skew = spec.start_skew_ns;
    let last = programs.len().saturating_sub(1) as u64;
    if skew.checked_mul(last).is_none_or(|t| t > meshsim_ccl::session::MAX_START_NS) {
        return Err(BenchError::BadArgument(format!(
            "a start skew of {skew} ns per chip over {} chips starts the last one more than {} s after the first, the longest meshsim simulates",
            programs.len(),
            meshsim_ccl::session::MAX_START_NS / 1_000_000_000
        )));
    }
    let stats = m.launch(programs, |c| Time::from_ns(c.0 as u64 * skew))?;
    let times = times.borrow();
    let rtt = times.iter().map(|t| t.as_ns_f64()).sum::<f64>() / times.len() as f64;
    let row =
        RingRow { size_bytes: size, hops: hops as u64, round_trip_ns: rtt, ns_per_hop: rtt / hops as f64 };
    Ok(Measured::new(row, stats, &mut m))
}

/// What a hop's two kernels share: the layout, the ping's size, the trips, the protocol, and
/// whether this hop's receiver times the trips (the first hop's).
struct Hop {
    lay: Rc<Layout>,
    size: u64,
    trips: u64,
    unmerged: bool,
    master: bool,
    /// This chip's sender core, which the receiver forwards to.
    sender_at: CoreCoord,
}

/// The receiver of the previous hop's link: forwards each ping to this chip's sender (the
/// first hop's starts each trip and times it when the ping is back), then frees its buffer.
async fn ring_receiver(k: Kernel, h: Rc<Hop>, times: Rc<RefCell<Vec<Time>>>) -> TaskResult {
    let l = &h.lay;
    let (buf, sync, sem, done) = (l.slot(0), l.sync(0), l.end(), l.end() + 16);
    k.eth_setup_handshake(l.handshake, false).await?;
    let to_sender = k.get_noc_addr(h.sender_at.x, h.sender_at.y, buf);
    let sender_sem = k.get_noc_addr(h.sender_at.x, h.sender_at.y, sem);
    for trip in 1..=h.trips as u32 {
        let t0 = k.now();
        if h.master {
            k.noc_async_write(buf, to_sender, h.size).await?;
            k.noc_semaphore_inc(sender_sem, 1).await?;
        }
        if h.unmerged {
            k.eth_wait_for_bytes_on_channel(0).await?;
        } else {
            k.wait_until(sync, Cond::Eq(trip)).await?;
        }
        if h.master {
            if trip > 1 {
                times.borrow_mut().push(k.now() - t0);
            }
        } else {
            k.noc_async_write(buf, to_sender, h.size).await?;
            k.noc_semaphore_inc(sender_sem, 1).await?;
        }
        if h.unmerged {
            // Acknowledge as soon as possible, then free the channel once forwarded.
            k.eth_receiver_channel_ack(0, done + 16).await?;
            k.noc_async_write_barrier().await?;
            k.eth_receiver_channel_done(0).await?;
        } else {
            // Tell the upstream sender its buffer here is free again.
            k.write_u32(done + 16, trip)?;
            k.eth_send_packet(0, (done + 16) >> 4, done >> 4, 1).await?;
            k.noc_async_write_barrier().await?;
        }
    }
    Ok(())
}

/// The sender of this hop's link: sends each ping on once the receiver has handed it over and
/// the next chip's buffer is free.
async fn ring_sender(k: Kernel, h: Rc<Hop>) -> TaskResult {
    let l = &h.lay;
    let (buf, sync, sem, done) = (l.slot(0), l.sync(0), l.end(), l.end() + 16);
    k.eth_setup_handshake(l.handshake, true).await?;
    for trip in 1..=h.trips as u32 {
        if h.unmerged {
            k.noc_semaphore_wait(sem, 1).await?;
            k.noc_semaphore_set(sem, 0)?;
            k.eth_send_bytes_over_channel(buf, buf, h.size, 0).await?;
            k.eth_wait_receiver_channel_done(0).await?;
            continue;
        }
        k.noc_semaphore_wait_min(sem, trip).await?;
        if trip > 1 {
            k.wait_until(done, Cond::Ge(trip - 1)).await?;
        }
        k.write_u32(sync, trip)?;
        k.eth_send_packet(0, buf >> 4, buf >> 4, (h.size + 16) >> 4).await?;
    }
    if !h.unmerged {
        k.wait_until(done, Cond::Ge(h.trips as u32)).await?;
    }
    Ok(())
}

/// Runs a sweep over payload sizes in parallel; rows come back in input order.
pub fn sweep(setup: &Setup, sizes: &[u64], spec: RingSpec) -> Result<Vec<RingRow>, BenchError> {
    sizes.par_iter().map(|&size_bytes| ring(setup, RingSpec { size_bytes, ..spec }).map(|m| m.row)).collect()
}
