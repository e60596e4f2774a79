//! meshsim's discrete-event engine.
//!
//! It provides integer picosecond [`Time`] and [`ClockDomain`]s, an event queue with a tested
//! `(time, insertion sequence)` order, sparse [`Memory`] that tasks can wait on, and a
//! deterministic single-threaded executor ([`Sim`]) for kernels written as `async` blocks.
//! Hardware is plugged in through the [`World`] trait; the engine knows nothing of Ethernet,
//! NoCs, YAML, files, threads or wall-clock time.
//!
//! ```
//! use meshsim_engine::{Cond, NoWorld, Sim, Time};
//!
//! let mut sim = Sim::new(NoWorld);
//! let ctx = sim.ctx();
//! let flag = ctx.sched().add_space("flags", 64);
//! let (a, b) = (ctx.clone(), ctx.clone());
//! sim.spawn("producer", Time::ZERO, async move {
//!     a.delay(Time::from_ns(100)).await;
//!     a.sched().write_u32(flag, 0, 1)?;
//!     Ok(())
//! });
//! sim.spawn("consumer", Time::ZERO, async move {
//!     b.wait_word(flag, 0, Cond::Eq(1)).await?;
//!     assert_eq!(b.now(), Time::from_ns(100));
//!     Ok(())
//! });
//! let stats = sim.run().unwrap();
//! assert_eq!(stats.end_time, Time::from_ns(100));
//! ```

#![warn(missing_docs)]

mod deferred;
mod memory;
pub mod queue;
mod sim;
mod time;

pub use memory::{Cond, MemError, MemSpace, Memory};
pub use queue::EventQueue;
pub use sim::{
    Ctx, Delay, NoWorld, Scheduler, SignalId, Sim, SimError, Stall, Stalled, Stats, TaskError, TaskEvent,
    TaskEventKind, TaskId, TaskResult, WaitAny, WaitSignal, WaitWord, World, fnv1a, set_shortcuts_by_default,
};
pub use time::{ClockDomain, Cycles, Time};
