//! One core's DRAM page reads, as tt-metal's data-movement test "DRAM Interleaved Packet Sizes"
//! measures them (`shared/fabric.md` §12): one Tensix core at logical (0, 0), on its second
//! data-movement RISC and NoC 1, issues `depth` back-to-back reads of `page_bytes` each to
//! consecutive addresses of one DRAM bank (channel 0), then one read barrier; the figure is the
//! cycles from the first issue to the barrier's return.
//!
//! ```text
//!  core (0,0) ── read ×depth ──► NoC1 ──► DRAM channel 0 endpoint ──► bank
//!        ▲                                                              │
//!        └──────────── data ◄── NoC1 ◄───────────────────────────────────┘
//!  barrier returns when the last page has landed
//! ```
//!
//! It separates what a page read costs once (issue, NoC, the bank's access latency) from what
//! reads in flight share (the bank's stream rate, the core's issue rate): the depth at which
//! the time stops growing with the first and starts growing with the second.

use std::cell::Cell;
use std::rc::Rc;

use meshsim_engine::Time;
use meshsim_hw::{CoreRef, Program};
use meshsim_topology::ChipIdx;
use meshsim_topology::soc::CoreCoord;
use serde::Serialize;

use crate::common::{BenchError, Measured, Setup};

/// The published points (`shared/fabric.md` §12, tt-metal's
/// `tests/tt_metal/tt_metal/data_movement/documentation/perf_plots/*/DRAM Interleaved Packet
/// Sizes.md`): (page bytes, reads in flight, Wormhole cycles at 1 GHz, Blackhole cycles at
/// 1.35 GHz).
pub const DRAM_READS: [(u64, u64, f64, f64); 16] = [
    (64, 1, 383.0, 479.0),
    (64, 4, 474.0, 547.0),
    (64, 16, 711.0, 1007.0),
    (64, 64, 1645.0, 2689.0),
    (2048, 1, 463.0, 578.0),
    (2048, 4, 716.0, 847.0),
    (2048, 16, 1880.0, 1942.0),
    (2048, 64, 6229.0, 6351.0),
    (4096, 1, 552.0, 673.0),
    (4096, 4, 1059.0, 1187.0),
    (4096, 16, 3387.0, 3354.0),
    (4096, 64, 12077.0, 12576.0),
    (8192, 1, 871.0, 860.0),
    (8192, 4, 1729.0, 1885.0),
    (8192, 16, 6390.0, 6072.0),
    (8192, 64, 23797.0, 22766.0),
];

/// The points' tolerance: the published cycles of a single read are not monotone in its size
/// on Wormhole (8 KiB is slower per byte than 4 KiB alone, not in a queue), so one tolerance
/// covers what a latency plus a stream rate can reproduce.
pub const DRAM_TOLERANCE_PCT: f64 = 15.0;

/// Most reads a point may have in flight (the test's deepest queue is 64; 256 pages of 8 KiB
/// still fit a Tensix L1).
pub const MAX_DEPTH: u64 = 256;

/// What a point is asked to do.
#[derive(Clone, Copy, Debug)]
pub struct DramReadSpec {
    /// Bytes of each read.
    pub page_bytes: u64,
    /// Reads issued before the one barrier.
    pub depth: u64,
}

/// One measured point.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DramReadRow {
    /// Bytes of each read.
    pub page_bytes: u64,
    /// Reads in flight.
    pub depth: u64,
    /// Core cycles from the first issue to the barrier's return.
    pub cycles: f64,
    /// Bytes read per core cycle over the whole point.
    pub bytes_per_cycle: f64,
}

/// The reading core: logical (0, 0), as the test places it.
const READER: CoreCoord = CoreCoord { x: 0, y: 0 };
/// The NoC its reads go on (RISCV_1's).
const READER_NOC: usize = 1;
/// The DRAM channel read.
const BANK: usize = 0;
/// Where in the reader's L1 the pages land.
const L1_BASE: u64 = 0x1_0000;

/// Runs one point on the first chip of `setup`'s cluster.
pub fn dram_read(setup: &Setup, spec: DramReadSpec) -> Result<Measured<DramReadRow>, BenchError> {
    let DramReadSpec { page_bytes, depth } = spec;
    if page_bytes == 0 || page_bytes % 16 != 0 {
        return Err(BenchError::BadArgument(format!(
            "page size {page_bytes} B is not a positive multiple of 16 B (a NoC read's alignment)"
        )));
    }
    crate::common::check_count(("read", "reads"), depth, MAX_DEPTH)?;
    let need = L1_BASE + depth * page_bytes;
    if need > setup.params.worker_l1_bytes {
        return Err(BenchError::BadArgument(format!(
            "{depth} reads of {page_bytes} B need {need} B of the reader's L1, which holds {} B",
            setup.params.worker_l1_bytes
        )));
    }
    let mut m = setup.machine();
    let took = Rc::new(Cell::new(Time::ZERO));
    let mut program = Program::new(ChipIdx(0));
    let t = took.clone();
    program.create_kernel(CoreRef::Worker(READER), "dram reader", READER_NOC, vec![], move |k| async move {
        let at = k.dram_endpoint(BANK);
        let t0 = k.now();
        for i in 0..depth {
            let src = k.get_noc_addr(at.x, at.y, i * page_bytes);
            k.noc_async_read(src, L1_BASE + i * page_bytes, page_bytes).await?;
        }
        k.noc_async_read_barrier().await?;
        t.set(k.now() - t0);
        Ok(())
    });
    let stats = m.launch(vec![program], |_| Time::ZERO)?;
    let cycles = took.get().as_ps() as f64 * setup.params.aiclk_mhz as f64 / 1e6;
    let row =
        DramReadRow { page_bytes, depth, cycles, bytes_per_cycle: (depth * page_bytes) as f64 / cycles };
    Ok(Measured::new(row, stats, &mut m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshsim_hw::Params;
    use meshsim_topology::Arch;

    fn setup(arch: Arch, cluster: &str) -> Setup {
        Setup::new(meshsim_topology::builtin::cluster(cluster).unwrap(), Params::of(arch).unwrap())
    }

    #[test]
    fn reads_in_flight_overlap_until_the_endpoint_streams_at_its_rate() {
        let s = setup(Arch::Blackhole, "p150");
        let time = |page, depth| dram_read(&s, DramReadSpec { page_bytes: page, depth }).unwrap().row.cycles;
        // Four reads cost far less than four single reads: their latencies overlap.
        assert!(time(2048, 4) < 2.0 * time(2048, 1));
        // Deep queues of large pages stream at the endpoint's rate.
        let rate = 48.0 * 8192.0 / (time(8192, 64) - time(8192, 16));
        let want = s.params.dram_endpoint_bytes_per_cycle as f64;
        assert!((rate - want).abs() / want < 0.02, "{rate} B/cycle against {want}");
        // Deep queues of small pages are bound by issuing them.
        let per_read = (time(64, 64) - time(64, 16)) / 48.0;
        assert!((per_read - s.params.noc_read_issue_cycles as f64).abs() < 1.0, "{per_read} cycles a read");
    }

    #[test]
    fn bad_points_are_refused() {
        let s = setup(Arch::WormholeB0, "n300");
        assert!(matches!(
            dram_read(&s, DramReadSpec { page_bytes: 100, depth: 1 }),
            Err(BenchError::BadArgument(_))
        ));
        assert!(dram_read(&s, DramReadSpec { page_bytes: 8192, depth: 0 }).is_err());
        assert!(dram_read(&s, DramReadSpec { page_bytes: 1 << 20, depth: 64 }).is_err());
    }
}
