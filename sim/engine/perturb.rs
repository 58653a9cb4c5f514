//! Perturbations drawn from the seed: multiplicative jitter, stragglers (a device
//! whose compute is slowed by a factor) and link faults (a link that degrades to a
//! fraction of its bandwidth, or fails, at a time). Each has an explicit form (the
//! caller lists them) and a seeded form drawn from a named component stream.

use std::collections::BTreeMap;

use rand::RngExt;
use thiserror::Error;

use super::rng::{component_rng, ComponentRng};
use super::time::{Time, TimeOverflow};

/// A perturbation that cannot be applied.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PerturbError {
    #[error("jitter spread must be in [0, 1), got {0}")]
    BadSpread(f64),
    #[error("straggler factor must be finite and >= 1, got {0}")]
    BadSlowdown(f64),
    #[error("link degradation fraction must be in (0, 1], got {0}")]
    BadFraction(f64),
    #[error("asked for {asked} stragglers among {available} devices")]
    TooManyStragglers { asked: usize, available: usize },
    #[error(transparent)]
    Time(#[from] TimeOverflow),
}

/// Multiplicative jitter: a duration `d` becomes `ceil(d * u)` with `u` uniform in
/// `[1 - spread, 1 + spread]`, drawn from the component's own stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Jitter {
    spread: f64,
}

impl Jitter {
    pub fn new(spread: f64) -> Result<Jitter, PerturbError> {
        if !(0.0..1.0).contains(&spread) {
            return Err(PerturbError::BadSpread(spread));
        }
        Ok(Jitter { spread })
    }

    pub fn spread(&self) -> f64 {
        self.spread
    }

    /// Jitter one duration with a draw from `rng`.
    pub fn apply(&self, d: Time, rng: &mut ComponentRng) -> Result<Time, TimeOverflow> {
        if self.spread == 0.0 {
            return Ok(d);
        }
        let u: f64 = rng.random_range(1.0 - self.spread..=1.0 + self.spread);
        d.scaled(u)
    }
}

/// Devices whose compute runs slower by a factor (>= 1).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stragglers {
    factors: BTreeMap<u64, f64>,
}

impl Stragglers {
    pub fn new() -> Self {
        Self::default()
    }

    /// Mark `device` as slowed by `factor`.
    pub fn insert(&mut self, device: u64, factor: f64) -> Result<(), PerturbError> {
        if !factor.is_finite() || factor < 1.0 {
            return Err(PerturbError::BadSlowdown(factor));
        }
        self.factors.insert(device, factor);
        Ok(())
    }

    /// Draw `count` distinct stragglers among devices `0..devices` from the
    /// `"stragglers"` stream of `seed`, each slowed by `factor`.
    pub fn draw(seed: u64, devices: u64, count: usize, factor: f64) -> Result<Self, PerturbError> {
        if count as u64 > devices {
            return Err(PerturbError::TooManyStragglers {
                asked: count,
                available: devices as usize,
            });
        }
        let mut rng = component_rng(seed, "stragglers");
        let mut s = Stragglers::new();
        while s.factors.len() < count {
            let d = rng.random_range(0..devices);
            s.insert(d, factor)?;
        }
        Ok(s)
    }

    /// The slowdown of `device` (1.0 for a normal one).
    pub fn factor(&self, device: u64) -> f64 {
        self.factors.get(&device).copied().unwrap_or(1.0)
    }

    /// Apply the slowdown of `device` to a compute duration.
    pub fn apply(&self, device: u64, d: Time) -> Result<Time, TimeOverflow> {
        match self.factors.get(&device) {
            Some(&f) => d.scaled(f),
            None => Ok(d),
        }
    }

    /// Slowed devices in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, f64)> + '_ {
        self.factors.iter().map(|(&d, &f)| (d, f))
    }
}

/// What happens to a link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FaultKind {
    /// Bandwidth drops to this fraction of nominal, in (0, 1].
    Degrade(f64),
    /// The link carries nothing from now on.
    Fail,
}

/// A fault on link `link` (an index into the network's link list) at time `at`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkFault {
    pub link: usize,
    pub at: Time,
    pub kind: FaultKind,
}

impl LinkFault {
    pub fn validate(&self) -> Result<(), PerturbError> {
        match self.kind {
            FaultKind::Degrade(f) if !(f > 0.0 && f <= 1.0) => Err(PerturbError::BadFraction(f)),
            _ => Ok(()),
        }
    }
}

/// Draw `count` link failures uniformly over links `0..links` and times
/// `[0, window)` from the `"faults"` stream of `seed`, sorted by (time, link).
pub fn draw_link_failures(seed: u64, links: usize, count: usize, window: Time) -> Vec<LinkFault> {
    let mut rng = component_rng(seed, "faults");
    let mut out: Vec<LinkFault> = (0..count)
        .map(|_| LinkFault {
            link: rng.random_range(0..links.max(1)),
            at: Time(rng.random_range(0..window.0.max(1))),
            kind: FaultKind::Fail,
        })
        .collect();
    out.sort_by_key(|f| (f.at, f.link));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_in_band() {
        let j = Jitter::new(0.1).unwrap();
        let mut rng = component_rng(7, "link/0");
        for _ in 0..1000 {
            let t = j.apply(Time(1_000_000), &mut rng).unwrap().0;
            assert!((900_000..=1_100_000).contains(&t), "{t}");
        }
        assert!(Jitter::new(1.0).is_err());
    }

    #[test]
    fn stragglers_are_distinct_and_reproducible() {
        let a = Stragglers::draw(3, 64, 5, 2.0).unwrap();
        let b = Stragglers::draw(3, 64, 5, 2.0).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.iter().count(), 5);
        assert!(Stragglers::draw(3, 4, 5, 2.0).is_err());
    }
}
