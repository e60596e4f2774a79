//! The numbers of each fabric algorithm's worker schedule, defined here once: how a slice's pages are packed into packets and dealt over routing planes
//! and workers, how many workers run per link and direction, how many packets a kernel reads
//! at once (its window), how many go between synchronising increments, which stripes a
//! relay kernel sends, and how far each rank's entry-barrier increment reaches.

use crate::plan::routed::Transfer;

/// Pages a fabric packet carries at most (`min(4, payload / page)`, tt-metal's CCL ops).
pub const MAX_PAGES_PER_PACKET: u64 = 4;

/// Which of tt-metal's packings a fabric op's packets take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Packing {
    /// The all-gathers and broadcast: up to [`MAX_PAGES_PER_PACKET`].
    Gather,
    /// The point-to-point senders (all-to-all's): up to 2 pages.
    Direct,
    /// The reduce-scatter: up to 2 pages on a ring, [`MAX_PAGES_PER_PACKET`] on a line.
    ReduceScatter { ring: bool },
}

impl Packing {
    /// Pages per packet for pages of `page` bytes in packets of `payload` (at least one).
    pub(crate) fn pages(self, payload: u64, page: u64) -> u64 {
        let cap = match self {
            Packing::Gather | Packing::ReduceScatter { ring: false } => MAX_PAGES_PER_PACKET,
            Packing::Direct | Packing::ReduceScatter { ring: true } => 2,
        };
        (payload / page).clamp(1, cap)
    }
}

/// The packets of `pages` pages, `ppp` to a packet: (first page, pages).
pub(crate) fn packets(pages: u64, ppp: u64) -> Vec<(u64, u64)> {
    (0..pages).step_by(ppp as usize).map(|lo| (lo, ppp.min(pages - lo))).collect()
}

/// The packets of a slice that routing plane `plane` of `planes` carries: every `planes`-th,
/// as tt-metal deals a slice's packets over its links.
pub(crate) fn plane_packets(pages: u64, ppp: u64, (plane, planes): (usize, usize)) -> Vec<(u64, u64)> {
    packets(pages, ppp).into_iter().skip(plane).step_by(planes).collect()
}

/// Packets a relay kernel reads at once.
pub(crate) const RELAY_WINDOW: usize = 8;

/// Packets between increments of the neighbour's semaphore (tt-metal's all-gather cap).
pub(crate) const RELAY_CHUNKS_PER_SYNC: usize = 160;

/// A relay kernel's stripes, in the order it sends them: for each, the slice and which of its
/// `total` packets it carries `(slice, first, count)` — the relays of the plan that pass rank
/// `k` going `dir`, by their position there (stripe 0 the rank's own slice). A stripe that
/// carries half a slice (an even ring's antipode) has its first half forward, the rest back.
/// `passes` are the plan's transfers through the rank that way with their positions
/// ([`routed::relay_passes`]).
pub(crate) fn relay_stripes(passes: &[(usize, &Transfer)], total: usize) -> Vec<(usize, usize, usize)> {
    let first = total.div_ceil(2);
    // The transfers through the rank going that way, by their position there.
    let mut at: Vec<Vec<&Transfer>> = Vec::new();
    for &(i, t) in passes {
        if at.len() <= i {
            at.resize(i + 1, Vec::new());
        }
        at[i].push(t);
    }
    at.iter()
        .map_while(|here| {
            let slice = here.first()?.to.slot;
            let halves = here.iter().fold(0, |h, t| h | t.part.halves());
            Some(match halves {
                0b01 => (slice, 0, first),
                0b10 => (slice, first, total - first),
                _ => (slice, 0, total),
            })
        })
        .collect()
}

/// tt-metal's relay workers per link and direction on a Wormhole ring (`shared/fabric.md` §7,
/// `@022ab700`): 1 for at most 64 KiB of a device's slice per link, or for long stripes (64
/// packets or more per link); otherwise 2, behind a mux.
pub(crate) fn relay_workers(bytes_per_link: u64, packets_per_link: u64) -> usize {
    if bytes_per_link <= 64 << 10 || packets_per_link >= 64 { 1 } else { 2 }
}

/// Slots per client channel of the mux in front of a relay all-gather's two workers
/// (`shared/fabric.md` §7, `@022ab700`): 1 on a ring at 2 MiB or more per link, otherwise 2.
pub(crate) fn relay_mux_slots(bytes_per_link: u64, ring: bool) -> u64 {
    if ring && bytes_per_link >= 2 << 20 { 1 } else { 2 }
}

/// Slots per client channel of a reduce-scatter's mux: 1 per worker channel
/// (`shared/fabric.md` §11.3).
pub(crate) const RS_MUX_SLOTS: u64 = 1;

/// tt-metal's reduce-scatter workers per link and direction for `bytes` of a rank's input on
/// each link (`shared/fabric.md` §7): 1 up to 4 KiB; on a ring 2 below 1 MiB, 4 up to 50 MiB,
/// 8 above; on a line 2 below 0.5 MB, 4 up to 4 MB, 8 above.
pub(crate) fn rs_workers(bytes: u64, ring: bool) -> usize {
    let (lo, hi) = if ring { (1 << 20, 50 << 20) } else { (500_000, 4_000_000) };
    match bytes {
        b if b <= 4 << 10 => 1,
        b if b < lo => 2,
        b if b <= hi => 4,
        _ => 8,
    }
}

/// `chunks_per_sync` of tt-metal's reduce-scatter: a ring's and a line's (each capped at half
/// a slice's packets).
pub(crate) const RS_CHUNKS_PER_SYNC: (u64, u64) = (80, 20);

/// Packets an all-to-all kernel reads at once.
pub(crate) const A2A_WINDOW: usize = 8;

/// Reducer cores per rank of the direct path, each adding the contributions to every
/// `DIRECT_REDUCERS`-th packet of the rank's slice (meshsim's choice: tt-metal's core count for
/// this path is not known).
pub const DIRECT_REDUCERS: usize = 4;

/// How far rank `k`'s entry-barrier increment reaches going `forward`: to the line's end, or
/// on a ring n / 2 chips forward and the rest backward — every other rank once.
pub(crate) fn barrier_reach(n: usize, k: usize, forward: bool, closed: bool) -> u32 {
    if !closed {
        return if forward { (n - 1 - k) as u32 } else { k as u32 };
    }
    (if forward { n / 2 } else { n - 1 - n / 2 }) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Dir;
    use crate::plan::routed;

    /// Dealing a slice's packets over planes and workers gives every page to exactly one share,
    /// in packets of at most the packing's pages.
    #[test]
    fn every_page_is_dealt_to_one_share() {
        for (pages, ppp) in [(1, 1), (7, 2), (64, 4), (65, 4), (1000, 2)] {
            for shares in [1, 2, 3, 8] {
                let mut seen = vec![0u32; pages as usize];
                for share in 0..shares {
                    for (lo, n) in plane_packets(pages, ppp, (share, shares)) {
                        assert!((1..=ppp).contains(&n), "{pages} pages, {ppp} per packet");
                        (lo..lo + n).for_each(|q| seen[q as usize] += 1);
                    }
                }
                assert!(seen.iter().all(|&c| c == 1), "{pages} pages over {shares} shares: {seen:?}");
            }
        }
        assert_eq!(Packing::Gather.pages(4352, 1088), 4);
        assert_eq!(Packing::Direct.pages(4352, 1088), 2);
        assert_eq!(Packing::ReduceScatter { ring: false }.pages(4352, 2048), 2);
        assert_eq!(Packing::Gather.pages(1024, 2048), 1);
    }

    /// Both directions together deliver every other rank's slice exactly once to each rank:
    /// a slice travels half-way round each way, the antipode's halves one each way; and stripe
    /// i of a rank is the slice i ranks upstream.
    #[test]
    fn the_stripes_cover_every_slice_once() {
        for n in 3..=9 {
            let total = 7;
            let plan = routed::relay_all_gather(n, true);
            let passes = routed::relay_passes(&plan);
            for k in 0..n {
                // Packets of each slice that reach rank k: what its upstream neighbours' stripes
                // carry on to it.
                let mut got = vec![0; n];
                for (dir, up) in [(Dir::Forward, (k + n - 1) % n), (Dir::Backward, (k + 1) % n)] {
                    for (i, &(slice, _, count)) in
                        relay_stripes(&passes[usize::from(dir == Dir::Backward)][up], total)
                            .iter()
                            .enumerate()
                    {
                        let want = if dir == Dir::Forward { (up + n - i) % n } else { (up + i) % n };
                        assert_eq!(slice, want, "n {n} rank {up} {dir:?} stripe {i}");
                        got[slice] += count;
                    }
                }
                let want: Vec<usize> = (0..n).map(|s| if s == k { 0 } else { total }).collect();
                assert_eq!(got, want, "n {n} rank {k}");
            }
        }
    }
}
