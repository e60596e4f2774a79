//! The fabric benchmarks, after tt-metal's fabric test framework (`shared/fabric.md` §10).
//!
//! Chips are named by their row-major position in the cluster's R x C mesh (T3000: 2 x 4,
//! chip 4·row + col), not by descriptor ids. Every test's flows are split so one sender core
//! serves one (direction, link); a core holding several flows sends one packet of each in turn.
//! As on hardware, only the first packets through a slot write a header; later ones only take a
//! credit and ring the doorbell, and the router re-sends what the slot holds. Receivers neither
//! poll nor check: each flow ends with a zero-payload increment along its route, which a sync
//! core on every destination chip counts — the global barrier that stops every sender's timer.
//!
//! Bandwidth per link = T · N · S / C_max, packets/s = T · N / C_max: S the payload, N the
//! packets per flow, C_max the longest sender time (its start to the barrier) and T the largest
//! number of link-0 flows crossing one (chip, direction) boundary at which that chip also sends
//! — computed from the flows, as the framework's profiler does.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use meshsim_ccl::fabric::worker::Connection;
use meshsim_ccl::fabric::{
    Dir, Fabric, FabricConfig, FabricKind, Header, Line, MAX_HOPS_1D, NocCmd, Route, Turn,
};
use meshsim_engine::{Cond, Time};
use meshsim_hw::{CoreRef, Program};
use meshsim_topology::ChipIdx;
use meshsim_topology::soc::CoreCoord;
use serde::Serialize;

use crate::common::{BenchError, Measured, Setup};
use crate::placement;

/// The bandwidth tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FabricTest {
    /// Every chip unicasts one hop to each neighbour (`FABRIC_1D_NEIGHBOR_EXCHANGE`).
    NeighborExchange,
    /// The same on the 1D line fabric.
    NeighborExchangeLinear,
    /// Every chip multicasts to both ends of its row and of its column.
    LinearMulticast,
    /// Each chip multicasts one way along its row and one way along its column, to the far end.
    UnidirLinearMulticast,
    /// Chip 0 alone: one core unicasts to each chip of its row, one to its column neighbour.
    SingleSenderLinearUnicast,
    /// Ring fabric: every chip multicasts round the ring both ways.
    FullRingMulticast,
    /// Ring fabric: every chip unicasts to the chip n − 1 hops away both ways.
    FullRingUnicast,
    /// Ring fabric: every chip multicasts half the ring one way and the rest the other.
    HalfRingMulticast,
    /// 2D fabric: every chip multicasts east and west along its row, and north and south
    /// trunks whose every chip branches east and west spines along its row.
    MeshMulticast,
    /// 2D fabric: chip 0 alone unicasts to every other chip (N/S first, then E/W).
    SingleSenderMeshUnicast,
}

impl FabricTest {
    /// Every test, as named on the command line.
    pub const ALL: [(&'static str, FabricTest); 10] = [
        ("neighbor-exchange", FabricTest::NeighborExchange),
        ("neighbor-exchange-linear", FabricTest::NeighborExchangeLinear),
        ("linear-multicast", FabricTest::LinearMulticast),
        ("unidir-linear-multicast", FabricTest::UnidirLinearMulticast),
        ("single-sender-linear-unicast", FabricTest::SingleSenderLinearUnicast),
        ("full-ring-multicast", FabricTest::FullRingMulticast),
        ("full-ring-unicast", FabricTest::FullRingUnicast),
        ("half-ring-multicast", FabricTest::HalfRingMulticast),
        ("mesh-multicast", FabricTest::MeshMulticast),
        ("single-sender-mesh-unicast", FabricTest::SingleSenderMeshUnicast),
    ];

    /// The golden file's test name.
    pub fn golden_name(self) -> &'static str {
        match self {
            FabricTest::NeighborExchange => "NeighborExchangeUnicast",
            FabricTest::NeighborExchangeLinear => "NeighborExchangeLinear",
            FabricTest::LinearMulticast => "LinearMulticast",
            FabricTest::UnidirLinearMulticast => "UnidirLinearMulticast",
            FabricTest::SingleSenderLinearUnicast => "SingleSenderLinearUnicastAllDevices",
            FabricTest::FullRingMulticast => "FullRingMulticast",
            FabricTest::FullRingUnicast => "FullRingUnicast",
            FabricTest::HalfRingMulticast => "HalfRingMulticast",
            FabricTest::MeshMulticast => "MeshMulticast",
            FabricTest::SingleSenderMeshUnicast => "SingleSenderMeshUnicastAllDevices",
        }
    }

    /// Packets per flow in the framework's test file.
    pub fn default_packets(self) -> u64 {
        match self {
            FabricTest::NeighborExchange | FabricTest::FullRingMulticast => 100_000,
            FabricTest::FullRingUnicast | FabricTest::HalfRingMulticast => 100_000,
            _ => 20_000,
        }
    }

    fn kind(self) -> FabricKind {
        match self {
            FabricTest::NeighborExchange => FabricKind::NeighborExchange,
            FabricTest::FullRingMulticast | FabricTest::FullRingUnicast | FabricTest::HalfRingMulticast => {
                FabricKind::Ring
            }
            FabricTest::MeshMulticast | FabricTest::SingleSenderMeshUnicast => FabricKind::Mesh,
            _ => FabricKind::Linear,
        }
    }
}

/// How a receiving router writes each packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NocSend {
    /// The payload to one L1 address.
    Write,
    /// The same write, then +1 on a semaphore of the same core.
    FusedAtomicInc,
    /// The payload split in two (ceil(S/2) and the rest) to two adjacent addresses.
    ScatterWrite,
}

impl NocSend {
    /// Every mode, as named on the command line.
    pub const ALL: [(&'static str, NocSend); 3] = [
        ("write", NocSend::Write),
        ("fused-atomic-inc", NocSend::FusedAtomicInc),
        ("scatter-write", NocSend::ScatterWrite),
    ];

    /// The calibration CSV's name.
    pub fn golden_name(self) -> &'static str {
        match self {
            NocSend::Write => "unicast_write",
            NocSend::FusedAtomicInc => "fused_atomic_inc",
            NocSend::ScatterWrite => "unicast_scatter_write",
        }
    }
}

/// One fabric bandwidth point.
#[derive(Clone, Copy, Debug)]
pub struct FabricSpec {
    /// The test.
    pub test: FabricTest,
    /// The NoC command at the destinations.
    pub noc_send: NocSend,
    /// Payload bytes per packet.
    pub packet_bytes: u64,
    /// The router's maximum payload (default: tt-metal's 4352 B, or the packet if larger).
    pub max_packet_bytes: Option<u64>,
    /// Routing planes used (every sender cloned onto links 0..k).
    pub num_links: usize,
    /// Packets per flow (default: the framework's).
    pub packets: Option<u64>,
}

/// One measured point (the golden file's columns).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FabricRow {
    /// The golden file's test name.
    pub test: String,
    /// The golden file's NoC command name.
    pub noc_send: String,
    /// Payload bytes per packet.
    pub packet_bytes: u64,
    /// Routing planes.
    pub num_links: usize,
    /// Flows crossing the busiest boundary (the T of the formula).
    pub flows_per_link: u64,
    /// Per-link payload bandwidth, GB/s.
    pub gbps: f64,
    /// Per-link packets per second.
    pub packets_per_s: f64,
    /// The slowest sender core's own rate, GB/s: its flows' payload bytes over the time from
    /// its start to its last data packet rung (before the barrier). Beside the fastest's, it
    /// shows whether the senders shared the run evenly; `gbps` is set by the slowest.
    pub sender_gbps_min: f64,
    /// The fastest sender core's own rate, GB/s.
    pub sender_gbps_max: f64,
}

/// A flow: packets from one chip along one direction of a line, or along a 2D route.
#[derive(Clone, Debug)]
struct Flow {
    src: ChipIdx,
    /// The line of its first hop.
    line: usize,
    /// The first chip on the way (picks the router).
    toward: ChipIdx,
    route: Route,
    /// Chips that receive it.
    dests: Vec<ChipIdx>,
    /// Every (chip, next chip) link it crosses, once each.
    edges: Vec<(ChipIdx, ChipIdx)>,
}

/// Where a flow's packets land in its receiver core's L1, per slot of the core.
const DATA_ADDR: u64 = 0x40000;
const DATA_SLOT_BYTES: u64 = 0x4000;
/// The core counting barrier increments on each chip.
const SYNC_CORE: CoreCoord = CoreCoord { x: 7, y: 8 };
/// The core the host's close runs on, on every chip.
const CLOSE_CORE: CoreRef = CoreRef::Worker(CoreCoord { x: 7, y: 9 });
/// Payload source and connection words in each sender's L1.
const PAYLOAD_SRC: u64 = 0x20000;
const CONN_BASE: u64 = 0x10000;

/// The fabric's lines: rows then columns of the mesh (line, neighbour exchange), or the
/// perimeter ring.
fn lines(setup: &Setup, kind: FabricKind) -> Result<(Vec<Line>, meshsim_topology::Grid), BenchError> {
    use meshsim_topology::{Grid, Shape};
    let grid = match setup.cluster.shape() {
        Shape::Mesh(g) | Shape::Torus(g) => g.clone(),
        // A chain of chips (an N300's two) is a mesh of one row, in the chain's order.
        &Shape::Line(cols) => Grid {
            rows: 1,
            cols,
            at: setup.cluster.lines().swap_remove(0).chips,
            torus: false,
            other_pairs: 0,
        },
        shape => {
            return Err(BenchError::BadArgument(format!(
                "the fabric benchmarks need a mesh or a line of chips; this cluster is {shape}"
            )));
        }
    };
    let lines = if kind.is_ring() {
        let (r, c) = (grid.rows, grid.cols);
        if r < 2 || c < 2 {
            return Err(BenchError::BadArgument("a ring fabric needs at least a 2x2 mesh".into()));
        }
        let mut ring: Vec<ChipIdx> = (0..c).map(|j| grid.chip(0, j)).collect();
        ring.extend((1..r).map(|i| grid.chip(i, c - 1)));
        ring.extend((0..c - 1).rev().map(|j| grid.chip(r - 1, j)));
        ring.extend((1..r - 1).rev().map(|i| grid.chip(i, 0)));
        vec![Line { chips: ring, closed: true }]
    } else {
        grid.rows_and_columns()
            .into_iter()
            .filter(|l| l.len() > 1)
            .map(|chips| Line { chips, closed: false })
            .collect()
    };
    // A 1D packet's route is its header's: a line's end, or all the way round a ring, must
    // be within its reach.
    let longest = lines.iter().map(|l| l.chips.len() - 1).max().unwrap_or(0);
    if kind != FabricKind::Mesh && longest > MAX_HOPS_1D as usize {
        return Err(BenchError::BadArgument(format!(
            "the fabric benchmark's routes on this cluster span up to {longest} hops, beyond the {MAX_HOPS_1D} a 1D fabric packet header carries: take a cluster with at most {} chips per line (or round its perimeter)",
            MAX_HOPS_1D + 1
        )));
    }
    Ok((lines, grid))
}

/// The flows of a test on `lines` (rows first, then columns, as [`lines`] builds them).
fn flows(test: FabricTest, grid: &meshsim_topology::Grid, lines: &[Line]) -> Vec<Flow> {
    match test {
        FabricTest::MeshMulticast | FabricTest::SingleSenderMeshUnicast => mesh_flows(test, grid, lines),
        FabricTest::FullRingMulticast | FabricTest::FullRingUnicast | FabricTest::HalfRingMulticast => {
            ring_flows(test, lines)
        }
        _ => line_flows(test, grid, lines),
    }
}

/// The flow from position `i` of line `line` (`l`): a multicast writing the chips `start` to
/// `start + range - 1` hops away, or a unicast to the chip `start + range - 1` hops away.
fn along(l: &Line, line: usize, i: usize, forward: bool, start: u32, range: u32, multicast: bool) -> Flow {
    let n = l.chips.len();
    let step = |k: usize| if forward { l.chips[(i + k) % n] } else { l.chips[(i + n * 2 - k) % n] };
    let route = if multicast { Route::multicast(start, range) } else { Route::unicast(start + range - 1) };
    let dests = if multicast {
        (start..start + range).map(|k| step(k as usize)).collect()
    } else {
        vec![step((start + range - 1) as usize)]
    };
    let edges = (0..route.hops() as usize).map(|k| (step(k), step(k + 1))).collect();
    Flow { src: l.chips[i], line, toward: step(1), route, dests, edges }
}

/// The 2D tests' flows: every chip multicasting along its row and down N/S trunks, or chip 0
/// unicasting to every other chip.
fn mesh_flows(test: FabricTest, grid: &meshsim_topology::Grid, lines: &[Line]) -> Vec<Flow> {
    let mut out = Vec::new();
    let (rows, cols) = (grid.rows as i32, grid.cols as i32);
    for r in 0..rows {
        for c in 0..cols {
            let mut routes: Vec<(Dir, Route)> = Vec::new();
            if test == FabricTest::MeshMulticast {
                let (east, west) = ((cols - 1 - c) as u8, c as u8);
                if east > 0 {
                    routes.push((Dir::E, Route::mesh_multicast(Dir::E, east, 0, 0)));
                }
                if west > 0 {
                    routes.push((Dir::W, Route::mesh_multicast(Dir::W, west, 0, 0)));
                }
                if r < rows - 1 {
                    routes.push((Dir::S, Route::mesh_multicast(Dir::S, (rows - 1 - r) as u8, east, west)));
                }
                if r > 0 {
                    routes.push((Dir::N, Route::mesh_multicast(Dir::N, r as u8, east, west)));
                }
            } else if (r, c) == (0, 0) {
                for (y, x) in (0..rows).flat_map(|y| (0..cols).map(move |x| (y, x))).skip(1) {
                    routes.push(Route::mesh_unicast(y, x));
                }
            }
            for (dir, route) in routes {
                out.push(mesh_flow(grid, lines, (r, c), dir, route));
            }
        }
    }
    out
}

/// The ring tests' flows: every chip multicasting (or unicasting) round the ring both ways, or
/// half-way each way.
fn ring_flows(test: FabricTest, lines: &[Line]) -> Vec<Flow> {
    let mut out = Vec::new();
    let n = lines[0].chips.len();
    for i in 0..n {
        let (fwd, bwd) = match test {
            FabricTest::HalfRingMulticast if i % 2 == 0 => (n / 2, n - 1 - n / 2),
            FabricTest::HalfRingMulticast => (n - 1 - n / 2, n / 2),
            _ => (n - 1, n - 1),
        };
        let multicast = test != FabricTest::FullRingUnicast;
        for (forward, range) in [(true, fwd), (false, bwd)] {
            if range == 0 {
                continue;
            }
            if multicast {
                out.push(along(&lines[0], 0, i, forward, 1, range as u32, true));
            } else {
                out.push(along(&lines[0], 0, i, forward, range as u32, 1, false));
            }
        }
    }
    out
}

/// The 1D tests' flows along every row and column: neighbour exchange, linear multicasts, or
/// chip 0's unicasts.
fn line_flows(test: FabricTest, grid: &meshsim_topology::Grid, lines: &[Line]) -> Vec<Flow> {
    let mut out = Vec::new();
    let line_of = |chips: &[ChipIdx]| lines.iter().position(|l| l.chips == chips).expect("a line");
    let rows: Vec<Vec<ChipIdx>> =
        (0..grid.rows).map(|r| (0..grid.cols).map(|c| grid.chip(r, c)).collect()).collect();
    let cols: Vec<Vec<ChipIdx>> =
        (0..grid.cols).map(|c| (0..grid.rows).map(|r| grid.chip(r, c)).collect()).collect();
    for (r, row) in rows.iter().enumerate() {
        for (c, col) in cols.iter().enumerate() {
            let chip_id = r * grid.cols + c;
            // (line, position on it, length) for the row and the column.
            let mut dims = Vec::new();
            if grid.cols > 1 {
                dims.push((line_of(row), c, grid.cols, 0));
            }
            if grid.rows > 1 {
                dims.push((line_of(col), r, grid.rows, 1));
            }
            for (line, pos, len, dim) in dims {
                let ahead = (len - 1 - pos) as u32;
                let behind = pos as u32;
                match test {
                    FabricTest::NeighborExchange | FabricTest::NeighborExchangeLinear => {
                        if ahead > 0 {
                            out.push(along(&lines[line], line, pos, true, 1, 1, false));
                        }
                        if behind > 0 {
                            out.push(along(&lines[line], line, pos, false, 1, 1, false));
                        }
                    }
                    FabricTest::LinearMulticast => {
                        if ahead > 0 {
                            out.push(along(&lines[line], line, pos, true, 1, ahead, true));
                        }
                        if behind > 0 {
                            out.push(along(&lines[line], line, pos, false, 1, behind, true));
                        }
                    }
                    FabricTest::UnidirLinearMulticast => {
                        if pos < len / 2 {
                            out.push(along(&lines[line], line, pos, true, 1, ahead, true));
                        } else {
                            out.push(along(&lines[line], line, pos, false, 1, behind, true));
                        }
                    }
                    FabricTest::SingleSenderLinearUnicast if chip_id == 0 => {
                        let far = if dim == 0 { ahead } else { 1.min(ahead) };
                        for d in 1..=far {
                            out.push(along(&lines[line], line, pos, true, d, 1, false));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    out
}

/// The flow of a 2D `route` from the chip at (`r`, `c`), first hop toward `dir`: the chips it
/// writes and the links it crosses, followed hop by hop as the routers will.
fn mesh_flow(
    grid: &meshsim_topology::Grid,
    lines: &[Line],
    (r, c): (i32, i32),
    dir: Dir,
    route: Route,
) -> Flow {
    let chip = |(y, x): (i32, i32)| grid.chip(y as usize, x as usize);
    let next = |(y, x): (i32, i32), d: Dir| match d {
        Dir::E => (y, x + 1),
        Dir::W => (y, x - 1),
        Dir::N => (y - 1, x),
        Dir::S => (y + 1, x),
    };
    let first = next((r, c), dir);
    let mut dests = Vec::new();
    let mut edges = vec![(chip((r, c)), chip(first))];
    let mut todo = vec![(route, first)];
    while let Some((route, at)) = todo.pop() {
        let s = route.step();
        if s.write {
            dests.push(chip(at));
        }
        for &(turn, onward) in s.forwards() {
            let Turn::Toward(d) = turn else { unreachable!("2D routes turn by direction") };
            let to = next(at, d);
            edges.push((chip(at), chip(to)));
            todo.push((onward, to));
        }
    }
    let (src, toward) = (chip((r, c)), chip(first));
    let line = lines
        .iter()
        .position(|l| l.chips.windows(2).any(|w| w == [src, toward] || w == [toward, src]))
        .expect("neighbours share a row or a column");
    Flow { src, line, toward, route, dests, edges }
}

/// T: the most flows crossing one (chip, direction) boundary at which that chip also sends.
fn flows_per_link(flows: &[Flow]) -> u64 {
    use std::collections::BTreeMap;
    let mut crossing: BTreeMap<(ChipIdx, ChipIdx), u64> = BTreeMap::new();
    for f in flows {
        for &e in &f.edges {
            *crossing.entry(e).or_default() += 1;
        }
    }
    let sends: std::collections::BTreeSet<(ChipIdx, ChipIdx)> =
        flows.iter().map(|f| (f.src, f.toward)).collect();
    crossing.iter().filter(|(edge, _)| sends.contains(edge)).map(|(_, &n)| n).max().unwrap_or(0)
}

/// Runs one fabric bandwidth point.
pub fn fabric(setup: &Setup, spec: FabricSpec) -> Result<Measured<FabricRow>, BenchError> {
    let size = spec.packet_bytes;
    if size == 0 || size % 16 != 0 {
        return Err(BenchError::BadSize(size));
    }
    let max = spec.max_packet_bytes.unwrap_or(size.max(setup.params.fabric_default_payload_bytes));
    if size > max {
        return Err(BenchError::BadArgument(format!("--packet-size {size} exceeds --max-packet-size {max}")));
    }
    if spec.num_links == 0 {
        return Err(BenchError::BadArgument("--num-links must be at least 1".into()));
    }
    let packets = spec.packets.unwrap_or(spec.test.default_packets());
    crate::common::check_count(("packet per flow", "packets per flow"), packets, crate::common::MAX_PACKETS)?;
    let kind = spec.test.kind();
    let (lines, grid) = lines(setup, kind)?;
    let flows = flows(spec.test, &grid, &lines);
    let t = flows_per_link(&flows);
    let mut m = setup.machine();
    let soc = setup.cluster.soc();
    let config = FabricConfig { kind, max_payload_bytes: max, planes: spec.num_links };
    let fabric = Fabric::new(&setup.cluster, &setup.params, soc.eth_cores.clone(), config, lines.clone())
        .map_err(|e| BenchError::BadArgument(e.to_string()))?;
    let chips = setup.cluster.chips().len();
    let mut programs: Vec<Program> = (0..chips).map(|c| Program::new(ChipIdx(c as u32))).collect();
    fabric.install(&mut programs);
    // Per destination chip: barrier increments expected (one per flow and plane reaching it).
    let mut expected = vec![0u32; chips];
    for f in &flows {
        for d in &f.dests {
            expected[d.0 as usize] += spec.num_links as u32;
        }
    }
    let dev0 = m.device(ChipIdx(0));
    let sync_at = dev0.noc_coord(CoreRef::Worker(SYNC_CORE));
    let sync_sem = dev0.semaphore_addr(CoreRef::Worker(SYNC_CORE), 0);
    // Each (plane, flow)'s receiver: its NoC coordinates, data address and semaphore.
    let dests: Vec<Vec<ChipIdx>> = flows.iter().map(|f| f.dests.clone()).collect();
    let lands = lands(&m, &dests, spec.num_links)?;
    let run = Tally::new(m.new_event("fabric benchmark done"));
    install_syncs(&mut programs, &expected, sync_sem, &run);
    let sync = (sync_at, sync_sem);
    // Sender cores handed out in turn on each chip (tt-metal's placement).
    let columns = soc.worker_columns();
    let mut used = vec![0u32; chips];
    for (r, list) in sender_cores(&fabric, &flows, spec.num_links) {
        let chip = fabric.routers[r].at.chip.0 as usize;
        let n = used[chip];
        used[chip] += 1;
        let core = placement::sender(n, columns);
        let list: Vec<(Flow, Land)> =
            list.into_iter().map(|(plane, i)| (flows[i].clone(), lands[plane][i])).collect();
        install_sender(&mut programs, &fabric, (r, &list, core), &spec, packets, sync, &run);
    }
    let close = run.close;
    // The host closes the fabric once every sender and barrier is done.
    fabric.install_close(&mut programs, |_| Ok::<_, BenchError>(CLOSE_CORE), Rc::new([close]))?;
    let stats = m.launch(programs, |_| Time::ZERO)?;
    let first = run.starts.borrow().iter().copied().min().unwrap_or(Time::ZERO);
    let c_max = (run.end.get() - first).as_ns_f64();
    let gbps = (t * packets * size) as f64 / c_max;
    let row = FabricRow {
        test: spec.test.golden_name().to_owned(),
        noc_send: spec.noc_send.golden_name().to_owned(),
        packet_bytes: size,
        num_links: spec.num_links,
        flows_per_link: t,
        gbps,
        packets_per_s: (t * packets) as f64 / c_max * 1e9,
        sender_gbps_min: run.rates.borrow().iter().copied().fold(f64::INFINITY, f64::min),
        sender_gbps_max: run.rates.borrow().iter().copied().fold(0.0, f64::max),
    };
    Ok(Measured::new(row, stats, &mut m))
}

/// What a fabric benchmark's kernels report as they run: how many are still running (the last
/// raises `close`), when each sender started, when the last barrier completed, and each
/// sender's own rate.
struct Tally {
    close: meshsim_engine::SignalId,
    participants: Rc<Cell<usize>>,
    starts: Rc<RefCell<Vec<Time>>>,
    end: Rc<Cell<Time>>,
    rates: Rc<RefCell<Vec<f64>>>,
}

impl Tally {
    fn new(close: meshsim_engine::SignalId) -> Tally {
        Tally {
            close,
            participants: Rc::new(Cell::new(0)),
            starts: Rc::new(RefCell::new(Vec::new())),
            end: Rc::new(Cell::new(Time::ZERO)),
            rates: Rc::new(RefCell::new(Vec::new())),
        }
    }
}

/// Where a flow's packets land on every chip it reaches: its receiver core, the data address
/// there and the semaphore its fused increments count on.
#[derive(Clone, Copy)]
struct Land {
    at: CoreCoord,
    addr: u64,
    sem: u64,
}

/// Each (plane, flow)'s receiver ([`placement::receivers`]; the flows by the chips they reach):
/// its NoC coordinates, data address and semaphore, the same on every chip.
fn lands(
    m: &meshsim_hw::Machine,
    dests: &[Vec<ChipIdx>],
    planes: usize,
) -> Result<Vec<Vec<Land>>, BenchError> {
    let dev0 = m.device(ChipIdx(0));
    let soc = m.cluster().soc();
    let rows = soc.workers.len() as u32 / soc.worker_columns();
    let placed = placement::receivers(dests, planes, m.cluster().chips().len());
    if placed.iter().flatten().any(|(core, _)| core.y >= rows) {
        return Err(BenchError::BadArgument(format!(
            "more flows land on a chip than its {rows} receiver cores take ({} each)",
            placement::FLOWS_PER_RECEIVER
        )));
    }
    Ok(placed
        .into_iter()
        .map(|plane| {
            plane
                .into_iter()
                .map(|(core, slot)| Land {
                    at: dev0.noc_coord(CoreRef::Worker(core)),
                    addr: DATA_ADDR + slot * DATA_SLOT_BYTES,
                    sem: dev0.semaphore_addr(CoreRef::Worker(core), slot),
                })
                .collect()
        })
        .collect())
}

/// A sync kernel on every chip that expects barrier increments: it records when the last one
/// came.
fn install_syncs(programs: &mut [Program], expected: &[u32], sync_sem: u64, run: &Tally) {
    for (c, &want) in expected.iter().enumerate() {
        if want == 0 {
            continue;
        }
        run.participants.set(run.participants.get() + 1);
        let (e, left, close) = (run.end.clone(), run.participants.clone(), run.close);
        programs[c].create_kernel(CoreRef::Worker(SYNC_CORE), "sync", 0, vec![], move |k| async move {
            k.wait_until(sync_sem, Cond::Ge(want)).await?;
            e.set(e.get().max(k.now()));
            left.set(left.get() - 1);
            if left.get() == 0 {
                k.raise_event(close);
            }
            Ok(())
        });
    }
}

/// The sender cores: one per (chip, router) that flows start at on any plane, holding its
/// flows in order.
fn sender_cores(fabric: &Fabric, flows: &[Flow], planes: usize) -> Vec<(usize, Vec<(usize, usize)>)> {
    let mut cores: Vec<(usize, Vec<(usize, usize)>)> = Vec::new();
    for plane in 0..planes {
        for (i, f) in flows.iter().enumerate() {
            let r = fabric
                .router_facing(f.line, plane, f.src, f.toward)
                .expect("a router toward the flow's first hop");
            match cores.iter_mut().find(|(cr, _)| *cr == r) {
                Some((_, list)) => list.push((plane, i)),
                None => cores.push((r, vec![(plane, i)])),
            }
        }
    }
    cores
}

/// A sender kernel on `core` of router `r`'s chip: it
/// sends `packets` rounds of one packet per flow, resending when its next slot is still
/// filled, then each flow's barrier increment.
fn install_sender(
    programs: &mut [Program],
    fabric: &Rc<Fabric>,
    (r, list, core): (usize, &[(Flow, Land)], CoreCoord),
    spec: &FabricSpec,
    packets: u64,
    (sync_at, sync_sem): (CoreCoord, u64),
    run: &Tally,
) {
    let chip = fabric.routers[r].at.chip;
    let size = spec.packet_bytes;
    let conn = Connection::new(fabric.clone(), r, CONN_BASE);
    let headers: Vec<Header> =
        list.iter().map(|(f, land)| data_header(f, spec.noc_send, size, *land)).collect();
    let syncs: Vec<Header> = list
        .iter()
        .map(|(f, _)| Header {
            cmd: NocCmd::AtomicInc { sem: k_noc(sync_at, sync_sem), inc: 1, flush: false },
            payload: 0,
            route: f.route,
            src_ch: 0,
        })
        .collect();
    run.participants.set(run.participants.get() + 1);
    let (st, left, rates, close) =
        (run.starts.clone(), run.participants.clone(), run.rates.clone(), run.close);
    let bytes = packets * size * list.len() as u64;
    programs[chip.0 as usize].create_kernel(
        CoreRef::Worker(core),
        "sender",
        0,
        vec![],
        move |k| async move {
            conn.open(&k).await?;
            let began = k.now();
            st.borrow_mut().push(began);
            for _ in 0..packets {
                for h in &headers {
                    if conn.next_slot_filled() {
                        conn.resend(&k).await?;
                    } else {
                        conn.send(&k, *h, PAYLOAD_SRC).await?;
                    }
                }
            }
            rates.borrow_mut().push(bytes as f64 / (k.now() - began).as_ns_f64());
            for h in &syncs {
                conn.send(&k, *h, PAYLOAD_SRC).await?;
            }
            conn.close(&k).await?;
            left.set(left.get() - 1);
            if left.get() == 0 {
                k.raise_event(close);
            }
            Ok(())
        },
    );
}

/// The NoC address of `addr` on the core at `at` (of whichever chip the packet lands on).
fn k_noc(at: CoreCoord, addr: u64) -> u64 {
    meshsim_hw::get_noc_addr(at.x, at.y, addr)
}

fn data_header(f: &Flow, mode: NocSend, size: u64, land: Land) -> Header {
    let noc = k_noc;
    let dst = noc(land.at, land.addr);
    let cmd = match mode {
        NocSend::Write => NocCmd::Write { dst },
        NocSend::FusedAtomicInc => NocCmd::FusedWriteInc { dst, sem: noc(land.at, land.sem), inc: 1 },
        NocSend::ScatterWrite => {
            let first = size.div_ceil(2).next_multiple_of(16);
            NocCmd::Scatter { chunks: [(dst, first), (dst + first, size - first), (0, 0), (0, 0)], count: 2 }
        }
    };
    Header { cmd, payload: size, route: f.route, src_ch: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshsim_hw::Params;
    use meshsim_topology::builtin;

    /// T from the flows matches the table in `shared/fabric.md` for every test on a T3000.
    #[test]
    fn flows_per_link_follow_the_profiler_rule() {
        let setup = Setup::new(builtin::cluster("t3000").unwrap(), Params::default());
        for (test, want) in [
            (FabricTest::NeighborExchange, 1),
            (FabricTest::LinearMulticast, 3),
            (FabricTest::UnidirLinearMulticast, 2),
            (FabricTest::SingleSenderLinearUnicast, 3),
            (FabricTest::FullRingMulticast, 7),
            (FabricTest::FullRingUnicast, 7),
            (FabricTest::HalfRingMulticast, 4),
            (FabricTest::MeshMulticast, 6),
            (FabricTest::SingleSenderMeshUnicast, 4),
        ] {
            let (lines, grid) = lines(&setup, test.kind()).unwrap();
            assert_eq!(flows_per_link(&flows(test, &grid, &lines)), want, "{test:?}");
        }
    }

    /// Every chip of a mesh multicast's row and the rows its trunks reach is written once per
    /// flow that covers it: on a T3000 each chip receives from all seven others... through
    /// exactly one flow each.
    #[test]
    fn mesh_multicast_reaches_every_other_chip_once_per_sender() {
        let setup = Setup::new(builtin::cluster("t3000").unwrap(), Params::default());
        let (lines, grid) = lines(&setup, FabricKind::Mesh).unwrap();
        let flows = flows(FabricTest::MeshMulticast, &grid, &lines);
        for &src in &grid.at {
            let mut got: Vec<ChipIdx> =
                flows.iter().filter(|f| f.src == src).flat_map(|f| f.dests.clone()).collect();
            got.sort();
            let mut want: Vec<ChipIdx> = grid.at.iter().copied().filter(|&c| c != src).collect();
            want.sort();
            assert_eq!(got, want, "chip {src:?}");
        }
        let single = flows_per_link(&self::flows(FabricTest::SingleSenderMeshUnicast, &grid, &lines));
        assert_eq!(single, 4);
    }
}

/// The fabric latency test's topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencyTopology {
    /// The 1D line fabric (every row and column a line).
    Line,
    /// The 1D ring fabric on the mesh's perimeter.
    Ring,
    /// The 2D mesh fabric.
    Mesh,
}

impl LatencyTopology {
    /// The fabric it runs on.
    fn kind(self) -> FabricKind {
        match self {
            LatencyTopology::Line => FabricKind::Linear,
            LatencyTopology::Ring => FabricKind::Ring,
            LatencyTopology::Mesh => FabricKind::Mesh,
        }
    }

    /// The golden file's test name.
    fn test_name(self) -> &'static str {
        match self {
            LatencyTopology::Line => "LatencyLinearUnicast",
            LatencyTopology::Ring => "LatencyRingUnicast",
            LatencyTopology::Mesh => "LatencyMeshUnicast",
        }
    }
}

/// One fabric latency point.
#[derive(Clone, Copy, Debug)]
pub struct FabricLatencySpec {
    /// Line or ring fabric.
    pub topology: LatencyTopology,
    /// Write, or write then increment (fused).
    pub noc_send: NocSend,
    /// Payload bytes of a ping.
    pub payload_bytes: u64,
    /// Pings measured.
    pub samples: u64,
}

/// One fabric latency point (the golden file's columns).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FabricLatencyRow {
    /// The golden file's test name.
    pub test: String,
    /// The golden file's NoC command name.
    pub noc_send: String,
    /// Payload bytes.
    pub payload_bytes: u64,
    /// Fastest round trip minus the responder's time, ns.
    pub net_min_ns: f64,
    /// Mean of the same, ns.
    pub net_avg_ns: f64,
    /// Its 99th percentile (`sorted[floor(0.99 n)]`), ns.
    pub net_p99_ns: f64,
    /// The responder's mean detect-to-issue time, ns.
    pub responder_avg_ns: f64,
}

/// Where pings and echoes land, and their semaphore, on both chips' core (0, 0).
const PING_BUF: u64 = 0x30000;
const PING_SRC: u64 = 0x38000;

/// Runs the fabric latency test: a sender on chip 0 (the mesh's first position) core (0, 0)
/// pings a responder on chip 1, one hop away over link 0; the responder echoes each ping.
pub fn fabric_latency(
    setup: &Setup,
    spec: FabricLatencySpec,
) -> Result<Measured<FabricLatencyRow>, BenchError> {
    let size = spec.payload_bytes;
    let default = setup.params.fabric_default_payload_bytes;
    if size == 0 || size % 16 != 0 || size > default {
        return Err(BenchError::BadArgument(format!(
            "--payload {size}: must be a positive multiple of 16 up to {default} B"
        )));
    }
    crate::common::check_count(("sample", "samples"), spec.samples, crate::common::MAX_SAMPLES)?;
    let kind = spec.topology.kind();
    let (fabric, line, (a, b), mut programs) = latency_fabric(setup, kind)?;
    let mut m = setup.machine();
    let core = CoreRef::Worker(CoreCoord { x: 0, y: 0 });
    let dev = m.device(a);
    let at = dev.noc_coord(core);
    let sem = dev.semaphore_addr(core, 0);
    let fused = spec.noc_send == NocSend::FusedAtomicInc;
    let header = ping_header(fused, size, (at, sem));
    let close = m.new_event("fabric latency done");
    let raw = Rc::new(RefCell::new(Vec::new()));
    let resp = Rc::new(RefCell::new(Vec::new()));
    let samples = spec.samples;
    let stamp = PING_SRC + size - 4;
    let landed = PING_BUF + size - 4;
    let mesh = kind == FabricKind::Mesh;
    for (me, other, times) in [(a, b, raw.clone()), (b, a, resp.clone())] {
        let r = fabric.router_facing(line, 0, me, other).expect("a router between chips 0 and 1");
        let route = match (mesh, me == a) {
            (false, _) => Route::unicast(1),
            (true, true) => Route::mesh_unicast(0, 1).1,
            (true, false) => Route::mesh_unicast(0, -1).1,
        };
        let conn = Connection::new(fabric.clone(), r, CONN_BASE);
        let pinger = me == a;
        programs[me.0 as usize].create_kernel(
            core,
            if pinger { "ping" } else { "echo" },
            0,
            vec![],
            move |k| async move {
                conn.open(&k).await?;
                for i in 0..samples {
                    if pinger {
                        k.write_u32(stamp, i as u32 + 1)?;
                        conn.send(&k, header(route), PING_SRC).await?;
                        let t0 = k.now();
                        k.noc_async_writes_flushed().await;
                        arrived(&k, i, fused, (sem, landed)).await?;
                        times.borrow_mut().push(k.now() - t0);
                    } else {
                        arrived(&k, i, fused, (sem, landed)).await?;
                        let t0 = k.now();
                        k.write_u32(stamp, i as u32 + 1)?;
                        conn.send(&k, header(route), PING_SRC).await?;
                        times.borrow_mut().push(k.now() - t0);
                    }
                }
                conn.close(&k).await?;
                if pinger {
                    k.raise_event(close);
                }
                Ok(())
            },
        );
    }
    fabric.install_close(&mut programs, |_| Ok::<_, BenchError>(CLOSE_CORE), Rc::new([close]))?;
    let stats = m.launch(programs, |_| Time::ZERO)?;
    let row = latency_row(&spec, &raw.borrow(), &resp.borrow());
    Ok(Measured::new(row, stats, &mut m))
}

/// The latency test's fabric of `kind` on the cluster's lines, with the line and the two
/// chips (row 0, columns 0 and 1) that ping each other, and every chip's program with its
/// routers installed.
#[allow(clippy::type_complexity)]
fn latency_fabric(
    setup: &Setup,
    kind: FabricKind,
) -> Result<(Rc<Fabric>, usize, (ChipIdx, ChipIdx), Vec<Program>), BenchError> {
    let (lines, grid) = lines(setup, kind)?;
    let (a, b) = (grid.chip(0, 0), grid.chip(0, 1));
    let line =
        lines.iter().position(|l| l.chips.contains(&a) && l.chips.contains(&b)).expect("a line holds row 0");
    let soc = setup.cluster.soc();
    let default = setup.params.fabric_default_payload_bytes;
    let config = FabricConfig { kind, max_payload_bytes: default, planes: 1 };
    let fabric = Fabric::new(&setup.cluster, &setup.params, soc.eth_cores.clone(), config, lines)
        .map_err(|e| BenchError::BadArgument(e.to_string()))?;
    let chips = setup.cluster.chips().len();
    let mut programs: Vec<Program> = (0..chips).map(|c| Program::new(ChipIdx(c as u32))).collect();
    fabric.install(&mut programs);
    Ok((fabric, line, (a, b), programs))
}

/// Waits for ping (or echo) `i` to have landed: its increment of `sem` (fused), or its stamp
/// in the last word `landed` of its payload.
async fn arrived(
    k: &meshsim_hw::Kernel,
    i: u64,
    fused: bool,
    (sem, landed): (u64, u64),
) -> Result<(), meshsim_hw::HwError> {
    if fused {
        k.wait_until(sem, Cond::Ge(i as u32 + 1)).await?;
    } else {
        k.wait_until(landed, Cond::Eq(i as u32 + 1)).await?;
    }
    Ok(())
}

/// A ping's header: its payload written to the responder's buffer (and, `fused`, its
/// semaphore incremented) on the worker at `at`.
fn ping_header(fused: bool, size: u64, (at, sem): (CoreCoord, u64)) -> impl Fn(Route) -> Header + Copy {
    move |route: Route| {
        let dst = k_noc(at, PING_BUF);
        let cmd = if fused {
            NocCmd::FusedWriteInc { dst, sem: k_noc(at, sem), inc: 1 }
        } else {
            NocCmd::Write { dst }
        };
        Header { cmd, payload: size, route, src_ch: 0 }
    }
}

/// The golden file's row from the pinger's round trips (`raw`) and the responder's turnarounds
/// (`resp`): the net latency is one less the other, sample by sample.
fn latency_row(spec: &FabricLatencySpec, raw: &[Time], resp: &[Time]) -> FabricLatencyRow {
    let mut net: Vec<f64> = raw.iter().zip(resp.iter()).map(|(r, s)| (*r - *s).as_ns_f64()).collect();
    net.sort_by(f64::total_cmp);
    let n = net.len();
    FabricLatencyRow {
        test: spec.topology.test_name().to_owned(),
        noc_send: spec.noc_send.golden_name().to_owned(),
        payload_bytes: spec.payload_bytes,
        net_min_ns: net[0],
        net_avg_ns: net.iter().sum::<f64>() / n as f64,
        net_p99_ns: net[(n as f64 * 0.99).floor() as usize],
        responder_avg_ns: resp.iter().map(|t| t.as_ns_f64()).sum::<f64>() / n as f64,
    }
}
