//! The tt-umd cluster descriptor exactly as written: every key and variant found in the wild.
//!
//! These structs mirror the file and check only syntax and types. Meaning (which chips exist,
//! which channels are taken, what is reserved) is decided when resolving into a
//! [`crate::Cluster`]; the simulator never sees these types.
//!
//! Variants accepted: block and flow style (flow maps with trailing commas); legacy arch names
//! (`Wormhole`); `chips` as an empty map; `chips_with_mmio` entries as `{chip: pcie}` maps or
//! bare chip ids; an optional third `{routing_enabled: bool}` element in a connection;
//! `ethernet_connections_to_remote_devices`; `harvesting`, `boards`, `chip_to_boardtype`, legacy
//! `boardtype`, `chip_unique_ids`, `chip_to_bus_id`, `asic_locations`, `io_device_type`,
//! `chip_pci_bdfs`. Unknown top-level keys are kept, not rejected, so newer files still load.

use std::collections::BTreeMap;

use serde::Deserialize;

/// A chip id as written in the file (arbitrary, not necessarily dense).
pub type FileChipId = u64;

/// A map keyed by chip id in which a chip id may appear once: YAML keeps the last of two equal
/// keys, which would silently drop a chip's entry.
fn unique_keys<'de, D, V>(d: D) -> Result<Option<BTreeMap<FileChipId, V>>, D::Error>
where
    D: serde::Deserializer<'de>,
    V: Deserialize<'de>,
{
    struct Unique<V>(BTreeMap<FileChipId, V>);
    impl<'de, V: Deserialize<'de>> Deserialize<'de> for Unique<V> {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visit<V>(std::marker::PhantomData<V>);
            impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Visit<V> {
                type Value = BTreeMap<FileChipId, V>;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a mapping from chip id to a value")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                    let mut out = BTreeMap::new();
                    while let Some((k, v)) = m.next_entry::<FileChipId, V>()? {
                        if out.insert(k, v).is_some() {
                            return Err(serde::de::Error::custom(format!("chip {k} appears twice")));
                        }
                    }
                    Ok(out)
                }
            }
            d.deserialize_map(Visit(std::marker::PhantomData)).map(Unique)
        }
    }
    Ok(Option::<Unique<V>>::deserialize(d)?.map(|u| u.0))
}

/// A whole cluster descriptor file.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a cluster description: a mapping with keys arch, ethernet_connections, ...")]
pub struct RawCluster {
    /// Chip id -> architecture name. Defines the chips.
    #[serde(default, deserialize_with = "unique_keys")]
    pub arch: Option<BTreeMap<FileChipId, String>>,
    /// Chip id -> `[x, y, rack, shelf]` Ethernet coordinates; may be empty.
    #[serde(default, deserialize_with = "unique_keys")]
    pub chips: Option<BTreeMap<FileChipId, Vec<i64>>>,
    /// One entry per physical link: two endpoints, optionally a `{routing_enabled}` element.
    pub ethernet_connections: Option<Vec<Vec<RawEnd>>>,
    /// Links to chips on other hosts: a local endpoint and a `{remote_chip_id, chan}` one.
    #[serde(default)]
    pub ethernet_connections_to_remote_devices: Option<Vec<Vec<RawEnd>>>,
    /// PCIe-attached chips: `{chip: pcie_index}` maps or bare chip ids.
    #[serde(default)]
    pub chips_with_mmio: Option<Vec<RawMmio>>,
    /// Per-chip harvesting masks.
    #[serde(default, deserialize_with = "unique_keys")]
    pub harvesting: Option<BTreeMap<FileChipId, RawHarvesting>>,
    /// Boards: each a list of single-key maps (`board_id`, `board_type`, `chips`).
    #[serde(default)]
    pub boards: Option<Vec<Vec<RawBoardField>>>,
    /// Chip id -> board type.
    #[serde(default, deserialize_with = "unique_keys")]
    pub chip_to_boardtype: Option<BTreeMap<FileChipId, Option<String>>>,
    /// Legacy name of `chip_to_boardtype`.
    #[serde(default, deserialize_with = "unique_keys")]
    pub boardtype: Option<BTreeMap<FileChipId, Option<String>>>,
    /// Chip id -> unique (board-level) chip id.
    #[serde(default, deserialize_with = "unique_keys")]
    pub chip_unique_ids: Option<BTreeMap<FileChipId, u64>>,
    /// Chip id -> PCIe bus id string.
    #[serde(default, deserialize_with = "unique_keys")]
    pub chip_to_bus_id: Option<BTreeMap<FileChipId, serde_yaml::Value>>,
    /// Chip id -> ASIC location on its board.
    #[serde(default, deserialize_with = "unique_keys")]
    pub asic_locations: Option<BTreeMap<FileChipId, serde_yaml::Value>>,
    /// The IO device type of the host (`PCIe`, `JTAG`, ...).
    #[serde(default)]
    pub io_device_type: Option<serde_yaml::Value>,
    /// Chip id -> PCIe bus/device/function.
    #[serde(default, deserialize_with = "unique_keys")]
    pub chip_pci_bdfs: Option<BTreeMap<FileChipId, serde_yaml::Value>>,
    /// Keys this version does not know; kept so newer files still load.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_yaml::Value>,
}

/// One element of a connection entry: an endpoint, a remote endpoint or the routing flag.
/// All fields are optional here; which combination is valid is checked when resolving.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an endpoint mapping such as {chip: 0, chan: 8}")]
pub struct RawEnd {
    /// Local chip id.
    pub chip: Option<FileChipId>,
    /// Ethernet channel (signed, so a negative value gets a clear message).
    pub chan: Option<i64>,
    /// Unique id of a chip on another host.
    pub remote_chip_id: Option<u64>,
    /// Whether routing firmware uses the link.
    pub routing_enabled: Option<bool>,
}

/// A `chips_with_mmio` entry.
#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "expected a chip id or a {chip id: PCIe index} mapping")]
pub enum RawMmio {
    /// `{chip: pcie_index}`.
    Map(BTreeMap<FileChipId, u64>),
    /// A bare chip id.
    Bare(FileChipId),
}

/// A `harvesting` entry.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a mapping with keys noc_translation, harvest_mask, ...")]
pub struct RawHarvesting {
    /// Whether NoC translation is enabled.
    pub noc_translation: Option<bool>,
    /// Bit `i` set: Tensix row `i` is harvested.
    pub harvest_mask: Option<u64>,
    /// Harvested DRAM channels.
    pub dram_harvesting_mask: Option<u64>,
    /// Harvested Ethernet cores.
    pub eth_harvesting_mask: Option<u64>,
    /// Harvested PCIe cores.
    pub pcie_harvesting_mask: Option<u64>,
}

/// One single-key map of a `boards` entry.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a one-key mapping: board_id, board_type or chips")]
pub struct RawBoardField {
    /// The board's id.
    pub board_id: Option<u64>,
    /// The board's type (`n300`, `ubb`, ...).
    pub board_type: Option<String>,
    /// The chips on the board.
    pub chips: Option<Vec<FileChipId>>,
}

impl RawCluster {
    /// Parses `text`, naming `file` in errors.
    pub fn parse(file: &str, text: &str) -> Result<RawCluster, crate::TopologyError> {
        let raw: Option<RawCluster> = crate::TopologyError::parse_yaml(file, text)?;
        // A document of only comments parses as null.
        raw.ok_or_else(|| crate::TopologyError::OnlyComments { file: file.to_owned() })
    }
}
