//! The hardware model end to end: real bytes across a link, address checks, deadlock reports,
//! and timing of single sends against the model's own arithmetic.

use std::cell::RefCell;
use std::rc::Rc;

use meshsim_engine::{Cond, SimError, Stall, Time};
use meshsim_hw::{CoreRef, Machine, Mode, Params, Program};
use meshsim_topology::{ChipIdx, builtin};

const BUF: u64 = 0x9000 + 0x100;

fn n300(mode: Mode) -> Machine {
    Machine::new(builtin::cluster("n300").unwrap(), Params::default(), mode)
}

/// The user link of the N300: (chip 0 channel, chip 1 channel).
fn user_link(m: &Machine) -> (u8, u8) {
    let dev = m.device(ChipIdx(0));
    let core = dev.active_ethernet_cores(true)[0];
    let (chip, far) = dev.connected_ethernet_core(core).unwrap();
    assert_eq!(chip, ChipIdx(1));
    (core.y as u8, far.y as u8)
}

#[test]
fn device_lists_only_user_ethernet_cores_when_asked() {
    let m = n300(Mode::Timing);
    let dev = m.device(ChipIdx(0));
    assert_eq!(dev.active_ethernet_cores(false).len(), 2);
    assert_eq!(dev.active_ethernet_cores(true).iter().map(|c| c.y).collect::<Vec<_>>(), [9]);
    assert_eq!(user_link(&m), (9, 1));
}

#[test]
fn real_bytes_cross_the_link_after_a_handshake() {
    let mut m = n300(Mode::Functional);
    let (tx_chan, rx_chan) = user_link(&m);
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let mut p0 = Program::new(ChipIdx(0));
    let data = pattern.clone();
    p0.create_kernel(CoreRef::Eth(tx_chan), "sender", 0, vec![], move |k| async move {
        k.eth_setup_handshake(0x9000, true).await?;
        k.write_bytes(BUF, &data)?;
        k.eth_send_bytes_over_channel(BUF, BUF, 4096, 1).await?;
        k.eth_wait_receiver_channel_done(1).await?;
        Ok(())
    });
    let mut p1 = Program::new(ChipIdx(1));
    let s = seen.clone();
    p1.create_kernel(CoreRef::Eth(rx_chan), "receiver", 0, vec![], move |k| async move {
        k.eth_setup_handshake(0x9000, false).await?;
        k.eth_wait_for_bytes_on_channel(1).await?;
        *s.borrow_mut() = k.read_bytes(BUF, 4096)?;
        k.eth_receiver_channel_done(1).await?;
        Ok(())
    });
    let stats = m.launch(vec![p0, p1], |c| Time::from_ns(500 * c.0 as u64)).unwrap();
    assert_eq!(*seen.borrow(), pattern);
    assert_eq!(m.read_l1(ChipIdx(1), CoreRef::Eth(rx_chan), BUF, 4096).unwrap(), pattern);
    assert!(stats.world_events > 0);
    // Handshake (payload + sync), data (payload + sync) out; two "done" records back.
    let links = m.link_use();
    assert_eq!(links.iter().map(|l| l.bytes).sum::<u64>(), 16 + 16 + 4096 + 16 + 16 + 16);
    // The data went one way: that direction carried payload, and its serializer was busy at
    // least for the payload at the line rate.
    let data = links.iter().find(|l| l.bytes > 4096).expect("the data direction");
    assert_eq!(data.from.chip, ChipIdx(0));
    assert!(data.first_payload.is_some() && data.busy >= Params::default().eth_wire_time(4096));
}

#[test]
fn timing_mode_moves_only_the_tail() {
    let mut m = n300(Mode::Timing);
    let (tx_chan, rx_chan) = user_link(&m);
    let mut p0 = Program::new(ChipIdx(0));
    p0.create_kernel(CoreRef::Eth(tx_chan), "sender", 0, vec![], move |k| async move {
        k.write_bytes(BUF, &[0xab; 64])?;
        k.eth_send_packet(0, BUF >> 4, BUF >> 4, 4).await?;
        Ok(())
    });
    m.launch(vec![p0], |_| Time::ZERO).unwrap();
    let got = m.read_l1(ChipIdx(1), CoreRef::Eth(rx_chan), BUF, 64).unwrap();
    assert_eq!(&got[..48], &[0; 48]);
    assert_eq!(&got[48..], &[0xab; 16]);
}

#[test]
fn a_send_lands_when_the_model_says() {
    let p = Params::default();
    let mut m = n300(Mode::Timing);
    let (tx_chan, rx_chan) = user_link(&m);
    let arrived = Rc::new(RefCell::new(Time::ZERO));
    let mut p0 = Program::new(ChipIdx(0));
    p0.create_kernel(CoreRef::Eth(tx_chan), "sender", 0, vec![], move |k| async move {
        k.write_u32(BUF + 1024, 1)?;
        k.eth_send_packet(0, BUF >> 4, BUF >> 4, 1040 >> 4).await?;
        Ok(())
    });
    let mut p1 = Program::new(ChipIdx(1));
    let a = arrived.clone();
    p1.create_kernel(CoreRef::Eth(rx_chan), "receiver", 0, vec![], move |k| async move {
        k.wait_until(BUF + 1024, Cond::Eq(1)).await?;
        *a.borrow_mut() = k.now();
        Ok(())
    });
    m.launch(vec![p0, p1], |_| Time::ZERO).unwrap();
    let want = p.cycles(p.eth_send_initiate_cycles + p.eth_txq_latch_cycles)
        + p.eth_dma_time(1040)
        + p.eth_wire_time(1040 + p.eth_packet_overhead_bytes)
        + Time::from_ns(p.eth_link_latency_ns)
        + p.eth_dma_time(1040)
        + p.cycles(p.core_poll_cycles);
    assert_eq!(*arrived.borrow(), want);
}

#[test]
fn a_kernel_writing_outside_the_erisc_window_gets_an_error() {
    let p = Params::default();
    let (_, end) = p.erisc_window();
    let mut m = n300(Mode::Functional);
    let mut p0 = Program::new(ChipIdx(0));
    p0.create_kernel(CoreRef::Eth(9), "scribbler", 0, vec![], move |k| async move {
        k.write_u32(end - 4, 1)?;
        k.write_u32(end, 1)?;
        Ok(())
    });
    let err = m.launch(vec![p0], |_| Time::ZERO).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "task 'chip0/eth9/scribbler' failed at 0.000ns: chip0/eth9: access of 4 bytes at {end:#x} is outside the kernel L1 window [{:#x}, {end:#x})",
            p.erisc_kernel_l1_base
        )
    );
}

#[test]
fn a_send_into_the_peers_reserved_memory_is_refused() {
    let mut m = n300(Mode::Functional);
    let mut p0 = Program::new(ChipIdx(0));
    p0.create_kernel(CoreRef::Eth(9), "sender", 0, vec![], move |k| async move {
        k.eth_send_packet(0, BUF >> 4, 0x40, 1).await?;
        Ok(())
    });
    let err = m.launch(vec![p0], |_| Time::ZERO).unwrap_err().to_string();
    assert!(err.contains("chip1/eth1: access of 16 bytes at 0x400 is outside the kernel L1 window"), "{err}");
}

#[test]
fn a_program_that_never_handshakes_deadlocks_naming_the_waiting_kernel() {
    let p = Params::default();
    let mut m = n300(Mode::Functional);
    let (_, rx_chan) = user_link(&m);
    let mut p1 = Program::new(ChipIdx(1));
    p1.create_kernel(CoreRef::Eth(rx_chan), "receiver", 0, vec![], move |k| async move {
        k.eth_setup_handshake(0x9000, false).await?;
        Ok(())
    });
    match m.launch(vec![p1], |_| Time::from_ns(100)) {
        Err(SimError::Deadlock { stalled, .. }) => {
            assert_eq!(stalled.len(), 1);
            assert_eq!(stalled[0].task, "chip1/eth1/receiver");
            assert_eq!(
                stalled[0].waits_for,
                Stall::Word {
                    space: "chip1/eth1/l1".into(),
                    label: Some("erisc_info channel 0".into()),
                    addr: p.erisc_info_base,
                    cond: Cond::Ne(0),
                    current: 0
                }
            );
        }
        other => panic!("expected a deadlock, got {other:?}"),
    }
}

#[test]
fn noc_writes_and_semaphores_arrive_in_order_and_barriers_wait_for_them() {
    let mut m = Machine::new(builtin::cluster("n300").unwrap(), Params::default(), Mode::Functional);
    let dev = m.device(ChipIdx(0));
    let dst = CoreRef::Worker(meshsim_topology::soc::CoreCoord { x: 3, y: 2 });
    let dst_at = dev.noc_coord(dst);
    let mut prog = Program::new(ChipIdx(0));
    let sem = prog.create_semaphore(&[dst], 0);
    let sem_addr = dev.semaphore_addr(dst, sem);
    let data: Vec<u8> = (0..20000u32).map(|i| (i % 253) as u8).collect();
    let d = data.clone();
    let src = CoreRef::Worker(meshsim_topology::soc::CoreCoord { x: 0, y: 0 });
    prog.create_kernel(src, "writer", 0, vec![], move |k| async move {
        k.write_bytes(0x2000, &d)?;
        k.noc_async_write(0x2000, k.get_noc_addr(dst_at.x, dst_at.y, 0x10000), 20000).await?;
        k.noc_semaphore_inc(k.get_noc_addr(dst_at.x, dst_at.y, sem_addr), 1).await?;
        k.noc_async_write_barrier().await?;
        Ok(())
    });
    let ok = Rc::new(RefCell::new(false));
    let o = ok.clone();
    prog.create_kernel(dst, "reader", 1, vec![], move |k| async move {
        k.noc_semaphore_wait(sem_addr, 1).await?;
        // The semaphore follows the write on the same NoC: the data is all there.
        *o.borrow_mut() = k.read_bytes(0x10000, 20000)? == data;
        Ok(())
    });
    m.launch(vec![prog], |_| Time::ZERO).unwrap();
    assert!(*ok.borrow());
}

#[test]
fn a_worker_reads_dram_through_the_noc_after_the_bank_latency() {
    let p = Params::default();
    let mut m = Machine::new(builtin::cluster("n300").unwrap(), Params::default(), Mode::Functional);
    let dev = m.device(ChipIdx(1));
    let bank = dev.dram_noc_coord(3);
    let data: Vec<u8> = (0..12288u32).map(|i| (i * 13 % 251) as u8).collect();
    m.write_dram(ChipIdx(1), 3, 0x4000_0000, &data).unwrap();
    let got = Rc::new(RefCell::new((Vec::new(), Time::ZERO)));
    let g = got.clone();
    let mut prog = Program::new(ChipIdx(1));
    prog.create_kernel(
        CoreRef::Worker(meshsim_topology::soc::CoreCoord { x: 2, y: 5 }),
        "reader",
        1,
        vec![],
        move |k| async move {
            k.noc_async_read(k.get_noc_addr(bank.x, bank.y, 0x4000_0000), 0x8000, 12288).await?;
            k.noc_async_read_barrier().await?;
            *g.borrow_mut() = (k.read_bytes(0x8000, 12288)?, k.now());
            Ok(())
        },
    );
    m.launch(vec![prog], |_| Time::ZERO).unwrap();
    let (bytes, at) = got.borrow().clone();
    assert_eq!(bytes, data);
    // Two packets (8 KiB + 4 KiB) stream out of the bank after its latency.
    let floor = p.cycles(p.dram_latency_cycles + 12288 / p.dram_bank_bytes_per_cycle);
    assert!(at > floor && at < floor + Time::from_us(1), "{at}");
}

/// A write tagged with a transaction id flushes once it has landed and been acknowledged, and
/// waiting for one id does not wait for another's later, larger write.
#[test]
fn a_tagged_write_flushes_when_acknowledged_and_ids_are_independent() {
    let mut m = n300(Mode::Timing);
    let dev = m.device(ChipIdx(0));
    let dst = dev.noc_coord(CoreRef::Worker(meshsim_topology::soc::CoreCoord { x: 5, y: 5 }));
    let src = CoreRef::Worker(meshsim_topology::soc::CoreCoord { x: 0, y: 0 });
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s = seen.clone();
    let mut prog = Program::new(ChipIdx(0));
    prog.create_kernel(src, "writer", 0, vec![], move |k| async move {
        let far = k.get_noc_addr(dst.x, dst.y, 0x10000);
        k.noc_async_write_with_trid(0x2000, far, 2048, 1).await?;
        let issued = k.now();
        assert!(!k.noc_write_trid_flushed(1), "2 KiB cannot leave in no time");
        k.noc_async_write_with_trid(0x4000, far + 0x4000, 8192, 2).await?;
        k.noc_async_write_flushed_with_trid(1).await;
        let one = k.now();
        k.noc_async_writes_flushed().await;
        let all = k.now();
        k.noc_async_write_barrier().await?;
        s.borrow_mut().extend([issued, one, all, k.now()]);
        Ok(())
    });
    m.launch(vec![prog], |_| Time::ZERO).unwrap();
    let p = Params::default();
    let t = seen.borrow().clone();
    let (issued, one, all, landed) = (t[0], t[1], t[2], t[3]);
    // Write 1's id flushes once its 65 flits have landed and the acknowledgement has come back
    // (at least a hop each way), without waiting for write 2: before write 2's 257 flits have
    // even left.
    let round_trip = p.cycles(65 + 2 * p.noc_hop_cycles + p.noc_inject_cycles + p.noc_eject_cycles);
    assert!(one - issued >= round_trip, "{one} vs {issued}");
    assert!(one < all, "{one} vs {all}");
    // Every write has left the source (sent) once both have gone through the injection port,
    // before the last one has landed.
    assert!(all - issued >= p.cycles(65 + 257), "{all} vs {issued}");
    assert!(landed > all, "a sent write may still be on its way");
}

/// Two kernels on one ERISC share its RISC-V: the second's command is written after the
/// first's, but while the first waits to latch, so the two are one initiation apart, not one
/// initiation plus a latch.
#[test]
fn kernels_on_one_erisc_share_its_riscv_but_not_the_queue_while_it_writes() {
    let mut m = n300(Mode::Timing);
    let (tx_chan, _) = user_link(&m);
    let subs = Rc::new(RefCell::new(Vec::new()));
    let mut prog = Program::new(ChipIdx(0));
    for (name, addr) in [("a", BUF), ("b", BUF + 0x100)] {
        let s = subs.clone();
        prog.create_kernel(CoreRef::Eth(tx_chan), name, 0, vec![], move |k| async move {
            k.eth_send_packet(0, addr >> 4, addr >> 4, 1).await?;
            s.borrow_mut().push(k.now());
            Ok(())
        });
    }
    m.launch(vec![prog], |_| Time::ZERO).unwrap();
    let p = Params::default();
    let t = subs.borrow().clone();
    assert_eq!(t[0], p.cycles(p.eth_send_initiate_cycles));
    let latched = t[0] + p.cycles(p.eth_txq_latch_cycles);
    assert_eq!(t[1], latched.max(p.cycles(2 * p.eth_send_initiate_cycles)));
}

/// A decrement that takes a semaphore below zero (a credit returned twice, a count taken once
/// too often) is recorded as a protocol hazard naming the chip, core, address, value and time;
/// decrements that stay at or above zero are not.
#[test]
fn a_semaphore_taken_below_zero_is_a_recorded_hazard() {
    let mut m = Machine::new(builtin::cluster("n300").unwrap(), Params::default(), Mode::Timing);
    let dev = m.device(ChipIdx(0));
    let dst = CoreRef::Worker(meshsim_topology::soc::CoreCoord { x: 3, y: 2 });
    let dst_at = dev.noc_coord(dst);
    let mut prog = Program::new(ChipIdx(0));
    let sem = prog.create_semaphore(&[dst], 0);
    let sem_addr = dev.semaphore_addr(dst, sem);
    let src = CoreRef::Worker(meshsim_topology::soc::CoreCoord { x: 0, y: 0 });
    prog.create_kernel(src, "broken", 0, vec![], move |k| async move {
        let at = k.get_noc_addr(dst_at.x, dst_at.y, sem_addr);
        k.noc_semaphore_inc(at, 2).await?;
        k.noc_semaphore_inc(at, (-2i32) as u32).await?; // back to 0: fine
        k.noc_semaphore_inc(at, (-1i32) as u32).await?; // -1: the hazard
        Ok(())
    });
    m.launch(vec![prog], |_| Time::ZERO).unwrap();
    let neg = m.negative_semaphores();
    assert_eq!(neg.len(), 1, "{neg:?}");
    assert_eq!((neg[0].chip, neg[0].core, neg[0].addr, neg[0].value), (ChipIdx(0), dst_at, sem_addr, -1));
    assert!(neg[0].at > Time::ZERO);
}
