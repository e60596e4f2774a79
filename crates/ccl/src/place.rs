//! Where every phase's tensors live: each op's input, output and scratch, one after another
//! in DRAM or worker L1 in submission order — on each chip after what the ops before placed
//! on its chips, so ops on disjoint chips (the rows of a mesh) reuse the same addresses —
//! refused in one line naming the op when they do not fit.

use std::collections::BTreeMap;

use meshsim_hw::Params;
use meshsim_topology::ChipIdx;
use meshsim_topology::soc::SocDescriptor;

use crate::op::{CclError, Collective};
use crate::phase::{Phase, Tensors};
use crate::request::OpRequest;
use crate::tensor::{Memory, Placement};
/// Gives every phase its tensors, in submission order, each after the last in its memory.
pub(crate) fn place(
    soc: &SocDescriptor,
    params: &Params,
    ops: &[OpRequest],
    phases: &[Phase<()>],
) -> Result<Vec<Tensors>, CclError> {
    let mut heap = Heap { soc, params, next: BTreeMap::new(), chips: Vec::new() };
    let mut out = Vec::with_capacity(phases.len());
    let mut i = 0;
    while i < phases.len() {
        heap.chips = ops[phases[i].op].comm.chips().to_vec();
        i += place_phase(&mut heap, &ops[phases[i].op], phases, i, &mut out)?;
    }
    Ok(out)
}

/// Where the next tensor goes in DRAM and in L1: each after the last on the chips it lives on
/// (the same address on every one of them).
struct Heap<'a> {
    soc: &'a SocDescriptor,
    params: &'a Params,
    /// The next free base, by whether it is L1, and chip.
    next: BTreeMap<(bool, ChipIdx), u64>,
    /// The chips of the op being placed.
    chips: Vec<ChipIdx>,
}

impl Heap<'_> {
    /// A tensor of `pages` pages of `page` bytes in `memory`, after the last one there.
    fn alloc(&mut self, memory: Memory, page: u64, pages: u64) -> Placement {
        let first = Placement::first(memory, page, self.soc, self.params);
        let l1 = memory == Memory::L1;
        let base =
            self.chips.iter().filter_map(|&c| self.next.get(&(l1, c)).copied()).fold(first.base, u64::max);
        let p = Placement { base, ..first };
        let end = p.after(pages).base;
        for &c in &self.chips {
            self.next.insert((l1, c), end);
        }
        p
    }

    /// Refuses, naming the op and `what`, a tensor `p` of `pages` pages that ends past its
    /// banks.
    fn fits(&self, req: &OpRequest, p: &Placement, pages: u64, what: &str) -> Result<(), CclError> {
        let capacity = p.capacity(self.params);
        if p.base + p.bank_bytes(pages) > capacity {
            return Err(CclError::Invalid(format!(
                "op '{}': {what} do not fit in {} ({} B per bank free of {capacity} B)",
                req.name,
                req.knobs.memory,
                capacity.saturating_sub(p.base)
            )));
        }
        Ok(())
    }
}

/// Places phase `i` (of `req`) — and, for a reduction, the phase after it that takes the
/// reduced slice to its result — pushing their tensors; returns how many phases it placed.
fn place_phase(
    heap: &mut Heap,
    req: &OpRequest,
    phases: &[Phase<()>],
    i: usize,
    out: &mut Vec<Tensors>,
) -> Result<usize, CclError> {
    let (slice, mem) = (phases[i].slice, req.knobs.memory);
    // The chunks the phase cuts the op's tensor into.
    let n = req.tensor.pages() / slice.pages();
    let (page, whole) = (slice.page_bytes(), slice.pages() * n);
    let t =
        |input, output, scratch| Tensors { input, output, scratch, slice, dim: req.dim, n, in_place: false };
    match req.collective {
        Collective::AllToAll | Collective::Broadcast { .. } | Collective::SendRecv => {
            let (input, output) = (heap.alloc(mem, page, whole), heap.alloc(mem, page, whole));
            heap.fits(
                req,
                &output,
                whole,
                &format!("input and output ({} B per chip)", 2 * req.tensor.bytes()),
            )?;
            out.push(t(input, output, None));
        }
        Collective::AllGather if req.in_place => {
            let output = heap.alloc(mem, page, whole);
            heap.fits(req, &output, whole, &format!("the output ({} B per chip)", n * slice.bytes()))?;
            out.push(Tensors { in_place: true, ..t(output, output, None) });
        }
        Collective::AllGather | Collective::Gather { .. } => {
            let (input, output) = (heap.alloc(mem, page, slice.pages()), heap.alloc(mem, page, whole));
            let what = format!("input and output ({} B per chip)", (n + 1) * slice.bytes());
            heap.fits(req, &output, whole, &what)?;
            out.push(t(input, output, None));
        }
        Collective::Scatter { .. } => {
            let (input, output) = (heap.alloc(mem, page, whole), heap.alloc(mem, page, slice.pages()));
            let what = format!("input and output ({} B per chip)", (n + 1) * slice.bytes());
            heap.fits(req, &output, slice.pages(), &what)?;
            out.push(t(input, output, None));
        }
        Collective::ReduceScatter(_) | Collective::AllReduce(_) | Collective::Reduce { .. } => {
            // Partials travel through the senders' relay buffers; only a line parks one per
            // rank (the side that arrives first), in scratch.
            let input = heap.alloc(mem, page, whole);
            let scratch = phases[i].plan.has_joins().then(|| heap.alloc(mem, page, whole));
            let output = heap.alloc(mem, page, slice.pages());
            let what = format!("input, scratch and output ({} B per chip)", 2 * req.tensor.bytes());
            heap.fits(req, &output, slice.pages(), &what)?;
            out.push(t(input, output, scratch));
            // A second phase (an all-reduce's all-gather, a reduce's gather) takes the reduced
            // slice to its whole result.
            if phases.get(i + 1).is_some_and(|q| q.op == phases[i].op) {
                let result = heap.alloc(mem, page, whole);
                heap.fits(req, &result, whole, "input, scratch, reduced slice and output")?;
                out.push(t(output, result, None));
                return Ok(2);
            }
        }
    }
    Ok(1)
}
