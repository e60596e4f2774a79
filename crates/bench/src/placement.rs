//! Where tt-metal's fabric test infrastructure places a benchmark's kernels (`shared/fabric.md`
//! §12): one sender core per (direction, link), from the highest logical column down; each
//! flow's receiver up column 0 from logical (0,0), two flows to a core by default.

use meshsim_topology::ChipIdx;
use meshsim_topology::soc::CoreCoord;

/// Flows that share one receiver core at most (the test infrastructure's default; its ubench
/// files take four, round-robin).
pub(crate) const FLOWS_PER_RECEIVER: u64 = 2;

/// The logical core of a chip's `n`-th sender: along row 0 from the highest column down, then
/// the next row; column 0 holds the receivers.
pub(crate) fn sender(n: u32, columns: u32) -> CoreCoord {
    CoreCoord { x: columns - 1 - n % (columns - 1), y: n / (columns - 1) }
}

/// Per plane and flow (each flow given by the chips it reaches), the logical receiver core its
/// packets land on — the same on every chip it reaches, as one header carries one NoC address —
/// and its slot there: flows take the first core up column 0 from (0,0) that has a free slot
/// on every chip they reach, at most [`FLOWS_PER_RECEIVER`] to a core, planes after one another.
pub(crate) fn receivers(flows: &[Vec<ChipIdx>], planes: usize, chips: usize) -> Vec<Vec<(CoreCoord, u64)>> {
    let mut load: Vec<Vec<u64>> = vec![Vec::new(); chips];
    let mut place = |dests: &[ChipIdx]| {
        let taken = |load: &[Vec<u64>], c: usize| {
            dests.iter().map(|d| load[d.0 as usize].get(c).copied().unwrap_or(0)).max().unwrap_or(0)
        };
        let core = (0..).find(|&c| taken(&load, c) < FLOWS_PER_RECEIVER).expect("a core with a free slot");
        let slot = taken(&load, core);
        for d in dests {
            let l = &mut load[d.0 as usize];
            if l.len() <= core {
                l.resize(core + 1, 0);
            }
            l[core] += 1;
        }
        (CoreCoord { x: 0, y: core as u32 }, slot)
    };
    (0..planes).map(|_| flows.iter().map(|f| place(f)).collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three flows into one chip take two cores, two and one; a multicast flow takes a core
    /// free on every chip it reaches, at the same slot on each; senders fill row 0 from the
    /// right, never column 0.
    #[test]
    fn receivers_fill_two_to_a_core_and_senders_come_from_the_right() {
        let c = |i: u32| ChipIdx(i);
        let got = receivers(&[vec![c(1)], vec![c(1)], vec![c(1)], vec![c(1), c(2)]], 1, 3);
        let at = |y| CoreCoord { x: 0, y };
        assert_eq!(got[0], vec![(at(0), 0), (at(0), 1), (at(1), 0), (at(1), 1)]);
        let two = receivers(&[vec![c(0)]], 2, 1);
        assert_eq!(two, vec![vec![(at(0), 0)], vec![(at(0), 1)]]);
        assert_eq!(sender(0, 8), CoreCoord { x: 7, y: 0 });
        assert_eq!(sender(6, 8), CoreCoord { x: 1, y: 0 });
        assert_eq!(sender(7, 8), CoreCoord { x: 7, y: 1 });
    }
}
