//! Deferred adds: word updates that take their place in the event order when issued but cost
//! an event only if something can observe them when they happen.
//!
//! A hardware model posts many updates whose only effect is to change a counter at a known
//! future instant — a NoC write's completion decrementing its issuer's outstanding-writes
//! counter, say. As events, each costs a queue push, a pop and a dispatch, yet nothing looks
//! at most of the intermediate values: the issuer waits for the counter to reach zero. A
//! deferred add is kept here instead, keyed by the `(time, seq)` an event would have had (the
//! sequence number is reserved from the queue when the add is issued, so every other event
//! keeps its number). It is applied
//!
//! - when the word is read or written after its instant (reads see it, writes come after it);
//! - by a *settle* event at its key, scheduled only for the first pending add at which a task
//!   watching the word would see its condition hold (and planned again whenever the word, its
//!   pending adds or its watchers change);
//! - at the end of a run, in key order, as the events would have fired.
//!
//! So every task wakes at the same `(time, seq)`, reads the same values and the run ends at the
//! same time as with one event per add: the shortcut is exact. With shortcuts off
//! ([`crate::Sim::set_shortcuts`]) every add gets its settle event.

use std::collections::VecDeque;

use crate::memory::MemSpace;
use crate::time::Time;

/// Where an event would have been: `(time, seq)`.
pub(crate) type Key = (Time, u64);

/// One pending add.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pending {
    pub(crate) key: Key,
    pub(crate) delta: u32,
    /// A settle event is scheduled at `key`.
    pub(crate) planned: bool,
}

/// The pending adds of one word, in key order (completions mostly arrive in order, so an
/// insert is usually a push at the back).
pub(crate) struct Word {
    pub(crate) addr: u64,
    pub(crate) pending: VecDeque<Pending>,
}

/// The pending adds of every word that has some.
#[derive(Default)]
pub(crate) struct Deferred {
    /// Per space, its words with pending adds: a handful at most (a core's outstanding-transfer
    /// counters), so a lookup is a short scan, and reads and writes of spaces without any
    /// cost one check.
    spaces: Vec<Vec<Word>>,
    /// Emptied lists kept for reuse: a counter's pending adds come and go with every burst of
    /// transfers, and a list made and dropped each time costs more than the adds themselves.
    spare: Vec<VecDeque<Pending>>,
}

impl Deferred {
    /// Whether `space` has any word with pending adds.
    #[inline]
    pub(crate) fn in_space(&self, space: MemSpace) -> bool {
        self.spaces.get(space.0 as usize).is_some_and(|w| !w.is_empty())
    }

    /// The pending adds of a word, if it has any.
    #[inline]
    pub(crate) fn word_mut(&mut self, space: MemSpace, addr: u64) -> Option<&mut VecDeque<Pending>> {
        self.spaces.get_mut(space.0 as usize)?.iter_mut().find(|w| w.addr == addr).map(|w| &mut w.pending)
    }

    /// Records an add.
    pub(crate) fn push(&mut self, space: MemSpace, addr: u64, p: Pending) {
        let i = space.0 as usize;
        if self.spaces.len() <= i {
            self.spaces.resize_with(i + 1, Vec::new);
        }
        let words = &mut self.spaces[i];
        let at = match words.iter().position(|w| w.addr == addr) {
            Some(at) => at,
            None => {
                let pending = self.spare.pop().unwrap_or_default();
                words.push(Word { addr, pending });
                words.len() - 1
            }
        };
        let list = &mut words[at].pending;
        if list.back().is_none_or(|b| b.key < p.key) {
            list.push_back(p);
        } else {
            let at = list.partition_point(|q| q.key < p.key);
            list.insert(at, p);
        }
    }

    /// The sum of the adds to a word that happened before `now` (wrapping).
    pub(crate) fn past_sum(&self, space: MemSpace, addr: u64, now: Key) -> u32 {
        let Some(words) = self.spaces.get(space.0 as usize) else {
            return 0;
        };
        words.iter().find(|w| w.addr == addr).map_or(0, |w| {
            w.pending.iter().take_while(|p| p.key <= now).fold(0u32, |a, p| a.wrapping_add(p.delta))
        })
    }

    /// Removes the adds to a word at or before `upto`; returns their sum (wrapping) and
    /// whether the word still has pending adds.
    pub(crate) fn take_until(&mut self, space: MemSpace, addr: u64, upto: Key) -> (u32, bool) {
        let Some(words) = self.spaces.get_mut(space.0 as usize) else {
            return (0, false);
        };
        let Some(at) = words.iter().position(|w| w.addr == addr) else {
            return (0, false);
        };
        let list = &mut words[at].pending;
        let mut sum = 0u32;
        while let Some(p) = list.front().filter(|p| p.key <= upto) {
            sum = sum.wrapping_add(p.delta);
            list.pop_front();
        }
        if !list.is_empty() {
            return (sum, true);
        }
        self.spare.push(words.swap_remove(at).pending);
        (sum, false)
    }

    /// The words of `space` in `[addr, end)` that have pending adds, in address order.
    pub(crate) fn words_in(&self, space: MemSpace, addr: u64, end: u64) -> Vec<u64> {
        let Some(words) = self.spaces.get(space.0 as usize) else {
            return Vec::new();
        };
        let mut out: Vec<u64> = words.iter().map(|w| w.addr).filter(|&a| a + 4 > addr && a < end).collect();
        out.sort_unstable();
        out
    }

    /// Every pending add, as `(key, space, addr)` in key order.
    pub(crate) fn pending(&self) -> Vec<(Key, MemSpace, u64)> {
        let mut all: Vec<(Key, MemSpace, u64)> = self
            .spaces
            .iter()
            .enumerate()
            .flat_map(|(sp, words)| {
                words
                    .iter()
                    .flat_map(move |w| w.pending.iter().map(move |p| (p.key, MemSpace(sp as u32), w.addr)))
            })
            .collect();
        all.sort_unstable_by_key(|&(k, _, _)| k);
        all
    }

    /// Whether the add at `key` to the word at `addr` is still pending.
    pub(crate) fn has(&self, space: MemSpace, addr: u64, key: Key) -> bool {
        self.spaces
            .get(space.0 as usize)
            .and_then(|words| words.iter().find(|w| w.addr == addr))
            .is_some_and(|w| w.pending.iter().any(|p| p.key == key))
    }
}
