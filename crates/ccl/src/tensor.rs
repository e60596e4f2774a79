//! Tensors: shape `[w, z, y, x]`, a dtype, a layout, and pages interleaved across DRAM banks.
//!
//! In tile layout a page is one 32x32 tile (bf16 2048 B, bfp8 1088 B, fp32 and uint32 4096 B)
//! and pages run row-major over the tile grid `(w, z, y/32, x/32)`; in row-major layout a page is
//! one row of `x` elements and pages run over `(w, z, y)`. Page `p` of an interleaved tensor lives
//! in DRAM bank `p % banks` at `base + (p / banks) * page_bytes`.

use meshsim_topology::soc::SocDescriptor;
use std::fmt;
use std::str::FromStr;

/// Element types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    /// bfloat16: 2 B per element, 2048 B tiles.
    Bf16,
    /// Block floating point, 8-bit mantissas with a shared exponent per 16 values: 1088 B tiles
    /// (tile layout only).
    Bfp8,
    /// 32-bit float.
    Fp32,
    /// 32-bit unsigned integer.
    Uint32,
}

impl DType {
    /// Bytes of one 32x32 tile.
    pub fn tile_bytes(self) -> u64 {
        match self {
            DType::Bf16 => 2048,
            DType::Bfp8 => 1088,
            DType::Fp32 | DType::Uint32 => 4096,
        }
    }

    /// Bytes per element in row-major layout (`None` for block formats).
    pub fn element_bytes(self) -> Option<u64> {
        match self {
            DType::Bf16 => Some(2),
            DType::Bfp8 => None,
            DType::Fp32 | DType::Uint32 => Some(4),
        }
    }
}

impl FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        // meshsim's names, and ttnn's (`ttnn.bfloat8_b`, `DataType::BFLOAT8_B`).
        let name = s.rsplit(['.', ':']).next().unwrap_or(s).to_ascii_lowercase();
        match name.as_str() {
            "bf16" | "bfloat16" => Ok(DType::Bf16),
            "bfp8" | "bfp8_b" | "bfloat8_b" => Ok(DType::Bfp8),
            "fp32" | "float32" => Ok(DType::Fp32),
            "uint32" | "u32" => Ok(DType::Uint32),
            _ => Err(format!(
                "unknown dtype '{s}' (bf16, bfp8, fp32, uint32; or ttnn's bfloat16, bfloat8_b, float32, uint32)"
            )),
        }
    }
}

crate::named::deserialize_by_name!(DType);

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DType::Bf16 => "bf16",
            DType::Bfp8 => "bfp8",
            DType::Fp32 => "fp32",
            DType::Uint32 => "uint32",
        })
    }
}

/// Memory layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// 32x32 tiles.
    Tile,
    /// Rows of `x` elements.
    RowMajor,
}

/// A tensor's shape, type and paging.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// `[w, z, y, x]`.
    pub shape: [u64; 4],
    /// Element type.
    pub dtype: DType,
    /// Layout.
    pub layout: Layout,
}

/// The largest tensor, in bytes (1 TiB: far beyond any chip's DRAM, far below where the
/// shape's products would overflow).
pub const MAX_TENSOR_BYTES: u64 = 1 << 40;

/// A tensor specification that cannot exist.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{0}")]
pub struct TensorError(pub String);

impl TensorSpec {
    /// Checks the shape against the layout: tiles need `y` and `x` multiples of 32, bfp8 needs
    /// tiles, row-major rows must be a multiple of 16 B.
    pub fn new(shape: [u64; 4], dtype: DType, layout: Layout) -> Result<TensorSpec, TensorError> {
        if shape.contains(&0) {
            return Err(TensorError(format!("shape {shape:?} has a zero dimension")));
        }
        // Every later product of the shape (pages, bytes, offsets) stays below this.
        let elements = shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
        let bytes = elements.and_then(|n| n.checked_mul(dtype.element_bytes().unwrap_or(1)));
        if bytes.is_none_or(|b| b > MAX_TENSOR_BYTES) {
            return Err(TensorError(format!(
                "shape {shape:?} of {dtype} is more than {} TiB, the largest tensor meshsim models",
                MAX_TENSOR_BYTES >> 40
            )));
        }
        match layout {
            Layout::Tile if shape[2] % 32 != 0 || shape[3] % 32 != 0 => {
                return Err(TensorError(format!(
                    "tile layout needs y and x multiples of 32, shape is {shape:?}"
                )));
            }
            Layout::RowMajor => {
                let e = dtype
                    .element_bytes()
                    .ok_or_else(|| TensorError(format!("{dtype} exists only in tile layout")))?;
                if shape[3] * e % 16 != 0 {
                    return Err(TensorError(format!(
                        "row-major rows of {} B are not a multiple of 16 B",
                        shape[3] * e
                    )));
                }
            }
            _ => {}
        }
        Ok(TensorSpec { shape, dtype, layout })
    }

    /// Bytes per page.
    pub fn page_bytes(&self) -> u64 {
        match self.layout {
            Layout::Tile => self.dtype.tile_bytes(),
            Layout::RowMajor => self.shape[3] * self.dtype.element_bytes().expect("checked"),
        }
    }

    /// The page grid: tile layout `[w, z, y/32, x/32]`, row-major `[w, z, y, 1]`.
    pub fn page_grid(&self) -> [u64; 4] {
        let [w, z, y, x] = self.shape;
        match self.layout {
            Layout::Tile => [w, z, y / 32, x / 32],
            Layout::RowMajor => [w, z, y, 1],
        }
    }

    /// Number of pages.
    pub fn pages(&self) -> u64 {
        self.page_grid().iter().product()
    }

    /// Total bytes.
    pub fn bytes(&self) -> u64 {
        self.pages() * self.page_bytes()
    }

    /// The page grid coordinates of page `p`.
    pub fn page_coords(&self, p: u64) -> [u64; 4] {
        let g = self.page_grid();
        [p / (g[1] * g[2] * g[3]), p / (g[2] * g[3]) % g[1], p / g[3] % g[2], p % g[3]]
    }

    /// The page at page grid coordinates `c`.
    pub fn page_at(&self, c: [u64; 4]) -> u64 {
        let g = self.page_grid();
        ((c[0] * g[1] + c[1]) * g[2] + c[2]) * g[3] + c[3]
    }

    /// This tensor split into `n` equal slices along `dim`.
    pub fn split(&self, dim: usize, n: u64) -> Result<TensorSpec, TensorError> {
        if dim > 3 {
            return Err(TensorError(format!("dim {dim} is outside the 4-d shape {:?}", self.shape)));
        }
        let unit = match (self.layout, dim) {
            (Layout::Tile, 2 | 3) => 32,
            (Layout::RowMajor, 3) => {
                return Err(TensorError(
                    "row-major tensors cannot be split along x (dim 3): use tile layout".into(),
                ));
            }
            _ => 1,
        };
        if n == 0 || self.shape[dim] % (n * unit) != 0 {
            return Err(TensorError(format!(
                "dim {dim} of shape {:?} ({}) does not divide into {n} slices of whole {}",
                self.shape,
                self.shape[dim],
                if unit == 32 { "tiles" } else { "rows" }
            )));
        }
        let mut shape = self.shape;
        shape[dim] /= n;
        TensorSpec::new(shape, self.dtype, self.layout)
    }

    /// The page of the whole (concatenated) tensor that page `p` of slice `s` becomes, when
    /// this tensor is slice-shaped and the whole has `n` slices along `dim`.
    pub fn page_in_whole(&self, dim: usize, n: u64, s: u64, p: u64) -> u64 {
        let mut whole = *self;
        whole.shape[dim] *= n;
        let mut c = self.page_coords(p);
        c[dim] += s * self.page_grid()[dim];
        whole.page_at(c)
    }
}

/// Which memory an interleaved tensor lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// The chip's DRAM banks.
    Dram,
    /// The L1 of the chip's Tensix workers (one bank per worker).
    L1,
}

impl FromStr for Memory {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "dram" => Ok(Memory::Dram),
            "l1" => Ok(Memory::L1),
            _ => Err(format!("unknown memory '{s}' (dram, l1)")),
        }
    }
}

crate::named::deserialize_by_name!(Memory);

impl std::fmt::Display for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Memory::Dram => "DRAM",
            Memory::L1 => "L1",
        })
    }
}

/// Where L1-interleaved tensors start in each worker's L1, above the kernels' staging area.
pub const L1_TENSOR_BASE: u64 = 0x40000;

/// Where an interleaved tensor's pages live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// DRAM or L1.
    pub memory: Memory,
    /// First byte in every bank.
    pub base: u64,
    /// Banks the pages rotate over.
    pub banks: u64,
    /// Bytes per page.
    pub page_bytes: u64,
}

impl Placement {
    /// The first tensor placed in `memory`, with pages of `page_bytes`: over the chip's DRAM
    /// channels (its SoC descriptor's), or over the L1 of its first `l1_tensor_banks` workers.
    pub fn first(memory: Memory, page_bytes: u64, soc: &SocDescriptor, p: &meshsim_hw::Params) -> Placement {
        match memory {
            Memory::Dram => Placement { memory, base: 0, banks: soc.dram.len() as u64, page_bytes },
            Memory::L1 => Placement { memory, base: L1_TENSOR_BASE, banks: p.l1_tensor_banks, page_bytes },
        }
    }

    /// The tensor placed right after this one, which has `pages` pages (4 KiB aligned).
    pub fn after(&self, pages: u64) -> Placement {
        Placement { base: (self.base + self.bank_bytes(pages)).div_ceil(4096) * 4096, ..*self }
    }

    /// Bytes of each bank this tensor's memory has (`dram_bank_bytes` or `worker_l1_bytes`).
    pub fn capacity(&self, p: &meshsim_hw::Params) -> u64 {
        match self.memory {
            Memory::Dram => p.dram_bank_bytes,
            Memory::L1 => p.worker_l1_bytes,
        }
    }
    /// `(bank, address)` of page `p`.
    pub fn page(&self, p: u64) -> (u64, u64) {
        (p % self.banks, self.base + p / self.banks * self.page_bytes)
    }

    /// Bytes a tensor of `pages` pages takes in each bank.
    pub fn bank_bytes(&self, pages: u64) -> u64 {
        pages.div_ceil(self.banks) * self.page_bytes
    }
}

/// Where the worker kernels' circular buffers start in a worker's L1.
pub(crate) const STAGING: u64 = 0x10000;

/// Where they must end: L1-interleaved tensors start here.
pub(crate) const STAGING_END: u64 = L1_TENSOR_BASE;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_bytes_follow_the_layout() {
        let t = TensorSpec::new([1, 1, 1024, 4096], DType::Bfp8, Layout::Tile).unwrap();
        assert_eq!((t.pages(), t.page_bytes(), t.bytes()), (32 * 128, 1088, 32 * 128 * 1088));
        let r = TensorSpec::new([1, 2, 3, 64], DType::Bf16, Layout::RowMajor).unwrap();
        assert_eq!((r.pages(), r.page_bytes()), (6, 128));
        assert!(TensorSpec::new([1, 1, 30, 64], DType::Bf16, Layout::Tile).is_err());
        assert!(TensorSpec::new([1, 1, 32, 64], DType::Bfp8, Layout::RowMajor).is_err());
    }

    #[test]
    fn slices_map_back_into_the_whole() {
        let whole = TensorSpec::new([1, 2, 64, 256], DType::Bf16, Layout::Tile).unwrap();
        let slice = whole.split(3, 4).unwrap();
        assert_eq!(slice.shape, [1, 2, 64, 64]);
        // Every (slice, page) lands on a distinct page of the whole.
        let mut seen: Vec<u64> = (0..4)
            .flat_map(|s| (0..slice.pages()).map(move |p| (s, p)))
            .map(|(s, p)| slice.page_in_whole(3, 4, s, p))
            .collect();
        seen.sort();
        assert_eq!(seen, (0..whole.pages()).collect::<Vec<_>>());
        // Page 1 of slice 2 is tile (0, 0, 0, 1) of slice 2: tile column 2*2 + 1 = 5 of the whole.
        assert_eq!(slice.page_in_whole(3, 4, 2, 1), 5);
        assert!(whole.split(3, 3).is_err());
        assert!(whole.split(4, 2).is_err());
    }
}
