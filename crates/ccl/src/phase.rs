//! A phase: one plan of one op (an all-reduce has two), with the slice it moves and, once
//! placed, where its tensors live. Phases are what a transport lowers.

use crate::op::{Bidir, Collective};
use crate::plan::{Loc, Plan};
use crate::tensor::{Placement, TensorSpec};

/// A plan of one op (an all-reduce has two) with what lowering needs. `T` is where its tensors
/// live: `()` until the session has placed them, then [`Tensors`] — a transport only ever sees
/// placed phases.
#[derive(Clone, Debug)]
pub struct Phase<T = Tensors> {
    /// The op (its index in the session) it belongs to.
    pub op: usize,
    /// The collective this phase performs: the op's own, or a step of it (an all-reduce is a
    /// reduce-scatter then an all-gather; a reduce by halves a reduce-scatter then a gather
    /// to its root). Never an all-reduce.
    pub collective: Collective,
    /// Its algorithm as data (the EDM walks it; see [`crate::plan`]).
    pub plan: Plan,
    /// The bidirectional mode the plan runs (resolved; `None` for reductions).
    pub bidir: Bidir,
    /// The slice its tensor is cut into along the op's dimension.
    pub slice: TensorSpec,
    /// Where its tensors live.
    pub tensors: T,
    /// Phases that must end first.
    pub deps: Vec<usize>,
}

impl Phase<()> {
    /// The phase with its tensors placed.
    pub fn place(self, tensors: Tensors) -> Phase {
        let Phase { op, collective, plan, bidir, slice, deps, .. } = self;
        Phase { op, collective, plan, bidir, slice, tensors, deps }
    }
}

/// Where a phase's tensors live, and how a plan's locations map to pages.
#[derive(Clone, Copy, Debug)]
pub struct Tensors {
    /// The input.
    pub input: Placement,
    /// The output.
    pub output: Placement,
    /// A line reduction's parked partials, as large as the whole tensor.
    pub scratch: Option<Placement>,
    /// The slice.
    pub slice: TensorSpec,
    /// The dimension the tensor is cut along.
    pub dim: usize,
    /// How many slices make the whole tensor.
    pub n: u64,
    /// The input is the rank's own slice of the output (an in-place all-gather).
    pub in_place: bool,
}

impl Tensors {
    /// Page `q` of rank `rank`'s own slice: in its input, or where it sits in the output.
    pub fn own_page(&self, rank: usize, q: u64) -> (&Placement, u64) {
        if self.in_place {
            (&self.output, self.slice.page_in_whole(self.dim, self.n, rank as u64, q))
        } else {
            (&self.input, q)
        }
    }

    /// The placement of `loc`, and the pages there of pages `lo..hi` of slice `s`: the slice's
    /// own pages, or where they sit in the whole tensor.
    pub fn pages(
        &self,
        loc: Loc,
        s: usize,
        lo: u64,
        hi: u64,
    ) -> (&Placement, impl Iterator<Item = u64> + '_) {
        let (place, whole) = match loc {
            Loc::InputSlice if self.in_place => (&self.output, true),
            Loc::InputSlice => (&self.input, false),
            Loc::InputWhole => (&self.input, true),
            Loc::OutputWhole => (&self.output, true),
            Loc::OutputSlice => (&self.output, false),
            Loc::Scratch => (self.scratch.as_ref().expect("reductions have scratch"), true),
            Loc::Relay | Loc::Receive => {
                unreachable!("neighbour plans keep relays in L1 and have no receive buffer")
            }
        };
        let map = move |p| if whole { self.slice.page_in_whole(self.dim, self.n, s as u64, p) } else { p };
        (place, (lo..hi).map(map))
    }
}

/// `after[p][q]`: phase `p` starts only after phase `q` has ended (directly or through others).
pub fn after_matrix<T>(phases: &[Phase<T>]) -> Vec<Vec<bool>> {
    let n = phases.len();
    let mut after = vec![vec![false; n]; n];
    // Dependencies point to earlier phases, so one pass in order closes them transitively.
    for p in 0..n {
        for &d in &phases[p].deps {
            let inherited = after[d].clone();
            for (mine, &theirs) in after[p].iter_mut().zip(&inherited) {
                *mine |= theirs;
            }
            after[p][d] = true;
        }
    }
    after
}
