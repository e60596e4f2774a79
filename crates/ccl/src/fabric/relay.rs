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
use super::schedule::{RELAY_CHUNKS_PER_SYNC, RELAY_WINDOW};
use super::worker::CONNECTION_L1_BYTES;
use super::{Fabric, Header, NocCmd, Route};
use crate::tensor::{Placement, TensorSpec};
use crate::transport::Gate;

/// What a relay kernel needs.
pub(crate) struct RelayCtx {
    pub ports: Rc<Ports>,
    pub phase: usize,
    pub fabric: Rc<Fabric>,
    pub router: usize,
    /// Which of the link's workers it is (its mux client when there are two).
    pub worker: usize,
    pub forward: bool,
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
    /// Its stripes in order: (slice, first packet, packets) — see [`relay_stripes`].
    pub stripes: Vec<(usize, usize, usize)>,
    /// The semaphores of this direction on the op's core: (core, address).
    pub sem: (CoreCoord, u64),
    pub base: u64,
    pub max: u64,
    pub barrier: u32,
    pub gate: Gate,
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

/// Packet `i`'s buffer: two windows of them, as tt-metal's relay reads on one RISC and sends
/// on the other through a circular buffer, so the next window's reads are on their way while
/// this one goes out.
fn buffer(c: &RelayCtx, i: usize) -> u64 {
    c.base + CONNECTION_L1_BYTES + (i % (2 * RELAY_WINDOW)) as u64 * c.max
}

/// Issues the reads of up to [`RELAY_WINDOW`] packets whose stripes have landed, in order, stopping
/// at the first that has not; `next` numbers them. Returns them with their numbers.
async fn fill(
    k: &Kernel,
    c: &RelayCtx,
    items: &mut std::iter::Peekable<impl Iterator<Item = Item>>,
    next: &mut usize,
) -> Result<Vec<(usize, Item)>, meshsim_engine::TaskError> {
    let page = c.slice.page_bytes();
    let mut window = Vec::with_capacity(RELAY_WINDOW);
    while window.len() < RELAY_WINDOW {
        let landed = k.read_u32(c.sem.1)? as u64;
        let Some(x) = items.next_if(|x| landed >= x.need) else {
            break;
        };
        if x.from_input && !c.own.1 {
            issue_reads(k, &c.input, x.lo..x.lo + x.pages, buffer(c, *next), page).await?;
        } else {
            let pages =
                (x.lo..x.lo + x.pages).map(|q| c.slice.page_in_whole(c.dim, c.n as u64, x.slice as u64, q));
            issue_reads(k, &c.output, pages, buffer(c, *next), page).await?;
        }
        window.push((*next, x));
        *next += 1;
    }
    Ok(window)
}

/// A relay kernel: its stripes in windows of reads and sends, the next window's reads issued
/// before this one's sends.
pub(crate) async fn relay(k: Kernel, c: Rc<RelayCtx>) -> TaskResult {
    let start = c.gate.enter(&k).await;
    let conn = c.ports.open(&k, c.fabric.clone(), (c.phase, c.router, c.worker), c.base).await?;
    entry_barrier(&k, Some(&conn), c.barrier, c.n).await?;
    let n = c.n;
    let page = c.slice.page_bytes();
    let whole = |s: usize, q: u64| c.slice.page_in_whole(c.dim, n as u64, s as u64, q);
    // The packets in sending order, made as they are needed (a long op has millions).
    let stripes = &c.stripes;
    let mut items = stripes
        .iter()
        .enumerate()
        .flat_map(|(i, &(slice, first, count))| {
            let upstream_first = if i == 0 { 0 } else { stripes[i - 1].1 };
            // Packets of the upstream neighbour's stripes 0..i-1 (its stripes are sized as ours).
            let before: u64 = stripes[..i.saturating_sub(1)].iter().map(|s| s.2 as u64).sum();
            c.packets[first..first + count].iter().enumerate().map(move |(x, &(lo, pages))| {
                // Slice packet `first + x` came as packet `first + x - upstream_first` of the
                // upstream's stripe i - 1.
                let need = if i == 0 { 0 } else { before + (first + x - upstream_first) as u64 + 1 };
                let end = x + 1 == count || (x + 1) % RELAY_CHUNKS_PER_SYNC == 0;
                let inc = end.then(|| (x % RELAY_CHUNKS_PER_SYNC + 1) as u32);
                Item { slice, lo, pages, from_input: i == 0, need, inc }
            })
        })
        .peekable();
    let (sem_at, sem) = c.sem;
    let mut next = 0;
    let mut window = Vec::new();
    loop {
        if window.is_empty() {
            let Some(head) = items.peek() else { break };
            if (k.read_u32(sem)? as u64) < head.need {
                k.wait_until(sem, Cond::Ge(head.need as u32)).await?;
            }
            k.noc_async_writes_flushed().await;
            window = fill(&k, &c, &mut items, &mut next).await?;
        }
        k.noc_async_read_barrier().await?;
        // The next window reuses the buffers of the one before this: its writes must have left.
        k.noc_async_writes_flushed().await;
        let ahead = fill(&k, &c, &mut items, &mut next).await?;
        for &(i, ref x) in &window {
            let out: Vec<u64> =
                (x.lo..x.lo + x.pages).map(|q| page_addr(&k, &c.output, whole(x.slice, q))).collect();
            if x.from_input && c.forward && c.own.0 {
                for (y, &dst) in out.iter().enumerate() {
                    k.noc_async_write(buffer(&c, i) + y as u64 * page, dst, page).await?;
                }
            }
            let cmd = NocCmd::pages(&out, page);
            conn.send(
                &k,
                Header { cmd, payload: x.pages * page, route: Route::unicast(1), src_ch: 0 },
                buffer(&c, i),
            )
            .await?;
            if let Some(inc) = x.inc {
                let cmd =
                    NocCmd::AtomicInc { sem: k.get_noc_addr(sem_at.x, sem_at.y, sem), inc, flush: true };
                conn.send(&k, Header { cmd, payload: 0, route: Route::unicast(1), src_ch: 0 }, 0).await?;
            }
        }
        window = ahead;
    }
    conn.close(&k).await?;
    k.noc_async_write_barrier().await?;
    c.gate.leave(&k, start);
    Ok(())
}
