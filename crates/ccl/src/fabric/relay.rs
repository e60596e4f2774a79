//! All-gather on a ring by tt-metal's unicast factory (`shared/fabric.md` §7, `@022ab700`),
//! which Wormhole rings use from 64 pages per device (20 for pages of 4 KiB or more):
//! store-and-forward, one hop at a time.
//!
//! Per rank, one kernel per direction sends stripes to its neighbour that way: stripe 0 is the
//! rank's own slice (read from its input; the forward kernel also copies it into its own
//! output), stripe i the slice i ranks upstream, read back from this rank's output once the
//! upstream neighbour's stripe i - 1 has landed there. Each direction carries a slice half-way
//! round: (n - 1) / 2 stripes on an odd ring; on an even ring n / 2, the last being the
//! antipode's slice, of which the forward direction carries the first half of the packets and
//! the backward direction the rest. Packets are scatter writes of up to 4 pages straight into
//! the neighbour's output; after every `chunks_per_sync` packets, and at each stripe's end, a
//! flushed increment of the neighbour's semaphore for that direction counts them.

use std::rc::Rc;

use meshsim_engine::{Cond, TaskResult};
use meshsim_hw::Kernel;
use meshsim_topology::soc::CoreCoord;

use super::build::{entry_barrier, issue_reads, page_addr};
use super::mux::Ports;
use super::worker::CONNECTION_L1_BYTES;
use super::{Fabric, Header, NocCmd, Route};
use crate::tensor::{Placement, TensorSpec};
use crate::transport::Gate;

/// Packets a relay kernel reads at once.
pub(crate) const WINDOW: usize = 8;

/// Packets between increments of the neighbour's semaphore (tt-metal's all-gather cap).
pub(crate) const CHUNKS_PER_SYNC: usize = 160;

/// The packets of a direction's stripe `i`: (first packet of the slice, packets). `total` is
/// the slice's packet count, `stripes` the direction's stripe count.
pub(crate) fn stripe(n: usize, i: usize, forward: bool, total: usize) -> (usize, usize) {
    let antipode = n % 2 == 0 && i + 1 == n / 2;
    if !antipode {
        return (0, total);
    }
    let first = total.div_ceil(2);
    if forward { (0, first) } else { (first, total - first) }
}

/// Stripes a direction carries on a ring of `n`.
pub(crate) fn stripes(n: usize) -> usize {
    if n % 2 == 0 { n / 2 } else { (n - 1) / 2 }
}

/// What a relay kernel needs.
pub(crate) struct RelayCtx {
    pub ports: Rc<Ports>,
    pub phase: usize,
    pub fabric: Rc<Fabric>,
    pub router: usize,
    /// Which of the link's workers it is (its mux client when there are two).
    pub worker: usize,
    pub forward: bool,
    pub rank: usize,
    pub n: usize,
    pub slice: TensorSpec,
    pub dim: usize,
    pub input: Placement,
    pub output: Placement,
    /// Whether the forward kernel copies the rank's own slice into its output, and whether
    /// the slice is read from the output (an in-place all-gather) rather than the input.
    pub own: (bool, bool),
    /// Every packet of a slice: (first page, pages).
    pub packets: Vec<(u64, u64)>,
    /// The semaphores of this direction on the op's core: (core, address).
    pub sem: (CoreCoord, u64),
    pub base: u64,
    pub max: u64,
    pub barrier: u32,
    pub gate: Gate,
}

/// tt-metal's relay workers per link and direction on a Wormhole ring (`shared/fabric.md` §7,
/// `@022ab700`): 1 for at most 64 KiB of a device's slice per link, or for long stripes (64
/// packets or more per link); otherwise 2, behind a mux.
pub(crate) fn workers(bytes_per_link: u64, packets_per_link: u64) -> usize {
    if bytes_per_link <= 64 << 10 || packets_per_link >= 64 { 1 } else { 2 }
}

/// One packet a relay kernel sends: its slice, pages, the packets it must have received first,
/// and the increment that follows it.
struct Item {
    slice: usize,
    lo: u64,
    pages: u64,
    from_input: bool,
    need: u64,
    inc: Option<u32>,
}

/// A relay kernel: its stripes in waves of reads and sends.
pub(crate) async fn relay(k: Kernel, c: Rc<RelayCtx>) -> TaskResult {
    let start = c.gate.enter(&k).await;
    let conn = c.ports.open(&k, c.fabric.clone(), (c.phase, c.router, c.worker), c.base).await?;
    entry_barrier(&k, Some(&conn), c.barrier, c.n).await?;
    let (n, total) = (c.n, c.packets.len());
    let page = c.slice.page_bytes();
    let whole = |s: usize, q: u64| c.slice.page_in_whole(c.dim, n as u64, s as u64, q);
    // The packets in sending order, made as they are needed (a long op has millions).
    let forward = c.forward;
    let mut items = (0..stripes(n))
        .flat_map(|i| {
            let slice = if forward { (c.rank + n - i) % n } else { (c.rank + i) % n };
            let (first, count) = stripe(n, i, forward, total);
            let upstream_first = if i == 0 { 0 } else { stripe(n, i - 1, forward, total).0 };
            // Packets of the upstream neighbour's stripes 0..i-1 (its stripes are sized as ours).
            let before: u64 = (0..i.saturating_sub(1)).map(|j| stripe(n, j, forward, total).1 as u64).sum();
            c.packets[first..first + count].iter().enumerate().map(move |(x, &(lo, pages))| {
                // Slice packet `first + x` came as packet `first + x - upstream_first` of the
                // upstream's stripe i - 1.
                let need = if i == 0 { 0 } else { before + (first + x - upstream_first) as u64 + 1 };
                let end = x + 1 == count || (x + 1) % CHUNKS_PER_SYNC == 0;
                let inc = end.then(|| (x % CHUNKS_PER_SYNC + 1) as u32);
                Item { slice, lo, pages, from_input: i == 0, need, inc }
            })
        })
        .peekable();
    let (sem_at, sem) = c.sem;
    let at = |i: usize| c.base + CONNECTION_L1_BYTES + (i % WINDOW) as u64 * c.max;
    // The window of packets read and then sent together, each with its place in the order.
    let mut window: Vec<(usize, Item)> = Vec::with_capacity(WINDOW);
    let mut next = 0;
    while let Some(head) = items.peek() {
        if (k.read_u32(sem)? as u64) < head.need {
            k.wait_until(sem, Cond::Ge(head.need as u32)).await?;
        }
        k.noc_async_writes_flushed().await;
        window.clear();
        while window.len() < WINDOW {
            let landed = k.read_u32(sem)? as u64;
            let Some(x) = items.next_if(|x| landed >= x.need) else {
                break;
            };
            if x.from_input && !c.own.1 {
                issue_reads(&k, &c.input, x.lo..x.lo + x.pages, at(next), page).await?;
            } else {
                let pages = (x.lo..x.lo + x.pages).map(|q| whole(x.slice, q));
                issue_reads(&k, &c.output, pages, at(next), page).await?;
            }
            window.push((next, x));
            next += 1;
        }
        k.noc_async_read_barrier().await?;
        for &(i, ref x) in &window {
            let out: Vec<u64> =
                (x.lo..x.lo + x.pages).map(|q| page_addr(&k, &c.output, whole(x.slice, q))).collect();
            if x.from_input && c.forward && c.own.0 {
                for (y, &dst) in out.iter().enumerate() {
                    k.noc_async_write(at(i) + y as u64 * page, dst, page).await?;
                }
            }
            let cmd = NocCmd::pages(&out, page);
            conn.send(
                &k,
                Header { cmd, payload: x.pages * page, route: Route::unicast(1), src_ch: 0 },
                at(i),
            )
            .await?;
            if let Some(inc) = x.inc {
                let cmd =
                    NocCmd::AtomicInc { sem: k.get_noc_addr(sem_at.x, sem_at.y, sem), inc, flush: true };
                conn.send(&k, Header { cmd, payload: 0, route: Route::unicast(1), src_ch: 0 }, 0).await?;
            }
        }
    }
    conn.close(&k).await?;
    k.noc_async_write_barrier().await?;
    c.gate.leave(&k, start);
    Ok(())
}

/// Packets this rank receives from upstream in a direction in all: the upstream's stripes.
pub(crate) fn received(n: usize, forward: bool, total: usize) -> u64 {
    (0..stripes(n)).map(|i| stripe(n, i, forward, total).1 as u64).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both directions together deliver every other rank's slice exactly once to each rank:
    /// a slice travels stripes(n) hops each way, the antipode's halves one each way.
    #[test]
    fn the_stripes_cover_every_slice_once() {
        for n in 2..=9 {
            let total = 7;
            let want: Vec<usize> = (0..n).map(|d| if d == 0 { 0 } else { total }).collect();
            // Stripe i carries the slice i ranks upstream to the rank i + 1 away from its owner:
            // distance i + 1 going forward, n - (i + 1) counted forward when going backward.
            let mut folded = vec![0; n];
            for forward in [true, false] {
                for i in 0..stripes(n) {
                    let d = if forward { i + 1 } else { n - (i + 1) };
                    folded[d] += stripe(n, i, forward, total).1;
                }
            }
            assert_eq!(folded, want, "n {n}");
        }
    }
}
