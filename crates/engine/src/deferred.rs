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

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

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

/// A hasher for `(space, addr)` pairs: one multiply per word.
#[derive(Default)]
pub(crate) struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(23) ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The pending adds of every word that has some.
#[derive(Default)]
pub(crate) struct Deferred {
    /// Pending adds per word, in key order (completions mostly arrive in order, so an insert
    /// is usually a push at the back).
    pub(crate) words: HashMap<(u32, u64), VecDeque<Pending>, BuildHasherDefault<WordHasher>>,
    /// How many words of each space have pending adds: reads and writes of other spaces skip
    /// the lookup.
    per_space: Vec<u32>,
}

impl Deferred {
    /// Whether `space` has any word with pending adds.
    #[inline]
    pub(crate) fn in_space(&self, space: MemSpace) -> bool {
        self.per_space.get(space.0 as usize).is_some_and(|&n| n > 0)
    }

    /// Records an add.
    pub(crate) fn push(&mut self, space: MemSpace, addr: u64, p: Pending) {
        let i = space.0 as usize;
        if self.per_space.len() <= i {
            self.per_space.resize(i + 1, 0);
        }
        let per_space = &mut self.per_space[i];
        let list = self.words.entry((space.0, addr)).or_insert_with(|| {
            *per_space += 1;
            VecDeque::new()
        });
        if list.back().is_none_or(|b| b.key < p.key) {
            list.push_back(p);
        } else {
            let at = list.partition_point(|q| q.key < p.key);
            list.insert(at, p);
        }
    }

    /// The sum of the adds to a word that happened before `now` (wrapping).
    pub(crate) fn past_sum(&self, space: MemSpace, addr: u64, now: Key) -> u32 {
        if !self.in_space(space) {
            return 0;
        }
        self.words.get(&(space.0, addr)).map_or(0, |list| {
            list.iter().take_while(|p| p.key <= now).fold(0u32, |a, p| a.wrapping_add(p.delta))
        })
    }

    /// Removes the adds to a word at or before `upto`; returns their sum (wrapping) and
    /// whether the word still has pending adds.
    pub(crate) fn take_until(&mut self, space: MemSpace, addr: u64, upto: Key) -> (u32, bool) {
        if !self.in_space(space) {
            return (0, false);
        }
        let Some(list) = self.words.get_mut(&(space.0, addr)) else {
            return (0, false);
        };
        let mut sum = 0u32;
        while let Some(p) = list.front().filter(|p| p.key <= upto) {
            sum = sum.wrapping_add(p.delta);
            list.pop_front();
        }
        if !list.is_empty() {
            return (sum, true);
        }
        self.words.remove(&(space.0, addr));
        self.per_space[space.0 as usize] -= 1;
        (sum, false)
    }

    /// The words of `space` in `[addr, end)` that have pending adds.
    pub(crate) fn words_in(&self, space: MemSpace, addr: u64, end: u64) -> Vec<u64> {
        if !self.in_space(space) {
            return Vec::new();
        }
        if end == addr.saturating_add(4) {
            return if self.words.contains_key(&(space.0, addr)) { vec![addr] } else { Vec::new() };
        }
        let mut out: Vec<u64> = self
            .words
            .keys()
            .filter(|&&(sp, a)| sp == space.0 && a + 4 > addr && a < end)
            .map(|&(_, a)| a)
            .collect();
        out.sort_unstable();
        out
    }

    /// The earliest pending add of all, as `(key, space, addr)`.
    pub(crate) fn earliest(&self) -> Option<(Key, MemSpace, u64)> {
        self.words
            .iter()
            .flat_map(|(&(sp, a), list)| list.iter().map(move |p| (p.key, MemSpace(sp), a)))
            .min_by_key(|&(k, _, _)| k)
    }
}
