//! The workload of a scenario: a `.mlir` program read from disk (or from the
//! models embedded in the binary, for the embedded default), its mesh
//! replaced by the scenario's, propagated and partitioned. A `model`
//! workload does not come here: [`super::model_run`] runs it through the
//! model builders.
//!
//! A [`ProgramCache`] keeps parsed programs and partitioned programs per mesh,
//! so a sweep partitions each (program, mesh) once whatever its other axes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::ir::{inline, mlir, Module};
use crate::mesh::Mesh;
use crate::partition::{partition_with, PartitionOptions, SpmdProgram};
use crate::propagate::{propagate_module, Strategy};

use super::mesh::rewrite_mesh;
use super::spec::WorkloadSpec;
use super::ScenarioError;

/// Model files compiled into the binary (found by file name when a scenario
/// has no directory, i.e. the embedded default).
pub const EMBEDDED_MODELS: &[(&str, &str)] = &[
    (
        "gpt_train_step.mlir",
        include_str!("../../models/gpt_train_step.mlir"),
    ),
    (
        "gpt_train_step_tiny.mlir",
        include_str!("../../models/gpt_train_step_tiny.mlir"),
    ),
];

/// A program ready to run: the single-device module (the numerics
/// reference, mesh rewritten) and its partitioned program.
#[derive(Debug)]
pub struct Prepared {
    pub module: Module,
    pub program: SpmdProgram,
    /// Where the program came from, for reports.
    pub source: String,
}

type PreparedKey = (String, String, bool);

/// Parsed programs by source and prepared programs by (source, mesh,
/// options); shared by the threads of a sweep.
#[derive(Debug, Default)]
pub struct ProgramCache {
    parsed: Mutex<BTreeMap<String, Arc<Module>>>,
    prepared: Mutex<BTreeMap<PreparedKey, Arc<Prepared>>>,
}

/// Where a workload's program text comes from.
fn resolve(spec: &WorkloadSpec, base: Option<&Path>) -> Result<(String, Source), ScenarioError> {
    match (&spec.program, &spec.model) {
        (Some(p), None) => {
            if spec.strategy.is_some() {
                return Err(ScenarioError::Workload(
                    "`strategy` belongs to a model preset; a program carries its shardings".into(),
                ));
            }
            match base {
                Some(dir) => {
                    let path = dir.join(p);
                    Ok((path.display().to_string(), Source::File(path)))
                }
                None => {
                    let name = Path::new(p).file_name().map(|n| n.to_string_lossy().into_owned());
                    let found = EMBEDDED_MODELS
                        .iter()
                        .find(|(n, _)| Some(*n) == name.as_deref())
                        .ok_or_else(|| {
                            ScenarioError::Workload(format!("{p} is not an embedded model"))
                        })?;
                    Ok((format!("embedded:{}", found.0), Source::Text(found.1)))
                }
            }
        }
        (None, Some(m)) => Err(ScenarioError::Workload(format!(
            "model '{m}' is built per strategy, not prepared as one program (run it with `run_scenario`)"
        ))),
        (Some(_), Some(_)) => Err(ScenarioError::Workload(
            "give either `program` or `model`, not both".into(),
        )),
        (None, None) => Err(ScenarioError::Workload(
            "give `program = \"file.mlir\"` or `model = \"name\"`".into(),
        )),
    }
}

enum Source {
    File(PathBuf),
    Text(&'static str),
}

impl ProgramCache {
    pub fn new() -> ProgramCache {
        ProgramCache::default()
    }

    fn parsed(&self, key: &str, source: &Source) -> Result<Arc<Module>, ScenarioError> {
        if let Some(m) = self.parsed.lock().expect("no panics while held").get(key) {
            return Ok(m.clone());
        }
        let text = match source {
            Source::File(p) => crate::base::files::read_text(p)?.into(),
            Source::Text(t) => std::borrow::Cow::Borrowed(*t),
        };
        let program_error = |message: String| ScenarioError::Program {
            file: key.to_string(),
            message,
        };
        let mut module = mlir::parse_and_verify(&text)
            .and_then(|m| crate::ir::verify::require_functions(&m).map(|()| m))
            .map_err(|e| program_error(e.to_string()))?;
        if inline::has_calls(&module) {
            module = inline::inline_calls(&module).map_err(|e| program_error(e.to_string()))?;
        }
        let module = Arc::new(module);
        self.parsed
            .lock()
            .expect("no panics while held")
            .insert(key.to_string(), module.clone());
        Ok(module)
    }

    /// The workload's program on `mesh`, partitioned.
    pub fn prepare(
        &self,
        spec: &WorkloadSpec,
        base: Option<&Path>,
        mesh: &Mesh,
    ) -> Result<Arc<Prepared>, ScenarioError> {
        let (key, source) = resolve(spec, base)?;
        let pkey = (key.clone(), mesh.to_string(), spec.avg_means);
        if let Some(p) = self
            .prepared
            .lock()
            .expect("no panics while held")
            .get(&pkey)
        {
            return Ok(p.clone());
        }
        let mut module = (*self.parsed(&key, &source)?).clone();
        rewrite_mesh(&mut module, mesh)?;
        let program_error = |message: String| ScenarioError::Program {
            file: key.clone(),
            message: format!("on mesh {mesh}: {message}"),
        };
        let reference = module.clone();
        propagate_module(&mut module, Strategy::default())
            .map_err(|e| program_error(e.to_string()))?;
        let opts = PartitionOptions {
            avg_means: spec.avg_means,
        };
        let program = partition_with(&module, &opts).map_err(|e| program_error(e.to_string()))?;
        let prepared = Arc::new(Prepared {
            module: reference,
            program,
            source: key,
        });
        self.prepared
            .lock()
            .expect("no panics while held")
            .insert(pkey, prepared.clone());
        Ok(prepared)
    }
}
