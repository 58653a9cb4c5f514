//! Lower bounds of a pipelined plan's estimate at a larger size from its
//! walk at a smaller size of the same shape, so a sweep (`collective`,
//! `bench collective`) skips NVLS-tree's plan and walk where it cannot win.
//!
//! Why it holds: every time in the longest-path walk (`critical.rs`) is a
//! maximum, over paths through the moves, of fixed latencies (hops, link
//! latencies, per-step overheads) plus bytes over bandwidths. When every
//! move's bytes scale by `s` (the same plan with every piece `s` times
//! longer), the path is `f(s) = max_P (A_P + s B_P)`, convex in `s`, with
//! `f(0)` the zero-bandwidth path. So for `s >= 1`,
//! `f(s) >= f(1) + (s - 1) (f(1) - f(0))`: one walk at size `x`, with its
//! zero-bandwidth column, bounds the estimate at every multiple of `x`.
//!
//! The shape is the same only where the pieces are exact: NVLS-tree cuts the
//! message into `m` parts (one per local rank) of `per` chunks, so a
//! message of `T` elements with `T % (m per) == 0` has every piece `T / (m
//! per)` long, and `s T` has every piece `s` times that. A cache belongs to
//! one topology, group and calibration (the sweep's).
//!
//! It also keeps the runs that time trees past the chunk budget
//! ([`super::tuner::TreePeriod`]): at every size past the budget the run is
//! the same tree of the same chunks, so a sweep runs it once; and the
//! rotation quotients of its plans (`channels.rs`), which plans of one
//! algorithm share across sizes.

use super::calibration::Calibration;
use super::channels::QuotientKey;
use super::critical::Paths;
use super::kinds::{Algorithm, Protocol};
use super::timing::Quotient;
use super::tuner::TimedChoice;

/// A tree's (or NVLS-tree's) period run: its algorithm, elements, chunk,
/// and the protocol it was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PeriodKey {
    pub algo: Algorithm,
    pub run_total: u64,
    /// The run's chunk (NCCL 2.19's tree chunk follows the message's size).
    pub chunk_bytes: u64,
    pub elem_bytes: u64,
    pub proto: Option<Protocol>,
}

/// A period run's timing and its period (`(span, steps)`; `None` where the
/// run has no full stretch).
pub(crate) type PeriodRun = (TimedChoice, Option<(u64, u64)>);

/// A plan shape: what fixes NVLS-tree's moves but the pieces' length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shape {
    pub algo: Algorithm,
    pub ranks: usize,
    /// Parts (local ranks) and chunks per part.
    pub parts: usize,
    pub per: usize,
    pub elem_bytes: u64,
    pub protos: Vec<Protocol>,
}

impl Shape {
    /// The shape of a message of `total` elements, where its pieces are
    /// exact (else `None`: no bound from it, none recorded).
    pub(crate) fn exact(self, total: u64) -> Option<Shape> {
        let k = (self.parts as u64).checked_mul(self.per as u64)?;
        (k > 0 && total > 0 && total % k == 0).then_some(self)
    }
}

/// Walks already made in a sweep: shape, message elements, paths.
#[derive(Debug, Clone, Default)]
pub struct PathCache {
    entries: Vec<(Shape, u64, Paths)>,
    periods: Vec<(PeriodKey, PeriodRun)>,
    /// Ranks, what the quotient depends on, the quotient.
    quotients: Vec<(usize, QuotientKey, Option<Quotient>)>,
}

impl PathCache {
    pub fn new() -> PathCache {
        PathCache::default()
    }

    /// A period run made earlier in the sweep.
    pub(crate) fn period(&self, key: &PeriodKey) -> Option<PeriodRun> {
        self.periods.iter().find(|(k, _)| k == key).map(|(_, r)| *r)
    }

    /// A quotient found earlier in the sweep.
    pub(crate) fn quotient(&self, ranks: usize, key: &QuotientKey) -> Option<&Option<Quotient>> {
        self.quotients
            .iter()
            .find(|(n, k, _)| *n == ranks && k == key)
            .map(|(_, _, q)| q)
    }

    /// Keep a quotient.
    pub(crate) fn record_quotient(&mut self, ranks: usize, key: QuotientKey, q: Option<Quotient>) {
        self.quotients.push((ranks, key, q));
    }

    /// Keep a period run.
    pub(crate) fn record_period(&mut self, key: PeriodKey, run: PeriodRun) {
        self.periods.push((key, run));
    }

    /// Keep the walk of `shape` at `total` elements.
    pub(crate) fn record(&mut self, shape: Shape, total: u64, paths: Paths) {
        self.entries.push((shape, total, paths));
    }

    /// A lower bound (picoseconds, base latency included) of the estimate
    /// of `shape` at `total` elements with its cheapest protocol, from a
    /// walk of the same shape at a size `total` is a multiple of.
    pub(crate) fn bound(&self, shape: &Shape, total: u64, cal: &Calibration) -> Option<f64> {
        let mut best: Option<f64> = None;
        for (s, x, paths) in &self.entries {
            if s != shape || *x == 0 || total % x != 0 {
                continue;
            }
            let scale = (total / x) as f64;
            let b = shape
                .protos
                .iter()
                .map(|&p| {
                    let k = Protocol::ALL.iter().position(|&q| q == p).unwrap_or(0);
                    let (f1, f0) = (paths.path[k], paths.zero_bw[k]);
                    cal.params(shape.algo, p).base_us * 1e6 + f1 + (scale - 1.0) * (f1 - f0)
                })
                .fold(f64::INFINITY, f64::min);
            best = Some(best.map_or(b, |a: f64| a.max(b)));
        }
        best
    }
}
