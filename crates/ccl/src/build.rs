//! Page movement every op's kernels share: reading and writing the pages of an interleaved
//! tensor over the NoC, and the host's reads and writes of tensor pages before and after a run.

use meshsim_engine::TaskResult;
use meshsim_hw::{CoreRef, Kernel, Machine};
use meshsim_topology::ChipIdx;
use meshsim_topology::soc::CoreCoord;

use crate::op::OpError;
use crate::tensor::{Memory, Placement};

/// NoC coordinates of bank `bank` of a placement: a DRAM endpoint or a worker core.
fn endpoint(k: &Kernel, place: &Placement, bank: u64) -> CoreCoord {
    match place.memory {
        Memory::Dram => k.dram_endpoint(bank as usize),
        Memory::L1 => k.worker_noc_coord(bank as usize),
    }
}

/// Reads the given pages of an interleaved tensor into consecutive L1 pages at `at`.
pub(crate) async fn read_pages(
    k: &Kernel,
    place: &Placement,
    pages: impl Iterator<Item = u64>,
    at: u64,
) -> TaskResult {
    for (i, q) in pages.enumerate() {
        let (bank, addr) = place.page(q);
        let d = endpoint(k, place, bank);
        k.noc_async_read(k.get_noc_addr(d.x, d.y, addr), at + i as u64 * place.page_bytes, place.page_bytes)
            .await?;
    }
    k.noc_async_read_barrier().await?;
    Ok(())
}

/// Writes consecutive L1 pages at `at` to the given pages of an interleaved tensor.
pub(crate) async fn write_pages(
    k: &Kernel,
    place: &Placement,
    pages: impl Iterator<Item = u64>,
    at: u64,
) -> TaskResult {
    for (i, q) in pages.enumerate() {
        let (bank, addr) = place.page(q);
        let d = endpoint(k, place, bank);
        k.noc_async_write(at + i as u64 * place.page_bytes, k.get_noc_addr(d.x, d.y, addr), place.page_bytes)
            .await?;
    }
    Ok(())
}

/// The worker whose L1 is bank `bank` of an L1-interleaved tensor on `m`'s chips.
fn bank_core(m: &Machine, bank: u64) -> CoreRef {
    CoreRef::Worker(m.cluster().soc().logical_worker(bank))
}

/// Host write of one page (before a run).
pub(crate) fn host_write(
    m: &Machine,
    chip: ChipIdx,
    place: &Placement,
    bank: u64,
    addr: u64,
    data: &[u8],
) -> Result<(), OpError> {
    match place.memory {
        Memory::Dram => m.write_dram(chip, bank as usize, addr, data),
        Memory::L1 => m.write_l1(chip, bank_core(m, bank), addr, data),
    }
    .map_err(|e| OpError(e.to_string()))
}

/// Host read of one page (after a run).
pub(crate) fn host_read(
    m: &Machine,
    chip: ChipIdx,
    place: &Placement,
    bank: u64,
    addr: u64,
    len: u64,
) -> Result<Vec<u8>, String> {
    match place.memory {
        Memory::Dram => m.read_dram(chip, bank as usize, addr, len),
        Memory::L1 => m.read_l1(chip, bank_core(m, bank), addr, len),
    }
    .map_err(|e| e.to_string())
}
