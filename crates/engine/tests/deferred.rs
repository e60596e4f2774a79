//! Deferred adds (`Scheduler::add_u32_at`) are an exact shortcut: the same program run with
//! shortcuts on and off wakes every task at the same instants, reads the same values and ends
//! at the same time — only the number of events differs.

use std::cell::RefCell;
use std::rc::Rc;

use meshsim_engine::{Cond, MemSpace, NoWorld, Sim, Stats, Time};

/// A tiny deterministic generator.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

/// What the tasks saw: `(task, time, what, value)`, and how the run ended.
type Seen = (Vec<(usize, Time, &'static str, u32)>, Result<Stats, String>);

/// Tasks that post counted transfers on shared counters (an immediate +1, a deferred −1 when
/// the transfer lands), deferred plain adds, wait for counters to drain or pass thresholds,
/// read them and spin, all driven by `seed`.
fn run(seed: u64, shortcuts: bool) -> Seen {
    let mut sim = Sim::new(NoWorld);
    sim.set_shortcuts(shortcuts);
    let ctx = sim.ctx();
    let space: MemSpace = ctx.sched().add_space("counters", 64);
    let seen = Rc::new(RefCell::new(Vec::new()));
    for task in 0..6usize {
        let (ctx, seen) = (ctx.clone(), seen.clone());
        let mut rng = Lcg(seed * 1000 + task as u64);
        sim.spawn(format!("t{task}"), Time::from_ns(rng.next(5)), async move {
            for _ in 0..60 {
                let word = 4 * rng.next(3);
                match rng.next(7) {
                    0..=2 => {
                        // A counted transfer: +1 now, −1 when it lands (often at a tie).
                        let lands = ctx.now() + Time::from_ns(rng.next(40));
                        let mut s = ctx.sched();
                        if rng.next(2) == 0 {
                            s.add_u32_until(space, word, 1, lands)?;
                        } else {
                            s.add_u32(space, word, 1)?;
                            s.add_u32_at(space, word, lands, 1u32.wrapping_neg())?;
                        }
                    }
                    3 => {
                        let v = ctx.wait_word(space, word, Cond::Eq(0)).await?;
                        seen.borrow_mut().push((task, ctx.now(), "drained", v));
                    }
                    4 => {
                        let v = ctx.sched().read_u32(space, word)?;
                        seen.borrow_mut().push((task, ctx.now(), "read", v));
                    }
                    5 => {
                        let at = ctx.now() + Time::from_ns(rng.next(30));
                        ctx.sched().add_u32_at(space, 12, at, 1)?;
                        let want = Cond::Ge(rng.next(4) as u32);
                        let i = ctx.wait_any(vec![(space, word, Cond::Eq(0)), (space, 12, want)]).await?;
                        seen.borrow_mut().push((task, ctx.now(), "any", i as u32));
                    }
                    _ => ctx.delay(Time::from_ns(rng.next(20))).await,
                }
            }
            Ok(())
        });
    }
    let end = sim.run().map_err(|e| e.to_string());
    let words: Vec<u32> = (0..4).map(|w| ctx.sched().read_u32(space, 4 * w).unwrap()).collect();
    seen.borrow_mut().push((99, Time::ZERO, "final", words.iter().fold(0, |a, &w| a ^ w)));
    let out = seen.borrow().clone();
    (out, end)
}

#[test]
fn shortcuts_change_only_the_event_count() {
    let (mut elided, mut oks) = (0, 0);
    for seed in 0..40 {
        let (fast, fast_end) = run(seed, true);
        let (exact, exact_end) = run(seed, false);
        assert_eq!(fast, exact, "seed {seed}: tasks saw different things");
        match (fast_end, exact_end) {
            (Ok(f), Ok(e)) => {
                assert_eq!(f.end_time, e.end_time, "seed {seed}");
                assert_eq!(f.wakes, e.wakes, "seed {seed}");
                assert_eq!(e.elided, 0);
                assert_eq!(f.events + f.elided, e.events, "seed {seed}: every elided add is one event less");
                elided += f.elided;
                oks += 1;
            }
            (f, e) => assert_eq!(f, e, "seed {seed}"),
        }
    }
    assert!(oks >= 30, "only {oks} of 40 runs finished: the test exercises deadlocks instead");
    assert!(elided > 1000, "the shortcut fired only {elided} times");
}

/// A counter left with adds pending when every task has finished still moves the clock: the
/// run ends when the last add lands, as it would with one event per add.
#[test]
fn pending_adds_at_the_end_move_the_clock() {
    for shortcuts in [true, false] {
        let mut sim = Sim::new(NoWorld);
        sim.set_shortcuts(shortcuts);
        let ctx = sim.ctx();
        let space = ctx.sched().add_space("c", 8);
        let c = ctx.clone();
        sim.spawn("poster", Time::ZERO, async move {
            c.sched().add_u32_at(space, 0, Time::from_ns(500), 7)?;
            c.sched().add_u32_at(space, 0, Time::from_ns(100), 1)?;
            Ok(())
        });
        let stats = sim.run().unwrap();
        assert_eq!(stats.end_time, Time::from_ns(500), "shortcuts {shortcuts}");
        assert_eq!(ctx.sched().read_u32(space, 0).unwrap(), 8);
        assert_eq!(stats.elided, if shortcuts { 2 } else { 0 });
    }
}

/// Adds left pending in many spaces when the queue empties all land: each word holds its sum
/// and the run ends at the last add, which a task posted after an earlier add woke it (its
/// counter reached what it waited for) — the same with and without shortcuts.
#[test]
fn adds_left_in_many_spaces_all_land_and_end_the_run() {
    let mut ends = Vec::new();
    for shortcuts in [true, false] {
        let mut sim = Sim::new(NoWorld);
        sim.set_shortcuts(shortcuts);
        let ctx = sim.ctx();
        let spaces: Vec<MemSpace> = (0..40).map(|i| ctx.sched().add_space(format!("s{i}"), 16)).collect();
        let woke = Rc::new(RefCell::new(None));
        let (c, sp) = (ctx.clone(), spaces.clone());
        sim.spawn("poster", Time::ZERO, async move {
            for (i, &s) in sp.iter().enumerate() {
                for k in 0..3u64 {
                    c.sched().add_u32_at(s, 4 * (k % 2), Time::from_ns(10 + 7 * i as u64 + 100 * k), 1)?;
                }
            }
            Ok(())
        });
        let (c, s0, seen) = (ctx.clone(), spaces[0], woke.clone());
        sim.spawn("waiter", Time::from_ns(1), async move {
            c.wait_word(s0, 0, Cond::Eq(2)).await?;
            let now = c.now();
            *seen.borrow_mut() = Some(now);
            c.sched().add_u32_at(s0, 8, now + Time::from_ns(1000), 5)?;
            Ok(())
        });
        let stats = sim.run().unwrap();
        let sums: Vec<u32> = spaces
            .iter()
            .flat_map(|&s| (0..3).map(move |w| (s, 4 * w)))
            .map(|(s, a)| ctx.sched().read_u32(s, a).unwrap())
            .collect();
        assert!(sums.chunks(3).skip(1).all(|w| w == [2, 1, 0]), "shortcuts {shortcuts}: {sums:?}");
        assert_eq!(&sums[..3], &[2, 1, 5], "shortcuts {shortcuts}");
        ends.push((stats.end_time, *woke.borrow()));
    }
    assert_eq!(ends[0], ends[1]);
    assert_eq!(ends[0], (Time::from_ns(210 + 1000), Some(Time::from_ns(210))));
}
