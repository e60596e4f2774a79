//! Functional runs: every op's inputs written by the host before the launch (distinct words
//! per rank, page and offset), and its outputs read back and checked against what the
//! collective must produce.

use meshsim_hw::Machine;

use crate::build::{host_read, host_write};
use crate::op::{CclError, Collective};
use crate::phase::Phase;
use crate::request::OpRequest;

/// Host writes of every op's input (functional mode).
pub(crate) fn write_inputs(m: &Machine, ops: &[OpRequest], phases: &[Phase]) -> Result<(), CclError> {
    for (i, req) in ops.iter().enumerate() {
        let p = phases.iter().find(|p| p.op == i).expect("every op has a phase");
        let t = p.tensors;
        let page = t.slice.page_bytes();
        for (k, &chip) in req.comm.chips().iter().enumerate() {
            let (pages, data): (u64, &dyn Fn(u64) -> Vec<u8>) = match req.collective {
                Collective::AllGather | Collective::Gather { .. } => {
                    (t.slice.pages(), &|q| gather_page(k as u64, q, page))
                }
                // Only the root (rank 0 of a send/receive) has an input.
                Collective::Broadcast { root } | Collective::Scatter { root } if k != root => continue,
                Collective::SendRecv if k != 0 => continue,
                Collective::AllToAll
                | Collective::Broadcast { .. }
                | Collective::Scatter { .. }
                | Collective::SendRecv => (req.tensor.pages(), &|q| gather_page(k as u64, q, page)),
                Collective::ReduceScatter(_) | Collective::AllReduce(_) | Collective::Reduce { .. } => {
                    (req.tensor.pages(), &|q| reduce_page(k as u64, q, page))
                }
            };
            for q in 0..pages {
                let (place, at) = t.own_page(k, q);
                let (bank, addr) = place.page(at);
                host_write(m, chip, place, bank, addr, &data(q)).map_err(|e| CclError::Invalid(e.0))?;
            }
        }
    }
    Ok(())
}

/// Checks `req`'s outputs on every rank, left by its last phase `last`, against what the
/// collective must produce.
pub(crate) fn check(m: &Machine, req: &OpRequest, last: &Phase) -> Result<(), String> {
    let t = last.tensors;
    let (n, page) = (req.comm.size() as u64, t.slice.page_bytes());
    let whole = req.tensor.pages();
    let reduction = req.reduction();
    let reduced = |_, q: u64| {
        let red = reduction.as_ref().expect("a reducing collective");
        let mut want = reduce_page(0, q, page);
        for k in 1..n {
            red.reduce_words(&mut want, &reduce_page(k, q, page));
        }
        want
    };
    for (c, &chip) in req.comm.chips().iter().enumerate() {
        // (page of the output, expected bytes) for every output page of this rank.
        let c64 = c as u64;
        let expect: Vec<(u64, Vec<u8>)> = match req.collective {
            Collective::AllGather | Collective::Gather { .. } => (0..n)
                .filter(|&s| match req.collective {
                    Collective::Gather { root } => c == root,
                    _ => !(req.exclude_myself && s == c64),
                })
                .flat_map(|s| (0..t.slice.pages()).map(move |p| (s, p)))
                .map(|(s, p)| (t.slice.page_in_whole(req.dim, n, s, p), gather_page(s, p, page)))
                .collect(),
            Collective::ReduceScatter(red) => (0..t.slice.pages())
                .map(|p| (p, reduced(red, t.slice.page_in_whole(req.dim, n, c as u64, p))))
                .collect(),
            Collective::AllReduce(red) => (0..whole).map(|q| (q, reduced(red, q))).collect(),
            Collective::Reduce { red, root } if c == root => {
                (0..whole).map(|q| (q, reduced(red, q))).collect()
            }
            Collective::Broadcast { root } => {
                (0..whole).map(|q| (q, gather_page(root as u64, q, page))).collect()
            }
            Collective::Scatter { root } => (0..t.slice.pages())
                .map(|p| (p, gather_page(root as u64, t.slice.page_in_whole(req.dim, n, c64, p), page)))
                .collect(),
            Collective::SendRecv if c == 1 => (0..whole).map(|q| (q, gather_page(0, q, page))).collect(),
            Collective::Reduce { .. } | Collective::SendRecv => Vec::new(),
            // Chunk s of rank c's output is chunk c of rank s's input.
            Collective::AllToAll => (0..n)
                .flat_map(|s| (0..t.slice.pages()).map(move |p| (s, p)))
                .map(|(s, p)| {
                    let from = t.slice.page_in_whole(req.dim, n, c as u64, p);
                    (t.slice.page_in_whole(req.dim, n, s, p), gather_page(s, from, page))
                })
                .collect(),
        };
        for (q, want) in expect {
            let (bank, addr) = t.output.page(q);
            let got = host_read(m, chip, &t.output, bank, addr, page)?;
            if let Some(w) = (0..page as usize).step_by(4).find(|&w| got[w..w + 4] != want[w..w + 4]) {
                let word = |b: &[u8]| u32::from_le_bytes(b[w..w + 4].try_into().expect("4 bytes"));
                return Err(format!(
                    "chip {}: output byte offset {} (page {q}): expected {:#010x}, got {:#010x}",
                    m.cluster().chip(chip).id,
                    q * page + w as u64,
                    word(&want),
                    word(&got)
                ));
            }
        }
    }
    Ok(())
}

/// The bytes of page `p` of rank `k`'s all-gather input: distinct words per rank, page and
/// offset.
pub fn gather_page(k: u64, p: u64, page: u64) -> Vec<u8> {
    (0..page / 4).flat_map(|i| (((k << 24) ^ (p << 10) ^ i) as u32).to_le_bytes()).collect()
}

/// The bytes of page `q` of rank `k`'s reduction input: small integers, so sums are exact.
pub fn reduce_page(k: u64, q: u64, page: u64) -> Vec<u8> {
    (0..page / 4).flat_map(|i| ((k + 1) * 1000 + (q * 7 + i) % 997).to_le_bytes()[..4].to_vec()).collect()
}
