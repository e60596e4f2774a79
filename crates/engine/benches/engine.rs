//! Raw engine throughput: many task pairs ping-ponging through memory words.
//!
//! Each pair shares two words; the pinger writes round `i` into its word and waits for the
//! ponger to echo it into the other, with a 1 ns reaction delay on each side. Every round costs
//! the engine two delay wake-ups and two watcher wake-ups, so the figure reported (elements/s)
//! is events per second of wall time.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use meshsim_engine::{Cond, NoWorld, Sim, Stats, Time};

/// Builds and runs `pairs` ping-pong pairs for `rounds` rounds each.
fn ping_pong(pairs: u32, rounds: u32) -> Stats {
    let mut sim = Sim::new(NoWorld);
    let ctx = sim.ctx();
    ctx.sched().set_poll_latency(Time::from_ns(1));
    for p in 0..pairs {
        let space = ctx.sched().add_space(format!("pair{p}"), 64);
        let (a, b) = (ctx.clone(), ctx.clone());
        sim.spawn(format!("ping{p}"), Time(p as u64), async move {
            for i in 1..=rounds {
                a.sched().write_u32(space, 0, i)?;
                a.wait_word(space, 4, Cond::Eq(i)).await?;
                a.delay(Time::from_ns(1)).await;
            }
            Ok(())
        });
        sim.spawn(format!("pong{p}"), Time::ZERO, async move {
            for i in 1..=rounds {
                b.wait_word(space, 0, Cond::Eq(i)).await?;
                b.delay(Time::from_ns(1)).await;
                b.sched().write_u32(space, 4, i)?;
            }
            Ok(())
        });
    }
    sim.run().expect("ping-pong completes")
}

fn bench(c: &mut Criterion) {
    let (pairs, rounds) = (256, 200);
    let events = ping_pong(pairs, rounds).events;
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(events));
    g.sample_size(20);
    g.bench_function(format!("ping_pong_{pairs}x{rounds}_events"), |b| b.iter(|| ping_pong(pairs, rounds)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
