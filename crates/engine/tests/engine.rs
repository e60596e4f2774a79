//! Behaviour of the engine as a whole: ordering, determinism, failure reports.

use std::cell::RefCell;
use std::rc::Rc;

use meshsim_engine::{Cond, MemSpace, NoWorld, Scheduler, Sim, SimError, Stall, Time, World};

/// Equal-time wake-ups resume tasks in the order their waits were registered.
#[test]
fn equal_time_wakeups_are_fifo_across_tasks() {
    let mut sim = Sim::new(NoWorld);
    let order = Rc::new(RefCell::new(Vec::new()));
    for name in ["c", "a", "b"] {
        let (ctx, order) = (sim.ctx(), order.clone());
        sim.spawn(name, Time::ZERO, async move {
            ctx.delay(Time::from_ns(10)).await;
            order.borrow_mut().push(name);
            Ok(())
        });
    }
    sim.run().unwrap();
    assert_eq!(*order.borrow(), ["c", "a", "b"]);
}

/// A world that counts pings and echoes each one into a memory word after a fixed latency.
struct Echo {
    space: Option<MemSpace>,
    seen: Vec<(Time, u32)>,
}

#[derive(Debug, Hash)]
enum EchoEvent {
    Ping(u32),
}

impl World for Echo {
    type Event = EchoEvent;
    fn handle(&mut self, event: EchoEvent, sched: &mut Scheduler<EchoEvent>) {
        let EchoEvent::Ping(n) = event;
        self.seen.push((sched.now(), n));
        sched.write_u32(self.space.unwrap(), 0, n).unwrap();
    }
}

fn echo_run(rounds: u32, start_skew_ps: u64) -> (meshsim_engine::Stats, Vec<(Time, u32)>) {
    let mut sim = Sim::new(Echo { space: None, seen: Vec::new() });
    let ctx = sim.ctx();
    let space = ctx.with(|w, s| {
        let space = s.add_space("echo", 16);
        w.space = Some(space);
        space
    });
    for k in 0..2u32 {
        let ctx = ctx.clone();
        sim.spawn(format!("pinger{k}"), Time(k as u64 * start_skew_ps), async move {
            for i in 1..=rounds {
                let value = i * 2 + k;
                ctx.sched().schedule_in(Time::from_ns(7), EchoEvent::Ping(value));
                ctx.wait_word(space, 0, Cond::Eq(value)).await?;
            }
            Ok(())
        });
    }
    let stats = sim.run().unwrap();
    let seen = ctx.world().seen.clone();
    (stats, seen)
}

#[test]
fn world_events_and_word_waits_interleave_deterministically() {
    let (a, seen) = echo_run(50, 3_000);
    let (b, _) = echo_run(50, 3_000);
    assert_eq!(a, b, "same inputs must give the same event log");
    assert_eq!(seen.len(), 100);
    assert_eq!(seen[0], (Time::from_ns(7), 2));
    assert_eq!(a.world_events, 100);
    // A different start skew changes the log.
    let (c, _) = echo_run(50, 4_000);
    assert_ne!(a.log_hash, c.log_hash);
}

#[test]
fn deadlock_names_each_stalled_task_and_what_it_waits_for() {
    let mut sim = Sim::new(NoWorld);
    let ctx = sim.ctx();
    let l1 = ctx.sched().add_space("chip0/eth8/l1", 0x1000);
    let sig = ctx.sched().new_signal("chip0/eth8/txq0 free");
    let (a, b) = (ctx.clone(), ctx.clone());
    sim.spawn("chip0/eth8/receiver", Time::ZERO, async move {
        a.delay(Time::from_ns(5)).await;
        a.wait_word(l1, 0x100, Cond::Eq(1)).await?;
        Ok(())
    });
    sim.spawn("chip0/eth8/sender", Time::ZERO, async move {
        b.wait_signal(sig).await;
        Ok(())
    });
    sim.spawn("chip0/eth8/idle", Time::ZERO, async { Ok(()) });
    match sim.run() {
        Err(SimError::Deadlock { at, stalled }) => {
            assert_eq!(at, Time::from_ns(5));
            assert_eq!(stalled.len(), 2);
            assert_eq!(stalled[0].task, "chip0/eth8/receiver");
            assert_eq!(
                stalled[0].waits_for,
                Stall::Word {
                    space: "chip0/eth8/l1".into(),
                    label: None,
                    addr: 0x100,
                    cond: Cond::Eq(1),
                    current: 0
                }
            );
            assert_eq!(stalled[1].waits_for, Stall::Signal { name: "chip0/eth8/txq0 free".into() });
            let text = SimError::Deadlock { at, stalled }.to_string();
            assert!(
                text.contains("'chip0/eth8/receiver' waits for chip0/eth8/l1[0x100] == 1 (value is 0)"),
                "{text}"
            );
        }
        other => panic!("expected a deadlock, got {other:?}"),
    }
}

#[test]
fn time_limit_stops_a_run_that_would_go_on() {
    let mut sim = Sim::new(NoWorld);
    let ctx = sim.ctx();
    sim.spawn("spinner", Time::ZERO, async move {
        loop {
            ctx.delay(Time::from_us(1)).await;
        }
    });
    sim.set_time_limit(Time::from_us(10));
    assert!(matches!(sim.run(), Err(SimError::TimeLimit { running: 1, .. })));
}

#[test]
fn a_task_error_stops_the_run_and_names_the_task() {
    let mut sim = Sim::new(NoWorld);
    let ctx = sim.ctx();
    let l1 = ctx.sched().add_space("chip1/eth0/l1", 64);
    sim.spawn("chip1/eth0/writer", Time::from_ns(3), async move {
        ctx.sched().write_u32(l1, 128, 7)?;
        Ok(())
    });
    let err = sim.run().unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("task 'chip1/eth0/writer' failed at 3.000ns"), "{text}");
    assert!(text.contains("outside chip1/eth0/l1"), "{text}");
}

#[test]
fn watchers_wake_after_the_poll_latency_and_recheck_the_condition() {
    let mut sim = Sim::new(NoWorld);
    let ctx = sim.ctx();
    let sem = ctx.sched().add_space("sem", 64);
    ctx.sched().set_poll_latency(Time::from_ns(2));
    let woke = Rc::new(RefCell::new(None));
    let (a, b, w) = (ctx.clone(), ctx.clone(), woke.clone());
    sim.spawn("waiter", Time::ZERO, async move {
        let v = a.wait_word(sem, 8, Cond::Ge(2)).await?;
        *w.borrow_mut() = Some((a.now(), v));
        Ok(())
    });
    sim.spawn("incrementer", Time::ZERO, async move {
        for _ in 0..3 {
            b.delay(Time::from_ns(10)).await;
            b.sched().add_u32(sem, 8, 1)?;
        }
        // A bulk write overlapping the word also wakes (and re-checks) watchers.
        b.sched().write_bytes(sem, 4, &[0xff; 12])?;
        Ok(())
    });
    sim.run().unwrap();
    // The second increment (t = 20 ns) satisfies ">= 2"; the waiter resumes 2 ns later.
    assert_eq!(*woke.borrow(), Some((Time::from_ns(22), 2)));
}

/// A task that sets its own poll latency is woken that long after the satisfying write, in
/// every kind of word wait, while other tasks keep the scheduler's.
#[test]
fn a_task_may_notice_words_sooner_than_the_default_poll_latency() {
    let mut sim = Sim::new(NoWorld);
    let ctx = sim.ctx();
    let sem = ctx.sched().add_space("sem", 64);
    ctx.sched().set_poll_latency(Time::from_ns(60));
    let woke = Rc::new(RefCell::new(Vec::new()));
    for (name, own) in [("default", None), ("fast", Some(Time::from_ns(10)))] {
        let (c, w) = (ctx.clone(), woke.clone());
        sim.spawn(name, Time::ZERO, async move {
            if let Some(t) = own {
                c.sched().set_task_poll_latency(t);
            }
            c.wait_word(sem, 0, Cond::Ge(1)).await?;
            w.borrow_mut().push((name, "word", c.now()));
            c.wait_any(vec![(sem, 4, Cond::Ge(1)), (sem, 8, Cond::Ge(1))]).await?;
            w.borrow_mut().push((name, "any", c.now()));
            Ok(())
        });
    }
    let c = ctx.clone();
    sim.spawn("writer", Time::ZERO, async move {
        c.delay(Time::from_ns(100)).await;
        c.sched().write_u32(sem, 0, 1)?;
        c.delay(Time::from_ns(100)).await;
        c.sched().write_u32(sem, 8, 1)?;
        Ok(())
    });
    sim.run().unwrap();
    let mut got = woke.borrow().clone();
    got.sort_by_key(|&(_, _, t)| t);
    assert_eq!(
        got,
        [
            ("fast", "word", Time::from_ns(110)),
            ("default", "word", Time::from_ns(160)),
            ("fast", "any", Time::from_ns(210)),
            ("default", "any", Time::from_ns(260)),
        ]
    );
}

#[test]
fn tasks_can_spawn_tasks_and_yield_to_same_time_events() {
    let mut sim = Sim::new(NoWorld);
    let ctx = sim.ctx();
    let log = Rc::new(RefCell::new(Vec::new()));
    let (c, l) = (ctx.clone(), log.clone());
    sim.spawn("parent", Time::ZERO, async move {
        let (c2, l2) = (c.clone(), l.clone());
        c.spawn("child", c.now(), async move {
            l2.borrow_mut().push(("child", c2.now()));
            Ok(())
        });
        c.yield_now().await;
        l.borrow_mut().push(("parent", c.now()));
        Ok(())
    });
    let stats = sim.run().unwrap();
    assert_eq!(*log.borrow(), [("child", Time::ZERO), ("parent", Time::ZERO)]);
    assert_eq!(stats.tasks, 2);
}

#[test]
fn wait_any_wakes_on_the_first_word_and_forgets_the_others() {
    let mut sim = Sim::new(NoWorld);
    let ctx = sim.ctx();
    let a = ctx.sched().add_space("a", 64);
    let b = ctx.sched().add_space("b", 64);
    let log = Rc::new(RefCell::new(Vec::new()));
    let (c, l) = (ctx.clone(), log.clone());
    sim.spawn("service", Time::ZERO, async move {
        for _ in 0..2 {
            let i = c.wait_any(vec![(a, 0, Cond::Ne(0)), (b, 8, Cond::Ge(2))]).await?;
            l.borrow_mut().push((i, c.now()));
            if i == 0 {
                c.sched().write_u32(a, 0, 0)?;
            }
        }
        Ok(())
    });
    let w = ctx.clone();
    sim.spawn("writer", Time::ZERO, async move {
        w.delay(Time::from_ns(5)).await;
        w.sched().write_u32(b, 8, 1)?; // not yet >= 2
        w.delay(Time::from_ns(5)).await;
        w.sched().write_u32(a, 0, 7)?; // wakes index 0
        w.delay(Time::from_ns(5)).await;
        w.sched().write_u32(b, 8, 2)?; // wakes index 1
        w.delay(Time::from_ns(5)).await;
        w.sched().write_u32(a, 0, 9)?; // nobody watches any more
        Ok(())
    });
    let stats = sim.run().unwrap();
    assert_eq!(*log.borrow(), [(0, Time::from_ns(10)), (1, Time::from_ns(15))]);
    assert_eq!(stats.wakes, 2 + 4 + 2, "two starts, four delays, two word wake-ups: no stale wake");
}

#[test]
fn a_deadlocked_service_loop_lists_every_word_it_waits_for() {
    let mut sim = Sim::new(NoWorld);
    let ctx = sim.ctx();
    let l1 = ctx.sched().add_space("chip0/eth0/l1", 64);
    let c = ctx.clone();
    sim.spawn("chip0/eth0/edm", Time::ZERO, async move {
        c.wait_any(vec![(l1, 0, Cond::Eq(1)), (l1, 16, Cond::Ne(0))]).await?;
        Ok(())
    });
    let err = sim.run().unwrap_err().to_string();
    assert!(
        err.contains("'chip0/eth0/edm' waits for any of chip0/eth0/l1[0x0] == 1 (value is 0), chip0/eth0/l1[0x10] != 0 (value is 0)"),
        "{err}"
    );
}

#[test]
fn task_trace_records_starts_named_waits_resumes_and_finishes_in_time_order() {
    use meshsim_engine::{TaskEventKind as K, TaskId};
    let mut sim = Sim::new(NoWorld);
    let ctx = sim.ctx();
    ctx.sched().enable_task_trace();
    let flag = ctx.sched().add_space("flags", 64);
    let (a, b) = (ctx.clone(), ctx.clone());
    sim.spawn("producer", Time::ZERO, async move {
        a.delay(Time::from_ns(100)).await;
        a.sched().write_u32(flag, 8, 1)?;
        Ok(())
    });
    sim.spawn("consumer", Time::from_ns(10), async move {
        b.wait_word(flag, 8, Cond::Eq(1)).await?;
        Ok(())
    });
    sim.run().unwrap();
    let got: Vec<(u64, TaskId, K)> =
        ctx.sched().take_task_trace().into_iter().map(|e| (e.at.0 / 1000, e.task, e.kind)).collect();
    let want = vec![
        (0, TaskId(0), K::Start),
        (10, TaskId(1), K::Start),
        (10, TaskId(1), K::WaitBegin("flags[0x8] == 1".into())),
        (100, TaskId(0), K::Finish),
        (100, TaskId(1), K::WaitEnd),
        (100, TaskId(1), K::Finish),
    ];
    assert_eq!(got, want);
    assert!(ctx.sched().take_task_trace().is_empty(), "taking empties the record");
}
