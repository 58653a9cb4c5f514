//! Model builders: the programs they write run through the whole pipeline
//! and match the single-device interpreter; strategies and presets are
//! checked; analytic closed forms hold.

mod ci;
mod cli;
mod context;
mod inference;
mod memory;
mod moe;
mod pass_cost;
mod pipeline;
mod programs;
mod step;

/// The failure line of a published row `label` whose relative error `err` is
/// outside its bound: the one `misses` lists for `key` (key, bound, reason),
/// else `default`.
pub fn outside_bound<K: PartialEq>(
    misses: &[(K, f64, &str)],
    key: &K,
    default: f64,
    label: &str,
    err: f64,
) -> Option<String> {
    let bound = misses.iter().find(|m| m.0 == *key).map_or(default, |m| m.1);
    (err.abs() > bound).then(|| {
        format!(
            "{label} off by {:+.1}% (allowed {:.0}%)",
            100.0 * err,
            100.0 * bound
        )
    })
}

/// The rows of a `#`-commented CSV fixture, each as column -> text.
pub fn csv_rows(text: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .from_reader(text.as_bytes())
        .deserialize()
        .map(|r| r.unwrap())
        .collect()
}
