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
use serde_json::json;

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

/// Writes `data` as Chrome / Perfetto trace-event JSON (the "JSON object format").
///
/// Every track's events are in timestamp order and every begin has its end: kernels that never
/// finished (a failed run) are closed at `data.end`.
pub fn write_chrome(data: &TraceData, cluster: &Cluster, out: &mut impl Write) -> io::Result<()> {
    // (pid, tid, ts in ps, event): sorted stably per track by time at the end.
    let mut events: Vec<(u64, u64, Time, serde_json::Value)> = Vec::new();
    let mut meta: Vec<serde_json::Value> = Vec::new();
    let chip_id = |c: ChipIdx| cluster.chip(c).id;
    let mut chips_seen = BTreeMap::new();

    let mut track_of: BTreeMap<TaskId, (u64, u64, &str)> = BTreeMap::new();
    for (i, k) in data.kernels.iter().enumerate() {
        let (pid, tid) = (chip_id(k.chip), i as u64 + 1);
        chips_seen.insert(pid, ());
        track_of.insert(k.task, (pid, tid, &k.kernel));
        meta.push(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
            "args": {"name": format!("{} · {}", k.core, k.kernel)}}));
        meta.push(json!({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
            "args": {"sort_index": tid}}));
    }
    let mut open: BTreeMap<TaskId, u32> = BTreeMap::new();
    for e in &data.tasks {
        let Some(&(pid, tid, kernel)) = track_of.get(&e.task) else { continue };
        let ts = us(e.at);
        let ev = match &e.kind {
            TaskEventKind::Start => {
                *open.entry(e.task).or_default() += 1;
                json!({"ph": "B", "name": kernel, "cat": "kernel", "pid": pid, "tid": tid, "ts": ts})
            }
            TaskEventKind::WaitBegin(what) => {
                *open.entry(e.task).or_default() += 1;
                json!({"ph": "B", "name": format!("wait {what}"), "cat": "wait", "pid": pid, "tid": tid,
                    "ts": ts, "args": {"waits_for": what}})
            }
            TaskEventKind::WaitEnd | TaskEventKind::Finish => {
                let depth = open.entry(e.task).or_default();
                if *depth == 0 {
                    continue;
                }
                *depth -= 1;
                json!({"ph": "E", "pid": pid, "tid": tid, "ts": ts})
            }
        };
        events.push((pid, tid, e.at, ev));
    }
    // Close what a failed run left open, innermost first.
    for (task, depth) in open {
        let (pid, tid, _) = track_of[&task];
        for _ in 0..depth {
            events.push((pid, tid, data.end, json!({"ph": "E", "pid": pid, "tid": tid, "ts": us(data.end)})));
        }
    }
    for m in &data.marks {
        let Some(&(pid, tid, _)) = m.task.and_then(|t| track_of.get(&t)) else { continue };
        events.push((
            pid,
            tid,
            m.at,
            json!({"ph": "i", "s": "t", "name": m.label, "cat": "mark",
            "pid": pid, "tid": tid, "ts": us(m.at)}),
        ));
    }

    // Link directions: one track per sending port, every packet a slice; plus a counter track.
    let mut links: BTreeMap<(ChipIdx, u8), Vec<&PacketRec>> = BTreeMap::new();
    for p in &data.packets {
        links.entry((p.chip, p.chan)).or_default().push(p);
    }
    let window = Time((data.end.0 / COUNTER_WINDOWS).max(1));
    for (&(chip, chan), packets) in &links {
        let (pid, tid) = (chip_id(chip), LINK_TID_BASE + chan as u64);
        chips_seen.insert(pid, ());
        let to = cluster.connected(Endpoint { chip, chan });
        let name = match to {
            Some(e) => format!("eth{chan} tx → chip {} eth{}", chip_id(e.chip), e.chan),
            None => format!("eth{chan} tx"),
        };
        meta.push(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}));
        meta.push(json!({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
            "args": {"sort_index": tid}}));
        let mut busy = vec![0u64; (data.end.0 / window.0 + 1) as usize];
        for p in packets {
            events.push((
                pid,
                tid,
                p.wire_start,
                json!({"ph": "X", "name": format!("{} B", p.bytes),
                "cat": "packet", "pid": pid, "tid": tid, "ts": us(p.wire_start),
                "dur": us(p.wire_end - p.wire_start),
                "args": {"bytes": p.bytes, "lands_us": us(p.land)}}),
            ));
            // Spread the packet's wire time over the windows it overlaps.
            let (mut t, end) = (p.wire_start.0, p.wire_end.0);
            while t < end {
                let w = t / window.0;
                let w_end = ((w + 1) * window.0).min(end);
                busy[w as usize] += w_end - t;
                t = w_end;
            }
        }
        let counter = format!("eth{chan} tx utilisation %");
        for (w, b) in busy.iter().enumerate() {
            let ts = Time(w as u64 * window.0);
            events.push((
                pid,
                0,
                ts,
                json!({"ph": "C", "name": counter, "pid": pid, "ts": us(ts),
                "args": {"busy": 100.0 * *b as f64 / window.0 as f64}}),
            ));
        }
    }
    for &pid in chips_seen.keys() {
        meta.push(
            json!({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": format!("chip {pid}")}}),
        );
        meta.push(json!({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}}));
    }
    // Counters share tid 0 per process but are separate tracks by name: order them by name too.
    events.sort_by(|a, b| {
        let key = |e: &(u64, u64, Time, serde_json::Value)| {
            (e.0, e.1, if e.1 == 0 { e.3["name"].as_str().map(str::to_owned) } else { None })
        };
        key(a).cmp(&key(b)).then(a.2.cmp(&b.2))
    });

    let mut w = io::BufWriter::new(out);
    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"meshsim\",\"time\":\"simulated\"},\n\"traceEvents\":[\n")?;
    let mut first = true;
    for ev in meta.iter().chain(events.iter().map(|e| &e.3)) {
        if !first {
            w.write_all(b",\n")?;
        }
        first = false;
        serde_json::to_writer(&mut w, ev)?;
    }
    w.write_all(b"\n]}\n")?;
    w.flush()
}

/// The bottleneck of a run: the link direction whose serializer was busy longest (the first
/// such by chip and channel on a tie).
pub fn bottleneck(links: &[LinkUse]) -> Option<&LinkUse> {
    links
        .iter()
        .max_by(|a, b| a.busy.cmp(&b.busy).then((b.from.chip, b.from.chan).cmp(&(a.from.chip, a.from.chan))))
}
