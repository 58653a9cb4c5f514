//! Reading topology files: TOML text → [`TopologyFile`] → [`Topology`], with
//! `--set key=value` overrides applied in between. Errors name the file, the
//! line and column, and the field.

use std::path::Path;

use crate::base::cursor::line_col;

use super::build::{build, SemanticError};
use super::settings::{self, CollectiveSettings};
use super::spec::TopologyFile;
use super::{Topology, TopologyError};

/// One `--set key=value` override, e.g. `nvlink.bandwidth=900GB/s`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// Dotted path into the file (`nvlink.bandwidth`, `nodes`, `dims`).
    pub key: String,
    /// The value as text: TOML (`4`, `[4, 4]`, `true`) or a bare string (`900GB/s`).
    pub value: String,
}

impl Override {
    /// Parse `key=value`.
    pub fn parse(text: &str) -> Result<Override, TopologyError> {
        let (k, v) = text
            .split_once('=')
            .ok_or_else(|| TopologyError::Override {
                key: text.to_string(),
                message: "expected key=value, e.g. nvlink.bandwidth=900GB/s".into(),
            })?;
        let key = k.trim();
        if key.is_empty() || key.split('.').any(|p| p.is_empty()) {
            return Err(TopologyError::Override {
                key: text.to_string(),
                message: "expected a dotted key such as nvlink.bandwidth".into(),
            });
        }
        Ok(Override {
            key: key.to_string(),
            value: v.trim().to_string(),
        })
    }

    fn value(&self) -> toml::Value {
        // A TOML literal when it is one (numbers, arrays, booleans), else a string.
        toml::from_str::<toml::Table>(&format!("v = {}", self.value))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(self.value.clone()))
    }
}

/// Parse a topology file's text; `file` names it in errors.
pub fn parse_file_text(text: &str, file: &str) -> Result<TopologyFile, TopologyError> {
    toml::from_str::<TopologyFile>(text).map_err(|e| toml_error(&e, Some(text), file))
}

/// Parse, override and build. Overrides are applied in order, each checked.
pub fn load_text(
    text: &str,
    file: &str,
    overrides: &[Override],
) -> Result<Topology, TopologyError> {
    let mut spec = parse_file_text(text, file)?;
    if overrides.is_empty() {
        let mut topo = build(&spec).map_err(|e| semantic_error(e, Some(text), file))?;
        topo.collective_settings = settings_of(text, file, overrides, &spec)?;
        topo.source = Some(std::sync::Arc::new((file.to_string(), text.to_string())));
        return Ok(topo);
    }
    let mut table: toml::Table =
        toml::from_str(text).map_err(|e| toml_error(&e, Some(text), file))?;
    for o in overrides {
        set(&mut table, o)?;
        let edited = toml::to_string(&table).map_err(|e| TopologyError::Override {
            key: o.key.clone(),
            message: e.to_string(),
        })?;
        spec = toml::from_str::<TopologyFile>(&edited).map_err(|e| TopologyError::Override {
            key: format!("{}={}", o.key, o.value),
            message: toml_error(&e, None, file).to_string(),
        })?;
    }
    let described: Vec<String> = overrides
        .iter()
        .map(|o| format!("{}={}", o.key, o.value))
        .collect();
    let mut topo = build(&spec).map_err(|e| TopologyError::Override {
        key: described.join(" "),
        message: semantic_error(e, None, file).to_string(),
    })?;
    topo.collective_settings = settings_of(text, file, overrides, &spec)?;
    topo.source = Some(std::sync::Arc::new((file.to_string(), text.to_string())));
    Ok(topo)
}

/// The run's collective settings with their origins (`settings.rs`).
fn settings_of(
    text: &str,
    file: &str,
    overrides: &[Override],
    spec: &TopologyFile,
) -> Result<std::sync::Arc<CollectiveSettings>, TopologyError> {
    let s = settings::read(text, file, overrides, spec.collective.as_ref(), |e| {
        toml_error(e, Some(text), file)
    })?;
    Ok(std::sync::Arc::new(s))
}

/// Read and build a topology file from disk.
pub fn load_path(path: &Path, overrides: &[Override]) -> Result<Topology, TopologyError> {
    let text = crate::base::files::read_text(path)?;
    load_text(&text, &path.display().to_string(), overrides)
}

fn set(table: &mut toml::Table, o: &Override) -> Result<(), TopologyError> {
    let parts: Vec<&str> = o.key.split('.').collect();
    let mut t = table;
    let mut i = 0;
    while i + 1 < parts.len() {
        let p = parts[i];
        let entry = t
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        // A list of tables named by `scope` (a device's memories): the next
        // part picks one, `device.memory.global.bandwidth`.
        if let toml::Value::Array(items) = entry {
            let scope = parts.get(i + 1).filter(|_| i + 2 < parts.len());
            let found = scope.and_then(|name| {
                items.iter_mut().find_map(|v| {
                    let t = v.as_table_mut()?;
                    (t.get("scope").and_then(|s| s.as_str()) == Some(*name)).then_some(t)
                })
            });
            t = found.ok_or_else(|| TopologyError::Override {
                key: o.key.clone(),
                message: format!(
                    "'{p}' is a list: name an entry by its scope, e.g. {p}.global.bandwidth"
                ),
            })?;
            i += 2;
            continue;
        }
        t = entry
            .as_table_mut()
            .ok_or_else(|| TopologyError::Override {
                key: o.key.clone(),
                message: format!("'{p}' is not a section, so it has no fields"),
            })?;
        i += 1;
    }
    t.insert(parts[parts.len() - 1].to_string(), o.value());
    Ok(())
}

/// A toml error as `file:line:col: field ...: message`.
fn toml_error(e: &toml::de::Error, text: Option<&str>, file: &str) -> TopologyError {
    let message = e.message().trim().to_string();
    // The error's key path is only printed when it has no input attached.
    let mut bare = e.clone();
    bare.set_input(None);
    let shown = bare.to_string();
    let mut field = shown
        .lines()
        .find_map(|l| l.strip_prefix("in `").and_then(|l| l.strip_suffix('`')))
        .unwrap_or("")
        .to_string();
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some(name) = rest.split('`').next() {
            field = if field.is_empty() {
                name.to_string()
            } else {
                format!("{field}.{name}")
            };
        }
    }
    let (line, col) = match (text, e.span()) {
        (Some(t), Some(s)) => {
            let (l, c) = line_col(t, s.start);
            (Some(l), Some(c))
        }
        _ => (None, None),
    };
    TopologyError::File {
        file: file.to_string(),
        line,
        col,
        field,
        message,
    }
}

fn semantic_error(e: SemanticError, text: Option<&str>, file: &str) -> TopologyError {
    let pos = match (text, &e.span) {
        (Some(t), Some(s)) => Some(line_col(t, s.start)),
        (Some(t), None) => locate(t, &e.field),
        _ => None,
    };
    TopologyError::File {
        file: file.to_string(),
        line: pos.map(|p| p.0),
        col: pos.map(|p| p.1),
        field: e.field,
        message: e.message,
    }
}

/// Line and column of `field` (`section.key`, `key` or `section`) in TOML text.
fn locate(text: &str, field: &str) -> Option<(usize, usize)> {
    let (section, key) = match field.rsplit_once('.') {
        Some((s, k)) => (s, k),
        None => ("", field),
    };
    let mut current = String::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            current = t.trim_matches(|c| c == '[' || c == ']').trim().to_string();
            if current == field {
                return Some((i + 1, line.find('[').unwrap_or(0) + 1));
            }
            continue;
        }
        if current == section {
            if let Some(rest) = t.strip_prefix(key) {
                if rest.trim_start().starts_with('=') {
                    return Some((i + 1, line.find(key).unwrap_or(0) + 1));
                }
            }
        }
    }
    None
}
