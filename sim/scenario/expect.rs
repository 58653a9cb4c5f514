//! Expectations: each figure of a run against its bound, with the verdict
//! and, when it fails, by how much.

use serde::Serialize;

use crate::exec::timed::report::{human_bytes, human_time, Summary};

use super::spec::{Bound, ExpectSpec};

/// One expectation checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// What was checked (`step_time`, `comm_time.all_reduce`, ...).
    pub what: String,
    pub measured: String,
    pub expected: String,
    pub ok: bool,
    /// Why it failed (empty when it passed).
    pub message: String,
}

/// A bound over plain numbers, with how to print them.
fn check_f64(
    what: &str,
    measured: f64,
    value: Option<f64>,
    tolerance: f64,
    min: Option<f64>,
    max: Option<f64>,
    show: &dyn Fn(f64) -> String,
) -> Check {
    let mut expected = Vec::new();
    let mut failures = Vec::new();
    if let Some(v) = value {
        expected.push(format!("{} +-{}%", show(v), tolerance * 100.0));
        let rel = if v == 0.0 {
            if measured == 0.0 {
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            (measured - v) / v
        };
        // NaN (a NaN measurement or expectation) fails: it passed every
        // comparison before.
        if rel.is_nan() || rel.abs() > tolerance {
            failures.push(format!(
                "{} is {:.2}% {} the expected {} (tolerance {}%)",
                show(measured),
                rel.abs() * 100.0,
                if rel > 0.0 { "above" } else { "below" },
                show(v),
                tolerance * 100.0
            ));
        }
    }
    if let Some(lo) = min {
        expected.push(format!(">= {}", show(lo)));
        if measured.is_nan() || lo.is_nan() || measured < lo {
            failures.push(format!(
                "{} is below the minimum {} by {}",
                show(measured),
                show(lo),
                show(lo - measured)
            ));
        }
    }
    if let Some(hi) = max {
        expected.push(format!("<= {}", show(hi)));
        if measured.is_nan() || hi.is_nan() || measured > hi {
            failures.push(format!(
                "{} is above the maximum {} by {}",
                show(measured),
                show(hi),
                show(measured - hi)
            ));
        }
    }
    Check {
        what: what.to_string(),
        measured: show(measured),
        expected: expected.join(", "),
        ok: failures.is_empty(),
        message: failures.join("; "),
    }
}

fn check<T: Copy>(
    what: &str,
    measured: f64,
    b: &Bound<T>,
    f: fn(T) -> f64,
    show: &dyn Fn(f64) -> String,
) -> Check {
    check_f64(
        what,
        measured,
        b.value.map(f),
        b.tolerance,
        b.min.map(f),
        b.max.map(f),
        show,
    )
}

/// Check `spec` against a run's summary (and numerics error, when run).
pub fn check_all(spec: &ExpectSpec, s: &Summary, numerics_error: Option<f64>) -> Vec<Check> {
    let time = |x: f64| human_time(x.max(0.0).round() as u64);
    let bytes = |x: f64| human_bytes(x.max(0.0).round() as u64);
    let ps = |d: crate::topology::Duration| d.ps() as f64;
    let by = |b: crate::topology::ByteSize| b.0 as f64;
    let mut out = Vec::new();
    if let Some(b) = &spec.step_time {
        out.push(check("step_time", s.step_time_ps as f64, b, ps, &time));
    }
    if let Some(b) = &spec.exposed_comm {
        out.push(check(
            "exposed_comm",
            s.mean_exposed_comm_ps as f64,
            b,
            ps,
            &time,
        ));
    }
    for (kind, b) in &spec.comm_time {
        let m = s
            .comm_by_kind
            .iter()
            .find(|k| &k.kind == kind)
            .map_or(0, |k| k.mean_ps);
        out.push(check(&format!("comm_time.{kind}"), m as f64, b, ps, &time));
    }
    for (kind, b) in &spec.comm_bytes {
        let m = s
            .comm_by_kind
            .iter()
            .find(|k| &k.kind == kind)
            .map_or(0, |k| k.bytes);
        out.push(check(
            &format!("comm_bytes.{kind}"),
            m as f64,
            b,
            by,
            &bytes,
        ));
    }
    for (scope, b) in &spec.peak_memory {
        let m = s
            .peak_memory
            .iter()
            .filter(|p| &p.scope == scope)
            .map(|p| p.peak)
            .max()
            .unwrap_or(0);
        out.push(check(
            &format!("peak_memory.{scope}"),
            m as f64,
            b,
            by,
            &bytes,
        ));
    }
    if let Some(b) = &spec.numerics_error {
        match numerics_error {
            Some(e) => out.push(check("numerics_error", e, b, |x| x, &|x| {
                format!("{x:.3e}")
            })),
            None => out.push(Check {
                what: "numerics_error".into(),
                measured: "not run".into(),
                expected: String::new(),
                ok: false,
                message: "expects a numerics error but `run.numerics` is off".into(),
            }),
        }
    }
    if let Some(b) = &spec.ooms {
        out.push(check(
            "ooms",
            s.ooms.len() as f64 + s.ooms_dropped as f64,
            b,
            |x| x as f64,
            &|x| format!("{x}"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_bound_says_by_how_much() {
        let show = |x: f64| format!("{x}");
        let c = check_f64("t", 110.0, Some(100.0), 0.05, None, None, &show);
        assert!(!c.ok);
        assert_eq!(
            c.message,
            "110 is 10.00% above the expected 100 (tolerance 5%)"
        );
        let c = check_f64("t", 104.0, Some(100.0), 0.05, None, Some(103.0), &show);
        assert_eq!(c.message, "104 is above the maximum 103 by 1");
        assert!(check_f64("t", 96.0, Some(100.0), 0.05, Some(90.0), None, &show).ok);
    }
}
