//! Scenarios, the runner and sweeps: a scenario file names a topology, a
//! mesh and its placement, a workload and run options with expectations;
//! [`run_scenario`] partitions and times it (and checks its numerics) on top
//! of [`crate::exec::timed`]; [`sweep`] runs grids of scenario variants.

pub mod expect;
pub mod mesh;
pub mod model_run;
pub mod options;
pub mod runner;
pub mod spec;
pub mod sweep;
pub mod workload;

use std::path::{Path, PathBuf};

use crate::base::cursor::line_col;

pub use expect::Check;
pub use runner::{run_scenario, RunConfig, ScenarioResult, ScenarioSummary};
pub use spec::{ScenarioFile, FORMAT_VERSION};
pub use workload::ProgramCache;

/// Why a scenario could not be read or run.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// A bad scenario or sweep file: where and what.
    #[error("{file}:{}{message}", position(*line, *col))]
    File {
        file: String,
        line: Option<usize>,
        col: Option<usize>,
        message: String,
    },
    #[error("cannot read {path}: {message}")]
    Io { path: String, message: String },
    /// An output file that could not be written (a full disk, a directory).
    #[error("cannot write {path}: {message}")]
    Write { path: String, message: String },
    /// An input file that could not be read (too large, not UTF-8...).
    #[error(transparent)]
    Read(#[from] crate::base::files::FileError),
    #[error("mesh: {0}")]
    Mesh(String),
    #[error("workload: {0}")]
    Workload(String),
    #[error("run options: {0}")]
    Options(String),
    #[error("topology: {0}")]
    Topology(#[from] crate::topology::TopologyError),
    #[error("{file}: {message}")]
    Program { file: String, message: String },
    #[error("timed run: {0}")]
    Timed(#[from] crate::exec::timed::TimedError),
    #[error("numerics: {0}")]
    Numerics(String),
    #[error("sweep: {0}")]
    Sweep(String),
    #[error(transparent)]
    Model(#[from] crate::models::ModelError),
}

fn position(line: Option<usize>, col: Option<usize>) -> String {
    match (line, col) {
        (Some(l), Some(c)) => format!("{l}:{c}: "),
        _ => " ".to_string(),
    }
}

/// A toml error as `file:line:col: message`.
pub(crate) fn toml_error(e: &toml::de::Error, text: &str, file: &str) -> ScenarioError {
    let (line, col) = match e.span() {
        Some(s) => {
            let (l, c) = line_col(text, s.start);
            (Some(l), Some(c))
        }
        None => (None, None),
    };
    ScenarioError::File {
        file: file.to_string(),
        line,
        col,
        message: e.message().trim().to_string(),
    }
}

/// A scenario as read: the file, its name and the directory its relative
/// paths start from (`None`: embedded, programs come from the embedded models).
#[derive(Debug, Clone)]
pub struct Scenario {
    pub file: ScenarioFile,
    pub name: String,
    pub base: Option<PathBuf>,
}

/// The embedded default: a GPT-style training step on 2 x dgx-h100, data x
/// tensor parallel (`shardsim run` without arguments).
pub const DEFAULT_SCENARIO: &str = include_str!("../../scenarios/default.toml");

impl Scenario {
    /// Parse scenario text; `file` names it in errors and gives its name.
    pub fn parse(text: &str, file: &str, base: Option<PathBuf>) -> Result<Scenario, ScenarioError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| toml_error(&e, text, file))?;
        let bad = |message: String| ScenarioError::File {
            file: file.into(),
            line: None,
            col: None,
            message,
        };
        match table.get("format") {
            Some(toml::Value::Integer(v)) if *v == i64::from(FORMAT_VERSION) => {}
            Some(v) => {
                return Err(bad(format!(
                    "format {v} is not supported (this build reads format {FORMAT_VERSION})"
                )))
            }
            None => return Err(bad(format!("missing `format = {FORMAT_VERSION}`"))),
        }
        let parsed: ScenarioFile = toml::from_str(text).map_err(|e| toml_error(&e, text, file))?;
        let name = parsed.name.clone().unwrap_or_else(|| {
            Path::new(file)
                .file_stem()
                .map_or("scenario".into(), |s| s.to_string_lossy().into_owned())
        });
        Ok(Scenario {
            file: parsed,
            name,
            base,
        })
    }

    /// A scenario from an edited table (a sweep point); errors name `file`
    /// without a position (the text is generated).
    pub fn from_table(
        table: &toml::Table,
        file: &str,
        base: Option<PathBuf>,
    ) -> Result<Scenario, ScenarioError> {
        let text = toml::to_string(table).map_err(|e| ScenarioError::Sweep(e.to_string()))?;
        Scenario::parse(&text, file, base).map_err(|e| match e {
            ScenarioError::File { file, message, .. } => ScenarioError::File {
                file,
                line: None,
                col: None,
                message,
            },
            other => other,
        })
    }

    /// Read a scenario file; relative paths in it start from its directory.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = crate::base::files::read_text(path)?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Scenario::parse(&text, &path.display().to_string(), Some(base))
    }

    /// The embedded default scenario.
    pub fn embedded_default() -> Scenario {
        Scenario::parse(DEFAULT_SCENARIO, "default.toml", None)
            .expect("the embedded default scenario is valid")
    }
}
