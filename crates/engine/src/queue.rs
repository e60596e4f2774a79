//! The event queue and its ordering contract.
//!
//! **Contract:** events fire in ascending `(time, seq)` order, where `seq` is a global insertion
//! counter. Two events scheduled for the same time therefore fire in the order they were
//! scheduled (FIFO), whatever their kind. Every run of the same program makes the same insertions
//! in the same order, so the firing order — and the event log — is reproducible.
//!
//! The contract is pinned by the tests below, including a randomised comparison against sorting.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::time::Time;

/// `(time, seq)` packed into one integer, so an ordering decision is a single comparison.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key(u128);

impl Key {
    fn new(time: Time, seq: u64) -> Key {
        Key(((time.0 as u128) << 64) | seq as u128)
    }
    fn time(self) -> Time {
        Time((self.0 >> 64) as u64)
    }
    fn seq(self) -> u64 {
        self.0 as u64
    }
}

struct Entry<T> {
    key: Key,
    payload: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl<T> Eq for Entry<T> {}

impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Entry<T> {
    /// Reversed, so that the max-heap pops the earliest `(time, seq)` first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key.cmp(&self.key)
    }
}

/// log2 of a wheel slot's width in picoseconds (1.024 ns).
const SLOT_SHIFT: u32 = 10;
/// Slots in the wheel: events up to about 4.2 µs ahead go into the wheel, later ones wait in
/// the far heap.
const SLOTS: u64 = 4096;
/// Words of the slot occupancy bitmap.
const WORDS: usize = (SLOTS / 64) as usize;

/// End of a node list.
const NIL: u32 = u32::MAX;

struct Node<T> {
    key: Key,
    next: u32,
    payload: Option<T>,
}

/// A priority queue of payloads ordered by `(time, insertion sequence)`.
///
/// Most events of a hardware model land within a few microseconds, so the queue is a timing
/// wheel of 1.024 ns slots (each slot kept sorted by key, usually holding one or two events)
/// with a binary heap for the far future. Invariant: every wheel event lies in slots
/// `[cursor, cursor + SLOTS)` and every far event at or after `cursor + SLOTS`, so the earliest
/// event is the first one in the first occupied slot from `cursor` on.
pub struct EventQueue<T> {
    /// Event storage; slots are singly linked lists through it, free nodes another list.
    nodes: Vec<Node<T>>,
    free: u32,
    /// First and last node of each slot's list (sorted by key), `NIL` when empty.
    heads: Vec<u32>,
    tails: Vec<u32>,
    occupied: [u64; WORDS],
    /// Absolute slot number of the last popped event.
    cursor: u64,
    wheel_len: usize,
    far: BinaryHeap<Entry<T>>,
    last_time: Time,
    next_seq: u64,
}

impl<T> Default for EventQueue<T> {
    fn default() -> Self {
        EventQueue {
            nodes: Vec::new(),
            free: NIL,
            heads: vec![NIL; SLOTS as usize],
            tails: vec![NIL; SLOTS as usize],
            occupied: [0; WORDS],
            cursor: 0,
            wheel_len: 0,
            far: BinaryHeap::new(),
            last_time: Time::ZERO,
            next_seq: 0,
        }
    }
}

impl<T> EventQueue<T> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `payload` at `time`; returns the sequence number it was given. Panics if `time`
    /// is before the last popped event: that can only be a bug in the caller.
    pub fn push(&mut self, time: Time, payload: T) -> u64 {
        assert!(time >= self.last_time, "event pushed into the past");
        let seq = self.next_seq;
        self.next_seq += 1;
        let key = Key::new(time, seq);
        if time.0 >> SLOT_SHIFT < self.cursor + SLOTS {
            self.put_in_wheel(key, payload);
        } else {
            self.far.push(Entry { key, payload });
        }
        seq
    }

    /// Takes the next sequence number without scheduling anything: the place in the event
    /// order of an event that may never need to be scheduled (see
    /// [`EventQueue::push_with_seq`]).
    pub fn reserve_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Schedules `payload` at `time` in the place of the sequence number `seq` taken earlier
    /// with [`EventQueue::reserve_seq`]: it fires exactly where an event pushed when the number
    /// was taken would have. Panics if `(time, seq)` is not after the last popped event, or
    /// `seq` was never handed out.
    pub fn push_with_seq(&mut self, time: Time, seq: u64, payload: T) {
        assert!(time >= self.last_time, "event pushed into the past");
        assert!(seq < self.next_seq, "sequence number {seq} was never reserved");
        let key = Key::new(time, seq);
        if time.0 >> SLOT_SHIFT < self.cursor + SLOTS {
            self.put_in_wheel(key, payload);
        } else {
            self.far.push(Entry { key, payload });
        }
    }

    fn put_in_wheel(&mut self, key: Key, payload: T) {
        let idx = ((key.time().0 >> SLOT_SHIFT) % SLOTS) as usize;
        let node = Node { key, next: NIL, payload: Some(payload) };
        let n = if self.free == NIL {
            self.nodes.push(node);
            u32::try_from(self.nodes.len() - 1).expect("fewer than 2^32 pending events")
        } else {
            let n = self.free;
            self.free = self.nodes[n as usize].next;
            self.nodes[n as usize] = node;
            n
        };
        let (head, tail) = (self.heads[idx], self.tails[idx]);
        if head == NIL {
            self.heads[idx] = n;
            self.tails[idx] = n;
            self.occupied[idx / 64] |= 1 << (idx % 64);
        } else if self.nodes[tail as usize].key < key {
            // The common case: the newest event is the latest in its slot.
            self.nodes[tail as usize].next = n;
            self.tails[idx] = n;
        } else if key < self.nodes[head as usize].key {
            self.nodes[n as usize].next = head;
            self.heads[idx] = n;
        } else {
            let mut prev = head;
            loop {
                let next = self.nodes[prev as usize].next;
                if next == NIL || key < self.nodes[next as usize].key {
                    break;
                }
                prev = next;
            }
            self.nodes[n as usize].next = self.nodes[prev as usize].next;
            self.nodes[prev as usize].next = n;
        }
        self.wheel_len += 1;
    }

    /// The first occupied slot index at or after `cursor`, circularly.
    fn first_occupied(&self) -> usize {
        let start = (self.cursor % SLOTS) as usize;
        let (w0, b0) = (start / 64, start % 64);
        let masked = self.occupied[w0] & (!0u64 << b0);
        if masked != 0 {
            return w0 * 64 + masked.trailing_zeros() as usize;
        }
        for k in 1..=WORDS {
            let w = (w0 + k) % WORDS;
            if self.occupied[w] != 0 {
                return w * 64 + self.occupied[w].trailing_zeros() as usize;
            }
        }
        unreachable!("the wheel holds an event")
    }

    /// Removes and returns the earliest event as `(time, seq, payload)`.
    pub fn pop(&mut self) -> Option<(Time, u64, T)> {
        if self.wheel_len == 0 {
            let first = self.far.peek()?.key.time();
            self.advance_to(first.0 >> SLOT_SHIFT);
        }
        let idx = self.first_occupied();
        let n = self.heads[idx];
        let node = &mut self.nodes[n as usize];
        let (key, payload) = (node.key, node.payload.take().expect("live node"));
        self.heads[idx] = node.next;
        node.next = self.free;
        self.free = n;
        if self.heads[idx] == NIL {
            self.tails[idx] = NIL;
            self.occupied[idx / 64] &= !(1 << (idx % 64));
        }
        self.wheel_len -= 1;
        self.last_time = key.time();
        self.advance_to(key.time().0 >> SLOT_SHIFT);
        Some((key.time(), key.seq(), payload))
    }

    /// Moves the cursor to `slot` and brings far events that now fit into the wheel.
    fn advance_to(&mut self, slot: u64) {
        self.cursor = slot;
        while let Some(e) = self.far.peek() {
            if e.key.time().0 >> SLOT_SHIFT >= self.cursor + SLOTS {
                break;
            }
            let Entry { key, payload } = self.far.pop().expect("peeked");
            self.put_in_wheel(key, payload);
        }
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.wheel_len + self.far.len()
    }

    /// Whether no event is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earlier_time_fires_first_and_equal_times_fire_in_insertion_order() {
        let mut q = EventQueue::new();
        q.push(Time(20), "late");
        q.push(Time(10), "tie-first");
        q.push(Time(5), "early");
        q.push(Time(10), "tie-second");
        q.push(Time(10), "tie-third");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, _, p)| p).collect();
        assert_eq!(order, ["early", "tie-first", "tie-second", "tie-third", "late"]);
    }

    #[test]
    fn sequence_numbers_are_global_and_increasing() {
        let mut q = EventQueue::new();
        assert_eq!(q.push(Time(7), ()), 0);
        assert_eq!(q.push(Time(1), ()), 1);
        assert_eq!(q.pop().map(|(t, s, _)| (t, s)), Some((Time(1), 1)));
        assert_eq!(q.push(Time(1), ()), 2);
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn a_reserved_number_fires_where_its_push_would_have() {
        // Reserve between two pushes for the same instant, push with the number after a later
        // one: it still fires between them, as if pushed when reserved.
        let mut q = EventQueue::new();
        q.push(Time(10), "first");
        let seq = q.reserve_seq();
        q.push(Time(10), "third");
        q.push(Time(5_000_000), "far");
        q.push_with_seq(Time(10), seq, "second");
        let far_seq = q.reserve_seq();
        q.push_with_seq(Time(6_000_000), far_seq, "farther");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, _, p)| p).collect();
        assert_eq!(order, ["first", "second", "third", "far", "farther"]);
    }
}

#[cfg(test)]
mod order_against_sort {
    use super::*;

    /// Interleaved pushes and pops, checked against sorting by (time, seq): a tiny LCG drives
    /// times from the current instant to tens of microseconds ahead (past the wheel), with many
    /// exact ties.
    #[test]
    fn matches_a_sorted_reference_under_interleaving() {
        let mut q = EventQueue::new();
        let mut pending: Vec<(u64, u64)> = Vec::new();
        let (mut now, mut x) = (0u64, 12345u64);
        for step in 0..20_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if (x >> 33) % 3 != 0 || pending.is_empty() {
                let ahead = match (x >> 40) % 4 {
                    0 => 0,
                    1 => (x >> 20) % 8,
                    2 => (x >> 20) % 5000,
                    _ => (x >> 8) % 50_000_000,
                };
                let seq = q.push(Time(now + ahead), step);
                pending.push((now + ahead, seq));
            } else {
                pending.sort();
                let want = pending.remove(0);
                let (t, seq, _) = q.pop().unwrap();
                assert_eq!((t.0, seq), want);
                now = t.0;
            }
        }
        pending.sort();
        for want in pending {
            let (t, seq, _) = q.pop().unwrap();
            assert_eq!((t.0, seq), want);
        }
        assert!(q.pop().is_none() && q.is_empty());
    }
}
