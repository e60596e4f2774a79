//! Why a run did not complete, as values: the deadlock's stalled tasks and what each waits
//! for, the time limit, a task's error.

use std::fmt;
use std::hash::Hash;

use thiserror::Error;

use super::{Scheduler, Wait};
use crate::memory::{Cond, MemSpace};
use crate::time::Time;

/// What a stalled task waits for, resolved to names and current values for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stall {
    /// A memory word that never came to satisfy the condition.
    Word {
        /// Name of the memory space.
        space: String,
        /// The word's label, if it was given one.
        label: Option<String>,
        /// Address of the word.
        addr: u64,
        /// The condition waited for.
        cond: Cond,
        /// The word's value when the run stopped.
        current: u32,
    },
    /// Several words, none of which came to satisfy its condition.
    AnyOf(Vec<Stall>),
    /// A signal that was never raised again.
    Signal {
        /// The signal's name.
        name: String,
    },
}

/// One task left waiting when a run deadlocked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stalled {
    /// The task's name (the hardware layer names kernels `chip/core/kernel`).
    pub task: String,
    /// What it waits for.
    pub waits_for: Stall,
}

impl fmt::Display for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stall::Word { space, label, addr, cond, current } => {
                write!(f, "{space}[{addr:#x}]")?;
                if let Some(label) = label {
                    write!(f, " ({label})")?;
                }
                write!(f, " {cond} (value is {current})")
            }
            Stall::AnyOf(words) => {
                let each: Vec<String> = words.iter().map(|w| w.to_string()).collect();
                write!(f, "any of {}", each.join(", "))
            }
            Stall::Signal { name } => write!(f, "signal '{name}'"),
        }
    }
}

impl fmt::Display for Stalled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}' waits for {}", self.task, self.waits_for)
    }
}

/// Why a run did not complete: a value callers match on (the stalled tasks, the limit, the
/// failed task), carried up to the command line.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SimError {
    /// Events ran out while tasks still wait.
    #[error("deadlock at {at}: {} stalled: {}", stalled.len(), list(stalled))]
    Deadlock {
        /// When the last event fired.
        at: Time,
        /// Every task still waiting, in spawn order.
        stalled: Vec<Stalled>,
    },
    /// The next event lies past the simulated-time limit.
    #[error("time limit {limit} reached with {running} task(s) unfinished")]
    TimeLimit {
        /// The limit that was set.
        limit: Time,
        /// Tasks not yet finished.
        running: usize,
    },
    /// A task returned an error.
    #[error("task '{task}' failed at {at}: {error}")]
    Task {
        /// When it failed.
        at: Time,
        /// The task's name.
        task: String,
        /// What it returned, as its message.
        error: String,
    },
}

fn list(stalled: &[Stalled]) -> String {
    stalled.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("; ")
}

/// Every unfinished task that waits for something no queued event will bring, in spawn order.
pub(super) fn stalled<E: Hash + fmt::Debug + 'static>(s: &Scheduler<E>) -> Vec<Stalled> {
    s.tasks
        .iter()
        .filter(|t| !t.done)
        .filter_map(|t| {
            let word = |space: MemSpace, addr: u64, cond: Cond| Stall::Word {
                space: s.memory.name(space).to_owned(),
                label: s.memory.word_label(space, addr).map(str::to_owned),
                addr,
                cond,
                current: s.memory.read_u32(space, addr).unwrap_or(0),
            };
            let waits_for = match t.waiting.as_ref()? {
                &Wait::Word { space, addr, cond } => word(space, addr, cond),
                Wait::AnyWord(words) => {
                    Stall::AnyOf(words.iter().map(|&(sp, a, c)| word(sp, a, c)).collect())
                }
                &Wait::Signal(id) => Stall::Signal { name: s.signals[id.0 as usize].name.clone() },
                // A task waiting for a start or a delay always has its wake-up queued.
                Wait::Start | Wait::Delay => return None,
            };
            Some(Stalled { task: t.name.clone(), waits_for })
        })
        .collect()
}
