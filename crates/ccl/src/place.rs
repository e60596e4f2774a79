//! Where every phase's tensors live: each op's input, output and scratch, one after another
//! in DRAM or worker L1 in submission order, refused in one line naming the op when they do
//! not fit.

use std::collections::BTreeMap;

use meshsim_hw::Params;
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
    let mut out = Vec::with_capacity(phases.len());
    let mut next: BTreeMap<bool, u64> = BTreeMap::new();
    let mut alloc = |memory: Memory, page: u64, pages: u64| -> Placement {
        let first = Placement::first(memory, page, soc, params);
        let base = *next.get(&(memory == Memory::L1)).unwrap_or(&first.base);
        let p = Placement { base, ..first };
        next.insert(memory == Memory::L1, p.after(pages).base);
        p
    };
    let mut i = 0;
    while i < phases.len() {
        let req = &ops[phases[i].op];
        let (slice, mem) = (phases[i].slice, req.knobs.memory);
        // The chunks the phase cuts the op's tensor into.
        let n = req.tensor.pages() / slice.pages();
        let (page, whole) = (slice.page_bytes(), slice.pages() * n);
        let fits = |p: &Placement, pages: u64, what: &str| -> Result<(), CclError> {
            if p.base + p.bank_bytes(pages) > p.capacity(params) {
                return Err(CclError::Invalid(format!(
                    "op '{}': {what} do not fit in {mem} ({} B per bank free of {} B)",
                    req.name,
                    p.capacity(params).saturating_sub(p.base),
                    p.capacity(params)
                )));
            }
            Ok(())
        };
        let t = |input, output, scratch| Tensors {
            input,
            output,
            scratch,
            slice,
            dim: req.dim,
            n,
            in_place: false,
        };
        match req.collective {
            Collective::AllToAll | Collective::Broadcast { .. } | Collective::SendRecv => {
                let (input, output) = (alloc(mem, page, whole), alloc(mem, page, whole));
                fits(&output, whole, &format!("input and output ({} B per chip)", 2 * req.tensor.bytes()))?;
                out.push(t(input, output, None));
            }
            Collective::AllGather if req.in_place => {
                let output = alloc(mem, page, whole);
                fits(&output, whole, &format!("the output ({} B per chip)", n * slice.bytes()))?;
                out.push(Tensors { in_place: true, ..t(output, output, None) });
            }
            Collective::AllGather | Collective::Gather { .. } => {
                let (input, output) = (alloc(mem, page, slice.pages()), alloc(mem, page, whole));
                fits(&output, whole, &format!("input and output ({} B per chip)", (n + 1) * slice.bytes()))?;
                out.push(t(input, output, None));
            }
            Collective::Scatter { .. } => {
                let (input, output) = (alloc(mem, page, whole), alloc(mem, page, slice.pages()));
                fits(
                    &output,
                    slice.pages(),
                    &format!("input and output ({} B per chip)", (n + 1) * slice.bytes()),
                )?;
                out.push(t(input, output, None));
            }
            Collective::ReduceScatter(_) | Collective::AllReduce(_) | Collective::Reduce { .. } => {
                // Partials travel through the senders' relay buffers; only a line parks one
                // per rank (the side that arrives first), in scratch.
                let input = alloc(mem, page, whole);
                let scratch = phases[i].plan.has_joins().then(|| alloc(mem, page, whole));
                let output = alloc(mem, page, slice.pages());
                let what = format!("input, scratch and output ({} B per chip)", 2 * req.tensor.bytes());
                fits(&output, slice.pages(), &what)?;
                out.push(t(input, output, scratch));
                // A second phase (an all-reduce's all-gather, a reduce's gather) takes the
                // reduced slice to its whole result.
                if phases.get(i + 1).is_some_and(|q| q.op == phases[i].op) {
                    let result = alloc(mem, page, whole);
                    fits(&result, whole, "input, scratch, reduced slice and output")?;
                    out.push(t(output, result, None));
                    i += 1;
                }
            }
        }
        i += 1;
    }
    Ok(out)
}
