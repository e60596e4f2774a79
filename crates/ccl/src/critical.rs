//! Where an op's time goes: its bottleneck link and the stages of its critical path.
//!
//! ```text
//!  start ── handshake ──► EDM handshake done ── first data ──► first payload lands
//!        ── steady state ──► last payload lands ── teardown ──► last chip done
//! ```
//!
//! The bottleneck is the link direction whose serializer was busy longest; the stages are read
//! on that link: its EDM's handshake mark, its first and last payload-carrying packets, and the
//! op's end on the last chip to finish.

use meshsim_engine::Time;
use meshsim_hw::LinkUse;
use meshsim_hw::trace::bottleneck;

use crate::edm::HANDSHAKE_DONE;
use crate::op::OpRun;

/// One stage of the critical path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stage {
    /// `handshake`, `first data`, `steady state` or `teardown`.
    pub name: &'static str,
    /// When it began.
    pub start: Time,
    /// When it ended.
    pub end: Time,
}

/// The bottleneck link of a run and the stages of the path through it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CriticalPath {
    /// The busiest link direction.
    pub link: LinkUse,
    /// Handshake, first data, steady state, teardown — contiguous, in order.
    pub stages: [Stage; 4],
}

/// The critical path of `run`, or `None` if it sent nothing over Ethernet.
pub fn critical_path(run: &OpRun) -> Option<CriticalPath> {
    let link = *bottleneck(&run.links)?;
    let start = run.per_chip.iter().find(|p| p.0 == link.from.chip).map_or(Time::ZERO, |p| p.1);
    let end = run.per_chip.iter().map(|p| p.2).max().unwrap_or(start).max(start);
    let handshake = run
        .marks
        .iter()
        .find(|m| m.label == HANDSHAKE_DONE && m.chip == link.from.chip && m.eth_chan == Some(link.from.chan))
        .map(|m| m.at)
        .or(link.first_land)
        .unwrap_or(start);
    // Each boundary is clamped into [previous, end] so the stages tile the run.
    let mut at = start;
    let mut next = |t: Option<Time>| {
        at = t.unwrap_or(at).clamp(at, end);
        at
    };
    let b = [start, next(Some(handshake)), next(link.first_payload), next(link.last_payload), end];
    let names = ["handshake", "first data", "steady state", "teardown"];
    let stages = std::array::from_fn(|i| Stage { name: names[i], start: b[i], end: b[i + 1] });
    Some(CriticalPath { link, stages })
}
