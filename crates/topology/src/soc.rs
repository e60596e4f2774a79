//! SoC descriptors: where a chip's cores sit on its NoC grid, and how big their memories are.
//!
//! The format is the one tt-metal and tt-umd use (`grid`, `eth`, `functional_workers`, `dram`,
//! `worker_l1_size`, ...); cores are written `x-y` in NoC0 coordinates. meshsim's own descriptors are
//! embedded per architecture ([`crate::Arch::soc`]).

use std::fmt;

use serde::Deserialize;

use crate::error::{TopologyError, text_of};

/// A core's NoC0 coordinates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CoreCoord {
    /// Column, `0..grid.x`.
    pub x: u32,
    /// Row, `0..grid.y`.
    pub y: u32,
}

impl fmt::Display for CoreCoord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.x, self.y)
    }
}

#[derive(Deserialize)]
struct RawGrid {
    x_size: u32,
    y_size: u32,
}

/// The descriptor as written; unknown keys (`features`, `arc`, ...) are ignored.
#[derive(Deserialize)]
struct RawSoc {
    grid: RawGrid,
    eth: Vec<String>,
    functional_workers: Vec<String>,
    dram: Vec<Vec<String>>,
    /// meshsim's addition: per NoC, the endpoint of each channel that NoC's reads and writes
    /// go through.
    #[serde(default)]
    dram_noc_endpoints: Option<Vec<Vec<String>>>,
    worker_l1_size: u64,
    eth_l1_size: u64,
    dram_bank_size: u64,
    arch_name: String,
}

/// A resolved SoC descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocDescriptor {
    /// Architecture name (`WORMHOLE_B0`).
    pub arch_name: String,
    /// NoC grid columns.
    pub grid_x: u32,
    /// NoC grid rows.
    pub grid_y: u32,
    /// Ethernet cores by channel.
    pub eth_cores: Vec<CoreCoord>,
    /// Tensix worker cores, row-major.
    pub workers: Vec<CoreCoord>,
    /// DRAM channels, each with the cores (NoC endpoints) that reach it.
    pub dram: Vec<Vec<CoreCoord>>,
    /// Per NoC, the endpoint of each channel its traffic goes through, when the descriptor
    /// says (`dram_noc_endpoints`); otherwise each channel's first.
    dram_by_noc: Option<[Vec<CoreCoord>; 2]>,
    /// Tensix L1 bytes.
    pub worker_l1_bytes: u64,
    /// ERISC L1 bytes (all of it; the kernel-usable window is a model parameter).
    pub eth_l1_bytes: u64,
    /// Bytes per DRAM channel.
    pub dram_bank_bytes: u64,
    /// Columns of the worker grid (distinct worker x coordinates).
    worker_columns: u32,
}

impl SocDescriptor {
    /// Parses a descriptor from text; `file` names it in errors.
    pub fn parse(file: &str, bytes: &[u8]) -> Result<SocDescriptor, TopologyError> {
        let text = text_of(file, bytes)?;
        let raw: RawSoc = TopologyError::parse_yaml(file, text)?;
        let (gx, gy) = (raw.grid.x_size, raw.grid.y_size);
        let core = |key: &str, i: usize, s: &str| -> Result<CoreCoord, TopologyError> {
            let bad = || {
                TopologyError::invalid(
                    file,
                    format!("{key}[{i}]"),
                    format!("'{s}' is not a core x-y inside the {gx}x{gy} grid"),
                )
            };
            let (x, y) = s.trim().split_once('-').ok_or_else(bad)?;
            let c = CoreCoord { x: x.parse().map_err(|_| bad())?, y: y.parse().map_err(|_| bad())? };
            if c.x < gx && c.y < gy { Ok(c) } else { Err(bad()) }
        };
        let list = |key: &str, v: &[String]| -> Result<Vec<CoreCoord>, TopologyError> {
            v.iter().enumerate().map(|(i, s)| core(key, i, s)).collect()
        };
        let workers = list("functional_workers", &raw.functional_workers)?;
        let dram: Vec<Vec<CoreCoord>> =
            raw.dram.iter().map(|ch| list("dram", ch)).collect::<Result<_, _>>()?;
        let dram_by_noc = match &raw.dram_noc_endpoints {
            None => None,
            Some(nocs) => {
                let bad = |why: String| TopologyError::invalid(file, "dram_noc_endpoints", why);
                if nocs.len() != 2 {
                    return Err(bad(format!("needs a list per NoC (2), got {}", nocs.len())));
                }
                let mut by = [Vec::new(), Vec::new()];
                for (noc, ends) in nocs.iter().enumerate() {
                    let ends = list("dram_noc_endpoints", ends)?;
                    if ends.len() != dram.len() {
                        return Err(bad(format!(
                            "NoC{noc} lists {} endpoints for {} channels",
                            ends.len(),
                            dram.len()
                        )));
                    }
                    if let Some(ch) = (0..ends.len()).find(|&ch| !dram[ch].contains(&ends[ch])) {
                        return Err(bad(format!(
                            "NoC{noc}'s endpoint {} is not one of channel {ch}'s",
                            ends[ch]
                        )));
                    }
                    by[noc] = ends;
                }
                Some(by)
            }
        };
        let mut xs: Vec<u32> = workers.iter().map(|c| c.x).collect();
        xs.sort_unstable();
        xs.dedup();
        Ok(SocDescriptor {
            arch_name: raw.arch_name,
            worker_columns: xs.len().max(1) as u32,
            grid_x: gx,
            grid_y: gy,
            eth_cores: list("eth", &raw.eth)?,
            workers,
            dram,
            dram_by_noc,
            worker_l1_bytes: raw.worker_l1_size,
            eth_l1_bytes: raw.eth_l1_size,
            dram_bank_bytes: raw.dram_bank_size,
        })
    }

    /// The Ethernet core of a channel.
    pub fn eth_core(&self, chan: u8) -> Option<CoreCoord> {
        self.eth_cores.get(chan as usize).copied()
    }

    /// Columns of the worker grid (distinct worker x coordinates): logical worker `(x, y)` is
    /// `workers[y * columns + x]`.
    pub fn worker_columns(&self) -> u32 {
        self.worker_columns
    }

    /// The NoC coordinates of logical worker `(x, y)`.
    pub fn worker(&self, logical: CoreCoord) -> CoreCoord {
        self.workers[(logical.y * self.worker_columns() + logical.x) as usize]
    }

    /// The logical coordinates of the `k`-th worker, row-major.
    pub fn logical_worker(&self, k: u64) -> CoreCoord {
        let cols = self.worker_columns() as u64;
        CoreCoord { x: (k % cols) as u32, y: (k / cols) as u32 }
    }

    /// The endpoint NoC `noc`'s reads and writes of DRAM channel `bank` go through.
    pub fn dram_endpoint(&self, bank: usize, noc: usize) -> CoreCoord {
        match &self.dram_by_noc {
            Some(by) => by[noc.min(1)][bank],
            None => self.dram[bank][0],
        }
    }

    /// The channel of an Ethernet core.
    pub fn eth_channel(&self, core: CoreCoord) -> Option<u8> {
        self.eth_cores.iter().position(|&c| c == core).map(|i| i as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wormhole_has_16_ethernet_cores_and_an_8x10_worker_grid() {
        let soc = crate::Arch::WormholeB0.soc().unwrap();
        assert_eq!(soc.eth_cores.len(), 16);
        assert_eq!(soc.eth_core(2), Some(CoreCoord { x: 8, y: 0 }));
        assert_eq!(soc.eth_channel(CoreCoord { x: 4, y: 6 }), Some(15));
        assert_eq!(soc.workers.len(), 80);
        assert!(soc.workers.iter().all(|c| c.x != 0 && c.x != 5 && c.y != 0 && c.y != 6));
        assert_eq!((soc.grid_x, soc.grid_y), (10, 12));
    }

    /// Blackhole's DRAM traffic goes through a different endpoint of each channel per NoC
    /// (`shared/fabric.md` §12); a descriptor without the list uses each channel's first; a
    /// listed endpoint that is not one of its channel's is refused by name.
    #[test]
    fn each_noc_reaches_dram_through_its_own_endpoint() {
        let bh = crate::Arch::Blackhole.soc().unwrap();
        assert_eq!(bh.dram_endpoint(0, 0), CoreCoord { x: 0, y: 11 });
        assert_eq!(bh.dram_endpoint(0, 1), CoreCoord { x: 0, y: 1 });
        assert_eq!(bh.dram_endpoint(5, 0), CoreCoord { x: 9, y: 3 });
        let wh = crate::Arch::WormholeB0.soc().unwrap();
        assert_eq!((wh.dram_endpoint(1, 0), wh.dram_endpoint(1, 1)), (wh.dram[1][0], wh.dram[1][0]));
        let text = b"grid: {x_size: 4, y_size: 3}\neth: []\nfunctional_workers: []\ndram: [[0-0, 0-1]]\ndram_noc_endpoints: [[0-1], [0-2]]\nworker_l1_size: 1\neth_l1_size: 1\ndram_bank_size: 1\narch_name: X\n";
        let err = SocDescriptor::parse("x.yaml", text).unwrap_err().to_string();
        assert!(
            err.contains("dram_noc_endpoints")
                && err.contains("NoC1's endpoint 0-2 is not one of channel 0's"),
            "{err}"
        );
    }

    #[test]
    fn logical_workers_are_row_major_over_the_descriptors_own_columns() {
        let soc = crate::Arch::WormholeB0.soc().unwrap();
        assert_eq!(soc.worker_columns(), 8);
        for k in 0..soc.workers.len() {
            assert_eq!(soc.worker(soc.logical_worker(k as u64)), soc.workers[k], "worker {k}");
        }
        // A grid of 3 columns: worker 4 is the second of the second row.
        let text = b"grid: {x_size: 4, y_size: 3}\neth: []\nfunctional_workers: [1-1, 2-1, 3-1, 1-2, 2-2, 3-2]\ndram: []\nworker_l1_size: 1\neth_l1_size: 1\ndram_bank_size: 1\narch_name: X\n";
        let small = SocDescriptor::parse("x.yaml", text).unwrap();
        assert_eq!(small.logical_worker(4), CoreCoord { x: 1, y: 1 });
        assert_eq!(small.worker(CoreCoord { x: 1, y: 1 }), CoreCoord { x: 2, y: 2 });
        assert!(crate::Arch::Grayskull.soc().is_none());
    }

    #[test]
    fn blackhole_has_14_ethernet_cores_on_row_1_and_a_14x10_worker_grid() {
        let soc = crate::Arch::Blackhole.soc().unwrap();
        assert_eq!((soc.grid_x, soc.grid_y), (17, 12));
        assert_eq!(soc.eth_cores.len(), 14);
        assert!(soc.eth_cores.iter().all(|c| c.y == 1));
        assert_eq!(soc.eth_core(1), Some(CoreCoord { x: 16, y: 1 }));
        assert_eq!((soc.workers.len(), soc.worker_columns()), (140, 14));
        assert_eq!(soc.dram.len(), 8);
        assert_eq!(soc.dram_bank_bytes, 4 << 30);
    }

    #[test]
    fn a_core_outside_the_grid_is_rejected_with_its_key() {
        let text = b"grid: {x_size: 2, y_size: 2}\neth: [1-5]\nfunctional_workers: []\ndram: []\nworker_l1_size: 1\neth_l1_size: 1\ndram_bank_size: 1\narch_name: X\n";
        let err = SocDescriptor::parse("x.yaml", text).unwrap_err().to_string();
        assert_eq!(err, "x.yaml: eth[0]: '1-5' is not a core x-y inside the 2x2 grid");
    }
}
