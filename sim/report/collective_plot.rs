//! Bus bandwidth against message size for a collective, with a measured
//! curve (nccl-tests' `size,busbw` columns) overlaid when given.

use plotters::coord::Shift;
use plotters::prelude::*;

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
        let mut chart = ChartBuilder::on(root)
            .caption(self.title.as_str(), (FAMILY, 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((x0.max(1.0)..x1 * 1.5).log_scale(), 0.0..y1.max(1e-9) * 1.1)
            .map_err(pe)?;
        chart
            .configure_mesh()
            .x_desc("message size")
            .y_desc("bus bandwidth (GB/s)")
            .x_label_formatter(&|b| size_label(*b))
            .label_style((FAMILY, 13))
            .draw()
            .map_err(pe)?;
        for (i, (name, pts)) in self.curves.iter().enumerate() {
            let c = color(i * 3);
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                .map_err(pe)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))
                .map_err(pe)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FAMILY, 13))
            .draw()
            .map_err(pe)?;
        Ok(())
    }
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
