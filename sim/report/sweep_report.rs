//! A sweep's pictures and `report.html` next to its CSV: heatmaps, scaling
//! curves and the Pareto front, with the result table.

use std::collections::BTreeMap;
use std::path::Path;

use crate::engine::log::write_atomically;

use super::html::{page, table, Block};
use super::sweep_plots::{Heatmap, Pareto, Results, Scaling};
use super::{render, ReportError};

/// Draw the sweep pictures into `dir` and write `dir/report.html`.
/// `heatmap` and `scaling` name keys (defaults: the first two keys; the
/// first key whose values are all numbers).
pub fn write_sweep_report(
    dir: &Path,
    header: &[String],
    rows: &BTreeMap<usize, Vec<String>>,
    keys: &[String],
    heatmap: Option<(String, String)>,
    scaling: Option<String>,
) -> Result<Vec<String>, ReportError> {
    std::fs::create_dir_all(dir).map_err(|e| ReportError::Io {
        path: dir.display().to_string(),
        message: e.to_string(),
    })?;
    let results = Results { header, rows, keys };
    let mut blocks = Vec::new();
    let mut files = Vec::new();
    let heatmap = heatmap.or_else(|| (keys.len() >= 2).then(|| (keys[0].clone(), keys[1].clone())));
    if let Some((x, y)) = heatmap {
        let svg = render(
            &Heatmap {
                results: results.clone(),
                x,
                y,
            },
            dir,
            "heatmap",
        )?;
        blocks.push(Block::Svg(svg, "Step time (ms) per sweep point".into()));
        files.push("heatmap".to_string());
    }
    let numeric = |k: &String| {
        let c = header.iter().position(|h| h == k);
        c.is_some_and(|c| rows.values().all(|r| r[c].parse::<f64>().is_ok()))
    };
    let scaling = scaling
        .or_else(|| {
            keys.iter()
                .find(|k| k.ends_with("nodes") && numeric(k))
                .cloned()
        })
        .or_else(|| keys.iter().find(|k| numeric(k)).cloned());
    if let Some(x) = scaling {
        let svg = render(
            &Scaling {
                results: results.clone(),
                x,
            },
            dir,
            "scaling",
        )?;
        blocks.push(Block::Svg(svg, "Scaling of the step time".into()));
        files.push("scaling".to_string());
    }
    let svg = render(&Pareto(results.clone()), dir, "pareto")?;
    blocks.push(Block::Svg(svg, "Step time against peak memory".into()));
    files.push("pareto".to_string());
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let shown: Vec<Vec<String>> = rows.values().take(500).cloned().collect();
    blocks.push(Block::Heading(format!("Results ({} points)", rows.len())));
    blocks.push(Block::Table(table(&header_refs, &shown)));
    let html = page("shardsim sweep report", &blocks);
    let p = dir.join("report.html");
    write_atomically(&p, html.as_bytes()).map_err(|e| ReportError::Io {
        path: p.display().to_string(),
        message: e.to_string(),
    })?;
    Ok(files)
}
