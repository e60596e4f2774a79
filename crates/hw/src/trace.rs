//! What a run leaves behind for people to look at: per-link utilisation (always recorded, a few
//! counters per Ethernet port), kernel marks (always), and — when asked for — a full trace of
//! kernels, waits and Ethernet packets, written as Chrome / Perfetto trace-event JSON.
//!
//! ```text
//!  trace-event JSON             from
//!  process  = chip (pid = chip id)
//!  thread   = kernel on a core   engine task events: start, waits (what for), resume, finish
//!           + marks              Kernel::mark (instant events)
//!  thread   = link direction     every packet on the wire as a complete ("X") slice
//!  counter  = link utilisation   busy fraction of the serializer per time window
//! ```
//!
//! Timestamps are simulated time in microseconds with picosecond resolution (six decimals).

use std::collections::BTreeMap;
use std::io::{self, Write};

use meshsim_engine::{TaskEvent, TaskEventKind, TaskId, Time};
use meshsim_topology::soc::CoreCoord;
use meshsim_topology::{ChipIdx, Cluster, Endpoint};

/// Sends of at most this many bytes are sync records, handshakes and acknowledgements; larger
/// sends carry payload.
pub const SYNC_SEND_BYTES: u64 = 16;

/// One Ethernet packet on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketRec {
    /// Sending chip.
    pub chip: ChipIdx,
    /// Sending channel.
    pub chan: u8,
    /// Payload bytes of the packet.
    pub bytes: u64,
    /// When the serializer started it.
    pub wire_start: Time,
    /// When the serializer finished it.
    pub wire_end: Time,
    /// When its last byte was in the peer's L1.
    pub land: Time,
}

/// A value a kernel reported over time (`Kernel::counter`), such as a router channel's
/// occupied slots: a counter track in traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterRec {
    /// When the value changed.
    pub at: Time,
    /// The chip.
    pub chip: ChipIdx,
    /// The core, as named in task names (`eth3`, `worker(1,1)`).
    pub core: String,
    /// What is counted.
    pub name: &'static str,
    /// The new value.
    pub value: u64,
}

/// A point a kernel marked in its own timeline (`Kernel::mark`), such as the end of an EDM
/// handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    /// When.
    pub at: Time,
    /// The chip.
    pub chip: ChipIdx,
    /// The core's NoC position.
    pub core: CoreCoord,
    /// The Ethernet channel, when the core is an ERISC.
    pub eth_chan: Option<u8>,
    /// The kernel's task.
    pub task: Option<TaskId>,
    /// What happened.
    pub label: &'static str,
}

/// A kernel as the trace shows it: its task, chip, core and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelTrack {
    /// The engine task running it.
    pub task: TaskId,
    /// The chip.
    pub chip: ChipIdx,
    /// The core, as named in task names (`eth3`, `worker(1,1)`).
    pub core: String,
    /// The kernel's name.
    pub kernel: String,
}

/// Use of one Ethernet link direction in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkUse {
    /// The sending end.
    pub from: Endpoint,
    /// The receiving end.
    pub to: Endpoint,
    /// Payload bytes sent (sync records included).
    pub bytes: u64,
    /// Packets put on the wire.
    pub packets: u64,
    /// Time the serializer was busy.
    pub busy: Time,
    /// When the first packet landed.
    pub first_land: Option<Time>,
    /// When the first payload-carrying packet (a send larger than [`SYNC_SEND_BYTES`]) landed.
    pub first_payload: Option<Time>,
    /// When the last payload-carrying packet landed.
    pub last_payload: Option<Time>,
}

/// How long one DRAM bank streamed in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DramUse {
    /// The chip.
    pub chip: ChipIdx,
    /// The bank.
    pub bank: u8,
    /// Time it spent streaming reads and writes (latency excluded).
    pub busy: Time,
    /// Bytes it moved.
    pub bytes: u64,
}

/// The busiest on-chip resources of a run, to set beside the busiest link: when the link is not
/// near full, one of these may be what limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceUse {
    /// The most occupied NoC link or port of any chip.
    pub noc: Option<(ChipIdx, crate::noc::PortUse)>,
    /// The busiest DRAM bank of any chip.
    pub dram: Option<DramUse>,
}

/// Everything a traced run recorded.
#[derive(Clone, Debug, Default)]
pub struct TraceData {
    /// Every kernel launched, in launch order.
    pub kernels: Vec<KernelTrack>,
    /// Task events in time order.
    pub tasks: Vec<TaskEvent>,
    /// Ethernet packets in the order they were put on the wire.
    pub packets: Vec<PacketRec>,
    /// Kernel marks in time order.
    pub marks: Vec<Mark>,
    /// Kernel counters in time order.
    pub counters: Vec<CounterRec>,
    /// When the run ended.
    pub end: Time,
}

/// Windows each link-utilisation counter track is divided into.
const COUNTER_WINDOWS: u64 = 200;
/// Thread ids of link tracks start here, above any kernel's.
const LINK_TID_BASE: u64 = 1_000_000;

fn us(t: Time) -> f64 {
    t.0 as f64 / 1e6
}

/// One trace event before it is written: small, so a run of millions of events sorts cheaply.
struct Ev<'a> {
    pid: u64,
    /// Thread id; 0 for counters, which are told apart by `sub`.
    tid: u64,
    sub: u8,
    ts: Time,
    kind: EvKind<'a>,
}

enum EvKind<'a> {
    Kernel(&'a str),
    Wait(&'a str),
    End,
    Mark(&'static str),
    Packet(&'a PacketRec),
    Counter(f64),
    Value(&'a CounterRec),
}

/// The metadata events naming a thread and fixing its place in the process.
fn thread_meta(pid: u64, tid: u64, name: &str) -> [String; 2] {
    [
        format!(
            r#"{{"ph":"M","name":"thread_name","pid":{pid},"tid":{tid},"args":{{"name":{}}}}}"#,
            js(name)
        ),
        format!(
            r#"{{"ph":"M","name":"thread_sort_index","pid":{pid},"tid":{tid},"args":{{"sort_index":{tid}}}}}"#
        ),
    ]
}

/// A JSON string literal.
fn js(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialise")
}

/// Writes `data` as Chrome / Perfetto trace-event JSON (the "JSON object format").
///
/// Every track's events are in timestamp order and every begin has its end: kernels that never
/// finished (a failed run) are closed at `data.end`.
pub fn write_chrome(data: &TraceData, cluster: &Cluster, out: &mut impl Write) -> io::Result<()> {
    let mut w = Chrome { w: io::BufWriter::new(out), first: true };
    w.w.write_all(
        b"{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"meshsim\",\"time\":\"simulated\"},\n\"traceEvents\":[\n",
    )?;
    let mut t = Tracks { cluster, chips_seen: BTreeMap::new(), events: Vec::new() };
    t.kernels(data, &mut w)?;
    t.links(data, &mut w)?;
    for &pid in t.chips_seen.keys() {
        w.line(format!(r#"{{"ph":"M","name":"process_name","pid":{pid},"args":{{"name":"chip {pid}"}}}}"#))?;
        w.line(format!(
            r#"{{"ph":"M","name":"process_sort_index","pid":{pid},"args":{{"sort_index":{pid}}}}}"#
        ))?;
    }
    // Per track, in time order; the sort is stable, so equal times keep their recorded order
    // (a wait's end before the next wait's begin).
    t.events.sort_by_key(|e| (e.pid, e.tid, e.sub, e.ts));
    for e in &t.events {
        w.line(e.json())?;
    }
    w.w.write_all(b"\n]}\n")?;
    w.w.flush()
}

/// The trace's output: one event per line, comma-separated.
struct Chrome<W: Write> {
    w: io::BufWriter<W>,
    first: bool,
}

impl<W: Write> Chrome<W> {
    fn line(&mut self, text: String) -> io::Result<()> {
        if !self.first {
            self.w.write_all(b",\n")?;
        }
        self.first = false;
        self.w.write_all(text.as_bytes())
    }
}

/// The trace's events as they are gathered, before sorting, and the chips they are on.
struct Tracks<'a> {
    cluster: &'a Cluster,
    chips_seen: BTreeMap<u64, ()>,
    events: Vec<Ev<'a>>,
}

impl<'a> Tracks<'a> {
    fn chip_id(&self, c: ChipIdx) -> u64 {
        self.cluster.chip(c).id
    }

    /// Kernels: a thread each, named after core and kernel, with their waits, marks and
    /// counters; what a failed run left open is closed at its end, innermost first.
    fn kernels(&mut self, data: &'a TraceData, w: &mut Chrome<impl Write>) -> io::Result<()> {
        let mut track_of: BTreeMap<TaskId, (u64, u64, &str)> = BTreeMap::new();
        for (i, k) in data.kernels.iter().enumerate() {
            let (pid, tid) = (self.chip_id(k.chip), i as u64 + 1);
            self.chips_seen.insert(pid, ());
            track_of.insert(k.task, (pid, tid, &k.kernel));
            for m in thread_meta(pid, tid, &format!("{} · {}", k.core, k.kernel)) {
                w.line(m)?;
            }
        }
        let mut open: BTreeMap<TaskId, u32> = BTreeMap::new();
        for e in &data.tasks {
            let Some(&(pid, tid, kernel)) = track_of.get(&e.task) else { continue };
            let kind = match &e.kind {
                TaskEventKind::Start => {
                    *open.entry(e.task).or_default() += 1;
                    EvKind::Kernel(kernel)
                }
                TaskEventKind::WaitBegin(what) => {
                    *open.entry(e.task).or_default() += 1;
                    EvKind::Wait(what)
                }
                TaskEventKind::WaitEnd | TaskEventKind::Finish => {
                    let depth = open.entry(e.task).or_default();
                    if *depth == 0 {
                        continue;
                    }
                    *depth -= 1;
                    EvKind::End
                }
            };
            self.events.push(Ev { pid, tid, sub: 0, ts: e.at, kind });
        }
        for (task, depth) in open {
            let (pid, tid, _) = track_of[&task];
            for _ in 0..depth {
                self.events.push(Ev { pid, tid, sub: 0, ts: data.end, kind: EvKind::End });
            }
        }
        for m in &data.marks {
            let Some(&(pid, tid, _)) = m.task.and_then(|t| track_of.get(&t)) else { continue };
            self.events.push(Ev { pid, tid, sub: 0, ts: m.at, kind: EvKind::Mark(m.label) });
        }
        // Kernel counters: a counter track per (chip, core, name).
        for c in &data.counters {
            let pid = self.chip_id(c.chip);
            self.chips_seen.insert(pid, ());
            self.events.push(Ev { pid, tid: 0, sub: u8::MAX, ts: c.at, kind: EvKind::Value(c) });
        }
        Ok(())
    }

    /// Link directions: one track per sending port, every packet a slice; plus a counter track
    /// of the port's busy share per window.
    fn links(&mut self, data: &'a TraceData, w: &mut Chrome<impl Write>) -> io::Result<()> {
        let mut links: BTreeMap<(ChipIdx, u8), Vec<&PacketRec>> = BTreeMap::new();
        for p in &data.packets {
            links.entry((p.chip, p.chan)).or_default().push(p);
        }
        let window = Time((data.end.0 / COUNTER_WINDOWS).max(1));
        for (&(chip, chan), packets) in &links {
            let (pid, tid) = (self.chip_id(chip), LINK_TID_BASE + chan as u64);
            self.chips_seen.insert(pid, ());
            let name = match self.cluster.connected(Endpoint { chip, chan }) {
                Some(e) => format!("eth{chan} tx → chip {} eth{}", self.chip_id(e.chip), e.chan),
                None => format!("eth{chan} tx"),
            };
            for m in thread_meta(pid, tid, &name) {
                w.line(m)?;
            }
            let mut busy = vec![0u64; (data.end.0 / window.0 + 1) as usize];
            for p in packets {
                self.events.push(Ev { pid, tid, sub: 0, ts: p.wire_start, kind: EvKind::Packet(p) });
                // Spread the packet's wire time over the windows it overlaps.
                let (mut t, end) = (p.wire_start.0, p.wire_end.0);
                while t < end {
                    let i = t / window.0;
                    let i_end = ((i + 1) * window.0).min(end);
                    busy[i as usize] += i_end - t;
                    t = i_end;
                }
            }
            for (i, b) in busy.iter().enumerate() {
                let ts = Time(i as u64 * window.0);
                let pct = 100.0 * *b as f64 / window.0 as f64;
                self.events.push(Ev { pid, tid: 0, sub: chan, ts, kind: EvKind::Counter(pct) });
            }
        }
        Ok(())
    }
}

impl Ev<'_> {
    /// The event as one trace-event JSON object.
    fn json(&self) -> String {
        let (pid, tid, ts) = (self.pid, self.tid, us(self.ts));
        match self.kind {
            EvKind::Kernel(name) => {
                format!(
                    r#"{{"ph":"B","name":{},"cat":"kernel","pid":{pid},"tid":{tid},"ts":{ts}}}"#,
                    js(name)
                )
            }
            EvKind::Wait(raw) => {
                let (name, what) = (js(&format!("wait {raw}")), js(raw));
                format!(
                    r#"{{"ph":"B","name":{name},"cat":"wait","pid":{pid},"tid":{tid},"ts":{ts},"args":{{"waits_for":{what}}}}}"#
                )
            }
            EvKind::End => format!(r#"{{"ph":"E","pid":{pid},"tid":{tid},"ts":{ts}}}"#),
            EvKind::Mark(label) => {
                format!(
                    r#"{{"ph":"i","s":"t","name":{},"cat":"mark","pid":{pid},"tid":{tid},"ts":{ts}}}"#,
                    js(label)
                )
            }
            EvKind::Packet(p) => format!(
                r#"{{"ph":"X","name":"{} B","cat":"packet","pid":{pid},"tid":{tid},"ts":{ts},"dur":{},"args":{{"bytes":{},"lands_us":{}}}}}"#,
                p.bytes,
                us(p.wire_end - p.wire_start),
                p.bytes,
                us(p.land)
            ),
            EvKind::Value(c) => format!(
                r#"{{"ph":"C","name":{},"pid":{pid},"ts":{ts},"args":{{"value":{}}}}}"#,
                js(&format!("{} {}", c.core, c.name)),
                c.value
            ),
            EvKind::Counter(pct) => format!(
                r#"{{"ph":"C","name":"eth{} tx utilisation %","pid":{pid},"ts":{ts},"args":{{"busy":{pct}}}}}"#,
                self.sub
            ),
        }
    }
}

/// The bottleneck of a run: the link direction whose serializer was busy longest (the first
/// such by chip and channel on a tie).
pub fn bottleneck(links: &[LinkUse]) -> Option<&LinkUse> {
    links
        .iter()
        .max_by(|a, b| a.busy.cmp(&b.busy).then((b.from.chip, b.from.chan).cmp(&(a.from.chip, a.from.chan))))
}
