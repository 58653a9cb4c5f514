//! A run's collective settings as the topology file (or `--set`) states
//! them, with where each came from: `[collective] algorithms` and
//! `protocols` (NCCL_ALGO / NCCL_PROTO), `tuner` (rows of a tuner plugin's
//! table, one string each) or `tuner_file` (the same rows in a CSV file).
//!
//! Only text and origins live here: the collectives layer, above this one,
//! owns the names and the syntax, and cites the origin in its errors.

use std::fmt;
use std::path::Path;

use serde::Deserialize;

use crate::base::cursor::line_col;

use super::load::Override;
use super::TopologyError;

/// The `[collective]` keys that are settings (every other key names a
/// device model's calibration).
pub const SETTING_KEYS: [&str; 4] = ["algorithms", "protocols", "tuner", "tuner_file"];

/// Where a setting's text came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A file, at the text's first character (1-based line and column).
    File {
        file: String,
        line: usize,
        col: usize,
    },
    /// A command-line override (`--set key=value`).
    Set(String),
    /// Built in code (no file).
    Code,
}

impl Origin {
    /// The origin of the character `offset` bytes into the text, where the
    /// text has no line breaks and no escapes before it.
    pub fn at(&self, offset: usize) -> Origin {
        match self {
            Origin::File { file, line, col } => Origin::File {
                file: file.clone(),
                line: *line,
                col: col + offset,
            },
            o => o.clone(),
        }
    }
}

impl Origin {
    /// An error about `field` at this origin.
    pub fn error(&self, field: &str, message: &str) -> TopologyError {
        match self {
            Origin::File { file, line, col } => TopologyError::File {
                file: file.clone(),
                line: Some(*line),
                col: Some(*col),
                field: field.to_string(),
                message: message.to_string(),
            },
            Origin::Set(kv) => TopologyError::Override {
                key: kv.clone(),
                message: message.to_string(),
            },
            Origin::Code => TopologyError::Override {
                key: field.to_string(),
                message: message.to_string(),
            },
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { file, line, col } => write!(f, "{file}:{line}:{col}"),
            Origin::Set(kv) => write!(f, "--set {kv}"),
            Origin::Code => f.write_str("(set in code)"),
        }
    }
}

/// One setting's text and origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub text: String,
    pub origin: Origin,
}

/// The run's collective settings (all empty when the file states none).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CollectiveSettings {
    /// NCCL_ALGO's value.
    pub algorithms: Option<Setting>,
    /// NCCL_PROTO's value.
    pub protocols: Option<Setting>,
    /// Tuner rows in order, one CSV row each (comments and blank lines of a
    /// file dropped, each row's origin its line).
    pub tuner: Vec<Setting>,
}

impl CollectiveSettings {
    pub fn is_empty(&self) -> bool {
        self.algorithms.is_none() && self.protocols.is_none() && self.tuner.is_empty()
    }
}

/// The settings' values with their spans, read from the file's text (other
/// keys ignored: the full parse checks them).
#[derive(Deserialize, Default)]
struct Spans {
    #[serde(default)]
    collective: Option<SpansCollective>,
}

#[derive(Deserialize, Default)]
struct SpansCollective {
    algorithms: Option<toml::Spanned<String>>,
    protocols: Option<toml::Spanned<String>>,
    tuner: Option<Vec<toml::Spanned<String>>>,
    tuner_file: Option<toml::Spanned<String>>,
}

/// The settings of a file's text with `overrides` applied: origins in the
/// text, or the override that set them. `file`: the text's name (a tuner
/// file named in it is read relative to its folder); `table`: the final
/// `[collective]` table.
pub(crate) fn read(
    text: &str,
    file: &str,
    overrides: &[Override],
    table: Option<&toml::Table>,
    located: impl Fn(&toml::de::Error) -> TopologyError,
) -> Result<CollectiveSettings, TopologyError> {
    let mut out = CollectiveSettings::default();
    let Some(table) = table else {
        return Ok(out);
    };
    if !SETTING_KEYS.iter().any(|k| table.contains_key(*k)) {
        return Ok(out);
    }
    let spans: Spans = toml::from_str(text).map_err(|e| located(&e))?;
    let spans = spans.collective.unwrap_or_default();
    let here = |start: usize| {
        let (line, col) = line_col(text, start);
        Origin::File {
            file: file.to_string(),
            line,
            // The text starts after the opening quote.
            col: col + 1,
        }
    };
    let set_by = |key: &str| {
        overrides
            .iter()
            .rev()
            .find(|o| o.key == format!("collective.{key}"))
            .map(|o| Origin::Set(format!("{}={}", o.key, o.value)))
    };
    let string = |key: &str| -> Result<Option<String>, TopologyError> {
        match table.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(TopologyError::Override {
                key: format!("collective.{key}"),
                message: "expected a string".into(),
            }),
        }
    };
    let origin_of = |key: &str, span: Option<usize>| {
        set_by(key).unwrap_or_else(|| span.map_or(Origin::Code, here))
    };
    if let Some(t) = string("algorithms")? {
        let span = spans.algorithms.as_ref().map(|s| s.span().start);
        out.algorithms = Some(Setting {
            text: t,
            origin: origin_of("algorithms", span),
        });
    }
    if let Some(t) = string("protocols")? {
        let span = spans.protocols.as_ref().map(|s| s.span().start);
        out.protocols = Some(Setting {
            text: t,
            origin: origin_of("protocols", span),
        });
    }
    let inline = table.contains_key("tuner");
    // An empty path: no table (what NCCL's own tuner would do under the
    // file's other settings).
    let path = string("tuner_file")?.filter(|p| !p.trim().is_empty());
    if let Some(path) = path {
        if inline {
            let origin = origin_of(
                "tuner_file",
                spans.tuner_file.as_ref().map(|s| s.span().start),
            );
            return Err(origin.error(
                "collective.tuner_file",
                "give the tuner rows inline (collective.tuner) or as a file, not both",
            ));
        }
        // A file named in a file is relative to it; on the command line, to
        // the working directory.
        let from_file = set_by("tuner_file").is_none();
        let resolved = match Path::new(file).parent() {
            Some(dir) if from_file && Path::new(&path).is_relative() => dir.join(&path),
            _ => Path::new(&path).to_path_buf(),
        };
        let body = crate::base::files::read_text(&resolved)?;
        let name = resolved.display().to_string();
        out.tuner = file_rows(&body, &name);
    } else if let Some(v) = table.get("tuner") {
        let rows = v.as_array().ok_or_else(|| TopologyError::Override {
            key: "collective.tuner".into(),
            message: "expected a list of rows, each a string".into(),
        })?;
        let set = set_by("tuner");
        let spans = spans.tuner.unwrap_or_default();
        for (i, r) in rows.iter().enumerate() {
            let text = r.as_str().ok_or_else(|| TopologyError::Override {
                key: "collective.tuner".into(),
                message: format!("row {}: expected a string (a CSV row)", i + 1),
            })?;
            let origin = match &set {
                Some(o) => o.clone(),
                None => spans.get(i).map_or(Origin::Code, |s| here(s.span().start)),
            };
            out.tuner.push(Setting {
                text: text.to_string(),
                origin,
            });
        }
    }
    Ok(out)
}

/// A tuner file's rows: every line but blank ones and `#` comments, each
/// with its line as origin.
pub fn file_rows(body: &str, name: &str) -> Vec<Setting> {
    body.lines()
        .enumerate()
        .filter(|(_, l)| {
            let t = l.trim();
            !t.is_empty() && !t.starts_with('#')
        })
        .map(|(i, l)| Setting {
            text: l.to_string(),
            origin: Origin::File {
                file: name.to_string(),
                line: i + 1,
                col: 1,
            },
        })
        .collect()
}
