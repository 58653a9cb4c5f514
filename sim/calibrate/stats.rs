//! Median and spread of repeated timings.

use serde::Serialize;

/// Summary of repeated measurements of one thing (seconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stats {
    pub median_s: f64,
    /// Interquartile range over the median (0 when every run took the same time).
    pub spread: f64,
    pub min_s: f64,
    pub max_s: f64,
    pub repeats: usize,
}

/// The value at quantile `q` of sorted `v` (linear interpolation).
fn quantile(v: &[f64], q: f64) -> f64 {
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

impl Stats {
    /// Stats of `samples` (at least one, all finite).
    pub fn of(samples: &[f64]) -> Option<Stats> {
        if samples.is_empty() || samples.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let median = quantile(&v, 0.5);
        let iqr = quantile(&v, 0.75) - quantile(&v, 0.25);
        Some(Stats {
            median_s: median,
            spread: if median > 0.0 { iqr / median } else { 0.0 },
            min_s: v[0],
            max_s: v[v.len() - 1],
            repeats: v.len(),
        })
    }
}
