//! The `shardsim` command line. Every user error (bad flag, bad file, bad text)
//! ends with a one-line message on stderr and exit code 2; nothing panics on input.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = match cli::Cli::try_parse() {
        Ok(a) => a,
        Err(e) => {
            // clap prints help/version on stdout and usage errors on stderr (exit 2).
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match cli::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let msg = format!("{e:#}").replace('\n', " ");
            eprintln!("error: {msg}");
            ExitCode::from(if e.downcast_ref::<cli::Failed>().is_some() {
                1
            } else {
                2
            })
        }
    }
}
