//! Presets: the topology files under `topologies/`, compiled into the binary
//! and loaded by name. `NAME:ARG` sets the preset's `dims` (`ring:8`,
//! `tpu-v4:4x4x4`, `mesh2d:2x4`, `pcie-box:8`); a name that is a path to a
//! `.toml` file loads that file instead.

use std::path::Path;

use super::load::{load_path, load_text, Override};
use super::{Topology, TopologyError};

/// Every preset: name and file text.
pub const PRESETS: &[(&str, &str)] = &[
    ("dgx-a100", include_str!("../../topologies/dgx-a100.toml")),
    ("dgx-h100", include_str!("../../topologies/dgx-h100.toml")),
    ("hgx-h200", include_str!("../../topologies/hgx-h200.toml")),
    ("aws-p5", include_str!("../../topologies/aws-p5.toml")),
    ("aws-p4de", include_str!("../../topologies/aws-p4de.toml")),
    ("tpu-v4", include_str!("../../topologies/tpu-v4.toml")),
    ("ring", include_str!("../../topologies/ring.toml")),
    ("switch", include_str!("../../topologies/switch.toml")),
    ("mesh2d", include_str!("../../topologies/mesh2d.toml")),
    ("pcie-box", include_str!("../../topologies/pcie-box.toml")),
];

/// Names of the presets, in the order of [`PRESETS`].
pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// The file text of preset `name` (without a `:ARG` suffix).
pub fn preset_text(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Load `name_or_path` at `nodes` nodes; when its fat tree's switches are
/// too small for that many nodes and `overrides` set no radix, with the
/// smallest power-of-two `network.switch_radix` from 64 up that fits (what
/// a cluster of that size is built with).
pub fn load_nodes(
    name_or_path: &str,
    nodes: u32,
    overrides: &[Override],
) -> Result<Topology, TopologyError> {
    let mut all = overrides.to_vec();
    all.push(Override {
        key: "nodes".into(),
        value: nodes.to_string(),
    });
    fit_radix(&all, |o| load(name_or_path, o))
}

/// `load` with `overrides`; where its fat tree's switches are too small
/// for its nodes and the overrides set no radix, again with the smallest
/// power-of-two `network.switch_radix` from 64 up that fits (as
/// [`load_nodes`]; every command that takes a node count loads this way).
pub fn fit_radix(
    overrides: &[Override],
    load: impl Fn(&[Override]) -> Result<Topology, TopologyError>,
) -> Result<Topology, TopologyError> {
    let first = load(overrides);
    let radix_set = overrides.iter().any(|o| o.key.ends_with("switch_radix"));
    match first {
        Err(e) if !radix_set && e.to_string().contains("larger switch_radix") => {
            for radix in [64u32, 128, 256, 512, 1024, 2048, 4096, 8192] {
                let mut with = overrides.to_vec();
                with.push(Override {
                    key: "network.switch_radix".into(),
                    value: radix.to_string(),
                });
                if let Ok(t) = load(&with) {
                    return Ok(t);
                }
            }
            Err(e)
        }
        other => other,
    }
}

/// Load a preset (`dgx-h100`, `ring:8`) or a file path, with overrides.
pub fn load(name_or_path: &str, overrides: &[Override]) -> Result<Topology, TopologyError> {
    let looks_like_path = name_or_path.ends_with(".toml") || name_or_path.contains('/');
    if looks_like_path {
        return load_path(Path::new(name_or_path), overrides);
    }
    let (base, arg) = match name_or_path.split_once(':') {
        Some((b, a)) => (b, Some(a)),
        None => (name_or_path, None),
    };
    let text = preset_text(base).ok_or_else(|| TopologyError::UnknownPreset {
        name: name_or_path.to_string(),
        known: preset_names().join(", "),
    })?;
    let mut all = Vec::new();
    if let Some(arg) = arg {
        let dims: Result<Vec<u32>, _> = arg.split('x').map(|d| d.trim().parse::<u32>()).collect();
        let dims = dims.map_err(|_| TopologyError::UnknownPreset {
            name: name_or_path.to_string(),
            known: format!(
                "expected NAME:DIMS such as ring:8 or tpu-v4:4x4x4; presets: {}",
                preset_names().join(", ")
            ),
        })?;
        // The preset's layout fixes how many dimensions it has: a 3-D torus
        // given two would silently become a different machine.
        let want = preset_dims(text);
        if let Some(want) = want.filter(|w| w.len() != dims.len()) {
            let example: Vec<String> = want.iter().map(u64::to_string).collect();
            return Err(TopologyError::PresetDims {
                name: name_or_path.to_string(),
                preset: base.to_string(),
                want: want.len(),
                got: dims.len(),
                example: format!("{base}:{}", example.join("x")),
            });
        }
        let list: Vec<String> = dims.iter().map(u32::to_string).collect();
        all.push(Override {
            key: "dims".into(),
            value: format!("[{}]", list.join(", ")),
        });
    }
    all.extend_from_slice(overrides);
    load_text(text, &format!("topologies/{base}.toml"), &all)
}

/// The `dims` a preset's text sets (its default shape), if it parses.
fn preset_dims(text: &str) -> Option<Vec<u64>> {
    let value: toml::Table = toml::from_str(text).ok()?;
    value
        .get("dims")?
        .as_array()?
        .iter()
        .map(|d| d.as_integer().and_then(|d| u64::try_from(d).ok()))
        .collect()
}
