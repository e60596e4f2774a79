//! Simulated time: integer picoseconds, cycle counts and clock domains.
//!
//! Time inside the engine is never floating point. `Time` is an absolute instant or a span in
//! picoseconds; `Cycles` counts clock cycles of some `ClockDomain`, which converts between the
//! two with exact integer arithmetic (rounding down to whole picoseconds).

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// Picoseconds per nanosecond.
const PS_PER_NS: u64 = 1_000;
/// Picoseconds per second.
const PS_PER_S: u128 = 1_000_000_000_000;

/// A simulated instant or span, in picoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

impl Time {
    /// The start of every simulation.
    pub const ZERO: Time = Time(0);
    /// The largest representable time (about 213 days); used as "no limit".
    pub const MAX: Time = Time(u64::MAX);

    /// A time of `ps` picoseconds.
    pub const fn from_ps(ps: u64) -> Time {
        Time(ps)
    }

    /// A time of `ns` nanoseconds.
    pub const fn from_ns(ns: u64) -> Time {
        Time(ns * PS_PER_NS)
    }

    /// A time of `us` microseconds.
    pub const fn from_us(us: u64) -> Time {
        Time(us * PS_PER_NS * 1_000)
    }

    /// This time in picoseconds.
    pub const fn as_ps(self) -> u64 {
        self.0
    }

    /// This time in nanoseconds, as a float, for reports only.
    pub fn as_ns_f64(self) -> f64 {
        self.0 as f64 / PS_PER_NS as f64
    }

    /// This time in microseconds, as a float, for reports only.
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// `self + rhs`, saturating at [`Time::MAX`].
    pub const fn saturating_add(self, rhs: Time) -> Time {
        Time(self.0.saturating_add(rhs.0))
    }

    /// `self - rhs`, or zero if `rhs` is later.
    pub const fn saturating_sub(self, rhs: Time) -> Time {
        Time(self.0.saturating_sub(rhs.0))
    }
}

impl Add for Time {
    type Output = Time;
    fn add(self, rhs: Time) -> Time {
        Time(self.0.checked_add(rhs.0).expect("simulated time overflow"))
    }
}

impl AddAssign for Time {
    fn add_assign(&mut self, rhs: Time) {
        *self = *self + rhs;
    }
}

impl Sub for Time {
    type Output = Time;
    fn sub(self, rhs: Time) -> Time {
        Time(self.0.checked_sub(rhs.0).expect("negative simulated time span"))
    }
}

impl fmt::Display for Time {
    /// Nanoseconds with three decimals: `1204.500ns`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}ns", self.0 / PS_PER_NS, self.0 % PS_PER_NS)
    }
}

/// A number of clock cycles; meaningful only together with a [`ClockDomain`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cycles(pub u64);

/// A clock of a fixed frequency that converts cycles to time and back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockDomain {
    hz: u64,
    /// The period in whole picoseconds when it is one (1 GHz: 1000), else 0. Saves a 128-bit
    /// division on every conversion for the common clocks.
    period_ps: u64,
}

impl ClockDomain {
    /// A clock of `hz` cycles per second. Panics on zero, which can only be a bug: parameter
    /// files are validated before a clock is built.
    pub fn from_hz(hz: u64) -> ClockDomain {
        assert!(hz > 0, "clock frequency must be positive");
        let period_ps = if PS_PER_S % hz as u128 == 0 { (PS_PER_S / hz as u128) as u64 } else { 0 };
        ClockDomain { hz, period_ps }
    }

    /// A clock of `mhz` megahertz.
    pub fn from_mhz(mhz: u64) -> ClockDomain {
        ClockDomain::from_hz(mhz * 1_000_000)
    }

    /// The frequency in hertz.
    pub fn hz(self) -> u64 {
        self.hz
    }

    /// The duration of `n` cycles, rounded down to whole picoseconds.
    pub fn cycles(self, n: u64) -> Time {
        if self.period_ps != 0 {
            return Time(n * self.period_ps);
        }
        Time((n as u128 * PS_PER_S / self.hz as u128) as u64)
    }

    /// The number of whole cycles that fit in `t`.
    pub fn cycles_in(self, t: Time) -> Cycles {
        Cycles((t.0 as u128 * self.hz as u128 / PS_PER_S) as u64)
    }

    /// The first clock edge at or after `t` (edges at whole cycles since time zero).
    pub fn next_edge(self, t: Time) -> Time {
        let whole = self.cycles_in(t).0;
        let edge = self.cycles(whole);
        if edge >= t { edge } else { self.cycles(whole + 1) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_ghz_cycle_is_one_nanosecond() {
        let aiclk = ClockDomain::from_mhz(1000);
        assert_eq!(aiclk.cycles(9), Time::from_ns(9));
        assert_eq!(aiclk.cycles_in(Time::from_ps(9_999)), Cycles(9));
    }

    #[test]
    fn non_integer_periods_round_down_and_edges_round_up() {
        let clk = ClockDomain::from_mhz(1200); // 833.33 ps period
        assert_eq!(clk.cycles(3), Time(2_500));
        assert_eq!(clk.cycles(1), Time(833));
        assert_eq!(clk.next_edge(Time(834)), Time(1_666));
        assert_eq!(clk.next_edge(Time(2_500)), Time(2_500));
    }

    #[test]
    fn display_is_nanoseconds_with_picosecond_digits() {
        assert_eq!(Time(1_204_500).to_string(), "1204.500ns");
    }
}
