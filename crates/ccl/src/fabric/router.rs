//! The fabric router kernel: one per active Ethernet core and routing plane, persistent from
//! the session's start to the host's termination write.
//!
//! Main loop, one inner pass (`shared/fabric.md` §3, 1D line and 2026 ring):
//!
//! 1. **sender channel 0** (the local worker), after its connection semaphore is checked
//!    (open, close, a second worker is a protocol error): at most one packet — if one is queued, the peer's
//!    receiver has a free slot (two on a ring's injection channel: bubble flow control; and on
//!    a ring, no forwarded packet waits in sender channel 1: transit traffic goes first) and
//!    the tx queue is idle: send header + payload into the peer's receiver slot, spin until the
//!    queue is idle, send the new "packets sent" count;
//! 2. **receiver channel**: the oldest landed packet — on a ring first acknowledge it (first
//!    level); then by its route code forward it (the whole packet, route shifted, into the
//!    opposite router's sender channel 1, which needs a downstream credit, plus its doorbell)
//!    and/or write it locally (per NoC command; an increment after a write waits for the write
//!    to flush), every write tagged with the slot's transaction id; then **completions**: the
//!    oldest processed receiver slot whose writes have flushed is completed to the peer, which
//!    frees the remote slot;
//! 3. **sender channel 1** (forwarded traffic), as channel 0;
//! 4. **credits**: completions (line) or acknowledgements (ring) from the peer return slots to
//!    the channel's producer — a NoC increment of the worker's credit word (channel 0) or of
//!    the upstream router's downstream-credit word (channel 1). fabric.md folds each channel's
//!    in at the end of its own sender step; returning channel 0's here, at the end of the pass,
//!    is a known departure (docs/model.md).
//!
//! On two ERISCs (`fabric_router_eriscs` = 2, Blackhole's default; fabric.md §8) the router
//! is two kernels on its Ethernet core, each with its own loop: ERISC0 runs the sender
//! channels, their connection and their credits (steps 1, 3 and 4 above) and sends on tx
//! queue 0; ERISC1 runs the receiver channel and its completions (step 2) and sends its
//! acknowledgements and completions on tx queue 1. Each loop costs its own passes. A mux in
//! front of a router (an op's workers sharing it) leaves it on two ERISCs: only the
//! fabric-level Tensix extension, off by default, turns two-ERISC mode off (fabric.md §11.1).
//!
//! The termination word is read before every pass.
//! The loop's own time: a sender step with a packet to send spends `fabric_router_step_cycles`
//! reading its channel's state before it tests the tx queue, and a pass that moved something
//! costs `fabric_router_pass_cycles` as it wraps round, on top of the sends and NoC commands
//! it issued. A pass that found nothing to do waits for whatever would unblock it (a doorbell,
//! a landed packet, a counter from the peer, a credit, the tx queue, a flush), so an idle
//! router costs no events; it notices the change `fabric_router_notice_cycles` later, at the
//! step whose turn comes next, runs the rest of that pass and wraps round to sender channel 0,
//! as the firmware's loop does. So the steps always follow one another in the firmware's
//! order: sender channel 1 comes straight after the receiver step's completion send, sender
//! channel 0 only after the wrap.

use std::collections::VecDeque;
use std::rc::Rc;

use meshsim_engine::{Cond, TaskResult, Time};
use meshsim_hw::{Kernel, Wake};

use meshsim_topology::soc::CoreCoord;

use super::words::{
    ACKED, CLOSE, COMPLETED, CONN, CONN_INFO, CREDITED, DOORBELL, DOWN_FREED, HANDSHAKE, RX_SENT, STAGE,
    TERMINATE, stage_acked, stage_completed,
};
use super::{BUBBLE_SLOTS, Fabric, Header, MESH_SENDER_CHANNELS, NocCmd, RECEIVER_TRIDS, Turn};

/// Room for the most sender channels a router has (a mesh router's four).
const CHANNELS: usize = MESH_SENDER_CHANNELS;

/// The host's termination value (IMMEDIATELY_TERMINATE).
pub const TERMINATE_NOW: u32 = 2;

/// A router's protocol broken by a worker or the host.
#[derive(Debug, thiserror::Error)]
#[error("fabric router {router}: {what}")]
pub struct RouterError {
    /// The router (`chip3/eth8`).
    pub router: String,
    /// What happened.
    pub what: String,
}

/// A step's failure: a hardware error or a broken protocol.
type StepError = Box<dyn std::error::Error>;

/// What blocks a step, so an idle pass knows what to wait for.
struct Waits(Vec<Wake>);

/// A router this one forwards into: its index, its core, and the sender channel taking the
/// packets there.
#[derive(Clone, Copy)]
struct Down {
    router: usize,
    at: CoreCoord,
    channel: usize,
    dir: Option<super::Dir>,
}

/// Where things go: the routers forwarded into and, per sender channel, the upstream router's
/// downstream-credit word to return freed slots to.
struct Wiring {
    downs: Vec<Down>,
    ups: [Option<u64>; CHANNELS],
    channels: usize,
}

/// The router's running state.
struct State {
    /// Packets sent per sender channel.
    sent: [u64; CHANNELS],
    /// Packets sent over all channels (the peer's receiver slots fill in this order).
    total_sent: u64,
    /// Slots returned to each channel's producer.
    credited: [u64; CHANNELS],
    /// Packets forwarded into each downstream router.
    forwarded: [u64; 3],
    /// Receiver packets taken.
    taken: u64,
    /// Packets acknowledged (first level) and completed per source channel of the peer.
    acked: [u64; CHANNELS],
    completed: [u64; CHANNELS],
    /// Landed receiver packets acknowledged (first level, rings).
    acks_sent: u64,
    /// Processed receiver slots awaiting completion: (transaction id, source channel).
    pending: VecDeque<(usize, u8)>,
    /// Opens and closes of channel 0 seen, and the connected worker's credit and teardown words.
    conn_seen: u32,
    worker: Option<(u64, u64)>,
    /// What the router did (the link report's router table).
    stats: super::RouterStats,
    /// Since when each sender channel has had a packet but no free slot at the peer.
    starved: [Option<Time>; CHANNELS],
    /// What a sender step's reads of its channel's state cost (`fabric_router_step_cycles`).
    check: Time,
}

/// Which of a router's channels a router kernel runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// All of them, in one loop on one ERISC.
    Both,
    /// The sender channels, their connection and credits (ERISC0, tx queue 0).
    Senders,
    /// The receiver channel and its completions (ERISC1, tx queue 1).
    Receiver,
}

impl Role {
    /// The steps of a pass this role runs. A single loop's pass has three: sender channel 0
    /// with the connection check (0); the receiver channel and its completions (1); the
    /// forwarding sender channels (1, and 2-3 on a mesh) with credits (2).
    fn steps(self) -> &'static [usize] {
        match self {
            Role::Both => &[0, 1, 2],
            Role::Senders => &[0, 2],
            Role::Receiver => &[1],
        }
    }

    /// The tx queue its Ethernet sends use.
    fn txq(self) -> usize {
        usize::from(self == Role::Receiver)
    }
}

/// Runs router `me` of `fabric` in `role` until the host terminates it (one kernel in
/// [`Role::Both`] per router on one ERISC, or one in each of the other two on two:
/// [`Fabric::install`]).
pub async fn run(k: Kernel, fabric: Rc<Fabric>, me: usize, role: Role) -> TaskResult {
    let spec = fabric.routers[me].clone();
    let lay = fabric.layout;
    let ring = fabric.config.kind.is_ring();
    let peer = fabric.router_on(spec.peer).expect("every router's peer is a router");
    let on_chip = |chan: u8| {
        fabric
            .router_on(meshsim_topology::Endpoint { chip: spec.at.chip, chan })
            .expect("routers forward to routers")
    };
    let mut wiring = Wiring {
        downs: spec
            .outs
            .iter()
            .map(|o| {
                let router = on_chip(o.chan);
                Down { router, at: fabric.core_of(router), channel: o.channel, dir: o.dir }
            })
            .collect(),
        ups: [None; CHANNELS],
        channels: lay.channels,
    };
    for (ch, up) in spec.ups.iter().enumerate() {
        if let Some(&(chan, idx)) = up.as_ref() {
            let at = fabric.core_of(on_chip(chan));
            wiring.ups[ch] = Some(k.get_noc_addr(at.x, at.y, lay.word(DOWN_FREED[idx])));
        }
    }
    let wiring = wiring;
    let trids = if ring { RECEIVER_TRIDS.1 } else { RECEIVER_TRIDS.0 } as usize;
    let pass = k.cycles(k.params().fabric_router_pass_cycles);
    k.set_noc_issue_cycles(k.params().fabric_router_noc_cycles);
    k.set_poll_cycles(k.params().fabric_router_notice_cycles);
    let w = |o: u64| lay.word(o);
    // Memory starts zeroed: every counter and semaphore begins at 0.
    let master = k.chip() < spec.peer.chip;
    if role != Role::Receiver {
        k.eth_setup_handshake(w(HANDSHAKE), master).await?;
        k.mark(crate::edm::HANDSHAKE_DONE);
    }
    let steps = role.steps();
    let txq = role.txq();
    let mut st = State {
        sent: [0; CHANNELS],
        total_sent: 0,
        credited: [0; CHANNELS],
        forwarded: [0; 3],
        taken: 0,
        acked: [0; CHANNELS],
        completed: [0; CHANNELS],
        acks_sent: 0,
        pending: VecDeque::new(),
        conn_seen: 0,
        worker: None,
        stats: super::RouterStats::default(),
        starved: [None; CHANNELS],
        check: k.cycles(k.params().fabric_router_step_cycles),
    };
    let name = k.name().rsplit_once('/').map_or(k.name().to_owned(), |(core, _)| core.to_owned());
    let err = |what: String| -> TaskResult { Err(Box::new(RouterError { router: name.clone(), what })) };
    // The loop spins: its steps come round every pass, so a change is noticed by whichever
    // step's turn comes next. `first` is the step the current pass resumes at, set by the
    // moment an idle router notices a change (0 once it wraps); `origin` is when a pass at
    // step 0 began.
    let mut first = 0;
    let mut origin = k.now();
    // What an idle pass waits for, gathered by the steps (one list, reused every pass).
    let mut waits = Waits(Vec::new());
    loop {
        if k.read_u32(w(TERMINATE))? == TERMINATE_NOW {
            fabric.stats.borrow_mut()[me].absorb(&st.stats);
            return match stranded(&k, &lay, &st, role)? {
                None => Ok(()),
                Some(what) => err(format!(
                    "terminated at {} with {what}: teardown before the packets were delivered",
                    k.now()
                )),
            };
        }
        waits.0.clear();
        let mut moved = false;
        let pass_start = k.now();
        for &step in &steps[first..] {
            match step {
                0 => {
                    match connection_step(&k, &fabric, &mut st, &mut waits).await? {
                        Ok(m) => moved |= m,
                        Err(what) => return err(what),
                    }
                    moved |= send_step(&k, &fabric, me, peer, 0, ring, &mut st, &mut waits).await?;
                }
                1 => {
                    moved |= receive_step(&k, &fabric, me, &wiring, (trids, txq), ring, &mut st, &mut waits)
                        .await?;
                    moved |= complete_step(&k, &fabric, ring, txq, &mut st, &mut waits).await?;
                }
                _ => {
                    for ch in 1..wiring.channels {
                        moved |= send_step(&k, &fabric, me, peer, ch, ring, &mut st, &mut waits).await?;
                    }
                    moved |= credit_step(&k, &fabric, &wiring, ring, &mut st, &mut waits).await?;
                }
            }
        }
        if moved || first > 0 {
            // The pass ran to its end (a pass resumed part-way runs the rest of it, whether or
            // not it finds work); the loop wraps round to sender channel 0.
            if moved {
                k.delay(pass).await;
                st.stats.busy += k.now() - pass_start;
            }
            first = 0;
            origin = k.now();
        } else {
            waits.0.push(Wake::Word(w(TERMINATE), Cond::Eq(TERMINATE_NOW)));
            k.wait_for_any(&waits.0).await?;
            // The step whose turn comes next notices the change.
            let n = steps.len();
            let phase = Time((k.now() - origin).0 % pass.0.max(1));
            first = (0..n).find(|&s| pass_offset(pass, s, n) >= phase).unwrap_or(0);
            let at = if pass_offset(pass, first, n) >= phase {
                pass_offset(pass, first, n) - phase
            } else {
                pass - phase
            };
            k.delay(at).await;
            origin = k.now() - pass_offset(pass, first, n);
        }
    }
}

/// What a terminated router still held: packets its producers queued that it never sent, or
/// packets landed in its receiver that it never processed.
fn stranded(k: &Kernel, lay: &super::Layout, st: &State, role: Role) -> Result<Option<String>, StepError> {
    let senders = if role == Role::Receiver { 0 } else { lay.channels };
    for (ch, (&doorbell, &sent)) in DOORBELL.iter().zip(&st.sent).take(senders).enumerate() {
        let queued = k.read_u32(lay.word(doorbell))? as u64;
        if queued > sent {
            return Ok(Some(format!("{} packets of sender channel {ch} unsent", queued - sent)));
        }
    }
    let landed = k.read_u32(lay.word(RX_SENT))? as u64;
    if role != Role::Senders && landed > st.taken {
        return Ok(Some(format!("{} landed packets unprocessed in its receiver", landed - st.taken)));
    }
    Ok(None)
}

/// When the `s`-th of a loop's `n` steps comes round within a pass of length `pass`.
fn pass_offset(pass: Time, s: usize, n: usize) -> Time {
    Time(pass.0 * s as u64 / n as u64)
}

/// A protocol error of the router running `k`.
fn protocol(k: &Kernel, what: String) -> StepError {
    let router = k.name().rsplit_once('/').map_or(k.name().to_owned(), |(core, _)| core.to_owned());
    Box::new(RouterError { router, what })
}

/// Sender channel `ch`: at most one packet.
#[allow(clippy::too_many_arguments)]
async fn send_step(
    k: &Kernel,
    fabric: &Fabric,
    me: usize,
    peer: usize,
    ch: usize,
    ring: bool,
    st: &mut State,
    waits: &mut Waits,
) -> Result<bool, StepError> {
    let lay = fabric.layout;
    let written = k.read_u32(lay.word(DOORBELL[ch]))? as u64;
    // A producer may have at most `sender_slots` packets written and not returned to it: one
    // more was written over a slot the router still holds.
    if written.saturating_sub(st.credited[ch]) > lay.sender_slots {
        return Err(protocol(
            k,
            format!(
                "sender channel {ch} overrun at {}: its producer has rung {written} packets but only {} slots were returned and the channel has {}: a packet was written without a credit",
                k.now(),
                st.credited[ch],
                lay.sender_slots
            ),
        ));
    }
    if written == st.sent[ch] {
        waits.0.push(Wake::Word(lay.word(DOORBELL[ch]), Cond::Ne(written as u32)));
        return Ok(false);
    }
    let mut completed = 0;
    for &c in &COMPLETED[..lay.channels] {
        completed += k.read_u32(lay.word(c))? as u64;
    }
    if completed > st.total_sent {
        return Err(protocol(
            k,
            format!(
                "credits beyond the slots at {}: the peer's receiver completed {completed} packets but only {} were sent to it",
                k.now(),
                st.total_sent
            ),
        ));
    }
    let free = lay.receiver_slots - (st.total_sent - completed);
    let need = if ring && ch == 0 { BUBBLE_SLOTS } else { 1 };
    let no_room = free < need;
    // On a ring the injection channel also yields to transit traffic: while packets forwarded
    // from the opposite router wait in channel 1, channel 0 sends nothing (docs/model.md,
    // "Ring arbitration"). Yielding is not a wait for the peer's slots (`credit_wait`).
    let yields = !no_room && ring && ch == 0 && k.read_u32(lay.word(DOORBELL[1]))? as u64 > st.sent[1];
    if no_room || yields {
        if no_room {
            st.starved[ch].get_or_insert(k.now());
        } else if let Some(since) = st.starved[ch].take() {
            st.stats.credit_wait += k.now() - since;
        }
        for &c in &COMPLETED[..lay.channels] {
            waits.0.push(Wake::Word(lay.word(c), Cond::Ne(k.read_u32(lay.word(c))?)));
        }
        return Ok(false);
    }
    // The step read its producer's doorbell and the peer's counters before it tests the queue.
    k.delay(st.check).await;
    if k.eth_txq_is_busy(0)? {
        waits.0.push(Wake::TxqFree(0));
        return Ok(false);
    }
    let slot = st.sent[ch] % lay.sender_slots;
    let rx = st.total_sent % lay.receiver_slots;
    let header = {
        let mut h = fabric.headers.borrow_mut();
        let Some(mut header) = h[me][lay.sender_entry(ch, slot)] else {
            return Err(protocol(
                k,
                format!(
                    "doorbell of sender channel {ch} rang for slot {slot}, which holds no packet (two workers on the channel, or a doorbell without a packet): one worker per sender channel"
                ),
            ));
        };
        header.src_ch = ch as u8;
        h[peer][lay.receiver_entry(rx)] = Some(header);
        header
    };
    let bytes = (lay.header_bytes + header.payload).next_multiple_of(16);
    k.eth_send_packet(0, lay.sender_slot(ch, slot) >> 4, lay.receiver_slot(rx) >> 4, bytes >> 4).await?;
    k.eth_txq_wait_idle(0).await?;
    st.sent[ch] += 1;
    st.total_sent += 1;
    st.stats.sent[ch.min(1)] += 1;
    if let Some(since) = st.starved[ch].take() {
        st.stats.credit_wait += k.now() - since;
    }
    occupancy(k, st, ch, written);
    let stage = lay.word(STAGE);
    k.write_u32(stage, st.total_sent as u32)?;
    k.eth_send_packet(0, stage >> 4, lay.word(RX_SENT) >> 4, 1).await?;
    Ok(true)
}

/// The receiver channel: the oldest landed packet.
#[allow(clippy::too_many_arguments)]
async fn receive_step(
    k: &Kernel,
    fabric: &Fabric,
    me: usize,
    wiring: &Wiring,
    (trids, txq): (usize, usize),
    ring: bool,
    st: &mut State,
    waits: &mut Waits,
) -> Result<bool, StepError> {
    let lay = fabric.layout;
    let landed = k.read_u32(lay.word(RX_SENT))? as u64;
    waits.0.push(Wake::Word(lay.word(RX_SENT), Cond::Ne(landed as u32)));
    let mut moved = false;
    // First-level acknowledgement (ring): every landed packet, on arrival, one per pass, ahead
    // of processing — so a head blocked on a downstream credit does not hold back the acks
    // that free the upstream's slots.
    if ring && st.acks_sent < landed {
        if k.eth_txq_is_busy(txq)? {
            waits.0.push(Wake::TxqFree(txq));
        } else {
            let i = st.acks_sent % lay.receiver_slots;
            let src = fabric.headers.borrow()[me][lay.receiver_entry(i)]
                .expect("a landed packet has a header")
                .src_ch as usize;
            st.acked[src] += 1;
            let stage = lay.word(stage_acked(src));
            k.write_u32(stage, st.acked[src] as u32)?;
            k.eth_send_packet(txq, stage >> 4, lay.word(ACKED[src]) >> 4, 1).await?;
            st.acks_sent += 1;
            moved = true;
        }
    }
    if landed == st.taken {
        return Ok(moved);
    }
    // A slot is taken only with a transaction id to itself: while every id is held by a
    // processed slot whose writes are not yet acknowledged, the next slot waits (the completion
    // step, next, waits for the oldest's writes). Sharing an id would complete the older slot
    // only once the newer one's writes were acknowledged too.
    if st.pending.len() >= trids {
        return Ok(moved);
    }
    let idx = st.taken % lay.receiver_slots;
    let Some(header) = fabric.headers.borrow()[me][lay.receiver_entry(idx)] else {
        return Err(protocol(k, format!("receiver slot {idx} was counted as landed but holds no packet")));
    };
    let step = header.route.step();
    // Every way the packet goes on needs a free slot there before the packet is taken.
    let mut outs = [0usize; 3];
    for (i, &(turn, _)) in step.forwards().iter().enumerate() {
        let o = match turn {
            Turn::Onward => (!wiring.downs.is_empty()).then_some(0),
            Turn::Toward(d) => wiring.downs.iter().position(|w| w.dir == Some(d)),
        };
        let Some(o) = o else {
            return Err(protocol(
                k,
                format!("a packet is routed on ({turn:?}) from a chip with no router that way"),
            ));
        };
        outs[i] = o;
        let freed = k.read_u32(lay.word(DOWN_FREED[o]))? as u64;
        if freed > st.forwarded[o] {
            return Err(protocol(
                k,
                format!(
                    "credits beyond the slots at {}: the downstream router returned {freed} slots of the {} packets forwarded to it",
                    k.now(),
                    st.forwarded[o]
                ),
            ));
        }
        if st.forwarded[o] - freed >= lay.sender_slots {
            waits.0.push(Wake::Word(lay.word(DOWN_FREED[o]), Cond::Ne(freed as u32)));
            return Ok(moved);
        }
    }
    let trid = (st.taken % trids as u64) as usize;
    let slot = lay.receiver_slot(idx);
    for (&(_, route), &o) in step.forwards().iter().zip(&outs) {
        let d = wiring.downs[o];
        let into = st.forwarded[o] % lay.sender_slots;
        let mut next = header;
        next.route = route;
        fabric.headers.borrow_mut()[d.router][lay.sender_entry(d.channel, into)] = Some(next);
        let bytes = (lay.header_bytes + header.payload).next_multiple_of(16);
        let dst = k.get_noc_addr(d.at.x, d.at.y, lay.sender_slot(d.channel, into));
        k.noc_async_write_with_trid(slot, dst, bytes, trid).await?;
        k.noc_semaphore_inc(k.get_noc_addr(d.at.x, d.at.y, lay.word(DOORBELL[d.channel])), 1).await?;
        st.forwarded[o] += 1;
    }
    if step.write {
        local_write(k, slot + lay.header_bytes, &header, trid).await?;
    }
    st.pending.push_back((trid, header.src_ch));
    st.taken += 1;
    st.stats.received += 1;
    st.stats.forwarded += u64::from(step.count > 0);
    st.stats.written += u64::from(step.write);
    let held = landed - st.completed.iter().sum::<u64>();
    st.stats.peak_rx_slots = st.stats.peak_rx_slots.max(held);
    k.counter("rx slots", held);
    Ok(true)
}

/// The local NoC command of a packet whose payload sits at `payload`.
async fn local_write(
    k: &Kernel,
    payload: u64,
    header: &Header,
    trid: usize,
) -> Result<(), meshsim_hw::HwError> {
    match header.cmd {
        NocCmd::Write { dst } => k.noc_async_write_with_trid(payload, dst, header.payload, trid).await,
        NocCmd::Inline { dst, value } => {
            k.write_u32(payload, value)?;
            k.noc_async_write_with_trid(payload, dst, 4, trid).await
        }
        // An increment that follows this channel's writes waits until they have landed: a
        // flushed write may still be on its way to a DRAM bank the increment's route does not
        // pass, and the increment tells its reader the data is there.
        NocCmd::AtomicInc { sem, inc, flush } => {
            if flush {
                k.noc_async_write_barrier().await?;
            }
            Ok(k.noc_semaphore_inc(sem, inc).await?)
        }
        // Write and increment go to the same core on one NoC route, which keeps them in order,
        // so the increment follows the write at once; the router then waits for the atomic's
        // response (a non-posted atomic flushed) before it moves on.
        NocCmd::FusedWriteInc { dst, sem, inc } => {
            k.noc_async_write_with_trid(payload, dst, header.payload, trid).await?;
            k.noc_semaphore_inc(sem, inc).await?;
            k.noc_async_atomic_barrier().await;
            Ok(())
        }
        NocCmd::Scatter { chunks, count } => {
            let mut off = 0;
            for &(dst, len) in &chunks[..count as usize] {
                k.noc_async_write_with_trid(payload + off, dst, len, trid).await?;
                off += len;
            }
            Ok(())
        }
    }
}

/// Completes the oldest processed receiver slot once its writes have flushed.
async fn complete_step(
    k: &Kernel,
    fabric: &Fabric,
    ring: bool,
    txq: usize,
    st: &mut State,
    waits: &mut Waits,
) -> Result<bool, StepError> {
    let Some(&(trid, src)) = st.pending.front() else {
        return Ok(false);
    };
    // On a ring a slot's completion never passes its first-level ack: the receiver's pointers
    // stay in order (completed <= acked), as the firmware's do. Completing first would let the
    // upstream reuse the slot, and the late ack would read the next packet's source channel and
    // credit the wrong channel. The ack waits only for the tx queue, which the receiver step
    // already waits on.
    // Slots completed so far: every taken slot waits in `pending` until it completes.
    if ring && st.taken - st.pending.len() as u64 >= st.acks_sent {
        return Ok(false);
    }
    if !k.noc_write_trid_flushed(trid) {
        waits.0.push(Wake::Flushed(trid));
        return Ok(false);
    }
    if k.eth_txq_is_busy(txq)? {
        waits.0.push(Wake::TxqFree(txq));
        return Ok(false);
    }
    let lay = fabric.layout;
    let src = src as usize;
    st.completed[src] += 1;
    let stage = lay.word(stage_completed(src));
    k.write_u32(stage, st.completed[src] as u32)?;
    k.eth_send_packet(txq, stage >> 4, lay.word(COMPLETED[src]) >> 4, 1).await?;
    st.pending.pop_front();
    Ok(true)
}

/// Records sender channel `ch`'s occupied slots: packets its producer has written (`written`)
/// that have not been returned to it.
fn occupancy(k: &Kernel, st: &mut State, ch: usize, written: u64) {
    let held = written.saturating_sub(st.credited[ch]);
    let peak = &mut st.stats.peak_slots[ch.min(1)];
    *peak = (*peak).max(held);
    k.counter(CHANNEL_SLOTS[ch], held);
}

/// Trace counter names of the sender channels' occupied slots.
const CHANNEL_SLOTS: [&str; CHANNELS] = ["ch0 slots", "ch1 slots", "ch2 slots", "ch3 slots"];

/// Returns freed slots to each sender channel's producer.
async fn credit_step(
    k: &Kernel,
    fabric: &Fabric,
    wiring: &Wiring,
    ring: bool,
    st: &mut State,
    waits: &mut Waits,
) -> Result<bool, StepError> {
    let lay = fabric.layout;
    let mut moved = false;
    for ch in 0..wiring.channels {
        let word = lay.word(if ring { ACKED[ch] } else { COMPLETED[ch] });
        let done = k.read_u32(word)? as u64;
        waits.0.push(Wake::Word(word, Cond::Ne(done as u32)));
        if done == st.credited[ch] {
            continue;
        }
        let delta = (done - st.credited[ch]) as u32;
        let to = match ch {
            0 => st.worker.map(|(credit, _)| credit),
            _ => wiring.ups[ch],
        };
        let Some(to) = to else {
            // No producer to tell (a worker closed): the slots are simply free.
            st.credited[ch] = done;
            if ch == 0 {
                k.write_u32(lay.word(CREDITED), done as u32)?;
            }
            continue;
        };
        k.noc_semaphore_inc(to, delta).await?;
        st.credited[ch] = done;
        if ch == 0 {
            k.write_u32(lay.word(CREDITED), done as u32)?;
        }
        // Returned slots only lower the occupancy (its peak is taken at sends): read the
        // doorbell for the trace's counter alone.
        if k.is_traced() {
            let held = (k.read_u32(lay.word(DOORBELL[ch]))? as u64).saturating_sub(done);
            k.counter(CHANNEL_SLOTS[ch], held);
        }
        moved = true;
    }
    Ok(moved)
}

/// Channel 0's connection semaphore: opens, closes, and a second worker.
async fn connection_step(
    k: &Kernel,
    fabric: &Fabric,
    st: &mut State,
    waits: &mut Waits,
) -> Result<Result<bool, String>, StepError> {
    let lay = fabric.layout;
    let conn = k.read_u32(lay.word(CONN))?;
    waits.0.push(Wake::Word(lay.word(CONN), Cond::Ne(conn)));
    if conn == st.conn_seen {
        return Ok(Ok(false));
    }
    let (opens, closes) = (conn & (CLOSE - 1), conn >> 16);
    if opens > closes + 1 {
        return Ok(Err(format!(
            "a second worker connected to sender channel 0 while one was connected ({opens} opens, {closes} closes): one worker per sender channel"
        )));
    }
    let (was_opens, was_closes) = (st.conn_seen & (CLOSE - 1), st.conn_seen >> 16);
    if opens > was_opens {
        let info = lay.word(CONN_INFO);
        let word = |i: u64| k.read_u32(info + 4 * i).map(u64::from);
        let credit = word(0)? | word(1)? << 32;
        let teardown = word(2)? | word(3)? << 32;
        st.worker = Some((credit, teardown));
    }
    if closes > was_closes {
        // The worker's packets are all queued; it may leave once they have been sent.
        if st.sent[0] < k.read_u32(lay.word(DOORBELL[0]))? as u64 {
            return Ok(Ok(false));
        }
        if let Some((_, teardown)) = st.worker.take() {
            k.noc_semaphore_inc(teardown, 1).await?;
        }
    }
    st.conn_seen = conn;
    Ok(Ok(true))
}
