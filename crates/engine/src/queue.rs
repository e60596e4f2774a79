//! The event queue and its ordering contract.
//!
//! **Contract:** events fire in ascending `(time, seq)` order, where `seq` is a global insertion
//! counter. Two events scheduled for the same time therefore fire in the order they were
//! scheduled (FIFO), whatever their kind. Every run of the same program makes the same insertions
//! in the same order, so the firing order — and the event log — is reproducible.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::time::Time;

struct Entry<T> {
    time: Time,
    seq: u64,
    payload: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
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
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

/// A priority queue of payloads ordered by `(time, insertion sequence)`.
pub struct EventQueue<T> {
    heap: BinaryHeap<Entry<T>>,
    next_seq: u64,
}

impl<T> Default for EventQueue<T> {
    fn default() -> Self {
        EventQueue { heap: BinaryHeap::new(), next_seq: 0 }
    }
}

impl<T> EventQueue<T> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `payload` at `time`; returns the sequence number it was given.
    pub fn push(&mut self, time: Time, payload: T) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Entry { time, seq, payload });
        seq
    }

    /// Removes and returns the earliest event as `(time, seq, payload)`.
    pub fn pop(&mut self) -> Option<(Time, u64, T)> {
        self.heap.pop().map(|e| (e.time, e.seq, e.payload))
    }

    /// The time of the earliest event, if any.
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|e| e.time)
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no event is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
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
        assert_eq!(q.peek_time(), Some(Time(1)));
        assert_eq!(q.len(), 2);
    }
}
