//! Output formats shared by subcommands.

use clap::ValueEnum;

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Format {
    /// Human-readable text.
    #[default]
    Text,
    /// One JSON document.
    Json,
}

/// Parse a comma-separated list of integers (`2,4`).
pub fn parse_u64_list(text: &str, what: &str) -> anyhow::Result<Vec<u64>> {
    text.split(',')
        .map(|t| {
            t.trim().parse::<u64>().map_err(|_| {
                anyhow::anyhow!("{what}: '{t}' is not a non-negative integer (expected e.g. 2,4)")
            })
        })
        .collect()
}

/// Write `content` to `path` through a temporary file and a rename (never
/// half-written), or to stdout when there is no path.
pub fn write_output(path: Option<&std::path::Path>, content: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    match path {
        None => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            // A reader that stops early (`| head`) is not an error.
            match out.write_all(content.as_bytes()).and_then(|()| out.flush()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
                _ => {}
            }
        }
        Some(p) => {
            let tmp = p.with_extension(format!(
                "{}.tmp",
                p.extension().and_then(|e| e.to_str()).unwrap_or("out")
            ));
            std::fs::write(&tmp, content)
                .with_context(|| format!("cannot write {}", tmp.display()))?;
            std::fs::rename(&tmp, p).with_context(|| format!("cannot write {}", p.display()))?;
        }
    }
    Ok(())
}

/// Read a program file and parse and verify it; errors name the file, line and column.
pub fn read_module(path: &std::path::Path) -> anyhow::Result<shardsim::ir::Module> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    shardsim::ir::mlir::parse_and_verify(&text)
        .map_err(|e| anyhow::anyhow!("{}", e.in_file(&path.display().to_string())))
}

/// A topology preset or file with `--nodes N` and `--set key=value` overrides.
pub fn load_topology(
    name: &str,
    nodes: Option<u32>,
    set: &[String],
) -> anyhow::Result<shardsim::topology::Topology> {
    use shardsim::topology::Override;
    let mut overrides = Vec::new();
    if let Some(n) = nodes {
        overrides.push(Override {
            key: "nodes".into(),
            value: n.to_string(),
        });
    }
    for s in set {
        overrides.push(Override::parse(s)?);
    }
    Ok(shardsim::topology::load(name, &overrides)?)
}
