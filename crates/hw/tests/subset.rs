//! A machine built for some chips of a cluster against the machine of every chip. Its own test
//! binary: it turns the engine's shortcuts off (a process-wide default), so that every deferred
//! counter update is a logged event.

use std::cell::RefCell;
use std::rc::Rc;

use meshsim_engine::{Time, set_shortcuts_by_default};
use meshsim_hw::{CoreRef, Machine, Mode, Params, Program};
use meshsim_topology::{ChipIdx, builtin};

/// A machine built for some chips of a cluster runs a program on them exactly as the machine
/// of every chip does: the same events, the same event-log hash (each memory keeps, in the
/// log, the id it has when every chip is built), the same times.
#[test]
fn a_machine_of_some_chips_runs_as_the_machine_of_all() {
    // Every deferred update of the NoC counters the barriers wait on is then an event that
    // names its memory.
    set_shortcuts_by_default(false);
    let run = |mut m: Machine| {
        let dev = m.device(ChipIdx(1));
        let bank = dev.dram_noc_coord(2);
        let dst = CoreRef::Worker(meshsim_topology::soc::CoreCoord { x: 3, y: 2 });
        let dst_at = dev.noc_coord(dst);
        let mut prog = Program::new(ChipIdx(1));
        let sem = prog.create_semaphore(&[dst], 0);
        let sem_addr = dev.semaphore_addr(dst, sem);
        let src = CoreRef::Worker(meshsim_topology::soc::CoreCoord { x: 2, y: 5 });
        prog.create_kernel(src, "mover", 0, vec![], move |k| async move {
            k.noc_async_read(k.get_noc_addr(bank.x, bank.y, 0x4000_0000), 0x8000, 8192).await?;
            k.noc_async_read_barrier().await?;
            k.noc_async_write(0x8000, k.get_noc_addr(dst_at.x, dst_at.y, 0x10000), 8192).await?;
            k.noc_semaphore_inc(k.get_noc_addr(dst_at.x, dst_at.y, sem_addr), 1).await?;
            k.noc_async_write_barrier().await?;
            Ok(())
        });
        let got = Rc::new(RefCell::new(Time::ZERO));
        let g = got.clone();
        prog.create_kernel(dst, "taker", 1, vec![], move |k| async move {
            k.noc_semaphore_wait(sem_addr, 1).await?;
            *g.borrow_mut() = k.now();
            Ok(())
        });
        let stats = m.launch(vec![prog], |_| Time::ZERO).unwrap();
        let got = *got.borrow();
        (stats.events, stats.log_hash, stats.end_time, got)
    };
    let n300 = || builtin::cluster("n300").unwrap();
    let all = run(Machine::new(n300(), Params::default(), Mode::Timing));
    let some = run(Machine::for_chips(n300(), Params::default(), Mode::Timing, &[ChipIdx(1)]));
    assert!(all.0 > 0);
    assert_eq!(all, some);
}
