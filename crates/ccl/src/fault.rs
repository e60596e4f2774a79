//! Faults injected into a run: links that go down, degrade or flap, chips that start late, and
//! Ethernet cores that stall.
//!
//! Written as the CLI takes them (`--fault SPEC`, repeatable; a workload's `faults:` list):
//!
//! | spec | meaning |
//! |---|---|
//! | `link-down:CHIP:CHAN@TIME_US` | the link on CHIP's channel CHAN goes down for good at TIME_US |
//! | `link-degrade:CHIP:CHAN:RATE_FACTOR[:EXTRA_LATENCY_NS]` | its rate times RATE_FACTOR (0.5: half), its latency plus EXTRA_LATENCY_NS, for the whole run |
//! | `link-flap:CHIP:CHAN@TIME_US:DOWN_US` | down at TIME_US for DOWN_US, then up again (once) |
//! | `straggler:CHIP:DELAY_US` | CHIP's programs start DELAY_US late (added to any skew) |
//! | `erisc-stall:CHIP:CHAN@TIME_US:STALL_US` | the ERISC core on CHIP's channel CHAN runs nothing from TIME_US for STALL_US |
//!
//! CHIP is the chip id of the cluster description; times count from the start of the run.
//! Packets lost while a link is down are sent again when it is back (the link layer's
//! go-back-N, [`meshsim_hw::eth::LinkFault`]); an op over a link down for good stalls, and the
//! run fails with the engine's report of the stalled kernels and the faults in force.

use std::fmt;

use meshsim_engine::Time;
use meshsim_hw::eth::LinkFault;
use meshsim_topology::{ChipIdx, Cluster, Endpoint};

/// One fault.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    /// A link down for good from `at`.
    LinkDown {
        /// Chip id (of the description) and channel at one end of the link.
        chip: u64,
        /// The channel.
        chan: u8,
        /// When it goes down.
        at: Time,
    },
    /// A link slower (rate factor) and longer (extra latency) for the whole run.
    LinkDegrade {
        /// Chip id at one end.
        chip: u64,
        /// The channel.
        chan: u8,
        /// The rate as a fraction of the line rate, parts per million.
        rate_ppm: u64,
        /// Added latency.
        extra: Time,
    },
    /// A link down from `at` for `down`, once.
    LinkFlap {
        /// Chip id at one end.
        chip: u64,
        /// The channel.
        chan: u8,
        /// When it goes down.
        at: Time,
        /// How long it stays down.
        down: Time,
    },
    /// An ERISC core that runs nothing from `at` for `stall` (its kernels resume after).
    EriscStall {
        /// Chip id.
        chip: u64,
        /// The Ethernet channel of the core.
        chan: u8,
        /// When the stall begins.
        at: Time,
        /// How long it lasts.
        stall: Time,
    },
    /// A chip whose programs start `delay` late.
    Straggler {
        /// Chip id.
        chip: u64,
        /// The delay.
        delay: Time,
    },
}

/// The longest time a fault may name, µs (an hour of simulated time, as start skews).
const MAX_US: f64 = 3.6e9;

impl std::str::FromStr for Fault {
    type Err = String;

    fn from_str(spec: &str) -> Result<Fault, String> {
        let bad = |why: &str| format!("fault '{spec}': {why}");
        let (kind, rest) = spec.split_once(':').ok_or_else(|| {
            bad("expected KIND:..., KIND one of link-down, link-degrade, link-flap, straggler, erisc-stall")
        })?;
        let chip = |s: &str| s.parse::<u64>().map_err(|_| bad(&format!("chip '{s}' is not a chip id")));
        let chan = |s: &str| match s.parse::<u8>() {
            Ok(c) if c < meshsim_topology::ETH_CHANNELS => Ok(c),
            _ => Err(bad(&format!("channel '{s}' is not 0-15"))),
        };
        let us = |s: &str, what: &str| match s.parse::<f64>() {
            Ok(v) if (0.0..=MAX_US).contains(&v) => Ok(Time((v * 1e6).round() as u64)),
            _ => Err(bad(&format!("{what} '{s}' is not a time in µs from 0 to {MAX_US:e}"))),
        };
        let shape = |want: &str| bad(&format!("expected {kind}:{want}"));
        // The timed forms: CHIP:CHAN@TIME_US, then `:DURATION_US` when `duration` names it.
        let timed = |want: &str, duration: Option<&str>| -> Result<(u64, u8, Time, Time), String> {
            let (head, tail) = rest.split_once('@').ok_or_else(|| shape(want))?;
            let Some((c, ch)) = head.split_once(':').filter(|(_, ch)| !ch.contains(':')) else {
                return Err(shape(want));
            };
            let (at, length) = match (tail.split_once(':'), duration) {
                (None, None) => (us(tail, "time")?, Time::ZERO),
                (Some((t, d)), Some(what)) if !d.contains(':') => (us(t, "time")?, us(d, what)?),
                _ => return Err(shape(want)),
            };
            Ok((chip(c)?, chan(ch)?, at, length))
        };
        let fields: Vec<&str> = rest.split(':').collect();
        match kind {
            "link-down" => {
                let (chip, chan, at, _) = timed("CHIP:CHAN@TIME_US", None)?;
                Ok(Fault::LinkDown { chip, chan, at })
            }
            "link-flap" => {
                let (chip, chan, at, down) = timed("CHIP:CHAN@TIME_US:DOWN_US", Some("down time"))?;
                Ok(Fault::LinkFlap { chip, chan, at, down })
            }
            "erisc-stall" => {
                let (chip, chan, at, stall) = timed("CHIP:CHAN@TIME_US:STALL_US", Some("stall time"))?;
                Ok(Fault::EriscStall { chip, chan, at, stall })
            }
            "link-degrade" if !rest.contains('@') => {
                let (c, ch, f, extra) = match fields.as_slice() {
                    [c, ch, f] => (c, ch, f, "0"),
                    [c, ch, f, e] => (c, ch, f, *e),
                    _ => return Err(shape("CHIP:CHAN:RATE_FACTOR[:EXTRA_LATENCY_NS]")),
                };
                let rate_ppm = match f.parse::<f64>() {
                    Ok(r) if r > 0.0 && r <= 1.0 => (r * 1e6).round().max(1.0) as u64,
                    _ => return Err(bad(&format!("rate factor '{f}' is not in (0, 1]"))),
                };
                let extra = match extra.parse::<u64>() {
                    Ok(ns) if ns <= 1_000_000_000 => Time::from_ns(ns),
                    _ => return Err(bad(&format!("extra latency '{extra}' is not 0 to 1e9 ns"))),
                };
                Ok(Fault::LinkDegrade { chip: chip(c)?, chan: chan(ch)?, rate_ppm, extra })
            }
            "link-degrade" => Err(shape("CHIP:CHAN:RATE_FACTOR[:EXTRA_LATENCY_NS]")),
            "straggler" => match fields.as_slice() {
                [c, d] if !rest.contains('@') => {
                    Ok(Fault::Straggler { chip: chip(c)?, delay: us(d, "delay")? })
                }
                _ => Err(shape("CHIP:DELAY_US")),
            },
            _ => Err(bad(&format!(
                "unknown kind '{kind}' (link-down, link-degrade, link-flap, straggler, erisc-stall)"
            ))),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |t: Time| t.as_us_f64();
        match *self {
            Fault::LinkDown { chip, chan, at } => write!(f, "link-down:{chip}:{chan}@{}", us(at)),
            Fault::LinkDegrade { chip, chan, rate_ppm, extra } => {
                write!(f, "link-degrade:{chip}:{chan}:{}:{}", rate_ppm as f64 / 1e6, extra.0 / 1000)
            }
            Fault::LinkFlap { chip, chan, at, down } => {
                write!(f, "link-flap:{chip}:{chan}@{}:{}", us(at), us(down))
            }
            Fault::Straggler { chip, delay } => write!(f, "straggler:{chip}:{}", us(delay)),
            Fault::EriscStall { chip, chan, at, stall } => {
                write!(f, "erisc-stall:{chip}:{chan}@{}:{}", us(at), us(stall))
            }
        }
    }
}

impl Fault {
    /// The chip the fault names, as a dense index of `cluster`, and the link's end when it is a
    /// link fault; an error naming the fault when the chip or the link does not exist.
    pub fn resolve(&self, cluster: &Cluster) -> Result<(ChipIdx, Option<Endpoint>), String> {
        let chip_id = match *self {
            Fault::LinkDown { chip, .. }
            | Fault::LinkDegrade { chip, .. }
            | Fault::LinkFlap { chip, .. }
            | Fault::EriscStall { chip, .. }
            | Fault::Straggler { chip, .. } => chip,
        };
        let idx = cluster
            .chips()
            .iter()
            .position(|c| c.id == chip_id)
            .map(|i| ChipIdx(i as u32))
            .ok_or_else(|| format!("fault '{self}': chip {chip_id} is not in the cluster"))?;
        let chan = match *self {
            Fault::LinkDown { chan, .. }
            | Fault::LinkDegrade { chan, .. }
            | Fault::LinkFlap { chan, .. }
            | Fault::EriscStall { chan, .. } => chan,
            Fault::Straggler { .. } => return Ok((idx, None)),
        };
        let ep = Endpoint { chip: idx, chan };
        if cluster.connected(ep).is_none() {
            return Err(format!("fault '{self}': chip {chip_id} channel {chan} has no link to another chip"));
        }
        Ok((idx, Some(ep)))
    }

    /// What the fault does to its link, merged into `into`.
    pub fn apply(&self, into: &mut LinkFault) {
        match *self {
            Fault::LinkDown { at, .. } => into.down.push((at, None)),
            Fault::LinkFlap { at, down, .. } => into.down.push((at, Some(at + down))),
            Fault::LinkDegrade { rate_ppm, extra, .. } => {
                into.rate_ppm = into.rate_ppm.min(rate_ppm);
                into.extra_latency += extra;
            }
            Fault::Straggler { .. } | Fault::EriscStall { .. } => {}
        }
    }

    /// `k` faults drawn from `seed` over `cluster`'s links and chips, the same for the same
    /// arguments: degraded links (rate 0.25-1, up to 2 µs more latency), flaps (down for up to
    /// 20 µs within the first 100 µs), stragglers (up to 20 µs late) and, one draw in eight, a
    /// link down for good.
    pub fn random(cluster: &Cluster, seed: u64, k: usize) -> Vec<Fault> {
        // SplitMix64: a fixed, portable sequence.
        let mut state = seed;
        let mut next = move || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let links = cluster.links();
        let chips = cluster.chips();
        (0..k)
            .map(|_| {
                let l = &links[(next() % links.len().max(1) as u64) as usize];
                let (chip, chan) = (chips[l.a.chip.0 as usize].id, l.a.chan);
                let us = |v: u64| Time::from_ns(v * 1000);
                match next() % 8 {
                    0 => Fault::LinkDown { chip, chan, at: us(next() % 100) },
                    1..=3 => Fault::LinkDegrade {
                        chip,
                        chan,
                        rate_ppm: 250_000 + next() % 750_001,
                        extra: Time::from_ns(next() % 2001),
                    },
                    4 | 5 => Fault::LinkFlap { chip, chan, at: us(next() % 100), down: us(1 + next() % 20) },
                    _ => Fault::Straggler {
                        chip: chips[(next() % chips.len() as u64) as usize].id,
                        delay: us(next() % 21),
                    },
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_print_back_and_refuse_in_words() {
        for spec in ["link-down:0:8@10", "link-degrade:3:14:0.5:200", "link-flap:1:9@2.5:4", "straggler:7:12"]
        {
            let f: Fault = spec.parse().unwrap();
            assert_eq!(f.to_string(), spec);
        }
        assert_eq!(
            "link-degrade:0:8:0.5".parse::<Fault>().unwrap(),
            Fault::LinkDegrade { chip: 0, chan: 8, rate_ppm: 500_000, extra: Time::ZERO }
        );
        for (spec, want) in [
            ("link-down:0:8", "expected link-down:CHIP:CHAN@TIME_US"),
            // The '@' in the wrong place (the channel's): once read as chip 0 channel 8 at 10.
            ("link-down:0@8:10", "expected link-down:CHIP:CHAN@TIME_US"),
            ("link-flap:0:8@1:2:3", "expected link-flap:CHIP:CHAN@TIME_US:DOWN_US"),
            ("link-degrade:0:8:1.5", "rate factor '1.5' is not in (0, 1]"),
            ("link-degrade:0:8:0", "rate factor '0'"),
            ("link-flap:0:16@1:1", "channel '16' is not 0-15"),
            ("straggler:x:1", "chip 'x' is not a chip id"),
            ("straggler:0:-1", "delay '-1' is not a time"),
            ("straggler:0:nan", "delay 'nan'"),
            ("meteor:0", "unknown kind 'meteor'"),
            ("erisc-stall:0:8@1", "expected erisc-stall:CHIP:CHAN@TIME_US:STALL_US"),
            ("nothing", "expected KIND:"),
        ] {
            let err = spec.parse::<Fault>().unwrap_err();
            assert!(err.starts_with(&format!("fault '{spec}': ")) && err.contains(want), "{spec}: {err}");
        }
    }

    #[test]
    fn random_faults_are_the_same_for_the_same_seed() {
        let t3000 = meshsim_topology::builtin::cluster("t3000").unwrap();
        let a = Fault::random(&t3000, 42, 6);
        assert_eq!(a, Fault::random(&t3000, 42, 6));
        assert_ne!(a, Fault::random(&t3000, 43, 6));
        for f in &a {
            f.resolve(&t3000).unwrap();
            assert_eq!(f.to_string().parse::<Fault>().unwrap().to_string(), f.to_string());
        }
    }
}
