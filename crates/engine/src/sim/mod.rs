//! The simulator: scheduler, world hook and the deterministic executor for async kernels.
//!
//! ```text
//!            ┌──────────── Scheduler ────────────┐
//!  kernels ──┤ queue (time, seq) · memory ·       │──► World::handle(event)  (hardware)
//!  (async)   │ word watchers · signals · tasks    │◄── schedule / write / notify
//!            └────────────────────────────────────┘
//! ```
//!
//! A run pops events in `(time, seq)` order (see [`crate::queue`]). An event either resumes a
//! task (a kernel) or is handed to the [`World`] — the hardware model, which the engine knows only
//! through that trait. Hardware is therefore woken only when something scheduled work for it.
//!
//! Kernels are `async` blocks polled by this single-threaded executor; each `.await` on a
//! [`Ctx`] wait is a point where simulated time passes. A task has at most one outstanding wait:
//! a delay, a memory word condition (woken by the write that makes it true, plus the poll
//! latency — never by busy polling) or a signal. Futures that are not the engine's own waits must
//! not return `Pending`; the executor reports that as a task error.

use std::cell::{Ref, RefCell, RefMut};
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::deferred::{Deferred, Key, Pending};
use crate::memory::{Cond, MemError, MemSpace, Memory};
use crate::queue::EventQueue;
use crate::time::Time;

mod report;
mod wait;

use report::stalled;
pub use report::{SimError, Stall, Stalled};
pub use wait::{Delay, WaitAny, WaitSignal, WaitWord};

/// The model the engine drives: it receives the events it scheduled for itself.
///
/// The engine knows nothing else about it — not Ethernet, not NoCs, not files.
pub trait World: 'static {
    /// The closed set of events this world schedules. Hashed into the event log.
    type Event: Hash + fmt::Debug + 'static;

    /// Handles one event at `sched.now()`. It may schedule further events, write memory (which
    /// wakes watching tasks), notify signals and spawn tasks.
    fn handle(&mut self, event: Self::Event, sched: &mut Scheduler<Self::Event>);
}

/// A world without hardware, for pure-software simulations and tests of the engine.
#[derive(Debug, Default)]
pub struct NoWorld;

impl World for NoWorld {
    type Event = Infallible;
    fn handle(&mut self, event: Infallible, _: &mut Scheduler<Infallible>) {
        match event {}
    }
}

/// What a kernel returns when it fails (for example a hardware-model error).
pub type TaskError = Box<dyn std::error::Error + 'static>;
/// The output of every task.
pub type TaskResult = Result<(), TaskError>;
type BoxFuture = Pin<Box<dyn Future<Output = TaskResult>>>;

/// Identifies a task (a running kernel) of one simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId(pub u32);

/// Identifies a signal: a hardware event that tasks can wait for (a queue becoming free, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SignalId(pub u32);

/// What a task is waiting for.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Wait {
    Start,
    Delay,
    Word {
        space: MemSpace,
        addr: u64,
        cond: Cond,
    },
    /// The first of several words to satisfy its condition (a service loop over channels).
    AnyWord(Rc<[(MemSpace, u64, Cond)]>),
    Signal(SignalId),
}

enum Action<E> {
    Wake(TaskId),
    World(E),
    /// Applies a word's deferred adds up to this event's key and wakes its watchers.
    Settle {
        space: MemSpace,
        addr: u64,
    },
}

/// Whether new simulations take exact shortcuts (see [`Sim::set_shortcuts`]).
static SHORTCUTS_BY_DEFAULT: AtomicBool = AtomicBool::new(true);

/// Sets whether simulations created from now on, in this process, take the engine's exact
/// shortcuts (on unless turned off: a command line's `--exact` turns them off).
pub fn set_shortcuts_by_default(on: bool) {
    SHORTCUTS_BY_DEFAULT.store(on, Ordering::Relaxed);
}

struct Watch {
    addr: u64,
    task: TaskId,
    cond: Cond,
}

struct TaskMeta {
    name: String,
    /// How long this task's poll loop takes to notice a word it watches, if not the
    /// scheduler's default.
    poll_latency: Option<Time>,
    waiting: Option<Wait>,
    done: bool,
}

struct SignalState {
    name: String,
    count: u64,
    waiters: Vec<TaskId>,
}

/// What happened to a task, as recorded when task tracing is on (see
/// [`Scheduler::enable_task_trace`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskEventKind {
    /// The task ran for the first time.
    Start,
    /// The task returned (successfully or not).
    Finish,
    /// The task began waiting on memory words or a signal; what it waits for, by name.
    /// Delays are the task's own work and are not recorded as waits.
    WaitBegin(String),
    /// The wait begun last ended: the task resumed.
    WaitEnd,
}

/// One recorded task event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskEvent {
    /// When.
    pub at: Time,
    /// Which task.
    pub task: TaskId,
    /// What.
    pub kind: TaskEventKind,
}

/// Counters of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events processed (task wake-ups plus world events).
    pub events: u64,
    /// Of which task wake-ups.
    pub wakes: u64,
    /// Of which world (hardware) events.
    pub world_events: u64,
    /// Deferred adds ([`Scheduler::add_u32_at`]) applied without an event of their own: the
    /// events the engine's exact shortcut saved. Zero with shortcuts off.
    pub elided: u64,
    /// Tasks spawned.
    pub tasks: u64,
    /// Simulated time when the last task finished (or of the last event, if later).
    pub end_time: Time,
    /// Hash of the ordered event log: equal logs give equal hashes.
    pub log_hash: u64,
}

impl Stats {
    /// Events per second of wall time, given how long the caller measured the run to take.
    pub fn events_per_sec(&self, wall: Duration) -> f64 {
        self.events as f64 / wall.as_secs_f64().max(1e-9)
    }
}

/// The 64-bit FNV-1a hash of `bytes`, as the event log is hashed: stable across runs,
/// platforms and Rust versions (a fingerprint, not a cryptographic hash).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = Fnv(FNV_OFFSET);
    h.write(bytes);
    h.0
}

/// FNV-1a's offset basis.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// A 64-bit FNV-1a hasher: stable across runs, platforms and Rust versions.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(0x0100_0000_01b3);
    }
}

/// The state kernels and the world share: clock, event queue, memory, watchers and signals.
pub struct Scheduler<E> {
    now: Time,
    queue: EventQueue<Action<E>>,
    memory: Memory,
    /// Watched words per memory space, in the order the waits began. A space rarely has more
    /// than a few waiting tasks (one wait per task), so a write scans its space's short list.
    watches: Vec<Vec<Watch>>,
    /// Scratch list of the tasks one write wakes.
    fired: Vec<TaskId>,
    signals: Vec<SignalState>,
    tasks: Vec<TaskMeta>,
    spawned: Vec<(TaskId, BoxFuture)>,
    current: Option<TaskId>,
    live_tasks: usize,
    poll_latency: Time,
    stats: Stats,
    /// Task events, when tracing is on.
    trace: Option<Vec<TaskEvent>>,
    /// Sequence number of the event being handled: with `now`, its place in the event order.
    cur_seq: u64,
    /// Pending deferred adds.
    deferred: Deferred,
    /// Whether deferred adds may skip their events.
    shortcuts: bool,
}

impl<E: Hash + fmt::Debug + 'static> Scheduler<E> {
    fn new() -> Self {
        Scheduler {
            now: Time::ZERO,
            queue: EventQueue::new(),
            memory: Memory::default(),
            watches: Vec::new(),
            fired: Vec::new(),
            signals: Vec::new(),
            tasks: Vec::new(),
            spawned: Vec::new(),
            current: None,
            live_tasks: 0,
            poll_latency: Time::ZERO,
            stats: Stats { log_hash: Fnv(FNV_OFFSET).0, ..Stats::default() },
            trace: None,
            cur_seq: 0,
            deferred: Deferred::default(),
            shortcuts: SHORTCUTS_BY_DEFAULT.load(Ordering::Relaxed),
        }
    }

    /// The current place in the event order.
    fn key(&self) -> Key {
        (self.now, self.cur_seq)
    }

    /// The current simulated time.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Schedules a world event at the absolute time `at` (not before now).
    pub fn schedule(&mut self, at: Time, event: E) {
        assert!(at >= self.now, "event scheduled in the past: {at} < {}", self.now);
        self.queue.push(at, Action::World(event));
    }

    /// Schedules a world event `delay` from now.
    pub fn schedule_in(&mut self, delay: Time, event: E) {
        self.queue.push(self.now + delay, Action::World(event));
    }

    /// Sets how long after a watched word is written a waiting task resumes (its poll loop's
    /// reaction time). Zero by default.
    pub fn set_poll_latency(&mut self, latency: Time) {
        self.poll_latency = latency;
    }

    /// Sets how long the running task's poll loop takes to notice a watched word, in place of
    /// the default (a firmware loop whose own passes say when it notices).
    pub fn set_task_poll_latency(&mut self, latency: Time) {
        let task = self.current.expect("a task's poll latency is set from within it");
        self.tasks[task.0 as usize].poll_latency = Some(latency);
    }

    /// Read access to memory.
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// Adds a memory space of `size` bytes.
    pub fn add_space(&mut self, name: impl Into<String>, size: u64) -> MemSpace {
        self.memory.add_space(name, size)
    }

    /// Adds a memory space whose event-log key is `key` ([`Memory::add_space_keyed`]).
    pub fn add_space_keyed(&mut self, name: impl Into<String>, size: u64, key: u32) -> MemSpace {
        self.memory.add_space_keyed(name, size, key)
    }

    /// Reads the word at `addr` (with the deferred adds that have happened by now).
    #[inline(always)]
    pub fn read_u32(&self, space: MemSpace, addr: u64) -> Result<u32, MemError> {
        let v = self.memory.read_u32(space, addr)?;
        if !self.deferred.in_space(space) {
            return Ok(v);
        }
        Ok(v.wrapping_add(self.deferred.past_sum(space, addr, self.key())))
    }

    /// Writes `data` at `addr` and wakes tasks whose watched word now satisfies their condition.
    pub fn write_bytes(&mut self, space: MemSpace, addr: u64, data: &[u8]) -> Result<(), MemError> {
        let end = addr.saturating_add(data.len() as u64);
        let deferred = self.settle_past(space, addr, end);
        self.memory.write(space, addr, data)?;
        self.fire_watches(space, addr, data.len() as u64);
        for a in deferred {
            self.replan(space, a);
        }
        Ok(())
    }

    /// Writes the word at `addr` and wakes satisfied watchers.
    pub fn write_u32(&mut self, space: MemSpace, addr: u64, value: u32) -> Result<(), MemError> {
        let deferred = self.settle_word_past(space, addr);
        self.memory.write_u32(space, addr, value)?;
        self.fire_watches(space, addr, 4);
        if deferred {
            self.replan(space, addr);
        }
        Ok(())
    }

    /// Adds `inc` (wrapping) to the word at `addr`, as a semaphore increment does; returns the
    /// new value.
    pub fn add_u32(&mut self, space: MemSpace, addr: u64, inc: u32) -> Result<u32, MemError> {
        let value = self.read_u32(space, addr)?.wrapping_add(inc);
        self.write_u32(space, addr, value)?;
        Ok(value)
    }

    /// Adds `delta` (wrapping) to the 4-byte-aligned word at `addr` at time `at` (not before
    /// now), exactly as an event scheduled now for `at` that did only that would: tasks
    /// watching the word wake at the same instant and in the same order, reads after `at` see
    /// it. Unlike such an event it costs nothing unless a watching task needs it (see the
    /// `deferred` module). The word must be read through [`Scheduler::read_u32`], not
    /// [`Scheduler::memory`], while adds are pending.
    pub fn add_u32_at(&mut self, space: MemSpace, addr: u64, at: Time, delta: u32) -> Result<(), MemError> {
        assert!(at >= self.now, "deferred add in the past: {at} < {}", self.now);
        self.memory.check_range(space, addr, 4)?;
        self.settle_word_past(space, addr);
        self.defer(space, addr, at, delta);
        Ok(())
    }

    /// Counts something in flight on the 4-byte-aligned word at `addr`: adds `inc` now (waking
    /// satisfied watchers) and takes it back at `until` as [`Scheduler::add_u32_at`] does — an
    /// outstanding-transfer counter's issue and completion in one call.
    pub fn add_u32_until(
        &mut self,
        space: MemSpace,
        addr: u64,
        inc: u32,
        until: Time,
    ) -> Result<(), MemError> {
        assert!(until >= self.now, "deferred add in the past: {until} < {}", self.now);
        self.settle_word_past(space, addr);
        let v = self.memory.read_u32(space, addr)?.wrapping_add(inc);
        self.memory.write_u32(space, addr, v)?;
        self.fire_watches(space, addr, 4);
        self.defer(space, addr, until, inc.wrapping_neg());
        Ok(())
    }

    /// Records a deferred add of `delta` at `at` in the place of an event pushed now: with
    /// shortcuts its settle event is planned only if a watcher needs it, without it always is.
    fn defer(&mut self, space: MemSpace, addr: u64, at: Time, delta: u32) {
        debug_assert!(addr % 4 == 0, "deferred adds go to aligned words");
        let seq = self.queue.reserve_seq();
        let planned = !self.shortcuts;
        self.deferred.push(space, addr, Pending { key: (at, seq), delta, planned });
        if planned {
            self.queue.push_with_seq(at, seq, Action::Settle { space, addr });
        } else {
            self.stats.elided += 1;
            self.replan(space, addr);
        }
    }

    /// Applies the deferred adds to words in `[addr, end)` of `space` that have happened by
    /// now (a write comes after them); returns the words that still have pending adds.
    fn settle_past(&mut self, space: MemSpace, addr: u64, end: u64) -> Vec<u64> {
        if !self.deferred.in_space(space) {
            return Vec::new();
        }
        let mut words = self.deferred.words_in(space, addr, end);
        words.retain(|&a| self.settle_word_past(space, a));
        words
    }

    /// [`Scheduler::settle_past`] for one word; returns whether it still has pending adds.
    fn settle_word_past(&mut self, space: MemSpace, addr: u64) -> bool {
        if !self.deferred.in_space(space) {
            return false;
        }
        let (sum, left) = self.deferred.take_until(space, addr, self.key());
        if sum != 0 {
            let v = self.memory.read_u32(space, addr).expect("deferred words are checked");
            self.memory.write_u32(space, addr, v.wrapping_add(sum)).expect("deferred words are checked");
        }
        left
    }

    /// Makes sure a settle event is scheduled at the first pending add to the word at `addr`
    /// after which a task watching the word would see its condition hold (given what is known
    /// now: called again whenever the word, its adds or its watchers change).
    fn replan(&mut self, space: MemSpace, addr: u64) {
        if !self.deferred.in_space(space) {
            return;
        }
        let Some(watches) = self.watches.get(space.0 as usize) else {
            return;
        };
        if !watches.iter().any(|w| w.addr == addr) {
            return;
        }
        let Some(list) = self.deferred.word_mut(space, addr) else {
            return;
        };
        let key = (self.now, self.cur_seq);
        let mut value = self.memory.read_u32(space, addr).expect("deferred words are checked");
        for p in list.iter_mut() {
            value = value.wrapping_add(p.delta);
            if p.key <= key {
                continue;
            }
            if watches.iter().any(|w| w.addr == addr && w.cond.holds(value)) {
                if !p.planned {
                    p.planned = true;
                    self.stats.elided -= 1;
                    self.queue.push_with_seq(p.key.0, p.key.1, Action::Settle { space, addr });
                }
                return;
            }
        }
    }

    /// The settle event at the current key: applies the word's adds up to it and wakes the
    /// watchers whose condition now holds.
    fn settle(&mut self, space: MemSpace, addr: u64) {
        self.settle_word_past(space, addr);
        self.fire_watches(space, addr, 4);
        self.replan(space, addr);
    }

    fn fire_watches(&mut self, space: MemSpace, addr: u64, len: u64) {
        let Some(list) = self.watches.get_mut(space.0 as usize) else {
            return;
        };
        if list.is_empty() {
            return;
        }
        let end = addr.saturating_add(len);
        // Most writes touch no watched word: then nothing changes (no task has fired yet).
        if !list.iter().any(|w| w.addr < end && w.addr + 4 > addr) {
            return;
        }
        let (now, latency) = (self.now, self.poll_latency);
        let (memory, queue, fired, tasks) = (&self.memory, &mut self.queue, &mut self.fired, &self.tasks);
        list.retain(|w| {
            if fired.contains(&w.task) {
                // Another of this task's words already woke it.
                return false;
            }
            // Only words overlapping [addr, addr + len) can have changed.
            if w.addr + 4 <= addr || w.addr >= end {
                return true;
            }
            let value = memory.read_u32(space, w.addr).expect("watch was validated");
            if w.cond.holds(value) {
                let at = now + tasks[w.task.0 as usize].poll_latency.unwrap_or(latency);
                queue.push(at, Action::Wake(w.task));
                fired.push(w.task);
                return false;
            }
            true
        });
        // A task woken by one of several words stops watching the others.
        for i in 0..self.fired.len() {
            let task = self.fired[i];
            if let Some(Wait::AnyWord(words)) = &self.tasks[task.0 as usize].waiting {
                for &(sp, _, _) in words.iter() {
                    self.watches[sp.0 as usize].retain(|w| w.task != task);
                }
            }
        }
        self.fired.clear();
    }

    fn add_watch(&mut self, space: MemSpace, addr: u64, cond: Cond) {
        let task = self.set_wait(Wait::Word { space, addr, cond });
        self.push_watch(task, space, addr, cond);
    }

    fn push_watch(&mut self, task: TaskId, space: MemSpace, addr: u64, cond: Cond) {
        let i = space.0 as usize;
        if self.watches.len() <= i {
            self.watches.resize_with(i + 1, Vec::new);
        }
        self.watches[i].push(Watch { addr, task, cond });
        self.replan(space, addr);
    }

    /// Creates a signal named `name`.
    pub fn new_signal(&mut self, name: impl Into<String>) -> SignalId {
        let id = SignalId(u32::try_from(self.signals.len()).expect("too many signals"));
        self.signals.push(SignalState { name: name.into(), count: 0, waiters: Vec::new() });
        id
    }

    /// How many times `signal` has been raised.
    pub fn signal_count(&self, signal: SignalId) -> u64 {
        self.signals[signal.0 as usize].count
    }

    /// Raises a signal: every task waiting on it resumes now (in the order they started waiting).
    pub fn notify(&mut self, signal: SignalId) {
        let s = &mut self.signals[signal.0 as usize];
        s.count += 1;
        for task in std::mem::take(&mut s.waiters) {
            self.queue.push(self.now, Action::Wake(task));
        }
    }

    /// Spawns a task named `name` that starts at `start` (not before now).
    pub fn spawn(
        &mut self,
        name: impl Into<String>,
        start: Time,
        future: impl Future<Output = TaskResult> + 'static,
    ) -> TaskId {
        assert!(start >= self.now, "task started in the past");
        let id = TaskId(u32::try_from(self.tasks.len()).expect("too many tasks"));
        self.tasks.push(TaskMeta {
            name: name.into(),
            poll_latency: None,
            waiting: Some(Wait::Start),
            done: false,
        });
        self.spawned.push((id, Box::pin(future)));
        self.live_tasks += 1;
        self.stats.tasks += 1;
        self.queue.push(start, Action::Wake(id));
        id
    }

    /// The name of a task.
    pub fn task_name(&self, task: TaskId) -> &str {
        &self.tasks[task.0 as usize].name
    }

    /// The task being polled, if a task is running.
    pub fn current_task(&self) -> Option<TaskId> {
        self.current
    }

    /// Counters so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Starts recording when each task starts, waits (on what), resumes and finishes. Costs
    /// nothing when off; meant for traces of single runs.
    pub fn enable_task_trace(&mut self) {
        self.trace.get_or_insert_with(Vec::new);
    }

    /// The task events recorded so far (empty when tracing is off), leaving the record empty.
    pub fn take_task_trace(&mut self) -> Vec<TaskEvent> {
        self.trace.as_mut().map(std::mem::take).unwrap_or_default()
    }

    fn set_wait(&mut self, wait: Wait) -> TaskId {
        let task = self.current.expect("engine wait awaited outside a task");
        if self.trace.is_some() {
            let what = match &wait {
                &Wait::Word { space, addr, cond } => Some(self.describe_word(space, addr, cond)),
                Wait::AnyWord(words) => {
                    let each: Vec<String> =
                        words.iter().map(|&(sp, a, c)| self.describe_word(sp, a, c)).collect();
                    Some(format!("any of {}", each.join(", ")))
                }
                &Wait::Signal(id) => Some(format!("signal '{}'", self.signals[id.0 as usize].name)),
                Wait::Start | Wait::Delay => None,
            };
            if let (Some(what), Some(trace)) = (what, self.trace.as_mut()) {
                trace.push(TaskEvent { at: self.now, task, kind: TaskEventKind::WaitBegin(what) });
            }
        }
        let meta = &mut self.tasks[task.0 as usize];
        assert!(meta.waiting.is_none(), "task '{}' waits on two things at once", meta.name);
        meta.waiting = Some(wait);
        task
    }

    fn describe_word(&self, space: MemSpace, addr: u64, cond: Cond) -> String {
        format!("{} {cond}", self.memory.describe(space, addr))
    }

    /// Names the word at `addr` for traces and deadlock reports (see [`Memory::label_word`]).
    pub fn label_word(
        &mut self,
        space: MemSpace,
        addr: u64,
        label: impl Into<std::borrow::Cow<'static, str>>,
    ) {
        self.memory.label_word(space, addr, label);
    }

    /// Gives `to` the word names of `from` (see [`Memory::share_labels`]).
    pub fn share_labels(&mut self, from: MemSpace, to: MemSpace) {
        self.memory.share_labels(from, to);
    }

    /// Records a task event if tracing is on.
    fn trace_task(&mut self, task: TaskId, kind: TaskEventKind) {
        if let Some(trace) = self.trace.as_mut() {
            trace.push(TaskEvent { at: self.now, task, kind });
        }
    }

    fn log(&mut self, t: Time, seq: u64, kind: u64, hash_of: impl Hash) {
        let mut h = Fnv(self.stats.log_hash);
        h.write_u64(t.0);
        h.write_u64(seq);
        h.write_u64(kind);
        hash_of.hash(&mut h);
        self.stats.log_hash = h.0;
    }
}

struct Inner<W: World> {
    sched: Scheduler<W::Event>,
    world: W,
}

/// A cheap handle on a simulation, given to kernels and to the code that builds them.
pub struct Ctx<W: World>(Rc<RefCell<Inner<W>>>);

impl<W: World> Clone for Ctx<W> {
    fn clone(&self) -> Self {
        Ctx(Rc::clone(&self.0))
    }
}

impl<W: World> Ctx<W> {
    /// The current simulated time.
    pub fn now(&self) -> Time {
        self.0.borrow().sched.now
    }

    /// Runs `f` with the world and the scheduler. Must not be nested.
    pub fn with<R>(&self, f: impl FnOnce(&mut W, &mut Scheduler<W::Event>) -> R) -> R {
        let mut g = self.0.borrow_mut();
        let Inner { sched, world } = &mut *g;
        f(world, sched)
    }

    /// Read access to the world.
    pub fn world(&self) -> Ref<'_, W> {
        Ref::map(self.0.borrow(), |i| &i.world)
    }

    /// Write access to the scheduler.
    pub fn sched(&self) -> RefMut<'_, Scheduler<W::Event>> {
        RefMut::map(self.0.borrow_mut(), |i| &mut i.sched)
    }

    /// Spawns a task named `name` starting at `start`.
    pub fn spawn(
        &self,
        name: impl Into<String>,
        start: Time,
        future: impl Future<Output = TaskResult> + 'static,
    ) -> TaskId {
        self.sched().spawn(name, start, future)
    }

    /// Waits for `span` of simulated time. A zero span returns at once.
    pub fn delay(&self, span: Time) -> Delay<W> {
        Delay { ctx: self.clone(), span, always: false, armed: false }
    }

    /// Lets every other event scheduled for the current instant run first.
    pub fn yield_now(&self) -> Delay<W> {
        Delay { ctx: self.clone(), span: Time::ZERO, always: true, armed: false }
    }

    /// Waits until the word at `addr` satisfies `cond`; returns the value that satisfied it.
    ///
    /// If the condition already holds the wait returns at once. Otherwise the task is woken by
    /// the write that makes it hold (plus the poll latency) and re-checks; it never busy-polls.
    pub fn wait_word(&self, space: MemSpace, addr: u64, cond: Cond) -> WaitWord<W> {
        WaitWord { ctx: self.clone(), space, addr, cond }
    }

    /// Waits until the first of several words satisfies its condition; returns the index of a
    /// satisfied one (the lowest, if several hold when the task resumes). A service loop over
    /// many channels waits like this instead of polling each in turn.
    pub fn wait_any(&self, words: Vec<(MemSpace, u64, Cond)>) -> WaitAny<W> {
        WaitAny { ctx: self.clone(), words: words.into() }
    }

    /// Waits for the next notification of `signal`.
    pub fn wait_signal(&self, signal: SignalId) -> WaitSignal<W> {
        WaitSignal { ctx: self.clone(), signal, seen: None }
    }
}

/// One simulation: a world, the tasks running on it, and the executor that drives them.
pub struct Sim<W: World> {
    ctx: Ctx<W>,
    futures: Vec<Option<BoxFuture>>,
    time_limit: Time,
}

impl<W: World> Sim<W> {
    /// A simulation of `world` at time zero.
    pub fn new(world: W) -> Self {
        Sim::new_with(|_| world)
    }

    /// A simulation of the world `build` makes, given the scheduler so it can create its
    /// memory spaces and signals.
    pub fn new_with(build: impl FnOnce(&mut Scheduler<W::Event>) -> W) -> Self {
        let mut sched = Scheduler::new();
        let world = build(&mut sched);
        let inner = Inner { sched, world };
        Sim { ctx: Ctx(Rc::new(RefCell::new(inner))), futures: Vec::new(), time_limit: Time::MAX }
    }

    /// A handle for building kernels and inspecting state.
    pub fn ctx(&self) -> Ctx<W> {
        self.ctx.clone()
    }

    /// Stops a run with [`SimError::TimeLimit`] if an event would fire after `limit`.
    pub fn set_time_limit(&mut self, limit: Time) {
        self.time_limit = limit;
    }

    /// Turns the engine's exact shortcuts on or off for this simulation (on by default, see
    /// [`set_shortcuts_by_default`]). Off, every deferred add ([`Scheduler::add_u32_at`]) is an
    /// event of its own: slower, and the same times, values and task wake-ups.
    pub fn set_shortcuts(&mut self, on: bool) {
        self.ctx.sched().shortcuts = on;
    }

    /// Spawns a task named `name` starting at `start`.
    pub fn spawn(
        &self,
        name: impl Into<String>,
        start: Time,
        future: impl Future<Output = TaskResult> + 'static,
    ) -> TaskId {
        self.ctx.spawn(name, start, future)
    }

    /// Runs until every task has finished and no event is left, a deadlock, a task error or
    /// the time limit. Pure: the same world, tasks and limit give the same result and log hash.
    pub fn run(&mut self) -> Result<Stats, SimError> {
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        loop {
            let action = {
                let mut g = self.ctx.0.borrow_mut();
                let s = &mut g.sched;
                if !s.spawned.is_empty() {
                    for (id, fut) in s.spawned.drain(..) {
                        let i = id.0 as usize;
                        if self.futures.len() <= i {
                            self.futures.resize_with(i + 1, || None);
                        }
                        self.futures[i] = Some(fut);
                    }
                }
                let Some((t, seq, action)) = s.queue.pop() else {
                    if settle_pending(s, self.time_limit)? {
                        continue;
                    }
                    break;
                };
                if t > self.time_limit {
                    return Err(SimError::TimeLimit { limit: self.time_limit, running: s.live_tasks });
                }
                s.now = t;
                s.cur_seq = seq;
                s.stats.events += 1;
                match &action {
                    Action::Wake(task) => {
                        s.stats.wakes += 1;
                        s.log(t, seq, 0, task.0);
                        let was = s.tasks[task.0 as usize].waiting.take();
                        if s.trace.is_some() {
                            match was {
                                Some(Wait::Start) => s.trace_task(*task, TaskEventKind::Start),
                                Some(Wait::Delay) | None => {}
                                Some(_) => s.trace_task(*task, TaskEventKind::WaitEnd),
                            }
                        }
                        s.current = Some(*task);
                    }
                    Action::World(e) => {
                        s.stats.world_events += 1;
                        s.log(t, seq, 1, e);
                    }
                    &Action::Settle { space, addr } => {
                        s.stats.world_events += 1;
                        let key = s.memory.key(space);
                        s.log(t, seq, 2, (key, addr));
                        s.settle(space, addr);
                    }
                }
                action
            };
            match action {
                Action::Wake(task) => self.poll_task(task, &mut cx)?,
                Action::World(event) => self.ctx.with(|world, sched| world.handle(event, sched)),
                Action::Settle { .. } => {}
            }
        }
        let s = self.ctx.sched();
        if s.live_tasks > 0 {
            return Err(SimError::Deadlock { at: s.now, stalled: stalled(&s) });
        }
        let mut stats = s.stats.clone();
        stats.end_time = stats.end_time.max(s.now);
        Ok(stats)
    }

    fn poll_task(&mut self, task: TaskId, cx: &mut Context<'_>) -> Result<(), SimError> {
        let fut = self.futures[task.0 as usize].as_mut().expect("woken task has finished");
        let result = fut.as_mut().poll(cx);
        let mut s = self.ctx.sched();
        s.current = None;
        let meta = &s.tasks[task.0 as usize];
        match result {
            Poll::Pending if meta.waiting.is_none() => Err(SimError::Task {
                at: s.now,
                task: meta.name.clone(),
                error: "returned Pending without waiting on the simulator".into(),
            }),
            Poll::Pending => Ok(()),
            Poll::Ready(Ok(())) => {
                s.trace_task(task, TaskEventKind::Finish);
                s.tasks[task.0 as usize].done = true;
                s.live_tasks -= 1;
                s.stats.end_time = s.now;
                drop(s);
                self.futures[task.0 as usize] = None;
                Ok(())
            }
            Poll::Ready(Err(error)) => {
                Err(SimError::Task { at: s.now, task: meta.name.clone(), error: error.to_string() })
            }
        }
    }
}

/// The queue ran dry: the deferred adds still pending fire in key order, as their events would
/// have. They move the clock, and a watcher they wake means the run goes on (back to the
/// queue). Listed once, in order: until something is queued, settling one only removes adds
/// from the list. Whether the run goes on (`false`: nothing was pending).
#[cold]
fn settle_pending<E: Hash + fmt::Debug + 'static>(
    s: &mut Scheduler<E>,
    limit: Time,
) -> Result<bool, SimError> {
    let pending = s.deferred.pending();
    if pending.is_empty() {
        return Ok(false);
    }
    for ((t, seq), space, addr) in pending {
        if !s.deferred.has(space, addr, (t, seq)) {
            continue;
        }
        if t > limit {
            return Err(SimError::TimeLimit { limit, running: s.live_tasks });
        }
        // Adds that happened before the last event are only applied.
        if (t, seq) > s.key() {
            s.now = t;
            s.cur_seq = seq;
        }
        s.settle(space, addr);
        if !s.queue.is_empty() {
            break;
        }
    }
    Ok(true)
}
