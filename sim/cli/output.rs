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
