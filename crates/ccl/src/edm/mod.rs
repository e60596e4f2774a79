//! The ERISC Data Mover (EDM): a multi-channel, bidirectional data mover on the two Ethernet
//! cores of a link, as the CCL guide describes it.
//!
//! ```text
//!  sender worker ──NoC write + sem inc──► EDM sender channel ══Ethernet══► EDM receiver channel
//!        ▲                                   │  (payload + 16 B sync, one packet)      │
//!        └──── sem inc: buffer free ◄────────┘◄── ack, then "buffer free" ─────────────┤
//!                                                          receiver worker ◄── sem inc: data here
//!                                                                │ NoC read, barrier
//!                                                                └── sem inc: read done ──► EDM
//! ```
//!
//! Each EDM has up to 8 channels, each a sender or a receiver channel whose mirror sits on the
//! peer EDM at the same index and the same buffer addresses. A channel has
//! `buffers_per_channel` buffers, each followed by its 16 B sync record (`bytes_sent`,
//! `receiver_ack`). The EDM:
//!
//! 1. clears its semaphores and records, then handshakes with its peer over `erisc_info`
//!    channel 0 (the side owning the lowest sender channel leads);
//! 2. tells sender workers which buffers they may fill (a semaphore increment per buffer);
//! 3. runs a round-robin service loop: a sender channel sends a filled buffer with its sync
//!    record as one packet once the receiver has freed its copy of that buffer; a receiver
//!    channel acknowledges a landed buffer at once (first level, from a fixed source word),
//!    tells its worker, and sends "buffer free" (second level, the cleared record) when the
//!    worker has read it. The sender offers a buffer back to its worker at the first level —
//!    the local copy is no longer needed once the payload landed — so the worker refills it
//!    while the remote worker still reads (a longer next message, whose payload would cover
//!    the record, waits for the second level). A send that finds the tx queue busy does not
//!    stall the loop: other channels are served and the loop wakes when the queue frees. With
//!    nothing to do it waits for any of the words its channels wait on, and after
//!    `idle_cycles_before_routing` of idling it calls `run_routing()`;
//! 4. terminates each channel after its message count (`MessageCountReached`) or its workers'
//!    signal (`WorkerInitiated`), and before exiting waits for every outstanding
//!    acknowledgement (teardown), so no late record can reach a later kernel on the core;
//! 5. hands a channel with later tenants ([`EdmLink::add_tenant`]) to the next tenant once the
//!    current one's messages have all gone through (and, on the sender, come back), counting
//!    messages: ops that run one after another reuse the channel.
//!
//! Workers take one credit from their semaphore per message (wait for at least 1, then subtract
//! 1), so several buffers of a channel can be signalled without a credit being lost.

mod lane;
mod lower;

pub use lower::EdmTransport;

use std::collections::VecDeque;
use std::rc::Rc;

use meshsim_engine::{Cond, TaskError, TaskResult};
use meshsim_hw::{CoreRef, Kernel, Params, Program, Wake};
use meshsim_topology::ChipIdx;
use meshsim_topology::soc::CoreCoord;

/// The mark an EDM sets on its core's timeline when the handshake with its peer is done.
pub const HANDSHAKE_DONE: &str = "handshake done";

/// Channels an EDM can have.
pub const MAX_CHANNELS: usize = 8;
/// Bytes of a sync record.
const SYNC: u64 = 16;

/// When a channel stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Termination {
    /// After a fixed number of messages, set by the host.
    MessageCountReached,
    /// When its workers say so: the sender worker with its last message, the receiver worker
    /// after reading its last one.
    WorkerInitiated,
}

/// How the workers of a channel share its buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferSharing {
    /// One worker per channel.
    NotShared,
    /// Several workers take the channel's messages in turn.
    RoundRobin,
}

/// How an EDM is built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdmConfig {
    /// Channels, decided ahead (buffer sizes depend on it); at most 8.
    pub channels: usize,
    /// Buffers per channel.
    pub buffers_per_channel: u64,
    /// Buffer sizes are rounded down to a multiple of this (a page, a tile).
    pub page_bytes: u64,
    /// Termination mode, shared by all channels.
    pub termination: Termination,
    /// Buffer sharing mode.
    pub sharing: BufferSharing,
    /// Idle cycles of the service loop after which it calls `run_routing()`.
    pub idle_cycles_before_routing: u64,
    /// Wait for every outstanding acknowledgement before exiting. Only a test of the protocol
    /// checker turns this off.
    pub teardown: bool,
}

impl Default for EdmConfig {
    fn default() -> Self {
        EdmConfig {
            channels: 1,
            buffers_per_channel: 2,
            page_bytes: 2048,
            termination: Termination::MessageCountReached,
            sharing: BufferSharing::NotShared,
            idle_cycles_before_routing: 10_000,
            teardown: true,
        }
    }
}

/// A configuration the EDM cannot run.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum EdmError {
    /// The buffers do not fit the ERISC kernel window.
    #[error(
        "EDM with {channels} channels x {buffers} buffers does not fit: each buffer needs at least one {page} B page plus a 16 B sync record, the ERISC window leaves {space} B"
    )]
    DoesNotFit {
        /// Channels.
        channels: usize,
        /// Buffers per channel.
        buffers: u64,
        /// Page bytes.
        page: u64,
        /// Bytes of window left for buffers.
        space: u64,
    },
    /// More channels than configured (or than an EDM has).
    #[error("EDM has room for {0} channels")]
    TooManyChannels(usize),
    /// A channel needs workers and messages that fit its buffers.
    #[error("{0}")]
    BadChannel(String),
}

/// A worker attached to an EDM channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerSlot {
    /// The worker core's NoC coordinates.
    pub core: CoreCoord,
    /// The worker's semaphore the EDM increments.
    pub semaphore: u64,
}

/// What a worker needs to talk to one EDM channel: buffer and semaphore addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelInterface {
    /// NoC coordinates of the EDM's Ethernet core.
    pub eth_core: CoreCoord,
    /// The channel's buffers, used in turn.
    pub buffers: Vec<u64>,
    /// Usable bytes per buffer.
    pub buffer_bytes: u64,
    /// The EDM channel semaphore workers increment.
    pub semaphore: u64,
    /// The word workers increment to terminate the channel (`WorkerInitiated`).
    pub terminate: u64,
    /// Workers sharing the channel at this end (each takes every `workers`-th message).
    pub workers: usize,
    /// Payload bytes of each message (with `WorkerInitiated`, messages beyond the list have
    /// the size of the last one).
    pub sizes: Rc<[u64]>,
    /// Messages on the channel (`MessageCountReached`).
    pub messages: u64,
}

impl ChannelInterface {
    /// Payload bytes of message `k`.
    pub fn bytes_of(&self, k: u64) -> u64 {
        size_of(&self.sizes, k)
    }
}

fn size_of(sizes: &[u64], k: u64) -> u64 {
    sizes.get(k as usize).or(sizes.last()).copied().unwrap_or(0)
}

#[derive(Clone, Debug)]
struct Channel {
    sender: bool,
    workers: Vec<WorkerSlot>,
    messages: u64,
    sizes: Rc<[u64]>,
}

/// Addresses of an EDM's structures in the ERISC kernel window (the same on both ends).
#[derive(Clone, Copy, Debug)]
struct Layout {
    handshake: u64,
    semaphores: u64,
    terminates: u64,
    ack_source: u64,
    buffers: u64,
    buffer_bytes: u64,
    buffers_per_channel: u64,
}

impl Layout {
    fn semaphore(&self, ch: usize) -> u64 {
        self.semaphores + SYNC * ch as u64
    }
    fn terminate(&self, ch: usize) -> u64 {
        self.terminates + SYNC * ch as u64
    }
    fn buffer(&self, ch: usize, b: u64) -> u64 {
        self.buffers + (ch as u64 * self.buffers_per_channel + b) * (self.buffer_bytes + SYNC)
    }
}

/// The EDMs at both ends of one link: channels are added in pairs (a sender channel on one end,
/// its receiver mirror on the other), then both kernels are installed into the chips' programs.
pub struct EdmLink {
    config: EdmConfig,
    ends: [(ChipIdx, u8, CoreCoord); 2],
    channels: Vec<(usize, Channel)>,
    /// Later tenants of each channel, in order: (sender, receiver) halves.
    later: Vec<Vec<(Channel, Channel)>>,
    layout: Layout,
}

impl EdmLink {
    /// EDMs for the link between `a` and `b` (chip, channel, Ethernet core NoC coordinates);
    /// sizes the buffers from the ERISC window and refuses configurations that do not fit.
    pub fn new(
        config: EdmConfig,
        params: &Params,
        a: (ChipIdx, u8, CoreCoord),
        b: (ChipIdx, u8, CoreCoord),
    ) -> Result<EdmLink, EdmError> {
        if config.channels == 0 || config.channels > MAX_CHANNELS {
            return Err(EdmError::TooManyChannels(MAX_CHANNELS));
        }
        if config.buffers_per_channel == 0 || config.page_bytes == 0 || config.page_bytes % 16 != 0 {
            return Err(EdmError::BadChannel(
                "buffers per channel and a page size that is a multiple of 16 B are needed".into(),
            ));
        }
        let (lo, hi) = params.erisc_window();
        let handshake = lo;
        let semaphores = lo + SYNC;
        let terminates = semaphores + SYNC * MAX_CHANNELS as u64;
        let ack_source = terminates + SYNC * MAX_CHANNELS as u64;
        let buffers = ack_source + SYNC;
        let count = config.channels as u64 * config.buffers_per_channel;
        let space = hi.saturating_sub(buffers);
        let per = (space / count).saturating_sub(SYNC);
        let buffer_bytes = per / config.page_bytes * config.page_bytes;
        if buffer_bytes == 0 {
            return Err(EdmError::DoesNotFit {
                channels: config.channels,
                buffers: config.buffers_per_channel,
                page: config.page_bytes,
                space,
            });
        }
        let layout = Layout {
            handshake,
            semaphores,
            terminates,
            ack_source,
            buffers,
            buffer_bytes,
            buffers_per_channel: config.buffers_per_channel,
        };
        Ok(EdmLink { config, ends: [a, b], channels: Vec::new(), later: Vec::new(), layout })
    }

    /// Usable bytes of every buffer.
    pub fn buffer_bytes(&self) -> u64 {
        self.layout.buffer_bytes
    }

    /// Adds a channel from end `from` (0 = a, 1 = b) to the other carrying one message per
    /// entry of `sizes` (payload bytes, at most a buffer): a sender channel fed by `senders` on
    /// that end and its receiver mirror drained by `receivers` on the other. Returns the
    /// interfaces for the sender and receiver workers.
    pub fn add_channel(
        &mut self,
        from: usize,
        senders: Vec<WorkerSlot>,
        receivers: Vec<WorkerSlot>,
        sizes: Vec<u64>,
    ) -> Result<(ChannelInterface, ChannelInterface), EdmError> {
        // Channels are stored as (sender end, receiver end) pairs.
        let ch = self.channels.len() / 2;
        if ch >= self.config.channels {
            return Err(EdmError::TooManyChannels(self.config.channels));
        }
        let ((chan, mirror), out) = self.halves(ch, from, senders, receivers, sizes)?;
        self.channels.push((from, chan));
        self.channels.push((1 - from, mirror));
        self.later.push(Vec::new());
        Ok(out)
    }

    /// Adds a later tenant to channel `ch` (sending from the same end `from`): once every
    /// earlier tenant's messages have gone through (and, on the sender, come back), the channel
    /// serves these workers and messages with the same buffers — channels return to the link
    /// when an op ends, for an op that runs after it. A channel with later tenants ends each
    /// tenant by its message count, whatever the termination mode.
    pub fn add_tenant(
        &mut self,
        ch: usize,
        from: usize,
        senders: Vec<WorkerSlot>,
        receivers: Vec<WorkerSlot>,
        sizes: Vec<u64>,
    ) -> Result<(ChannelInterface, ChannelInterface), EdmError> {
        if ch >= self.later.len() || self.channels[2 * ch].0 != from {
            return Err(EdmError::BadChannel(format!("channel {ch} does not send from end {from}")));
        }
        let (halves, out) = self.halves(ch, from, senders, receivers, sizes)?;
        self.later[ch].push(halves);
        Ok(out)
    }

    /// Checks one tenant of channel `ch` (its workers, its messages against the buffers) and
    /// builds its sender half, its receiver mirror and the interfaces of both ends' workers.
    #[allow(clippy::type_complexity)]
    fn halves(
        &self,
        ch: usize,
        from: usize,
        senders: Vec<WorkerSlot>,
        receivers: Vec<WorkerSlot>,
        sizes: Vec<u64>,
    ) -> Result<((Channel, Channel), (ChannelInterface, ChannelInterface)), EdmError> {
        let shared = self.config.sharing == BufferSharing::RoundRobin;
        for (side, w) in [("sender", &senders), ("receiver", &receivers)] {
            if w.is_empty() || (!shared && w.len() > 1) {
                return Err(EdmError::BadChannel(format!(
                    "channel {ch} has {} {side} workers; {} allowed",
                    w.len(),
                    if shared { "one or more" } else { "exactly one is" }
                )));
            }
        }
        if let Some(bad) = sizes.iter().find(|&&n| n == 0 || n % 16 != 0 || n > self.layout.buffer_bytes) {
            return Err(EdmError::BadChannel(format!(
                "channel {ch}: a message of {bad} B does not fit {} B buffers in 16 B words",
                self.layout.buffer_bytes
            )));
        }
        if sizes.is_empty() {
            return Err(EdmError::BadChannel(format!("channel {ch} carries no message")));
        }
        let messages = sizes.len() as u64;
        let sizes: Rc<[u64]> = sizes.into();
        let chan = Channel { sender: true, workers: senders, messages, sizes: sizes.clone() };
        let mirror = Channel { sender: false, workers: receivers, ..chan.clone() };
        let iface = |end: usize, workers: usize| ChannelInterface {
            eth_core: self.ends[end].2,
            buffers: (0..self.layout.buffers_per_channel).map(|b| self.layout.buffer(ch, b)).collect(),
            buffer_bytes: self.layout.buffer_bytes,
            semaphore: self.layout.semaphore(ch),
            terminate: self.layout.terminate(ch),
            workers,
            sizes: sizes.clone(),
            messages,
        };
        let out = (iface(from, chan.workers.len()), iface(1 - from, mirror.workers.len()));
        Ok(((chan, mirror), out))
    }

    /// Places both EDM kernels: `programs` is indexed by chip.
    pub fn install(self, programs: &mut [Program]) {
        let lowest_sender = self.channels.iter().find(|(_, c)| c.sender).map(|(end, _)| *end).unwrap_or(0);
        for end in 0..2 {
            let (chip, chan, _) = self.ends[end];
            // Channel index i is the i-th channel added; both ends list every index.
            let mut mine: Vec<Option<Channel>> = vec![None; self.channels.len() / 2];
            for (i, (e, c)) in self.channels.iter().enumerate() {
                if *e == end {
                    mine[i / 2] = Some(c.clone());
                }
            }
            let later: Vec<Vec<Channel>> = (0..self.later.len())
                .map(|i| {
                    let sends = self.channels[2 * i].0 == end;
                    self.later[i].iter().map(|(tx, rx)| if sends { tx.clone() } else { rx.clone() }).collect()
                })
                .collect();
            let spec = Rc::new(EdmSpec {
                config: self.config.clone(),
                layout: self.layout,
                channels: mine.into_iter().map(|c| c.expect("every index has both ends")).collect(),
                later,
                leader: end == lowest_sender,
            });
            programs[chip.0 as usize]
                .create_kernel(CoreRef::Eth(chan), "edm", 0, vec![], move |k| edm_kernel(k, spec));
        }
    }
}

struct EdmSpec {
    config: EdmConfig,
    layout: Layout,
    /// Every channel's first tenant.
    channels: Vec<Channel>,
    /// Every channel's later tenants, in order.
    later: Vec<Vec<Channel>>,
    leader: bool,
}

/// Per-channel progress in the service loop.
struct State {
    /// Messages handed to the EDM (sender) or landed (receiver).
    next: u64,
    /// Sender: buffers sent and not yet freed by the receiver, oldest first, with their sync
    /// record address.
    inflight: VecDeque<u64>,
    /// Sender: messages whose first-level acknowledgement (the payload landed) has arrived.
    acked: u64,
    /// Sender: messages whose buffer has been offered to a worker.
    offered: u64,
    /// Messages completed: freed (sender) or read by the worker (receiver).
    done: u64,
    /// Receiver: a landed buffer waits for its worker.
    waiting_worker: Option<u64>,
    terminated: bool,
    /// Later tenants already served (0: the first tenant is being served).
    tenant: usize,
}

impl State {
    /// A channel's state as tenant number `tenant` `c` starts: a sender's first buffers already
    /// offered to its workers.
    fn new(c: &Channel, bpc: u64, tenant: usize) -> State {
        State {
            next: 0,
            inflight: VecDeque::new(),
            acked: 0,
            offered: if c.sender { bpc.min(c.messages) } else { 0 },
            done: 0,
            waiting_worker: None,
            terminated: false,
            tenant,
        }
    }
}

impl Channel {
    fn bytes_of(&self, k: u64) -> u64 {
        size_of(&self.sizes, k)
    }
}

async fn notify(k: &Kernel, w: WorkerSlot) -> TaskResult {
    k.noc_semaphore_inc(k.get_noc_addr(w.core.x, w.core.y, w.semaphore), 1).await?;
    Ok(())
}

/// The EDM kernel: clears its words and handshakes, then serves its channels round-robin,
/// each pass one step per channel, handing a channel to its next tenant when one is served,
/// until every channel is done; when a pass makes no progress it waits for a word that would.
async fn edm_kernel(k: Kernel, spec: Rc<EdmSpec>) -> TaskResult {
    let bpc = spec.layout.buffers_per_channel;
    let worker_mode = spec.config.termination == Termination::WorkerInitiated;
    edm_setup(&k, &spec).await?;
    let mut st: Vec<State> = spec.channels.iter().map(|c| State::new(c, bpc, 0)).collect();
    // The tenant each channel serves now; a channel with later tenants ends each by its count.
    let mut cur: Vec<Channel> = spec.channels.clone();
    let multi: Vec<bool> = spec.later.iter().map(|l| !l.is_empty()).collect();
    // Sender workers may fill the first buffers at once.
    for c in spec.channels.iter().filter(|c| c.sender) {
        offer_first(&k, c, bpc).await?;
    }
    let mut turn = 0usize;
    // Idle waits that returned without time passing and without the next pass progressing: a
    // protocol bug that would otherwise spin forever at one instant.
    let mut spins = 0u32;
    loop {
        let mut pass = Pass::default();
        let n = spec.channels.len();
        for step in 0..n {
            let ch = (turn + step) % n;
            let (c, s, wm) = (&cur[ch], &mut st[ch], worker_mode && !multi[ch]);
            let lay = &spec.layout;
            pass.progressed |= terminate(&k, lay, ch, c, s, wm)?;
            if c.sender {
                pass.progressed |= acks(&k, lay, ch, c, s)?;
                while let Some(w) = next_offer(c, s, bpc, wm) {
                    notify(&k, w).await?;
                    s.offered += 1;
                    pass.progressed = true;
                }
            }
            let tx = ready(&k, wants_to_send(&k, lay, ch, c, s, wm)?)?;
            pass.progressed |= matches!(tx, Tx::Go);
            match (tx, c.sender, s.waiting_worker) {
                (Tx::Idle, ..) => {}
                (Tx::Blocked, ..) => pass.tx_blocked = true,
                (Tx::Go, true, _) => {
                    let (buf, words) = start_send(&k, lay, ch, c, s)?;
                    k.eth_send_packet(0, buf >> 4, buf >> 4, words).await?;
                }
                (Tx::Go, false, Some(rec)) => {
                    free_buffer(&k, lay, ch, c, s, rec)?;
                    k.eth_send_packet(0, rec >> 4, rec >> 4, 1).await?;
                }
                (Tx::Go, false, None) => {
                    let rec = record(lay, ch, c, s.next);
                    k.eth_send_packet(0, lay.ack_source >> 4, rec >> 4, 1).await?;
                    notify(&k, c.workers[(s.next % c.workers.len() as u64) as usize]).await?;
                    s.waiting_worker = Some(rec);
                    s.next += 1;
                }
            }
        }
        for ch in 0..n {
            if multi[ch] {
                pass.progressed |= hand_over(&k, &spec, ch, &mut st[ch], &mut cur[ch]).await?;
            }
        }
        turn = (turn + 1) % spec.channels.len().max(1);
        if all_done(&spec, &cur, &st, &multi, worker_mode) {
            break;
        }
        if !pass.progressed {
            let idle_from = k.now();
            idle_wait(&k, &spec, (&cur, &multi, &st), worker_mode, pass.tx_blocked).await?;
            spins = if k.now() == idle_from { spins + 1 } else { 0 };
            if spins > 1000 {
                return Err(format!(
                    "EDM service loop on {} made no progress at {} (protocol bug)",
                    k.name(),
                    k.now()
                )
                .into());
            }
        }
    }
    Ok(())
}

/// Whether channel `ch` has something to send: a sender a filled buffer with a free remote
/// one; a receiver a buffer its worker has read (to free on the sender), or else a landed one
/// (to acknowledge, first level, from the fixed source word, and hand to its worker).
#[inline(always)]
fn wants_to_send(
    k: &Kernel,
    lay: &Layout,
    ch: usize,
    c: &Channel,
    s: &State,
    wm: bool,
) -> Result<bool, TaskError> {
    Ok(match (c.sender, s.waiting_worker) {
        (true, _) => sender_ready(k, lay, ch, c, s, wm)?,
        (false, Some(_)) => k.read_u32(lay.semaphore(ch))? >= 1,
        (false, None) => {
            (if wm { !s.terminated } else { s.next < c.messages })
                && k.read_u32(record(lay, ch, c, s.next))? != 0
        }
    })
}

/// Whether every channel has served its last tenant.
#[inline(always)]
fn all_done(spec: &EdmSpec, cur: &[Channel], st: &[State], multi: &[bool], worker_mode: bool) -> bool {
    let teardown = spec.config.teardown;
    cur.iter().zip(st).enumerate().all(|(ch, (c, s))| {
        s.tenant >= spec.later[ch].len() && channel_done(c, s, worker_mode && !multi[ch], teardown)
    })
}

/// A pass made no progress: waits for any word that would let one (and for the tx queue, when
/// a send found it busy); an idle stretch longer than the routing threshold yields to the
/// firmware's routing (`run_routing`).
async fn idle_wait(
    k: &Kernel,
    spec: &EdmSpec,
    (cur, multi, st): (&[Channel], &[bool], &[State]),
    worker_mode: bool,
    tx_blocked: bool,
) -> TaskResult {
    let words = waits(k, spec, cur, multi, st, worker_mode, tx_blocked)?;
    let idle_from = k.now();
    if tx_blocked {
        let wakes: Vec<Wake> =
            words.into_iter().map(|(a, c)| Wake::Word(a, c)).chain([Wake::TxqFree(0)]).collect();
        k.wait_for_any(&wakes).await?;
    } else {
        k.wait_any(words).await?;
    }
    if k.now() - idle_from >= k.cycles(spec.config.idle_cycles_before_routing) {
        k.run_routing().await;
    }
    Ok(())
}

/// Clears every semaphore, termination word and sync record before anyone can signal the EDM,
/// labels them for deadlock reports, writes the first-level ack's source word, and handshakes
/// with the EDM at the link's other end.
async fn edm_setup(k: &Kernel, spec: &EdmSpec) -> TaskResult {
    let lay = spec.layout;
    let bpc = lay.buffers_per_channel;
    for (i, c) in spec.channels.iter().enumerate() {
        k.write_u32(lay.semaphore(i), 0)?;
        k.write_u32(lay.terminate(i), 0)?;
        let role = if c.sender { "sender" } else { "receiver" };
        k.label_word(lay.semaphore(i), format!("EDM {role} channel {i} semaphore"));
        k.label_word(lay.terminate(i), format!("EDM {role} channel {i} termination"));
        for m in 0..bpc {
            k.label_word(lay.buffer(i, m) + c.bytes_of(m), format!("EDM {role} channel {i} buffer {m} sync"));
        }
        // A message's record sits right after its payload, so where depends on its size: clear
        // where the first message of each buffer will put it.
        for m in 0..bpc {
            k.write_bytes(lay.buffer(i, m) + c.bytes_of(m), &[0; 16])?;
        }
    }
    let mut ack = [0u8; 16];
    ack[0..4].copy_from_slice(&1u32.to_le_bytes());
    ack[4..8].copy_from_slice(&1u32.to_le_bytes());
    k.write_bytes(lay.ack_source, &ack)?;
    k.eth_setup_handshake(lay.handshake, spec.leader).await?;
    k.mark(HANDSHAKE_DONE);
    Ok(())
}

/// A sender channel's workers may fill its first buffers at once.
async fn offer_first(k: &Kernel, c: &Channel, bpc: u64) -> TaskResult {
    for m in 0..bpc.min(c.messages) {
        notify(k, c.workers[(m % c.workers.len() as u64) as usize]).await?;
    }
    Ok(())
}

/// What one pass over the channels did.
#[derive(Default)]
struct Pass {
    /// Something moved: the loop goes round again without waiting.
    progressed: bool,
    /// A send found the tx queue busy: the loop served other channels meanwhile.
    tx_blocked: bool,
}

/// Whether a channel sends now: nothing to send, the tx queue busy (the loop serves other
/// channels meanwhile), or go.
enum Tx {
    Idle,
    Blocked,
    Go,
}

/// `Go` when `want` and the tx queue is free, `Blocked` when it is busy.
#[inline(always)]
fn ready(k: &Kernel, want: bool) -> Result<Tx, TaskError> {
    Ok(match want {
        false => Tx::Idle,
        true if k.eth_txq_is_busy(0)? => Tx::Blocked,
        true => Tx::Go,
    })
}

/// The workers said stop (worker-initiated termination): a sender stops once nothing more is
/// posted, a receiver once its worker has read the last buffer. Whether it stopped now.
#[inline(always)]
fn terminate(
    k: &Kernel,
    lay: &Layout,
    ch: usize,
    c: &Channel,
    s: &mut State,
    worker_mode: bool,
) -> Result<bool, TaskError> {
    if !worker_mode || s.terminated || k.read_u32(lay.terminate(ch))? == 0 {
        return Ok(false);
    }
    let idle = if c.sender { k.read_u32(lay.semaphore(ch))? == 0 } else { s.waiting_worker.is_none() };
    s.terminated |= idle;
    Ok(idle)
}

/// Where message `m` of channel `ch` puts its sync record.
#[inline(always)]
fn record(lay: &Layout, ch: usize, c: &Channel, m: u64) -> u64 {
    lay.buffer(ch, m % lay.buffers_per_channel) + c.bytes_of(m)
}

/// A sender's acknowledgements: first level (the payload landed, so the local buffer may be
/// refilled by a worker while the remote one is still being read), then second level (the
/// receiver's worker has read the buffer; it may be sent into). Whether any came.
#[inline(always)]
fn acks(k: &Kernel, lay: &Layout, ch: usize, c: &Channel, s: &mut State) -> Result<bool, TaskError> {
    let mut progressed = false;
    while s.acked < s.next {
        let rec = record(lay, ch, c, s.acked);
        if k.read_u32(rec + 4)? == 1 || k.read_u32(rec)? == 0 {
            s.acked += 1;
            progressed = true;
        } else {
            break;
        }
    }
    if let Some(&rec) = s.inflight.front()
        && k.read_u32(rec)? == 0
    {
        s.inflight.pop_front();
        s.done += 1;
        progressed = true;
    }
    Ok(progressed)
}

/// The worker to offer the next buffer to, if it may be offered: after the first-level ack of
/// the buffer's previous message, unless the new payload would cover that message's record (a
/// longer message), in which case after its second level.
#[inline(always)]
fn next_offer(c: &Channel, s: &State, bpc: u64, worker_mode: bool) -> Option<WorkerSlot> {
    if !(worker_mode || s.offered < c.messages) {
        return None;
    }
    let m = s.offered.checked_sub(bpc)?;
    let early = m < s.acked && c.bytes_of(s.offered) <= c.bytes_of(m);
    (early || m < s.done).then(|| c.workers[(s.offered % c.workers.len() as u64) as usize])
}

/// Whether a sender has a buffer its worker filled and a free remote buffer to send it into.
#[inline(always)]
fn sender_ready(
    k: &Kernel,
    lay: &Layout,
    ch: usize,
    c: &Channel,
    s: &State,
    worker_mode: bool,
) -> Result<bool, TaskError> {
    let more = if worker_mode { !s.terminated } else { s.next < c.messages };
    Ok(more && s.inflight.len() < lay.buffers_per_channel as usize && k.read_u32(lay.semaphore(ch))? >= 1)
}

/// Takes the filled buffer (its record written, in flight); returns the address and 16-byte
/// words to send.
#[inline(always)]
fn start_send(
    k: &Kernel,
    lay: &Layout,
    ch: usize,
    c: &Channel,
    s: &mut State,
) -> Result<(u64, u64), TaskError> {
    k.add_u32(lay.semaphore(ch), u32::MAX)?;
    let (buf, rec, bytes) =
        (lay.buffer(ch, s.next % lay.buffers_per_channel), record(lay, ch, c, s.next), c.bytes_of(s.next));
    k.write_bytes(rec, &sync_record(bytes))?;
    s.inflight.push_back(rec);
    s.next += 1;
    Ok((buf, (bytes + SYNC) >> 4))
}

/// A receiver frees the buffer its worker has read: the record cleared, and the next message's
/// record place in this buffer, so stale payload cannot pass for it.
#[inline(always)]
fn free_buffer(
    k: &Kernel,
    lay: &Layout,
    ch: usize,
    c: &Channel,
    s: &mut State,
    rec: u64,
) -> Result<(), TaskError> {
    let bpc = lay.buffers_per_channel;
    k.add_u32(lay.semaphore(ch), u32::MAX)?;
    k.write_bytes(rec, &[0; 16])?;
    let reuse = s.done + bpc;
    k.write_bytes(lay.buffer(ch, reuse % bpc) + c.bytes_of(reuse), &[0; 16])?;
    s.waiting_worker = None;
    s.done += 1;
    Ok(())
}

/// A tenant whose messages have all gone through (and, on the sender, come back) hands its
/// channel to the next: fresh state, the next tenant's record places cleared on the receiver
/// (nothing of it can have landed: its sender waits for our last "buffer free"), its sender
/// workers offered the first buffers. Whether it did.
async fn hand_over(
    k: &Kernel,
    spec: &EdmSpec,
    ch: usize,
    s: &mut State,
    c: &mut Channel,
) -> Result<bool, TaskError> {
    let served = if c.sender {
        s.next == c.messages && s.inflight.is_empty()
    } else {
        s.done == c.messages && s.waiting_worker.is_none()
    };
    if !served || s.tenant >= spec.later[ch].len() {
        return Ok(false);
    }
    let lay = spec.layout;
    let next = spec.later[ch][s.tenant].clone();
    *s = State::new(&next, lay.buffers_per_channel, s.tenant + 1);
    if next.sender {
        offer_first(k, &next, lay.buffers_per_channel).await?;
    } else {
        for m in 0..lay.buffers_per_channel {
            k.write_bytes(lay.buffer(ch, m) + next.bytes_of(m), &[0; 16])?;
        }
    }
    *c = next;
    Ok(true)
}

fn sync_record(bytes: u64) -> [u8; 16] {
    let mut r = [0u8; 16];
    r[0..4].copy_from_slice(&(bytes as u32).to_le_bytes());
    r
}

/// Whether a channel has terminated and, for a sender, every buffer came back (teardown).
/// Without `teardown` a sender channel stops once everything is sent, not once every buffer
/// came back: the deliberately broken protocol the guide warns about.
fn channel_done(c: &Channel, s: &State, worker_mode: bool, teardown: bool) -> bool {
    if c.sender {
        let sent_all = if worker_mode { s.terminated } else { s.next == c.messages };
        sent_all && (!teardown || s.inflight.is_empty())
    } else {
        let count_reached = if worker_mode { s.terminated } else { s.done == c.messages };
        count_reached && s.waiting_worker.is_none()
    }
}

/// The words the idle service loop waits on: whatever would let some channel progress.
fn waits(
    k: &Kernel,
    spec: &EdmSpec,
    cur: &[Channel],
    multi: &[bool],
    st: &[State],
    worker_mode: bool,
    tx_blocked: bool,
) -> Result<Vec<(u64, Cond)>, meshsim_hw::HwError> {
    let lay = spec.layout;
    let bpc = lay.buffers_per_channel;
    let mut words = Vec::with_capacity(3 * spec.channels.len() + 1);
    for (ch, (c, s)) in cur.iter().zip(st).enumerate() {
        let worker_mode = worker_mode && !multi[ch];
        // A served tenant with a successor switches at once (the loop's own progress).
        if channel_done(c, s, worker_mode, spec.config.teardown) {
            continue;
        }
        // Once the termination word is set, the channel ends through its own progress (its
        // last buffers go out or come back); waiting on the word again would return at once.
        if worker_mode && !s.terminated && k.read_u32(lay.terminate(ch))? == 0 {
            words.push((lay.terminate(ch), Cond::Ge(1)));
        }
        // With the tx queue busy, work that needs it (a send, an acknowledgement, a "buffer
        // free") waits for the queue's latch, not for its own word.
        if c.sender {
            let more = if worker_mode { !s.terminated } else { s.next < c.messages };
            if more && s.inflight.len() < bpc as usize && !tx_blocked {
                words.push((lay.semaphore(ch), Cond::Ge(1)));
            }
            if let Some(&rec) = s.inflight.front() {
                words.push((rec, Cond::Eq(0)));
            }
            if s.acked < s.next {
                words.push((lay.buffer(ch, s.acked % bpc) + c.bytes_of(s.acked) + 4, Cond::Eq(1)));
            }
        } else if tx_blocked {
        } else if s.waiting_worker.is_some() {
            words.push((lay.semaphore(ch), Cond::Ge(1)));
        } else {
            let rec = lay.buffer(ch, s.next % bpc) + c.bytes_of(s.next);
            words.push((rec, Cond::Ne(0)));
        }
    }
    Ok(words)
}
