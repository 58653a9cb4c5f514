//! Bus bandwidth against message size for a collective, with measured
//! curves (nccl-tests' `size_bytes,busbw_gbs` columns) overlaid when given.

use std::path::Path;

use crate::base::csv_columns::{CsvColumns, CsvFault};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::chart::{legend, line, xy_chart};
use super::{color, pe, Plot, ReportError, FAMILY};

/// One curve: a name and (bytes, GB/s) points.
pub type Curve = (String, Vec<(f64, f64)>);

/// Simulated (and measured) bus bandwidth against size, log-scaled sizes.
pub struct BusBandwidth {
    pub title: String,
    pub curves: Vec<Curve>,
}

impl Plot for BusBandwidth {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), ReportError> {
        root.fill(&WHITE).map_err(pe)?;
        let all = self.curves.iter().flat_map(|c| c.1.iter());
        let (x0, x1, y1) = all.fold((f64::MAX, 1.0f64, 0.0f64), |(a, b, c), p| {
            (a.min(p.0), b.max(p.0), c.max(p.1))
        });
        let x0 = if x0 < x1 { x0 } else { x1 / 2.0 };
        let (lo, hi) = (x0.max(1.0) / 1.5, x1 * 1.5);
        let mut chart = xy_chart(
            root,
            &self.title,
            20,
            60,
            (lo..hi)
                .log_scale()
                .with_key_points(power_of_two_ticks(lo, hi)),
            0.0..y1.max(1e-9) * 1.1,
        )?;
        chart
            .configure_mesh()
            .x_desc("message size")
            .y_desc("bus bandwidth (GB/s)")
            .x_label_formatter(&|b| size_label(*b))
            .label_style((FAMILY, 13))
            .draw()
            .map_err(pe)?;
        for (i, (name, pts)) in self.curves.iter().enumerate() {
            line(&mut chart, pts.clone(), color(i * 3), name, true)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }
}

/// Powers of two in [lo, hi] whose exponents are multiples of 1, 2, 5 or
/// 10, the first step giving at most ten ticks (steps that divide 10 keep
/// 1KiB, 1MiB, 1GiB among the ticks; sizes read 1MiB, not 976.6KiB).
fn power_of_two_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (lo.max(1.0).log2().ceil() as i32, hi.log2().floor() as i32);
    let span = (b - a).max(0);
    let step = [1, 2, 5, 10]
        .into_iter()
        .find(|s| span / s < 10)
        .unwrap_or(10);
    let first = (a + step - 1).div_euclid(step) * step;
    (first..=b)
        .step_by(step as usize)
        .map(|e| 2f64.powi(e))
        .collect()
}

/// `1048576` as `1MiB`.
fn size_label(b: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = b;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < units.len() {
        x /= 1024.0;
        u += 1;
    }
    format!("{}{}", (x * 10.0).round() / 10.0, units[u])
}

/// A measured curve from an nccl-tests-like CSV (`#` lines are comments;
/// columns `size_bytes` and `busbw_gbs`), named "measured (file stem)".
pub fn measured_curve(path: &Path) -> Result<Curve, ReportError> {
    let file = path.display().to_string();
    let bytes = crate::base::files::read_bytes(path).map_err(|e| ReportError::Data {
        file: file.clone(),
        message: format!("cannot read the measured curve: {e}"),
    })?;
    let stem = path
        .file_stem()
        .map_or("measured".into(), |s| s.to_string_lossy().into_owned());
    measured_curve_from(&bytes, &file, &stem)
}

/// [`measured_curve`] of CSV text in memory; `file` names it in errors, which
/// carry `file:line:col`.
pub fn measured_curve_from(bytes: &[u8], file: &str, stem: &str) -> Result<Curve, ReportError> {
    let at = |line: u64, col: usize, message: String| ReportError::Data {
        file: format!("{file}:{line}:{col}"),
        message,
    };
    let fault = |f: CsvFault| at(f.line, 1, f.message);
    let table = CsvColumns::new(bytes).map_err(fault)?;
    let col = |name: &str| {
        table.find(name).ok_or_else(|| {
            at(
                table.header_line(),
                1,
                format!("no `{name}` column (the header is `{}`)", table.listed()),
            )
        })
    };
    let (size, busbw) = (col("size_bytes")?, col("busbw_gbs")?);
    let mut pts = Vec::new();
    for row in table.into_rows() {
        let row = row.map_err(fault)?;
        let num = |c: usize, what: &str| {
            row.text(c)
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| {
                    at(
                        row.line(),
                        row.column(c),
                        format!("{what} is not a non-negative number"),
                    )
                })
        };
        let s = num(size, "size_bytes")?;
        let b = num(busbw, "busbw_gbs")?;
        // A zero size has no place on a log axis.
        if s > 0.0 {
            pts.push((s, b));
        }
    }
    if pts.is_empty() {
        return Err(ReportError::Data {
            file: file.to_string(),
            message: "no rows".into(),
        });
    }
    Ok((format!("measured ({stem})"), pts))
}
