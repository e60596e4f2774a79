//! Model parameters: every number the hardware model uses, with its unit in its name.
//!
//! The defaults live in `configs/wormhole_b0.yaml` (embedded); `Params::load` reads another
//! file. Unknown keys are rejected; [`DESCRIPTIONS`] documents every field and a test keeps the
//! two in step.

use serde::{Deserialize, Serialize};

use meshsim_engine::{ClockDomain, Time};
use meshsim_topology::Arch;

/// All model parameters.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The architecture whose chips these parameters describe: `wormhole_b0` or `blackhole`.
    /// A parameter file applies to the chips of its architecture only.
    pub arch: String,
    /// Core clock (AICLK) in MHz; cycle counts below are of this clock.
    pub aiclk_mhz: u64,
    /// Ethernet line rate per direction per link, Gb/s.
    pub eth_link_gbps: u64,
    /// The line rate on a Galaxy (chips on `ubb` boards), Gb/s, where it differs from
    /// `eth_link_gbps` (Blackhole Galaxy links run at 200 Gb/s); 0: the same.
    #[serde(default)]
    pub eth_link_gbps_galaxy: u64,
    /// Bytes of header, FEC and CRC added to every Ethernet packet on the wire.
    pub eth_packet_overhead_bytes: u64,
    /// Largest payload of one Ethernet packet; larger sends are split by hardware.
    pub eth_mtu_bytes: u64,
    /// Fixed one-way latency through MAC, PHY and cable, ns.
    pub eth_link_latency_ns: u64,
    /// Rate at which the Ethernet subsystem moves a packet between ERISC L1 and the MAC, bytes per cycle.
    pub eth_dma_bytes_per_cycle: u64,
    /// ERISC L1 size, bytes.
    pub erisc_l1_bytes: u64,
    /// First byte of the ERISC L1 window usable by kernels and EDM buffers.
    pub erisc_kernel_l1_base: u64,
    /// Size of the ERISC L1 window usable by kernels, bytes.
    pub erisc_kernel_l1_bytes: u64,
    /// Address of `erisc_info` (8 channel sync records of 16 B) in the reserved L1 region.
    pub erisc_info_base: u64,
    /// ERISC cycles spent issuing one send command (`eth_send_packet`).
    pub eth_send_initiate_cycles: u64,
    /// Cycles after submission before a tx command queue latches the command and frees up.
    pub eth_txq_latch_cycles: u64,
    /// Cycles of one `run_routing()` context switch to the routing firmware.
    pub erisc_run_routing_cycles: u64,
    /// Cycles a polling loop takes to notice that a watched word was written.
    pub core_poll_cycles: u64,
    /// Bytes per NoC flit; a link carries one flit per cycle.
    pub noc_flit_bytes: u64,
    /// Cycles per NoC router hop for a packet's head.
    pub noc_hop_cycles: u64,
    /// Cycles to inject a packet from a core into the NoC.
    pub noc_inject_cycles: u64,
    /// Cycles to eject a packet from the NoC into a core.
    pub noc_eject_cycles: u64,
    /// Largest NoC packet, bytes; larger transfers are split.
    pub noc_max_packet_bytes: u64,
    /// Core cycles spent issuing one NoC command.
    pub noc_issue_cycles: u64,
    /// Core cycles spent issuing one write tagged with a transaction id
    /// (`noc_async_write_one_packet_with_trid`: one NoC packet, counted by the NIU's per-id
    /// counters, so none of the dataflow API's size loop and software counters), in place of
    /// `noc_issue_cycles`.
    pub noc_trid_write_cycles: u64,
    /// Core cycles spent issuing one NoC read (`noc_async_read` of one packet), in place of
    /// `noc_issue_cycles`.
    pub noc_read_issue_cycles: u64,
    /// ERISC cycles a fabric router's main-loop pass that acted spends as it wraps round (its
    /// bookkeeping), beyond the sends, NoC commands and sender-step checks it issued.
    pub fabric_router_pass_cycles: u64,
    /// ERISC cycles a fabric router spends on each NoC command it issues (the command and the
    /// router's bookkeeping around it), in place of `noc_issue_cycles`.
    pub fabric_router_noc_cycles: u64,
    /// ERISC cycles of a fabric router's sender step reading its channel's state (the
    /// producer's doorbell, the peer's free slots) before it tests the tx queue.
    pub fabric_router_step_cycles: u64,
    /// Cycles after a word changes before an idle fabric router's loop reads it, in place of
    /// `core_poll_cycles` (the pass it resumes in adds the rest).
    pub fabric_router_notice_cycles: u64,
    /// ERISC L1 a fabric router has for its channels' packet slots, bytes.
    pub fabric_router_l1_bytes: u64,
    /// Slots per channel of a 1D router's first allocator option (that many sender and
    /// receiver slots; the next options halve the sender slots, then the receiver slots).
    pub fabric_router_slots_1d: u64,
    /// Sender slots per channel of a 2D mesh router's first allocator option.
    pub fabric_mesh_sender_slots: u64,
    /// Receiver slots of a 2D mesh router's first allocator option.
    pub fabric_mesh_receiver_slots: u64,
    /// RISC-V cores a fabric router runs on: 1 (sender and receiver channels share one loop,
    /// Wormhole), or 2 (senders on ERISC0, receivers on ERISC1 with the second tx queue,
    /// Blackhole's default). A session with a Tensix mux in front of a router runs 1.
    #[serde(default = "one")]
    pub fabric_router_eriscs: u64,
    /// Largest payload a fabric router's packet may carry on this architecture, bytes.
    pub fabric_max_payload_bytes: u64,
    /// The router payload tt-metal configures by default, bytes.
    pub fabric_default_payload_bytes: u64,
    /// Pages per device from which a ring all-gather takes tt-metal's unicast (relay) factory.
    pub fabric_relay_pages: u64,
    /// The same for pages of 4 KiB or more.
    pub fabric_relay_pages_4k: u64,
    /// Tensix L1 size, bytes.
    pub worker_l1_bytes: u64,
    /// Workers whose L1 holds an L1-interleaved tensor's pages (the first, row-major).
    pub l1_tensor_banks: u64,
    /// Tensix cycles to reduce (add or max) one 32x32 tile into another.
    pub tile_reduce_cycles: u64,
    /// Bytes per DRAM bank (channel).
    pub dram_bank_bytes: u64,
    /// Bandwidth of one DRAM bank (channel), bytes per cycle: every access to it shares it.
    pub dram_bank_bytes_per_cycle: u64,
    /// Rate at which one NoC's endpoint of a DRAM bank streams the reads that come through it,
    /// bytes per cycle.
    pub dram_endpoint_bytes_per_cycle: u64,
    /// Access latency of a DRAM bank, cycles.
    pub dram_latency_cycles: u64,
    /// Whether the flow model makes each chip's NoC links and ports resources (1) or leaves
    /// the NoC out (0): more accurate where the NoC binds, several times slower on big
    /// machines. The packet model always has its NoCs.
    #[serde(default = "one")]
    pub flow_noc_ports: u64,
    /// The most chips a session's ops may use for `flow_noc_ports` to apply: on more, the flow
    /// model leaves the NoC out, so that its cost stays linear in the machine.
    #[serde(default = "noc_max_chips")]
    pub flow_noc_ports_max_chips: u64,
}

/// `(field, description with unit)` for every parameter, in file order.
pub const DESCRIPTIONS: &[(&str, &str)] = &[
    ("aiclk_mhz", "core clock (AICLK), MHz; all *_cycles are of this clock"),
    ("eth_link_gbps", "Ethernet line rate per direction per link, Gb/s"),
    ("eth_link_gbps_galaxy", "Ethernet line rate on a Galaxy (ubb boards), Gb/s; 0: eth_link_gbps"),
    ("eth_packet_overhead_bytes", "header, FEC and CRC bytes added to each Ethernet packet on the wire"),
    ("eth_mtu_bytes", "largest payload of one Ethernet packet, bytes; larger sends are split"),
    ("eth_link_latency_ns", "fixed one-way latency through MAC, PHY and cable, ns"),
    ("eth_dma_bytes_per_cycle", "L1 <-> MAC transfer rate of the Ethernet subsystem, bytes/cycle"),
    ("erisc_l1_bytes", "ERISC L1 size, bytes"),
    ("erisc_kernel_l1_base", "first byte of the ERISC L1 window usable by kernels"),
    ("erisc_kernel_l1_bytes", "size of the ERISC L1 window usable by kernels, bytes"),
    ("erisc_info_base", "address of erisc_info (8 x 16 B channel sync records), reserved L1"),
    ("eth_send_initiate_cycles", "ERISC cycles to issue one Ethernet send command"),
    ("eth_txq_latch_cycles", "cycles before a tx command queue latches a command and frees up"),
    ("erisc_run_routing_cycles", "cycles of one run_routing() context switch"),
    ("core_poll_cycles", "cycles for a polling loop to notice a written word"),
    ("noc_flit_bytes", "bytes per NoC flit; one flit per cycle per link"),
    ("noc_hop_cycles", "cycles per NoC router hop (packet head)"),
    ("noc_inject_cycles", "cycles to inject a packet into the NoC"),
    ("noc_eject_cycles", "cycles to eject a packet from the NoC"),
    ("noc_max_packet_bytes", "largest NoC packet, bytes; larger transfers are split"),
    ("noc_issue_cycles", "core cycles to issue one NoC command"),
    ("noc_trid_write_cycles", "core cycles to issue one NoC write tagged with a transaction id (one packet)"),
    ("noc_read_issue_cycles", "core cycles to issue one NoC read (one packet)"),
    (
        "fabric_router_pass_cycles",
        "ERISC cycles of a fabric router main-loop pass that acted, as it wraps round, beyond its sends, NoC commands and sender-step checks",
    ),
    ("fabric_router_noc_cycles", "ERISC cycles a fabric router spends per NoC command it issues"),
    (
        "fabric_router_step_cycles",
        "ERISC cycles of a fabric router's sender step reading its channel's state before it tests the tx queue",
    ),
    (
        "fabric_router_notice_cycles",
        "cycles after a word changes before an idle fabric router's loop reads it",
    ),
    ("fabric_router_l1_bytes", "ERISC L1 for a fabric router's packet slots, bytes"),
    (
        "fabric_router_slots_1d",
        "slots per channel (sender and receiver) of a 1D router's first allocator option; later options halve them",
    ),
    ("fabric_mesh_sender_slots", "sender slots per channel of a 2D mesh router's first allocator option"),
    ("fabric_mesh_receiver_slots", "receiver slots of a 2D mesh router's first allocator option"),
    (
        "fabric_router_eriscs",
        "RISC-V cores per fabric router: 1 (one loop), 2 (senders on ERISC0, receivers on ERISC1 and tx queue 1)",
    ),
    ("fabric_max_payload_bytes", "largest payload of a fabric router's packet on this architecture, bytes"),
    ("fabric_default_payload_bytes", "the router payload tt-metal configures by default, bytes"),
    ("fabric_relay_pages", "pages per device from which a ring all-gather takes the unicast (relay) factory"),
    ("fabric_relay_pages_4k", "the same for pages of 4 KiB or more"),
    ("worker_l1_bytes", "Tensix L1 size, bytes"),
    ("l1_tensor_banks", "workers whose L1 holds an L1-interleaved tensor's pages (the first, row-major)"),
    ("tile_reduce_cycles", "Tensix cycles to reduce (add or max) one 32x32 tile into another"),
    ("dram_bank_bytes", "bytes per DRAM bank"),
    (
        "dram_bank_bytes_per_cycle",
        "bandwidth of one DRAM bank (channel), shared by all its accesses, bytes/cycle",
    ),
    ("dram_endpoint_bytes_per_cycle", "read rate of one NoC's endpoint of a DRAM bank, bytes/cycle"),
    ("dram_latency_cycles", "DRAM access latency, cycles"),
    (
        "flow_noc_ports",
        "1: the flow model makes every chip's NoC links and ports resources (slower on big machines); 0: it leaves the NoC out",
    ),
    (
        "flow_noc_ports_max_chips",
        "the most chips a session's ops may use for flow_noc_ports to apply; on more the flow model leaves the NoC out",
    ),
];

fn one() -> u64 {
    1
}

fn noc_max_chips() -> u64 {
    64
}

/// Bytes at the start of the ERISC window a fabric router keeps for its configuration and
/// counters, below its packet slots.
pub const FABRIC_CONFIG_BYTES: u64 = 512;

/// The embedded default parameter file.
pub const DEFAULT_YAML: &str = include_str!("../../../configs/wormhole_b0.yaml");

/// The embedded Blackhole parameter file.
pub const BLACKHOLE_YAML: &str = include_str!("../../../configs/blackhole.yaml");

/// A parameter file that cannot be used.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{file}: {message}")]
pub struct ParamsError {
    /// The file.
    pub file: String,
    /// What is wrong (with line and column when the parser knows them).
    pub message: String,
}

impl Default for Params {
    /// Wormhole B0's parameters, the architecture of every built-in cluster.
    fn default() -> Self {
        Params::of(Arch::WormholeB0).expect("Wormhole is modelled")
    }
}

impl Params {
    /// The built-in parameters of a modelled architecture (`configs/<arch>.yaml`, embedded);
    /// `None` when meshsim does not model it.
    pub fn of(arch: Arch) -> Option<Params> {
        let (file, text) = match arch {
            Arch::WormholeB0 => ("configs/wormhole_b0.yaml", DEFAULT_YAML),
            Arch::Blackhole => ("configs/blackhole.yaml", BLACKHOLE_YAML),
            Arch::Grayskull => return None,
        };
        Some(Params::parse(file, text).expect("the embedded parameters are valid"))
    }

    /// These parameters as they apply on `cluster`: on a Galaxy (a chip on a `ubb` board, or
    /// of board type `galaxy`) the links run at `eth_link_gbps_galaxy` when it is set.
    pub fn on(mut self, cluster: &meshsim_topology::Cluster) -> Params {
        let galaxy = cluster.chips().iter().any(|c| {
            c.board_type.as_deref().is_some_and(|t| {
                let t = t.to_ascii_lowercase();
                t.starts_with("ubb") || t == "galaxy"
            })
        });
        if galaxy && self.eth_link_gbps_galaxy > 0 {
            self.eth_link_gbps = self.eth_link_gbps_galaxy;
        }
        self
    }

    /// Parses parameters from YAML text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Params, ParamsError> {
        let err = |message: String| ParamsError { file: file.to_owned(), message };
        let p: Params = meshsim_topology::input::from_yaml(text).map_err(|e| {
            let m = meshsim_topology::input::plain_message(&e.to_string());
            err(if m.contains("missing field `arch`") {
                "names no architecture: add `arch: wormhole_b0` or `arch: blackhole` (a parameter file applies to the chips of its architecture)".into()
            } else {
                m
            })
        })?;
        p.validate().map_err(err)?;
        Ok(p)
    }

    /// Reads parameters from a file.
    pub fn load(path: &std::path::Path) -> Result<Params, ParamsError> {
        let file = path.display().to_string();
        let text = meshsim_topology::input::read_input_text(path)
            .map_err(|e| ParamsError { file: file.clone(), message: format!("cannot read: {e}") })?;
        Params::parse(&file, &text)
    }

    /// The architecture the parameters describe.
    pub fn arch(&self) -> Arch {
        if self.arch == "blackhole" { Arch::Blackhole } else { Arch::WormholeB0 }
    }

    fn validate(&self) -> Result<(), String> {
        if !matches!(self.arch.as_str(), "wormhole_b0" | "blackhole") {
            return Err(format!(
                "arch '{}' is not a modelled architecture (wormhole_b0, blackhole)",
                self.arch
            ));
        }
        let positive = [
            ("aiclk_mhz", self.aiclk_mhz),
            ("eth_link_gbps", self.eth_link_gbps),
            ("eth_mtu_bytes", self.eth_mtu_bytes),
            ("eth_dma_bytes_per_cycle", self.eth_dma_bytes_per_cycle),
            ("noc_flit_bytes", self.noc_flit_bytes),
            ("noc_max_packet_bytes", self.noc_max_packet_bytes),
            ("dram_bank_bytes_per_cycle", self.dram_bank_bytes_per_cycle),
            ("fabric_router_slots_1d", self.fabric_router_slots_1d),
            ("fabric_mesh_sender_slots", self.fabric_mesh_sender_slots),
            ("fabric_mesh_receiver_slots", self.fabric_mesh_receiver_slots),
            ("dram_endpoint_bytes_per_cycle", self.dram_endpoint_bytes_per_cycle),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{name} must be positive"));
        }
        // Bounds that keep every product of parameters (a time in picoseconds, an address)
        // inside 64 bits: a per-step cost of more than a second, or a memory beyond a TiB,
        // describes no hardware.
        for (name, value, _) in self.table() {
            let (limit, what) = if name.ends_with("_ns") || name.ends_with("_cycles") {
                (1_000_000_000, "1e9 (a second)")
            } else if name.ends_with("_mhz") || name.ends_with("_gbps") {
                (1_000_000, "1e6")
            } else {
                (1 << 40, "2^40 (a TiB)")
            };
            if value > limit {
                return Err(format!("{name} {value} is beyond its limit of {what}"));
            }
        }
        let window_end = self.erisc_kernel_l1_base + self.erisc_kernel_l1_bytes;
        if window_end > self.erisc_l1_bytes {
            return Err(format!(
                "the ERISC kernel window [{:#x}, {window_end:#x}) exceeds erisc_l1_bytes {:#x}",
                self.erisc_kernel_l1_base, self.erisc_l1_bytes
            ));
        }
        if self.fabric_router_l1_bytes.saturating_add(FABRIC_CONFIG_BYTES) > self.erisc_kernel_l1_bytes {
            return Err(format!(
                "fabric_router_l1_bytes {} plus the router's {FABRIC_CONFIG_BYTES} B of configuration exceeds erisc_kernel_l1_bytes {}",
                self.fabric_router_l1_bytes, self.erisc_kernel_l1_bytes
            ));
        }
        if self.flow_noc_ports > 1 {
            return Err(format!("flow_noc_ports {} must be 0 or 1", self.flow_noc_ports));
        }
        if !(1..=2).contains(&self.fabric_router_eriscs) {
            return Err(format!("fabric_router_eriscs {} must be 1 or 2", self.fabric_router_eriscs));
        }
        let (max, default) = (self.fabric_max_payload_bytes, self.fabric_default_payload_bytes);
        if max == 0 || max % 16 != 0 || default == 0 || default % 16 != 0 || default > max {
            return Err(format!(
                "fabric_default_payload_bytes {default} and fabric_max_payload_bytes {max} must be positive multiples of 16, the default at most the maximum"
            ));
        }
        if self.erisc_info_base + 8 * 16 > self.erisc_kernel_l1_base {
            return Err("erisc_info must lie below the kernel window".into());
        }
        Ok(())
    }

    /// The core clock.
    pub fn aiclk(&self) -> ClockDomain {
        ClockDomain::from_mhz(self.aiclk_mhz)
    }

    /// `n` core cycles as time.
    pub fn cycles(&self, n: u64) -> Time {
        // Hot: every NoC packet and kernel step converts cycles. A clock whose period is a whole
        // number of picoseconds (1 GHz: 1000 ps) needs one 64-bit division, not a clock domain.
        match self.cycle_ps() {
            Some(ps) => Time(n * ps),
            None => self.aiclk().cycles(n),
        }
    }

    /// The core clock's period in picoseconds, when it is a whole number (then `cycles(n)` is
    /// exactly `n` periods).
    pub fn cycle_ps(&self) -> Option<u64> {
        let mhz = self.aiclk_mhz;
        (mhz != 0 && 1_000_000 % mhz == 0).then(|| 1_000_000 / mhz)
    }

    /// Time to put `bytes` on the Ethernet wire at the line rate.
    pub fn eth_wire_time(&self, bytes: u64) -> Time {
        // bits / (Gb/s) = ns; in ps: bytes * 8 * 1000 / gbps.
        Time(bytes * 8_000 / self.eth_link_gbps)
    }

    /// Time for the Ethernet subsystem to move `bytes` between L1 and the MAC.
    pub fn eth_dma_time(&self, bytes: u64) -> Time {
        self.cycles(bytes.div_ceil(self.eth_dma_bytes_per_cycle))
    }

    /// The ERISC kernel window `[base, end)`.
    pub fn erisc_window(&self) -> (u64, u64) {
        (self.erisc_kernel_l1_base, self.erisc_kernel_l1_base + self.erisc_kernel_l1_bytes)
    }

    /// `(name, value, description)` for every parameter, in file order.
    pub fn table(&self) -> Vec<(&'static str, u64, &'static str)> {
        let value = serde_yaml::to_value(self).expect("params serialise");
        DESCRIPTIONS
            .iter()
            .map(|&(name, desc)| (name, value[name].as_u64().expect("every parameter is an integer"), desc))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_has_a_description_and_the_defaults_load() {
        let p = Params::default();
        let fields = serde_yaml::to_value(&p).unwrap();
        // Every number has a description; `arch` names the architecture, not a number.
        let keys: Vec<String> = fields
            .as_mapping()
            .unwrap()
            .keys()
            .map(|k| k.as_str().unwrap().to_owned())
            .filter(|k| k != "arch")
            .collect();
        let described: Vec<String> = DESCRIPTIONS.iter().map(|d| d.0.to_owned()).collect();
        assert_eq!(keys, described);
        assert_eq!(p.table().len(), keys.len());
    }

    #[test]
    fn unknown_keys_and_bad_windows_are_rejected() {
        let extra = format!("{DEFAULT_YAML}\nnoc_hops_per_cycle: 3\n");
        let err = Params::parse("p.yaml", &extra).unwrap_err().to_string();
        assert!(err.starts_with("p.yaml: unknown field `noc_hops_per_cycle`"), "{err}");
        let bad = DEFAULT_YAML.replace("erisc_kernel_l1_bytes: 163840", "erisc_kernel_l1_bytes: 263840");
        let err = Params::parse("p.yaml", &bad).unwrap_err().to_string();
        assert!(err.contains("exceeds erisc_l1_bytes"), "{err}");
    }

    #[test]
    fn values_that_would_overflow_the_clock_are_rejected() {
        // Found by the fuzzing harness: a link latency of u64::MAX ns overflowed the clock.
        let bad =
            DEFAULT_YAML.replace("eth_link_latency_ns: 318", "eth_link_latency_ns: 18446744073709551615");
        let err = Params::parse("p.yaml", &bad).unwrap_err().to_string();
        assert!(err.contains("eth_link_latency_ns 18446744073709551615 is beyond its limit of 1e9"), "{err}");
        let bad = DEFAULT_YAML.replace("aiclk_mhz: 1000", "aiclk_mhz: 4000000");
        assert!(Params::parse("p.yaml", &bad).unwrap_err().to_string().contains("aiclk_mhz"));
        let ok = DEFAULT_YAML.replace("eth_link_latency_ns: 318", "eth_link_latency_ns: 1000000000");
        assert!(Params::parse("p.yaml", &ok).is_ok());
    }

    #[test]
    fn wire_time_is_exact_at_100_gbps() {
        let p = Params::default();
        assert_eq!(p.eth_wire_time(1250), Time::from_ns(100));
        assert_eq!(p.eth_dma_time(44), Time::from_ns(2));
    }
}
