//! The `tessera` command-line tool (see `tessera --help` and README.md).

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;
mod cli;

use cli::{Cli, run_cli};

fn main() -> ExitCode {
    match run_cli(Cli::parse()) {
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            // A closed pipe (`tessera ... | head`) is not an error worth a message.
            let _ = stdout.write_all(out.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
