//! Simulated time: integer picoseconds with checked arithmetic, and the one
//! rounding rule that turns bytes at a rate into picoseconds.
//!
//! Rounding rule (used everywhere a duration is derived from bytes and a rate):
//! the duration of `b` bytes at `r` bytes/s is `ceil(b * 1e12 / r)` picoseconds.
//! When both are integers (`transfer_ps_exact`) this is exact integer arithmetic.
//! When the rate is a fair share (a float), the quotient `x` is computed in `f64`;
//! if `x` is within `1e-3 + 1e-13 * x` ps of an integer it is snapped to that
//! integer, otherwise it is rounded up. The snap absorbs float error (so that an
//! exact closed form does not gain a picosecond from rounding noise); it can make a
//! duration shorter than the true one by at most that tolerance (below 0.002 ps
//! for anything under 10 s), and otherwise a duration is at most 1 ps longer.

use std::fmt;

use thiserror::Error;

/// Picoseconds per second.
pub const PS_PER_SEC: u64 = 1_000_000_000_000;

/// Arithmetic on simulated time left the `u64` picosecond range (about 213 days).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("simulated time overflow: {what}")]
pub struct TimeOverflow {
    pub what: String,
}

/// An instant or a duration in simulated time, in picoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(pub u64);

impl Time {
    pub const ZERO: Time = Time(0);

    pub fn ps(self) -> u64 {
        self.0
    }

    pub fn from_ns(ns: u64) -> Result<Time, TimeOverflow> {
        ns.checked_mul(1_000)
            .map(Time)
            .ok_or_else(|| overflow(format!("{ns} ns")))
    }

    pub fn from_us(us: u64) -> Result<Time, TimeOverflow> {
        us.checked_mul(1_000_000)
            .map(Time)
            .ok_or_else(|| overflow(format!("{us} us")))
    }

    /// `self + d`, an error instead of a wrap.
    pub fn checked_add(self, d: Time) -> Result<Time, TimeOverflow> {
        self.0
            .checked_add(d.0)
            .map(Time)
            .ok_or_else(|| overflow(format!("{} ps + {} ps", self.0, d.0)))
    }

    /// `self - earlier`, an error if `earlier` is later.
    pub fn checked_sub(self, earlier: Time) -> Result<Time, TimeOverflow> {
        self.0
            .checked_sub(earlier.0)
            .map(Time)
            .ok_or_else(|| overflow(format!("{} ps - {} ps is negative", self.0, earlier.0)))
    }

    /// `self * k`, an error instead of a wrap.
    pub fn checked_mul(self, k: u64) -> Result<Time, TimeOverflow> {
        self.0
            .checked_mul(k)
            .map(Time)
            .ok_or_else(|| overflow(format!("{} ps * {k}", self.0)))
    }

    /// Seconds as a float (for reports only; never fed back into time).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / PS_PER_SEC as f64
    }

    /// Scale a duration by a positive factor (jitter, stragglers), rounding up.
    pub fn scaled(self, factor: f64) -> Result<Time, TimeOverflow> {
        ceil_to_ps(self.0 as f64 * factor)
            .ok_or_else(|| overflow(format!("{} ps * {factor}", self.0)))
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ps", self.0)
    }
}

fn overflow(what: String) -> TimeOverflow {
    TimeOverflow { what }
}

/// `ceil(bytes * 1e12 / bytes_per_sec)` in exact integer arithmetic.
pub fn transfer_ps_exact(bytes: u64, bytes_per_sec: u64) -> Result<Time, TimeOverflow> {
    if bytes_per_sec == 0 {
        return Err(overflow(format!("{bytes} bytes at 0 bytes/s never finish")));
    }
    let num = bytes as u128 * PS_PER_SEC as u128;
    let q = num.div_ceil(bytes_per_sec as u128);
    u64::try_from(q)
        .map(Time)
        .map_err(|_| overflow(format!("{bytes} bytes at {bytes_per_sec} bytes/s")))
}

/// The rounding rule for a float byte count at a float rate (see the module doc).
pub fn transfer_ps(bytes: f64, bytes_per_sec: f64) -> Result<Time, TimeOverflow> {
    if bytes <= 0.0 {
        return Ok(Time::ZERO);
    }
    if bytes_per_sec.is_nan() || bytes_per_sec <= 0.0 || !bytes_per_sec.is_finite() {
        return Err(overflow(format!(
            "{bytes} bytes at {bytes_per_sec} bytes/s never finish"
        )));
    }
    ceil_to_ps(bytes * PS_PER_SEC as f64 / bytes_per_sec)
        .ok_or_else(|| overflow(format!("{bytes} bytes at {bytes_per_sec} bytes/s")))
}

/// Round a non-negative float number of picoseconds up, snapping values within
/// `1e-3 + 1e-13 * x` of an integer to that integer. `None` when out of range.
pub fn ceil_to_ps(x: f64) -> Option<Time> {
    if !x.is_finite() || x < 0.0 {
        return None;
    }
    let nearest = x.round();
    let v = if (x - nearest).abs() <= 1e-3 + 1e-13 * x {
        nearest
    } else {
        x.ceil()
    };
    // 2^64 as f64 is exactly representable; anything at or above it overflows.
    if v >= 18_446_744_073_709_551_616.0 {
        return None;
    }
    Some(Time(v as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_rounds_up() {
        assert_eq!(transfer_ps_exact(1, 3).unwrap(), Time(333_333_333_334));
        assert_eq!(
            transfer_ps_exact(1_000_000, 100_000_000_000).unwrap(),
            Time(10_000_000)
        );
        assert!(transfer_ps_exact(u64::MAX, 1).is_err());
        assert!(Time(u64::MAX).checked_add(Time(1)).is_err());
    }

    #[test]
    fn float_rule_matches_exact_on_integers() {
        for (b, r) in [
            (1u64, 3u64),
            (1_000_000, 100_000_000_000),
            (4096, 25_000_000_000),
            (7, 9),
        ] {
            assert_eq!(
                transfer_ps(b as f64, r as f64).unwrap(),
                transfer_ps_exact(b, r).unwrap()
            );
        }
    }
}
