//! Calibration from a user's own collective measurements (`shardsim calibrate
//! --measured FILE.csv`): nccl-tests-like curves read and checked, then the
//! collective calibration of the measured machine (per protocol: base and
//! per-hop latencies, achievable NVLink and network fractions) fitted so that
//! the simulated `auto` choice reproduces the measured times.
//!
//! The simulator is the model: each candidate calibration is judged by timing
//! the measured sizes with [`time_collective`] on the topology they were
//! measured on, so whatever the collectives layer models (algorithms,
//! protocols, the tuner's choice) is what gets fitted. The search is a
//! coordinate descent on the logarithm of each figure with shrinking steps,
//! minimising the squared log error (relative error) on every other size; the
//! other sizes are held out and reported.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::base::csv_columns::{CsvColumns, CsvFault};
use crate::collective::tuner::protocols_for;
use crate::collective::{
    auto_algorithms, time_collective, Algorithm, Calibration, CollectiveOp, Group, Protocol,
    ProtocolParams,
};
use crate::topology::Topology;

use super::CalibrateError;

/// A point: (curve, index in it).
type Point = (usize, usize);
/// An (algorithm, protocol) pair.
type Pair = (Algorithm, Protocol);

/// One measured point: message size (bytes) and time (microseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeasuredPoint {
    pub size: u64,
    pub time_us: f64,
}

/// One measured curve: the points of one operation over one group.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredCurve {
    /// The file it came from (for reports).
    pub file: String,
    /// The operation's name as outputs print it (`all_reduce`).
    pub op_name: String,
    pub op: CollectiveOp,
    pub points: Vec<MeasuredPoint>,
}

/// Read an nccl-tests-like CSV: `#` lines are comments; a header with
/// `size_bytes` and one of `time_us`, `algbw_gbs` or `busbw_gbs` (GB = 1e9
/// bytes; the time is derived from the bandwidth when it is absent, with
/// nccl-tests' bus factor for `op` over `ranks`). Sizes must be positive and
/// strictly increasing, times and bandwidths positive and finite. Errors
/// carry `file:line:col`.
pub fn read_curve(
    bytes: &[u8],
    file: &str,
    op_name: &str,
    op: &CollectiveOp,
    ranks: usize,
) -> Result<MeasuredCurve, CalibrateError> {
    let at = |line: u64, col: usize, message: String| {
        CalibrateError::Measured(format!("{file}:{line}:{col}: {message}"))
    };
    let fault = |f: CsvFault| at(f.line, 1, f.message);
    let table = CsvColumns::new(bytes).map_err(fault)?;
    let header_line = table.header_line();
    let find = |name: &str| table.find(name);
    let listed = || table.listed();
    let size_col = find("size_bytes").ok_or_else(|| {
        at(
            header_line,
            1,
            format!(
                "expected a `size_bytes` column, found the header `{}`",
                listed()
            ),
        )
    })?;
    // Which column gives the time, and how.
    enum Timing {
        Micros,
        AlgBw,
        BusBw,
    }
    let (time_col, timing) = if let Some(c) = find("time_us") {
        (c, Timing::Micros)
    } else if let Some(c) = find("algbw_gbs") {
        (c, Timing::AlgBw)
    } else if let Some(c) = find("busbw_gbs") {
        (c, Timing::BusBw)
    } else {
        return Err(at(
            header_line,
            1,
            format!(
                "expected a `time_us`, `algbw_gbs` or `busbw_gbs` column, found the header `{}`",
                listed()
            ),
        ));
    };
    let bus = op.busbw_factor(ranks);
    let mut points: Vec<MeasuredPoint> = Vec::new();
    let time_name = table.name(time_col).to_string();
    for row in table.into_rows() {
        let row = row.map_err(fault)?;
        let line = row.line();
        let column = |c: usize| row.column(c);
        let text = |c: usize| row.text(c);
        let size: u64 = text(size_col)
            .parse()
            .ok()
            .filter(|s| *s > 0)
            .ok_or_else(|| {
                at(
                    line,
                    column(size_col),
                    format!(
                        "size_bytes: expected a positive whole number of bytes, found `{}`",
                        text(size_col)
                    ),
                )
            })?;
        let value: f64 = text(time_col)
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v > 0.0)
            .ok_or_else(|| {
                at(
                    line,
                    column(time_col),
                    format!(
                        "{}: expected a positive number, found `{}`",
                        time_name,
                        text(time_col)
                    ),
                )
            })?;
        let time_us = match timing {
            Timing::Micros => value,
            Timing::AlgBw => size as f64 / (value * 1e9) * 1e6,
            Timing::BusBw => size as f64 * bus / (value * 1e9) * 1e6,
        };
        if let Some(last) = points.last() {
            if size <= last.size {
                return Err(at(
                    line,
                    column(size_col),
                    format!(
                        "size_bytes: sizes must increase row by row ({size} after {})",
                        last.size
                    ),
                ));
            }
        }
        points.push(MeasuredPoint { size, time_us });
    }
    if points.is_empty() {
        return Err(CalibrateError::Measured(format!(
            "{file}: no measured rows"
        )));
    }
    Ok(MeasuredCurve {
        file: file.to_string(),
        op_name: op_name.to_string(),
        op: op.clone(),
        points,
    })
}

/// What the fit is given: the machine the curves were measured on.
pub struct MeasuredSetup<'a> {
    pub topo: &'a Topology,
    pub group: &'a Group,
    /// Element size of the measured buffers (nccl-tests' float: 4).
    pub elem_bytes: u64,
}

/// One point after the fit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FittedPoint {
    pub file: String,
    pub op: String,
    pub size_bytes: u64,
    pub measured_us: f64,
    pub predicted_us: f64,
    /// Before the fit (the calibration it started from).
    pub initial_us: f64,
    pub algo: String,
    pub protocol: String,
    /// Relative error |predicted - measured| / measured.
    pub error: f64,
    pub held_out: bool,
}

/// The fitted calibration with every point's prediction.
#[derive(Debug, Clone)]
pub struct MeasuredFit {
    pub device_model: String,
    pub initial: Calibration,
    pub fitted: Calibration,
    pub points: Vec<FittedPoint>,
}

impl MeasuredFit {
    /// Median relative error over the held-out points (or all when `held_out` is false).
    pub fn median_error(&self, held_out: bool) -> Option<f64> {
        let mut e: Vec<f64> = self
            .points
            .iter()
            .filter(|p| p.held_out == held_out)
            .map(|p| p.error)
            .collect();
        if e.is_empty() {
            return None;
        }
        e.sort_by(f64::total_cmp);
        let m = e.len() / 2;
        Some(if e.len() % 2 == 1 {
            e[m]
        } else {
            (e[m - 1] + e[m]) / 2.0
        })
    }
}

/// The fitted figures: a name per coordinate and its getter/setter.
const PROTOCOLS: [&str; 4] = ["ll", "ll128", "simple", "nvls"];
const FIELDS: [&str; 5] = [
    "base_us",
    "nvlink_hop_us",
    "network_hop_us",
    "nvlink_fraction",
    "network_fraction",
];

fn protocol_mut(c: &mut Calibration, p: usize) -> &mut ProtocolParams {
    match p {
        0 => &mut c.ll,
        1 => &mut c.ll128,
        2 => &mut c.simple,
        _ => &mut c.nvls,
    }
}

fn field_mut(p: &mut ProtocolParams, f: usize) -> &mut f64 {
    match f {
        0 => &mut p.base_us,
        1 => &mut p.nvlink_hop_us,
        2 => &mut p.network_hop_us,
        3 => &mut p.nvlink_fraction,
        _ => &mut p.network_fraction,
    }
}

fn coordinate(c: &mut Calibration, i: usize) -> &mut f64 {
    field_mut(protocol_mut(c, i / FIELDS.len()), i % FIELDS.len())
}

/// `c` with coordinate `i` multiplied by `factor` (a zero latency starts at
/// 0.1 us; fractions stay in (0, 1]).
fn scaled(c: &Calibration, i: usize, factor: f64) -> Calibration {
    let mut out = *c;
    let x = coordinate(&mut out, i);
    let base = if *x > 0.0 { *x } else { 0.1 };
    let mut v = base * factor;
    if i % FIELDS.len() >= 3 {
        v = v.min(1.0);
    }
    *x = v;
    out
}

/// Every point timed under `cal`: (time in us, algorithm, protocol).
/// One point timed under `cal`, with the tuner's choice or a forced pair.
fn time_point(
    setup: &MeasuredSetup,
    curves: &[MeasuredCurve],
    cal: &Calibration,
    (c, p): Point,
    pair: Option<Pair>,
) -> Result<crate::collective::TimedChoice, crate::collective::CollectiveError> {
    let curve = &curves[c];
    let count = (curve.points[p].size / setup.elem_bytes).max(1);
    time_collective(
        setup.topo,
        setup.group,
        &curve.op,
        count,
        setup.elem_bytes,
        cal,
        pair.map(|x| x.0),
        pair.map(|x| x.1),
    )
}

fn predict(
    setup: &MeasuredSetup,
    curves: &[MeasuredCurve],
    cal: &Calibration,
    which: &[Point],
) -> Result<Vec<(f64, &'static str, &'static str)>, CalibrateError> {
    which
        .iter()
        .map(|&pt| {
            let t = time_point(setup, curves, cal, pt, None)?;
            Ok((t.time.ps() as f64 * 1e-6, t.algo.name(), t.proto.name()))
        })
        .collect()
}

fn residuals(
    setup: &MeasuredSetup,
    curves: &[MeasuredCurve],
    cal: &Calibration,
    which: &[(usize, usize)],
) -> Result<Vec<f64>, CalibrateError> {
    let pred = predict(setup, curves, cal, which)?;
    Ok(which
        .iter()
        .zip(&pred)
        .map(|(&(c, p), (t, _, _))| (t.max(1e-9) / curves[c].points[p].time_us).ln())
        .collect())
}

fn loss(
    setup: &MeasuredSetup,
    curves: &[MeasuredCurve],
    cal: &Calibration,
    which: &[(usize, usize)],
) -> Result<f64, CalibrateError> {
    let pred = predict(setup, curves, cal, which)?;
    Ok(which
        .iter()
        .zip(&pred)
        .map(|(&(c, p), (t, _, _))| {
            let m = curves[c].points[p].time_us;
            let r = (t.max(1e-9) / m).ln();
            r * r
        })
        .sum::<f64>()
        / which.len().max(1) as f64)
}

/// The figures of `coords` the data determines: each protocol owning `k`
/// points (`owned`, by [`protocol_index`]) keeps at most its `k` figures
/// that move its points' times most (summed |d ln t / d ln x|, the pair
/// forced); a protocol owning no point keeps its figures (they act through
/// the tuner's choice only). In `coords`' order.
fn identifiable(
    setup: &MeasuredSetup,
    curves: &[MeasuredCurve],
    cal: &Calibration,
    coords: &[usize],
    owned: &[Vec<(Point, Pair)>],
) -> Vec<usize> {
    let mut keep = Vec::new();
    for (q, points) in owned.iter().enumerate() {
        let mine: Vec<usize> = coords
            .iter()
            .copied()
            .filter(|&i| i / FIELDS.len() == q)
            .collect();
        if points.is_empty() || mine.len() <= points.len() {
            keep.extend(mine);
            continue;
        }
        let mut ranked: Vec<(f64, usize)> = mine
            .iter()
            .map(|&i| {
                let moved = scaled(cal, i, 1.1);
                let pull: f64 = points
                    .iter()
                    .map(|&(pt, pair)| {
                        match (
                            forced(setup, curves, cal, pt, pair),
                            forced(setup, curves, &moved, pt, pair),
                        ) {
                            (Some(a), Some(b)) if a > 0.0 && b > 0.0 => (b / a).ln().abs(),
                            _ => 0.0,
                        }
                    })
                    .sum();
                (pull, i)
            })
            .collect();
        // Largest pull first; ties by coordinate, so the choice is deterministic.
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        keep.extend(
            ranked
                .iter()
                .take(points.len())
                .filter(|r| r.0 > 0.0)
                .map(|r| r.1),
        );
    }
    keep.sort_unstable();
    keep
}

/// Index (into [`PROTOCOLS`]) of the figures an (algorithm, protocol) runs with.
fn protocol_index(algo: Algorithm, proto: Protocol) -> usize {
    match (algo, proto) {
        (Algorithm::Nvls, _) => 3,
        (_, Protocol::Ll) => 0,
        (_, Protocol::Ll128) => 1,
        (_, Protocol::Simple) => 2,
    }
}

/// One point timed with a forced (algorithm, protocol), in us; `None` where
/// the pair does not apply.
fn forced(
    setup: &MeasuredSetup,
    curves: &[MeasuredCurve],
    cal: &Calibration,
    pt: Point,
    pair: Pair,
) -> Option<f64> {
    time_point(setup, curves, cal, pt, Some(pair))
        .ok()
        .map(|t| t.time.ps() as f64 * 1e-6)
}

/// Coordinate descent on the logarithm of each figure in `coords`, shrinking
/// steps, minimising `loss`.
fn descend(
    start: Calibration,
    coords: &[usize],
    mut loss: impl FnMut(&Calibration) -> Result<f64, CalibrateError>,
) -> Result<(Calibration, f64), CalibrateError> {
    let mut best = start;
    let mut best_loss = loss(&best)?;
    for step in [2.0f64, 1.25, 1.06, 1.015] {
        for _pass in 0..12 {
            let mut improved = false;
            for &i in coords {
                for factor in [step, 1.0 / step] {
                    let cand = scaled(&best, i, factor);
                    let l = loss(&cand)?;
                    if l < best_loss * (1.0 - 1e-9) {
                        best = cand;
                        best_loss = l;
                        improved = true;
                    }
                }
            }
            if !improved {
                break;
            }
        }
    }
    Ok((best, best_loss))
}

/// Levenberg-Marquardt on the log of the figures in `coords`, residuals
/// `ln(predicted / measured)` (numeric Jacobian): coordinate steps crawl along
/// the valleys that correlated figures (base latency against bandwidth) make;
/// this follows them. Steps that do not lower the loss are refused.
fn polish(
    start: Calibration,
    coords: &[usize],
    residuals: impl Fn(&Calibration) -> Result<Vec<f64>, CalibrateError>,
) -> Result<Calibration, CalibrateError> {
    let sq = |r: &[f64]| r.iter().map(|x| x * x).sum::<f64>();
    let set = |c: &Calibration, x: &[f64]| {
        let mut out = *c;
        for (&i, &v) in coords.iter().zip(x) {
            let mut e = v.exp();
            if i % FIELDS.len() >= 3 {
                e = e.min(1.0);
            }
            *coordinate(&mut out, i) = e;
        }
        out
    };
    let mut cal = start;
    // Zero latencies have no logarithm: start them small.
    let mut x: Vec<f64> = coords
        .iter()
        .map(|&i| coordinate(&mut cal, i).max(0.01).ln())
        .collect();
    cal = set(&cal, &x);
    let mut r = residuals(&cal)?;
    let mut lambda = 1e-2;
    for _ in 0..40 {
        let h = 1e-4;
        let mut jac = vec![vec![0.0; coords.len()]; r.len()];
        for k in 0..coords.len() {
            let mut xk = x.clone();
            xk[k] += h;
            let rk = residuals(&set(&cal, &xk))?;
            for (row, (a, b)) in jac.iter_mut().zip(rk.iter().zip(&r)) {
                row[k] = (a - b) / h;
            }
        }
        let n = coords.len();
        let mut jtj = vec![vec![0.0; n]; n];
        let mut jtr = vec![0.0; n];
        for (row, ri) in jac.iter().zip(&r) {
            for a in 0..n {
                jtr[a] -= row[a] * ri;
                for b in 0..n {
                    jtj[a][b] += row[a] * row[b];
                }
            }
        }
        let mut accepted = false;
        for _ in 0..8 {
            let mut a = jtj.clone();
            for (k, row) in a.iter_mut().enumerate() {
                row[k] += lambda * (jtj[k][k] + 1e-9);
            }
            let Ok(step) = super::fit::solve(a, jtr.clone()) else {
                lambda *= 10.0;
                continue;
            };
            let xn: Vec<f64> = x
                .iter()
                .zip(&step)
                .map(|(v, d)| v + d.clamp(-1.0, 1.0))
                .collect();
            let cn = set(&cal, &xn);
            let rn = residuals(&cn)?;
            if sq(&rn) < sq(&r) {
                x = xn;
                cal = cn;
                r = rn;
                lambda = (lambda / 3.0).max(1e-9);
                accepted = true;
                break;
            }
            lambda *= 4.0;
        }
        if !accepted {
            break;
        }
    }
    Ok(if sq(&r) < sq(&residuals(&start)?) {
        cal
    } else {
        start
    })
}

/// A start for the search that sidesteps the tuner's choice: each fitted point
/// is given to the (algorithm, protocol) whose time is closest to it, and each
/// protocol's figures are fitted to its own points with that pair forced (a
/// smooth problem, unlike the choice); a few rounds.
fn assigned_start(
    setup: &MeasuredSetup,
    curves: &[MeasuredCurve],
    start: Calibration,
    fit_idx: &[(usize, usize)],
) -> Result<Calibration, CalibrateError> {
    let mut cal = start;
    for _round in 0..3 {
        let mut owned: Vec<Vec<(Point, Pair)>> = vec![Vec::new(); 4];
        for &pt in fit_idx {
            let curve = &curves[pt.0];
            let m = curve.points[pt.1].time_us;
            let mut best: Option<(f64, (Algorithm, Protocol))> = None;
            for &a in auto_algorithms(&curve.op) {
                for &p in protocols_for(a) {
                    if let Some(t) = forced(setup, curves, &cal, pt, (a, p)) {
                        let d = (t.max(1e-9) / m).ln().abs();
                        if best.map_or(true, |(b, _)| d < b) {
                            best = Some((d, (a, p)));
                        }
                    }
                }
            }
            if let Some((_, pair)) = best {
                owned[protocol_index(pair.0, pair.1)].push((pt, pair));
            }
        }
        for (q, points) in owned.iter().enumerate() {
            if points.is_empty() {
                continue;
            }
            let all: Vec<usize> = (0..FIELDS.len()).map(|f| q * FIELDS.len() + f).collect();
            let coords = identifiable(setup, curves, &cal, &all, &owned);
            let (fitted, _) = descend(cal, &coords, |c| {
                let mut sum = 0.0;
                for &(pt, pair) in points {
                    let m = curves[pt.0].points[pt.1].time_us;
                    let t = forced(setup, curves, c, pt, pair).unwrap_or(f64::INFINITY);
                    let r = (t.max(1e-9) / m).ln();
                    sum += r * r;
                }
                Ok(sum)
            })?;
            cal = fitted;
        }
    }
    Ok(cal)
}

/// Fit the collective calibration of the group's device model to `curves`,
/// starting from `initial`: every other size of each curve (from the
/// smallest) is fitted, the rest held out. Needs at least two points per
/// curve and four in all.
pub fn fit_measured(
    setup: &MeasuredSetup,
    curves: &[MeasuredCurve],
    initial: Calibration,
) -> Result<MeasuredFit, CalibrateError> {
    let total: usize = curves.iter().map(|c| c.points.len()).sum();
    if total < 4 || curves.iter().any(|c| c.points.len() < 2) {
        return Err(CalibrateError::Measured(format!(
            "{total} measured points: need at least 4, and 2 per file (half are fitted, half held out)"
        )));
    }
    let mut fit_idx = Vec::new();
    let mut held_idx = Vec::new();
    for (c, curve) in curves.iter().enumerate() {
        for p in 0..curve.points.len() {
            if p % 2 == 0 {
                fit_idx.push((c, p));
            } else {
                held_idx.push((c, p));
            }
        }
    }
    let coords = PROTOCOLS.len() * FIELDS.len();
    let fit_loss = |c: &Calibration| loss(setup, curves, c, &fit_idx);
    // Figures that change nothing (network latencies inside one node) are
    // left as they were.
    // A protocol that owns fewer fitted points than it has live figures
    // (under NCCL's protocol choice LL128 may own a single size) keeps only
    // as many figures as it owns points, its most telling ones: the others
    // are not determined by the data and stay where they started.
    let live_at = |c: &Calibration| -> Result<Vec<usize>, CalibrateError> {
        let here = fit_loss(c)?;
        let mut live = Vec::new();
        for i in 0..coords {
            if fit_loss(&scaled(c, i, 2.0))? != here || fit_loss(&scaled(c, i, 0.5))? != here {
                live.push(i);
            }
        }
        let mut owned: Vec<Vec<(Point, Pair)>> = vec![Vec::new(); PROTOCOLS.len()];
        for &pt in &fit_idx {
            let t = time_point(setup, curves, c, pt, None)?;
            owned[protocol_index(t.algo, t.proto)].push((pt, (t.algo, t.proto)));
        }
        Ok(identifiable(setup, curves, c, &live, &owned))
    };
    // The tuner's choice makes the loss a minimum over candidates, with
    // local minima: search from the given calibration and from one fitted
    // candidate by candidate, keep the better.
    let search = |from: Calibration| -> Result<(Calibration, f64), CalibrateError> {
        let live = live_at(&from)?;
        let (c, _) = descend(from, &live, fit_loss)?;
        let c = polish(c, &live, |c| residuals(setup, curves, c, &fit_idx))?;
        descend(c, &live, fit_loss)
    };
    let (mut best, best_loss) = search(initial)?;
    let (other, other_loss) = search(assigned_start(setup, curves, initial, &fit_idx)?)?;
    if other_loss < best_loss {
        best = other;
    }
    // Four significant digits: the fit is not finer than that, and the file
    // written from it then predicts exactly what is reported here.
    for i in 0..coords {
        let x = coordinate(&mut best, i);
        *x = four_digits(*x);
    }
    let all: Vec<(usize, usize)> = curves
        .iter()
        .enumerate()
        .flat_map(|(c, curve)| (0..curve.points.len()).map(move |p| (c, p)))
        .collect();
    let fitted = predict(setup, curves, &best, &all)?;
    let before = predict(setup, curves, &initial, &all)?;
    let held: std::collections::BTreeSet<(usize, usize)> = held_idx.into_iter().collect();
    let points = all
        .iter()
        .zip(fitted.iter().zip(&before))
        .map(|(&(c, p), (&(t, algo, proto), &(t0, _, _)))| {
            let m = curves[c].points[p];
            FittedPoint {
                file: curves[c].file.clone(),
                op: curves[c].op_name.clone(),
                size_bytes: m.size,
                measured_us: m.time_us,
                predicted_us: t,
                initial_us: t0,
                algo: algo.to_string(),
                protocol: proto.to_string(),
                error: (t - m.time_us).abs() / m.time_us,
                held_out: held.contains(&(c, p)),
            }
        })
        .collect();
    Ok(MeasuredFit {
        device_model: setup.group.device_model(setup.topo),
        initial,
        fitted: best,
        points,
    })
}

fn four_digits(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(3 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// The fitted calibration as a topology file's `[collective]` table (one
/// entry for the device model), ready to add to the measured topology's file.
pub fn collective_table(fit: &MeasuredFit) -> Result<toml::Table, CalibrateError> {
    let entry = toml::Value::try_from(fit.fitted)
        .map_err(|e| CalibrateError::Measured(format!("writing the calibration: {e}")))?;
    let mut table = toml::Table::new();
    table.insert(fit.device_model.clone(), entry);
    Ok(table)
}

/// The figures that moved, `protocol.field: before -> after`, in a fixed order.
pub fn changes(fit: &MeasuredFit) -> BTreeMap<String, (f64, f64)> {
    let mut out = BTreeMap::new();
    let (mut a, mut b) = (fit.initial, fit.fitted);
    for i in 0..PROTOCOLS.len() * FIELDS.len() {
        let (x, y) = (*coordinate(&mut a, i), *coordinate(&mut b, i));
        if x != y {
            out.insert(
                format!(
                    "{}.{}",
                    PROTOCOLS[i / FIELDS.len()],
                    FIELDS[i % FIELDS.len()]
                ),
                (x, y),
            );
        }
    }
    out
}
