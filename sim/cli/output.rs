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

/// Write `content` to `path` without destroying what it replaces (through a
/// temporary file and a rename for a regular file, through a symlink to its
/// target, directly into a FIFO or device file), or to stdout when there is no path.
pub fn write_output(path: Option<&std::path::Path>, content: &str) -> anyhow::Result<()> {
    match path {
        None => print_out(content),
        Some(p) => Ok(shardsim::base::files::write_file(p, content.as_bytes())?),
    }
}

/// Print `content` on stdout. A full disk or a reader that went away (`| head`)
/// is an error (exit 2), never a panic.
pub fn print_out(content: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(content.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::BrokenPipe => {
                anyhow::anyhow!("cannot write to stdout: the reader closed the pipe")
            }
            _ => anyhow::anyhow!("cannot write to stdout: {e}"),
        })
}

/// Read a program file and parse and verify it; errors name the file, line and column.
pub fn read_module(path: &std::path::Path) -> anyhow::Result<shardsim::ir::Module> {
    let text = read_text(path)?;
    shardsim::ir::mlir::parse_and_verify(&text)
        .and_then(|m| shardsim::ir::verify::require_functions(&m).map(|()| m))
        .map_err(|e| anyhow::anyhow!("{}", e.in_file(&path.display().to_string())))
}

/// Read a text input (capped by `--max-input-size`; bad UTF-8 is an error at its line:col).
pub fn read_text(path: &std::path::Path) -> anyhow::Result<String> {
    Ok(shardsim::base::files::read_text(path)?)
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
        let o = Override::parse(s)?;
        // Two node counts: the later one would silently win.
        if let Some(n) = nodes.filter(|n| o.key == "nodes" && o.value.trim() != n.to_string()) {
            anyhow::bail!(
                "--nodes {n} and --set {}={} contradict each other: give one",
                o.key,
                o.value.trim()
            );
        }
        overrides.push(o);
    }
    // Switches as large as the nodes need (`shardsim::topology::fit_radix`).
    let topo = shardsim::topology::fit_radix(&overrides, |o| shardsim::topology::load(name, o))
        .map_err(|e| match (e, nodes) {
            // The override was `--nodes N` (the user gave no `--set nodes`).
            (shardsim::topology::TopologyError::Override { key, message }, Some(n))
                if key == format!("nodes={n}") =>
            {
                anyhow::anyhow!("--nodes {n}: {message}")
            }
            (e, _) => e.into(),
        })?;
    // The run's collective settings, checked once before any work (each
    // collective reads them again).
    shardsim::collective::Policy::of(&topo)?;
    Ok(topo)
}

/// The `--set` list with `--tuner FILE` as the override it stands for,
/// `collective.tuner_file` (a literal string: any path but one holding `'`).
pub fn with_tuner(set: &[String], tuner: Option<&std::path::Path>) -> anyhow::Result<Vec<String>> {
    let mut out = set.to_vec();
    if let Some(p) = tuner {
        let text = p.display().to_string();
        if text.contains('\'') || text.contains('\n') {
            anyhow::bail!("--tuner {text}: a path with a quote or a line break cannot be named");
        }
        if set
            .iter()
            .any(|s| s.trim_start().starts_with("collective.tuner"))
        {
            anyhow::bail!(
                "--tuner {text} and --set collective.tuner...: give the tuner table once"
            );
        }
        out.push(format!("collective.tuner_file='{text}'"));
    }
    Ok(out)
}

/// A `--roofline` kernel table, its errors as `file:line:col: ...` (they
/// read `file: roofline table: line:col: ...`).
pub fn read_roofline(
    path: &std::path::Path,
) -> anyhow::Result<std::collections::BTreeMap<String, shardsim::exec::timed::RooflineParams>> {
    let text = read_text(path)?;
    shardsim::exec::timed::parse_roofline(&text).map_err(|e| {
        let m = e.to_string();
        let rest = m.strip_prefix("roofline table: ").unwrap_or(&m);
        // `line:col: message` from the TOML reader.
        let mut parts = rest.splitn(3, ':');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(l), Some(c), Some(msg))
                if l.parse::<usize>().is_ok() && c.parse::<usize>().is_ok() =>
            {
                anyhow::anyhow!("{}:{l}:{c}: roofline table:{msg}", path.display())
            }
            _ => anyhow::anyhow!("{}: {m}", path.display()),
        }
    })
}

/// Refuse an output directory `dir` (given by `flag`) that exists as
/// something else, before any work is done: the write would fail only
/// after the run, with the bare "File exists" of the OS.
pub fn check_out_dir(dir: &std::path::Path, flag: &str) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!(
            "{flag} {}: exists and is not a directory (expected a directory to write into)",
            dir.display()
        );
    }
    Ok(())
}

/// Create the output directory `dir` (given by `flag`) and its parents.
pub fn create_out_dir(dir: &std::path::Path, flag: &str) -> anyhow::Result<()> {
    check_out_dir(dir, flag)?;
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("{flag} {}: cannot create the directory: {e}", dir.display()))
}

/// A `--sizes` value that does not parse, named once (the library's error
/// already starts with "sizes:").
pub fn sizes_error(e: shardsim::collective::CollectiveError) -> anyhow::Error {
    match e {
        shardsim::collective::CollectiveError::Sizes(m) => anyhow::anyhow!("--sizes: {m}"),
        e => anyhow::anyhow!("--sizes: {e}"),
    }
}
