//! The futures a kernel awaits: a delay, a memory word's condition, any of several words, a
//! signal. Each records the task's one outstanding wait with the scheduler and is polled again
//! only by the wake-up that wait schedules.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use super::{Action, Ctx, SignalId, Wait, World};
use crate::memory::{Cond, MemError, MemSpace};
use crate::time::Time;

/// Future of [`Ctx::delay`] and [`Ctx::yield_now`].
pub struct Delay<W: World> {
    pub(super) ctx: Ctx<W>,
    pub(super) span: Time,
    /// Wait even for a zero span (`yield_now`).
    pub(super) always: bool,
    pub(super) armed: bool,
}

impl<W: World> Future for Delay<W> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        // A task is only polled again by its own wake-up, so an armed delay has elapsed.
        if self.armed || (self.span == Time::ZERO && !self.always) {
            return Poll::Ready(());
        }
        let mut s = self.ctx.sched();
        let at = s.now + self.span;
        let task = s.set_wait(Wait::Delay);
        s.queue.push(at, Action::Wake(task));
        drop(s);
        self.armed = true;
        Poll::Pending
    }
}

/// Future of [`Ctx::wait_word`].
pub struct WaitWord<W: World> {
    pub(super) ctx: Ctx<W>,
    pub(super) space: MemSpace,
    pub(super) addr: u64,
    pub(super) cond: Cond,
}

impl<W: World> Future for WaitWord<W> {
    type Output = Result<u32, MemError>;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.ctx.sched();
        let value = match s.read_u32(self.space, self.addr) {
            Ok(v) => v,
            Err(e) => return Poll::Ready(Err(e)),
        };
        if self.cond.holds(value) {
            return Poll::Ready(Ok(value));
        }
        s.add_watch(self.space, self.addr, self.cond);
        Poll::Pending
    }
}

/// Future of [`Ctx::wait_any`].
pub struct WaitAny<W: World> {
    pub(super) ctx: Ctx<W>,
    /// Shared with the task's recorded wait, so registering it allocates nothing.
    pub(super) words: Rc<[(MemSpace, u64, Cond)]>,
}

impl<W: World> Future for WaitAny<W> {
    type Output = Result<usize, MemError>;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.ctx.sched();
        for (i, &(space, addr, cond)) in self.words.iter().enumerate() {
            match s.read_u32(space, addr) {
                Ok(v) if cond.holds(v) => return Poll::Ready(Ok(i)),
                Ok(_) => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        assert!(!self.words.is_empty(), "wait_any needs at least one word");
        let task = s.set_wait(Wait::AnyWord(Rc::clone(&self.words)));
        for &(space, addr, cond) in self.words.iter() {
            s.push_watch(task, space, addr, cond);
        }
        Poll::Pending
    }
}

/// Future of [`Ctx::wait_signal`].
pub struct WaitSignal<W: World> {
    pub(super) ctx: Ctx<W>,
    pub(super) signal: SignalId,
    pub(super) seen: Option<u64>,
}

impl<W: World> Future for WaitSignal<W> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        let mut s = self.ctx.sched();
        let count = s.signals[self.signal.0 as usize].count;
        match self.seen {
            Some(seen) if count > seen => Poll::Ready(()),
            _ => {
                let task = s.set_wait(Wait::Signal(self.signal));
                s.signals[self.signal.0 as usize].waiters.push(task);
                drop(s);
                self.seen.get_or_insert(count);
                Poll::Pending
            }
        }
    }
}
