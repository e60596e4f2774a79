//! The EDM and its worker protocol end to end on an N300 link, with real bytes.

use std::cell::RefCell;
use std::rc::Rc;

use meshsim_ccl::edm::{BufferSharing, EdmConfig, EdmError, EdmLink, Termination, WorkerSlot};
use meshsim_ccl::worker::{ReceiverWorker, SenderWorker};
use meshsim_engine::Time;
use meshsim_hw::{CoreRef, Machine, Mode, Params, Program};
use meshsim_topology::soc::CoreCoord;
use meshsim_topology::{ChipIdx, builtin};

const SRC: u64 = 0x20000;
const DST: u64 = 0x40000;

/// The bytes of message `m` sent from end `from`.
fn pattern(from: u64, m: u64, bytes: u64) -> Vec<u8> {
    (0..bytes).map(|i| ((i * 31 + m * 7 + from * 101) % 251) as u8).collect()
}

/// What a run delivered: (direction, message, bytes), in arrival order; and when it ended.
type Delivered = Vec<(u64, u64, Vec<u8>)>;

/// Moves `messages` messages (of `bytes`, the last of `last`) from chip 0 to chip 1 — and, with
/// `both_ways`, as many back — through one EDM link, with `workers` workers per channel end.
fn run(
    config: EdmConfig,
    messages: u64,
    bytes: u64,
    last: u64,
    workers: usize,
    both_ways: bool,
) -> Result<(Delivered, Time), String> {
    let mut m = Machine::new(builtin::cluster("n300").unwrap(), Params::default(), Mode::Functional);
    let (c0, c1) = (ChipIdx(0), ChipIdx(1));
    let e0 = m.device(c0).active_ethernet_cores(true)[0];
    let (_, e1) = m.device(c0).connected_ethernet_core(e0).unwrap();
    let (ch0, ch1) = (e0.y as u8, e1.y as u8);
    let at = |chip: ChipIdx, core: CoreRef| m.device(chip).noc_coord(core);
    let ends = [(c0, ch0, at(c0, CoreRef::Eth(ch0))), (c1, ch1, at(c1, CoreRef::Eth(ch1)))];
    let mut link =
        EdmLink::new(config.clone(), &Params::default(), ends[0], ends[1]).map_err(|e| e.to_string())?;
    let mut programs = vec![Program::new(c0), Program::new(c1)];
    let delivered = Rc::new(RefCell::new(Vec::new()));
    let worker_mode = config.termination == Termination::WorkerInitiated;
    for from in 0..if both_ways { 2 } else { 1 } {
        let (src, dst) = (ends[from].0, ends[1 - from].0);
        let cores: Vec<CoreRef> =
            (0..workers).map(|w| CoreRef::Worker(CoreCoord { x: w as u32, y: from as u32 })).collect();
        let mut slots = |chip: ChipIdx| -> Vec<WorkerSlot> {
            cores
                .iter()
                .map(|&c| {
                    let sem = programs[chip.0 as usize].create_semaphore(&[c], 0);
                    WorkerSlot { core: at(chip, c), semaphore: m.device(chip).semaphore_addr(c, sem) }
                })
                .collect()
        };
        let (senders, receivers) = (slots(src), slots(dst));
        let (tx, rx) = link
            .add_channel(from, senders.clone(), receivers.clone(), sizes(messages, bytes, last))
            .map_err(|e| e.to_string())?;
        for (w, &core) in cores.iter().enumerate() {
            let (tx, sem) = (tx.clone(), senders[w].semaphore);
            programs[src.0 as usize].create_kernel(core, "sender", 0, vec![], move |k| async move {
                let mut s = SenderWorker::new(tx, sem, w);
                while let Some(msg) = s.next_message() {
                    k.write_bytes(SRC, &pattern(from as u64, msg, s.bytes_of(msg)))?;
                    s.send(&k, SRC).await?;
                    k.noc_async_write_barrier().await?;
                }
                if worker_mode && w == 0 {
                    s.terminate(&k).await?;
                }
                Ok(())
            });
            let (rx, sem, got) = (rx.clone(), receivers[w].semaphore, delivered.clone());
            programs[dst.0 as usize].create_kernel(core, "receiver", 1, vec![], move |k| async move {
                let mut r = ReceiverWorker::new(rx, sem, w);
                while let Some(msg) = r.next_message() {
                    let n = r.receive(&k, DST).await?;
                    got.borrow_mut().push((from as u64, msg, k.read_bytes(DST, n)?));
                }
                if worker_mode && w == 0 {
                    r.terminate(&k).await?;
                }
                Ok(())
            });
        }
    }
    link.install(&mut programs);
    let stats = m.launch(programs, |c| Time::from_ns(700 * c.0 as u64)).map_err(|e| e.to_string())?;
    if let Some(late) = m.late_landings().first() {
        return Err(format!(
            "packet landed on chip {} eth{} at {:#x} after its kernels finished",
            late.chip.0, late.chan, late.addr
        ));
    }
    let out = delivered.borrow().clone();
    Ok((out, stats.end_time))
}

fn sizes(messages: u64, bytes: u64, last: u64) -> Vec<u64> {
    (0..messages).map(|m| if m + 1 == messages { last } else { bytes }).collect()
}

fn check_all_arrived(got: &Delivered, directions: u64, messages: u64, bytes: u64, last: u64) {
    assert_eq!(got.len() as u64, directions * messages);
    for &(from, msg, ref data) in got {
        let n = if msg + 1 == messages { last } else { bytes };
        assert_eq!(data, &pattern(from, msg, n), "direction {from} message {msg}");
    }
}

#[test]
fn one_channel_moves_every_message_intact_and_in_order() {
    let config = EdmConfig { channels: 1, page_bytes: 2048, ..EdmConfig::default() };
    let (got, end) = run(config, 12, 8192, 4096, 1, false).unwrap();
    check_all_arrived(&got, 1, 12, 8192, 4096);
    assert!(got.windows(2).all(|w| w[0].1 < w[1].1), "in order");
    // 92 KiB over a 12.5 GB/s link cannot take less than ~7.5 us.
    assert!(end > Time::from_us(7), "{end}");
}

#[test]
fn bidirectional_channels_share_the_link_both_ways() {
    let config = EdmConfig { channels: 2, page_bytes: 1024, ..EdmConfig::default() };
    let (got, _) = run(config, 9, 4096, 1024, 1, true).unwrap();
    check_all_arrived(&got, 2, 9, 4096, 1024);
}

#[test]
fn round_robin_workers_take_turns_on_one_channel() {
    let config = EdmConfig {
        channels: 1,
        sharing: BufferSharing::RoundRobin,
        buffers_per_channel: 4,
        ..EdmConfig::default()
    };
    let (got, _) = run(config, 10, 2048, 2048, 2, false).unwrap();
    check_all_arrived(&got, 1, 10, 2048, 2048);
    let mut msgs: Vec<u64> = got.iter().map(|g| g.1).collect();
    msgs.sort();
    assert_eq!(msgs, (0..10).collect::<Vec<_>>());
}

#[test]
fn workers_can_terminate_their_channels() {
    let config = EdmConfig { channels: 2, termination: Termination::WorkerInitiated, ..EdmConfig::default() };
    let (got, _) = run(config, 5, 2048, 2048, 1, true).unwrap();
    check_all_arrived(&got, 2, 5, 2048, 2048);
}

#[test]
fn configurations_that_do_not_fit_are_refused_with_the_sizes() {
    let p = Params::default();
    let end = |chip, chan| (ChipIdx(chip), chan, CoreCoord { x: 1, y: 0 });
    let big = EdmConfig { channels: 8, buffers_per_channel: 8, page_bytes: 4096, ..EdmConfig::default() };
    match EdmLink::new(big, &p, end(0, 9), end(1, 1)) {
        Err(e @ EdmError::DoesNotFit { .. }) => {
            assert!(e.to_string().contains("8 channels x 8 buffers does not fit"), "{e}");
        }
        Err(other) => panic!("wrong error {other}"),
        Ok(_) => panic!("64 buffers of 4 KiB cannot fit 160 KiB"),
    }
    let mut link = EdmLink::new(EdmConfig::default(), &p, end(0, 9), end(1, 1)).unwrap();
    // 160 KiB less the EDM's own words, over 2 buffers, rounded down to 2 KiB pages.
    assert_eq!(link.buffer_bytes(), 79872);
    let w = vec![WorkerSlot { core: CoreCoord { x: 1, y: 1 }, semaphore: 0x100 }];
    assert!(link.add_channel(0, w.clone(), w.clone(), vec![100_000]).is_err());
    assert!(link.add_channel(0, w.clone(), w.clone(), vec![2048]).is_ok());
    assert!(matches!(link.add_channel(0, w.clone(), w, vec![2048]), Err(EdmError::TooManyChannels(1))));
}

/// Leaving before every acknowledgement is back (no teardown wait) lets the last "buffer free"
/// records land on a core whose kernels have finished: the checker reports it.
#[test]
fn an_edm_that_skips_its_teardown_wait_is_caught() {
    let broken = EdmConfig { teardown: false, ..EdmConfig::default() };
    let err = run(broken, 4, 2048, 2048, 1, false).unwrap_err();
    assert!(err.contains("after its kernels finished"), "{err}");
    assert!(run(EdmConfig::default(), 4, 2048, 2048, 1, false).is_ok());
}
