//! Plots and reports: per run (Gantt chart, link utilization over time,
//! memory over time, step-time breakdown), per sweep (heatmaps, scaling
//! curves, the time/memory Pareto front), collectives (bus bandwidth against
//! size) and a self-contained `report.html`. Every plot is drawn once per
//! backend, as SVG and PNG, with the DejaVu Sans font compiled into the
//! binary (no system font library).

pub mod chart;
pub mod collective_plot;
pub mod glyphs;
pub mod html;
pub mod run_plots;
pub mod run_report;
pub mod sweep_plots;
pub mod sweep_report;

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::engine::log::write_atomically;

/// Why a report could not be drawn or written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("plot {0}")]
    Plot(String),
    #[error("cannot write {path}: {message}")]
    Io { path: String, message: String },
    /// A bad input data file (a measured curve): where and what.
    #[error("{file}: {message}")]
    Data { file: String, message: String },
}

/// DejaVu Sans (Bitstream Vera license, see `fonts/LICENSE-DejaVu.txt`).
const FONT: &[u8] = include_bytes!("fonts/DejaVuSans.ttf");

/// The font family every plot uses (registered under plotters' default name).
pub const FAMILY: &str = "sans-serif";

/// Register the embedded font with plotters (once per process).
pub fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TrueType file; a failure would only drop text.
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT);
    });
}

/// A drawing error as a [`ReportError`].
pub(crate) fn pe<E: std::fmt::Display>(e: E) -> ReportError {
    ReportError::Plot(e.to_string())
}

/// A picture that can be drawn on any plotters backend.
pub trait Plot {
    /// Width and height in pixels.
    fn size(&self) -> (u32, u32) {
        (1000, 500)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), ReportError>;
}

/// Draw `plot` as `dir/name.svg` and `dir/name.png` (each through a
/// temporary file and a rename); returns the SVG text.
pub fn render(plot: &impl Plot, dir: &Path, name: &str) -> Result<String, ReportError> {
    register_font();
    let size = plot.size();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        plot.draw(&root)?;
        root.present().map_err(pe)?;
    }
    let io = |p: &Path, e: std::io::Error| ReportError::Io {
        path: p.display().to_string(),
        message: e.to_string(),
    };
    let svg_path = dir.join(format!("{name}.svg"));
    write_atomically(&svg_path, svg.as_bytes()).map_err(|e| io(&svg_path, e))?;
    let png_path = dir.join(format!("{name}.png"));
    let tmp = dir.join(format!(".{name}.tmp.png"));
    {
        let font = ab_glyph::FontRef::try_from_slice(FONT).map_err(pe)?;
        let root = glyphs::Glyphs {
            inner: BitMapBackend::new(&tmp, size),
            font,
        }
        .into_drawing_area();
        let drawn = plot.draw(&root).and_then(|()| root.present().map_err(pe));
        if let Err(e) = drawn {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    }
    // Read the drawing back and write it as every output is written (never
    // replacing a symlink or a device file).
    let png = std::fs::read(&tmp);
    let _ = std::fs::remove_file(&tmp);
    let png = png.map_err(|e| io(&png_path, e))?;
    write_atomically(&png_path, &png).map_err(|e| io(&png_path, e))?;
    Ok(svg)
}

/// A colour from a fixed palette.
pub fn color(i: usize) -> RGBColor {
    const C: [(u8, u8, u8); 10] = [
        (31, 119, 180),
        (255, 127, 14),
        (44, 160, 44),
        (214, 39, 40),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (127, 127, 127),
        (188, 189, 34),
        (23, 190, 207),
    ];
    let (r, g, b) = C[i % C.len()];
    RGBColor(r, g, b)
}

/// A value in [0, 1] on a light-yellow to dark-red scale.
pub fn heat(x: f64) -> RGBColor {
    let x = x.clamp(0.0, 1.0);
    let lerp = |a: f64, b: f64| (a + (b - a) * x).round() as u8;
    RGBColor(lerp(255.0, 165.0), lerp(240.0, 15.0), lerp(170.0, 21.0))
}
