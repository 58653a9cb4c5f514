//! The `shardsim` command line. Every user error (bad flag, bad file, bad text)
//! ends with a one-line message on stderr and exit code 2; nothing panics on input.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = match cli::Cli::try_parse() {
        Ok(a) => a,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            eprintln!("error: a subcommand is needed (see --help for the list)");
            return ExitCode::from(2);
        }
        Err(e) if e.use_stderr() => {
            eprintln!("{}", one_line(&e.render().to_string()));
            return ExitCode::from(2);
        }
        Err(e) => {
            // Help and version go to stdout; a full disk or a closed pipe is
            // a user error like any other write to stdout (exit 2, no panic).
            use std::io::Write;
            let text = e.render().to_string();
            let mut out = std::io::stdout().lock();
            return match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(io) => {
                    eprintln!("error: cannot write to stdout: {io}");
                    ExitCode::from(2)
                }
            };
        }
    };
    match cli::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let msg = error_line(&e);
            eprintln!("error: {msg}");
            ExitCode::from(if e.downcast_ref::<cli::Failed>().is_some() {
                1
            } else if e.downcast_ref::<cli::OutOfMemory>().is_some() {
                3
            } else {
                2
            })
        }
    }
}

/// An error and its causes on one line. A cause whose text its parent's
/// message already carries (`#[error("topology: {0}")]` with `#[from]`) is
/// not repeated.
fn error_line(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if msg.contains(&text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&text);
    }
    msg.replace('\n', " ")
}

/// A clap usage error on one line: its message and tips, without the usage
/// block and the "For more information" line.
fn one_line(rendered: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for line in rendered.lines().map(str::trim) {
        if line.starts_with("Usage:") {
            break;
        }
        if !line.is_empty() && !line.starts_with("For more information") {
            parts.push(line);
        }
    }
    let mut msg = parts.join(" ");
    msg.push_str(" (see --help)");
    msg
}
