//! Sweeps: a grid (every combination) or a list of points over any scenario
//! field, each point a scenario run giving one CSV row. Points are numbered in
//! a fixed order (grid keys sorted, the last varying fastest), a shard `i/N`
//! takes every `N`-th point of a fixed shuffled order from the `i`-th (so
//! shards get like mixes of cheap and costly points), and rows are always
//! written sorted by point, so the file does not depend on the number of
//! threads, the sharding or the order in which points finish.
//!
//! Keys are dotted paths into the scenario file (`mesh.shape`,
//! `topology.nodes`, `run.seed`); `set.KEY`, `topology.set.KEY` or a key
//! that names no scenario field (`nvlink.bandwidth`) is a topology override
//! as `--set KEY=...` takes it elsewhere.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use rayon::prelude::*;
use serde::Deserialize;

use crate::engine::log::write_atomically;

use super::runner::{run_scenario, RunConfig, ScenarioResult};
use super::workload::ProgramCache;
use super::{toml_error, Scenario, ScenarioError, DEFAULT_SCENARIO};

/// A sweep file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepFile {
    pub format: u32,
    /// The base scenario, relative to the sweep file; `default` is the
    /// embedded default.
    pub scenario: String,
    /// Every combination of these values.
    #[serde(default)]
    pub grid: toml::Table,
    /// Or an explicit list of points.
    #[serde(default)]
    pub points: Vec<toml::Table>,
    #[serde(default)]
    pub plots: PlotSpec,
}

/// Which sweep keys the plots use (defaults: the first keys of the grid).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlotSpec {
    /// Heatmap columns and rows.
    #[serde(default)]
    pub heatmap: Option<(String, String)>,
    /// The x axis of the scaling plot (a numeric key, e.g. `topology.nodes`).
    #[serde(default)]
    pub scaling: Option<String>,
}

/// One point: its number and the values it assigns.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub index: usize,
    pub values: Vec<(String, toml::Value)>,
}

/// A loaded sweep: the file, the base scenario as a table, its points.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub file: SweepFile,
    pub keys: Vec<String>,
    pub points: Vec<Point>,
    base: toml::Table,
    base_file: String,
    base_dir: Option<PathBuf>,
}

/// Result rows: the header and the rows by point.
pub type Table = (Vec<String>, BTreeMap<usize, Vec<String>>);

/// The metric columns of a row, after `point` and the sweep keys.
pub const METRICS: &[&str] = &[
    "status",
    "devices",
    "mesh",
    "overrides",
    "step_time_us",
    "compute_busy_us",
    "comm_us",
    "exposed_comm_us",
    "all_reduce_us",
    "all_gather_us",
    "reduce_scatter_us",
    "all_to_all_us",
    "collective_permute_us",
    "comm_bytes",
    "peak_memory_bytes",
    "numerics_max_abs_error",
    "failed_checks",
    "error",
];

/// A value as a short label (`[-1, 8]` is `-1x8`).
pub fn label(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Array(a) if a.iter().all(|x| x.is_integer()) && !a.is_empty() => a
            .iter()
            .map(|x| x.as_integer().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
            .join("x"),
        other => other.to_string(),
    }
}

fn sweep_err(m: impl Into<String>) -> ScenarioError {
    ScenarioError::Sweep(m.into())
}

/// The top-level fields of a scenario file; a key starting with anything
/// else is a topology override.
const SCENARIO_FIELDS: [&str; 8] = [
    "format",
    "name",
    "description",
    "topology",
    "mesh",
    "workload",
    "run",
    "expect",
];

/// Set `key` (see the module doc) in a scenario table. A key that names no
/// scenario field (`nvlink.bandwidth`) is a topology override, as `--set`
/// takes it in `exec`, `collective` and `topology`.
pub fn assign(table: &mut toml::Table, key: &str, value: toml::Value) -> Result<(), ScenarioError> {
    let first = key.split('.').next().unwrap_or_default();
    let set_key = key
        .strip_prefix("topology.set.")
        .or_else(|| key.strip_prefix("set."))
        .or_else(|| (!SCENARIO_FIELDS.contains(&first)).then_some(key));
    let parts: Vec<String> = match set_key {
        Some(k) => vec!["topology".into(), "set".into(), k.into()],
        None => key.split('.').map(str::to_string).collect(),
    };
    if parts.iter().any(String::is_empty) {
        return Err(sweep_err(format!("bad key '{key}'")));
    }
    let mut t = table;
    for p in &parts[..parts.len() - 1] {
        t = t
            .entry(p.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .ok_or_else(|| sweep_err(format!("key '{key}': '{p}' is not a section")))?;
    }
    t.insert(parts[parts.len() - 1].clone(), value);
    Ok(())
}

impl Sweep {
    /// Read a sweep file (its scenario relative to it).
    pub fn load(path: &Path) -> Result<Sweep, ScenarioError> {
        let text = crate::base::files::read_text(path)?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Sweep::parse(&text, &path.display().to_string(), &dir)
    }

    /// Read a sweep file's text (`file_name` names it in errors); a scenario
    /// path in it is relative to `dir`.
    pub fn parse(text: &str, file_name: &str, dir: &Path) -> Result<Sweep, ScenarioError> {
        let file: SweepFile = toml::from_str(text).map_err(|e| toml_error(&e, text, file_name))?;
        if file.format != super::FORMAT_VERSION {
            return Err(sweep_err(format!(
                "{file_name}: format {} is not supported (this build reads format {})",
                file.format,
                super::FORMAT_VERSION
            )));
        }
        let (base_text, base_file, base_dir) = if file.scenario == "default" {
            (
                DEFAULT_SCENARIO.to_string(),
                "default.toml".to_string(),
                None,
            )
        } else {
            let p = dir.join(&file.scenario);
            let t = crate::base::files::read_text(&p)?;
            let d = p.parent().map(Path::to_path_buf).unwrap_or_default();
            (t, p.display().to_string(), Some(d))
        };
        // The base must be a valid scenario on its own.
        Scenario::parse(&base_text, &base_file, base_dir.clone())?;
        let base: toml::Table =
            toml::from_str(&base_text).map_err(|e| toml_error(&e, &base_text, &base_file))?;
        let (keys, points) = expand(&file)?;
        let sweep = Sweep {
            file,
            keys,
            points,
            base,
            base_file,
            base_dir,
        };
        // A point whose scenario cannot even be built (a misspelt key, a
        // value of the wrong type) is a mistake in the sweep file, not a
        // result: refuse it here rather than write an error row and exit 0.
        for p in &sweep.points {
            sweep.scenario(p).map_err(|e| {
                let set: Vec<String> = p
                    .values
                    .iter()
                    .map(|(k, v)| format!("{k} = {}", label(v)))
                    .collect();
                sweep_err(format!(
                    "{file_name}: point {} ({}): {e}",
                    p.index,
                    set.join(", ")
                ))
            })?;
        }
        Ok(sweep)
    }

    /// The scenario of one point.
    pub fn scenario(&self, p: &Point) -> Result<Scenario, ScenarioError> {
        let mut t = self.base.clone();
        for (k, v) in &p.values {
            assign(&mut t, k, v.clone())?;
        }
        let mut sc = Scenario::from_table(&t, &self.base_file, self.base_dir.clone())?;
        sc.name = format!("{}-point{}", sc.name, p.index);
        Ok(sc)
    }

    /// The CSV header.
    pub fn header(&self) -> Vec<String> {
        std::iter::once("point".to_string())
            .chain(self.keys.iter().cloned())
            .chain(METRICS.iter().map(|m| m.to_string()))
            .collect()
    }
}

/// The keys and points of a sweep file.
fn expand(file: &SweepFile) -> Result<(Vec<String>, Vec<Point>), ScenarioError> {
    match (file.grid.is_empty(), file.points.is_empty()) {
        (false, false) => Err(sweep_err("give either [grid] or [[points]], not both")),
        (true, true) => Err(sweep_err("the sweep has no [grid] and no [[points]]")),
        (false, true) => {
            let mut axes: Vec<(String, Vec<toml::Value>)> = Vec::new();
            for (k, v) in &file.grid {
                let values = v.as_array().filter(|a| !a.is_empty()).ok_or_else(|| {
                    sweep_err(format!("grid key '{k}' needs a non-empty list of values"))
                })?;
                axes.push((k.clone(), values.clone()));
            }
            let total = axes
                .iter()
                .try_fold(1usize, |acc, (_, v)| acc.checked_mul(v.len()));
            let total = total
                .filter(|&t| t <= 1_000_000)
                .ok_or_else(|| sweep_err("the grid has more than a million points"))?;
            let points = (0..total)
                .map(|index| {
                    let mut rest = index;
                    let mut values = vec![(String::new(), toml::Value::Boolean(false)); axes.len()];
                    for (i, (k, vs)) in axes.iter().enumerate().rev() {
                        values[i] = (k.clone(), vs[rest % vs.len()].clone());
                        rest /= vs.len();
                    }
                    Point { index, values }
                })
                .collect();
            Ok((axes.into_iter().map(|a| a.0).collect(), points))
        }
        (true, false) => {
            let mut keys: Vec<String> = Vec::new();
            for p in &file.points {
                for k in p.keys() {
                    if !keys.contains(k) {
                        keys.push(k.clone());
                    }
                }
            }
            keys.sort();
            let points = file
                .points
                .iter()
                .enumerate()
                .map(|(index, t)| Point {
                    index,
                    values: t.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                })
                .collect();
            Ok((keys, points))
        }
    }
}

/// Parse `i/N` (0 <= i < N).
pub fn parse_shard(text: &str) -> Result<(usize, usize), ScenarioError> {
    let bad = || {
        sweep_err(format!(
            "--shard {text}: expected i/N with 0 <= i < N, e.g. 0/4"
        ))
    };
    let (i, n) = text.split_once('/').ok_or_else(bad)?;
    let (i, n): (usize, usize) = (
        i.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if n == 0 || i >= n {
        return Err(bad());
    }
    Ok((i, n))
}

/// Is point `index` of `total` in shard `i` of `n`? Points are dealt
/// round-robin in a fixed shuffled order (a ChaCha stream with a constant
/// seed, so the same on every machine): dealt in grid order, shard `i`
/// would get every point whose fastest-varying value is the `i`-th, e.g.
/// all the 16-node points of a sweep over 2, 4, 8 and 16 nodes.
pub fn in_shard(index: usize, total: usize, (i, n): (usize, usize)) -> bool {
    shard_order(total)[index] % n == i
}

/// Each point's position in the dealing order.
fn shard_order(total: usize) -> Vec<usize> {
    use rand::seq::SliceRandom;
    let mut order: Vec<usize> = (0..total).collect();
    order.shuffle(&mut crate::engine::component_rng(0, "sweep-shards"));
    let mut position = vec![0; total];
    for (pos, &point) in order.iter().enumerate() {
        position[point] = pos;
    }
    position
}

fn us(ps: u64) -> String {
    format!("{:.3}", ps as f64 / 1e6)
}

/// The metric cells of a finished run, in [`METRICS`] order.
pub fn metric_cells(r: &ScenarioResult) -> Vec<String> {
    let s = &r.summary;
    let t = &s.timing;
    let n = t.per_device.len().max(1) as u64;
    let kind = |k: &str| {
        t.comm_by_kind
            .iter()
            .find(|c| c.kind == k)
            .map_or(0, |c| c.mean_ps)
    };
    let failed: Vec<&str> = s
        .checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| c.what.as_str())
        .collect();
    // A model's step (`[workload] model`) is timed per chunk, not as a
    // timeline of kernels and collectives: its busy and communication
    // columns are left empty rather than shown as zeros.
    let timeline = s.model_step.is_none();
    let traced = |v: String| if timeline { v } else { String::new() };
    vec![
        if t.stopped { "oom" } else { "ok" }.to_string(),
        t.devices.to_string(),
        s.mesh.clone(),
        s.overrides.join(" "),
        us(t.step_time_ps),
        traced(us(t
            .per_device
            .iter()
            .map(|d| d.compute_busy_ps)
            .sum::<u64>()
            / n)),
        traced(us(
            t.per_device.iter().map(|d| d.comm_busy_ps).sum::<u64>() / n
        )),
        traced(us(t.mean_exposed_comm_ps)),
        traced(us(kind("all_reduce"))),
        traced(us(kind("all_gather"))),
        traced(us(kind("reduce_scatter"))),
        traced(us(kind("all_to_all"))),
        traced(us(kind("collective_permute"))),
        traced(
            t.comm_by_kind
                .iter()
                .map(|c| c.bytes)
                .sum::<u64>()
                .to_string(),
        ),
        t.peak_memory
            .iter()
            .filter(|p| p.scope == "global")
            .map(|p| p.peak)
            .max()
            .unwrap_or(0)
            .to_string(),
        s.numerics
            .as_ref()
            .map_or(String::new(), |x| format!("{:e}", x.max_abs_error)),
        failed.join(" "),
        String::new(),
    ]
}

/// Run one point into its CSV row (a failed point is a row with its error).
pub fn run_point(sweep: &Sweep, p: &Point, cache: &ProgramCache) -> Vec<String> {
    let mut row = vec![p.index.to_string()];
    for k in &sweep.keys {
        row.push(
            p.values
                .iter()
                .find(|(key, _)| key == k)
                .map_or(String::new(), |(_, v)| label(v)),
        );
    }
    let cfg = RunConfig {
        record_memory: false,
        ..RunConfig::default()
    };
    match sweep
        .scenario(p)
        .and_then(|sc| run_scenario(&sc, cache, cfg))
    {
        Ok(r) => row.extend(metric_cells(&r)),
        Err(e) => {
            let mut cells = vec![String::new(); METRICS.len()];
            cells[0] = "error".into();
            *cells.last_mut().expect("METRICS is not empty") = e.to_string();
            row.extend(cells);
        }
    }
    row
}

/// Rows as CSV text (header first), sorted by point.
pub fn to_csv(
    header: &[String],
    rows: &BTreeMap<usize, Vec<String>>,
) -> Result<Vec<u8>, ScenarioError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let e = |e: csv::Error| sweep_err(e.to_string());
    w.write_record(header).map_err(e)?;
    for r in rows.values() {
        w.write_record(r).map_err(e)?;
    }
    w.into_inner().map_err(|e| sweep_err(e.to_string()))
}

/// Read a results CSV: its header and rows by point.
pub fn read_csv(path: &Path) -> Result<Table, ScenarioError> {
    let bytes = crate::base::files::read_bytes(path)?;
    read_csv_from(&bytes, &path.display().to_string())
}

/// Read a results CSV from its bytes (`name` names it in errors).
pub fn read_csv_from(bytes: &[u8], name: &str) -> Result<Table, ScenarioError> {
    let io = |m: String| ScenarioError::Io {
        path: name.to_string(),
        message: m,
    };
    // `file:line:col` where the CSV reader knows the line (column 1: it
    // gives the record's byte offset, not the field's).
    let at = |line: Option<u64>, m: String| ScenarioError::File {
        file: name.to_string(),
        line: line.map(|l| l as usize),
        col: line.map(|_| 1),
        message: m,
    };
    let csv_err = |e: csv::Error| {
        let line = e.position().map(csv::Position::line);
        let m = match e.kind() {
            csv::ErrorKind::UnequalLengths {
                expected_len, len, ..
            } => format!("expected {expected_len} fields as in the header, found {len}"),
            csv::ErrorKind::Utf8 { err, .. } => {
                format!("invalid UTF-8 in field {}", err.field() + 1)
            }
            _ => e.to_string(),
        };
        at(line, m)
    };
    let mut r = csv::Reader::from_reader(bytes);
    let header: Vec<String> = r
        .headers()
        .map_err(csv_err)?
        .iter()
        .map(str::to_string)
        .collect();
    if header.first().map(String::as_str) != Some("point") {
        return Err(io(
            "not a sweep result (the first column is not `point`)".into()
        ));
    }
    let mut rows = BTreeMap::new();
    for rec in r.records() {
        let rec = rec.map_err(csv_err)?;
        let line = rec.position().map(csv::Position::line);
        let row: Vec<String> = rec.iter().map(str::to_string).collect();
        let first = row.first().map_or("", String::as_str);
        let point: usize = first.parse().map_err(|_| {
            at(
                line,
                format!("expected a point number in column `point`, found '{first}'"),
            )
        })?;
        if rows.insert(point, row).is_some() {
            return Err(at(line, format!("point {point} appears twice")));
        }
    }
    Ok((header, rows))
}

/// How a sweep runs.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    pub jobs: usize,
    pub shard: Option<(usize, usize)>,
    pub out: PathBuf,
    pub resume: bool,
}

/// Run the sweep's points (this shard's), writing `out` atomically as rows
/// come in (at most once a second, and at the end); with `resume`, points
/// already in `out` are kept and not run again. `done` is called per point.
pub fn run_sweep(
    sweep: &Sweep,
    opts: &SweepOptions,
    done: &(dyn Fn(usize, usize) + Sync),
) -> Result<BTreeMap<usize, Vec<String>>, ScenarioError> {
    let header = sweep.header();
    let mut rows = BTreeMap::new();
    if opts.resume && opts.out.exists() {
        let (h, old) = read_csv(&opts.out)?;
        if h != header {
            return Err(sweep_err(format!(
                "--resume: {} has other columns than this sweep",
                opts.out.display()
            )));
        }
        // A row kept must be this sweep's point (it kept another sweep's
        // values, or a point past the end, and counted it as done).
        for (k, r) in &old {
            check_row(sweep, *k, r, &opts.out).map_err(|e| {
                let e = e.to_string();
                sweep_err(format!(
                    "--resume: {}",
                    e.strip_prefix("sweep: ").unwrap_or(&e)
                ))
            })?;
        }
        rows = old;
    }
    let order = shard_order(sweep.points.len());
    let todo: Vec<&Point> = sweep
        .points
        .iter()
        .filter(|p| opts.shard.map_or(true, |(i, n)| order[p.index] % n == i))
        .filter(|p| !rows.contains_key(&p.index))
        .collect();
    let total = todo.len();
    let cache = ProgramCache::new();
    // Rows go out as they come only into a regular file (or a new one): a
    // FIFO's reader took the first partial CSV and left, and the next
    // write waited for a reader forever; a device gets the whole CSV once.
    let periodic = std::fs::metadata(&opts.out).map_or(true, |m| m.is_file());
    let state = Mutex::new((rows, Instant::now(), 0usize));
    let write = |rows: &BTreeMap<usize, Vec<String>>| -> Result<(), ScenarioError> {
        let bytes = to_csv(&header, rows)?;
        write_atomically(&opts.out, &bytes).map_err(|e| ScenarioError::Write {
            path: opts.out.display().to_string(),
            message: e.to_string(),
        })
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.jobs.max(1))
        .build()
        .map_err(|e| sweep_err(e.to_string()))?;
    pool.install(|| {
        todo.par_iter().try_for_each(|p| {
            let row = run_point(sweep, p, &cache);
            let mut s = state.lock().expect("no panics while held");
            s.0.insert(p.index, row);
            s.2 += 1;
            done(s.2, total);
            if periodic && s.1.elapsed().as_secs_f64() >= 1.0 {
                write(&s.0)?;
                s.1 = Instant::now();
            }
            Ok::<(), ScenarioError>(())
        })
    })?;
    let (rows, _, _) = state.into_inner().expect("no panics while held");
    write(&rows)?;
    Ok(rows)
}

/// `1, 2, 3, 7, 9` as `1-3, 7, 9`.
fn ranges(points: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < points.len() {
        let mut j = i;
        while j + 1 < points.len() && points[j + 1] == points[j] + 1 {
            j += 1;
        }
        out.push(if j == i {
            points[i].to_string()
        } else {
            format!("{}-{}", points[i], points[j])
        });
        i = j + 1;
    }
    out.join(", ")
}

/// Check that row `r` of `file` is point `k` of `sweep`: the point exists
/// and the row's key cells are the point's values.
fn check_row(sweep: &Sweep, k: usize, r: &[String], file: &Path) -> Result<(), ScenarioError> {
    let Some(point) = sweep.points.get(k) else {
        return Err(sweep_err(format!(
            "{}: point {k} is not in the sweep (it has {} points)",
            file.display(),
            sweep.points.len()
        )));
    };
    for (i, key) in sweep.keys.iter().enumerate() {
        let want = point
            .values
            .iter()
            .find(|(pk, _)| pk == key)
            .map_or(String::new(), |(_, v)| label(v));
        let got = r.get(i + 1).map_or("", String::as_str);
        if got != want {
            return Err(sweep_err(format!(
                "{}: point {k} has {key} = {got} but the sweep gives {want} (a shard of another sweep?)",
                file.display(),
            )));
        }
    }
    Ok(())
}

/// Join shard results of `sweep` into one file equal to a single run's:
/// same header, every point of the sweep once (a missing one, trailing
/// points included, is an error naming them), sorted by point, each row's
/// key cells those of its point (shards of another sweep are refused).
pub fn merge(sweep: &Sweep, inputs: &[PathBuf]) -> Result<Table, ScenarioError> {
    let header = sweep.header();
    let mut all = BTreeMap::new();
    let mut from: BTreeMap<usize, &Path> = BTreeMap::new();
    for p in inputs {
        let (h, rows) = read_csv(p)?;
        if h != header {
            return Err(sweep_err(format!(
                "{} has other columns than this sweep's results ({})",
                p.display(),
                header.join(",")
            )));
        }
        for (k, r) in rows {
            check_row(sweep, k, &r, p)?;
            if let Some(prev) = from.insert(k, p) {
                return Err(sweep_err(format!(
                    "point {k} is in both {} and {}",
                    prev.display(),
                    p.display()
                )));
            }
            all.insert(k, r);
        }
    }
    let missing: Vec<usize> = (0..sweep.points.len())
        .filter(|i| !all.contains_key(i))
        .collect();
    if !missing.is_empty() {
        return Err(sweep_err(format!(
            "{} of {} points missing: {} (a shard not run or not finished? rerun it with --resume)",
            missing.len(),
            sweep.points.len(),
            ranges(&missing)
        )));
    }
    Ok((header, all))
}

#[cfg(test)]
mod tests {
    use super::{in_shard, ranges};

    #[test]
    fn shards_split_every_point_once_and_evenly() {
        for (total, n) in [(100, 4), (6, 3), (7, 4), (1, 2)] {
            let mut seen = vec![0; total];
            for i in 0..n {
                let mine: Vec<usize> = (0..total).filter(|&p| in_shard(p, total, (i, n))).collect();
                assert!(mine.len() == total / n || mine.len() == total.div_ceil(n));
                for p in mine {
                    seen[p] += 1;
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "{total}/{n}");
        }
        // A grid's fastest key (4 values) is spread over 4 shards, not one value each.
        let shard0: Vec<usize> = (0..100).filter(|&p| in_shard(p, 100, (0, 4))).collect();
        assert!(shard0.iter().any(|p| p % 4 != 0), "{shard0:?}");
    }

    #[test]
    fn missing_points_read_as_ranges() {
        assert_eq!(ranges(&[1, 2, 3, 7, 9, 10]), "1-3, 7, 9-10");
        assert_eq!(ranges(&[4]), "4");
        assert_eq!(ranges(&[]), "");
    }
}
