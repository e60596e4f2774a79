//! The chip architectures a cluster description names, and which of them meshsim models. A
//! modelled architecture is data: its SoC descriptor (`configs/<arch>_soc.yaml`: Ethernet cores
//! by channel, the worker grid, DRAM, L1 sizes) here, and its model parameters
//! (`configs/<arch>.yaml`: clock, link rate, L1 windows, packet limits, costs) in the hardware
//! crate. Adding one is two files and its arm in [`Arch::soc`] and the parameters' lookup.

use std::fmt;
use std::sync::OnceLock;

use crate::soc::SocDescriptor;

/// The most Ethernet channels a chip of any modelled architecture has: the bound of per-chip
/// channel tables. A chip's own channels are its SoC descriptor's Ethernet cores.
pub const ETH_CHANNELS: u8 = 16;

/// Chip architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// Wormhole B0 (written `wormhole_b0`, or `Wormhole` in older files).
    WormholeB0,
    /// Grayskull: recognised, so a descriptor naming it is refused by name (no Ethernet).
    Grayskull,
    /// Blackhole (its 140-Tensix part: P150, P300, Blackhole Galaxy).
    Blackhole,
}

impl Arch {
    /// The architecture a descriptor's `arch` entry names.
    pub(crate) fn parse(s: &str) -> Option<Arch> {
        match s.to_ascii_lowercase().as_str() {
            "wormhole_b0" | "wormhole" => Some(Arch::WormholeB0),
            "grayskull" => Some(Arch::Grayskull),
            "blackhole" => Some(Arch::Blackhole),
            _ => None,
        }
    }

    /// The built-in SoC descriptor of a modelled architecture (parsed once per process: a
    /// lowering asks for core coordinates once per kernel it places); `None` when meshsim does
    /// not model the architecture.
    pub fn soc(self) -> Option<&'static SocDescriptor> {
        static WORMHOLE_B0: OnceLock<SocDescriptor> = OnceLock::new();
        static BLACKHOLE: OnceLock<SocDescriptor> = OnceLock::new();
        let (cell, file, text) = match self {
            Arch::WormholeB0 => (
                &WORMHOLE_B0,
                "configs/wormhole_b0_soc.yaml",
                include_str!("../../../configs/wormhole_b0_soc.yaml"),
            ),
            Arch::Blackhole => (
                &BLACKHOLE,
                "configs/blackhole_soc.yaml",
                include_str!("../../../configs/blackhole_soc.yaml"),
            ),
            Arch::Grayskull => return None,
        };
        Some(cell.get_or_init(|| {
            SocDescriptor::parse(file, text.as_bytes()).expect("the built-in SoC descriptors are valid")
        }))
    }

    /// Whether meshsim models the architecture.
    pub fn modelled(self) -> bool {
        self.soc().is_some()
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arch::WormholeB0 => "wormhole_b0",
            Arch::Grayskull => "grayskull",
            Arch::Blackhole => "blackhole",
        })
    }
}
