//! The `tessera` command-line tool (see `tessera --help` and README.md).

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;
mod cli;

/// Large arrays (at least 2 MiB: matrices read from files, kernel outputs) on huge pages, advised
/// before first touch (`tessera::runtime::huge`).
#[global_allocator]
static ALLOC: tessera::runtime::huge::HugePages = tessera::runtime::huge::HugePages;

use cli::{Cli, run_cli};

fn main() -> ExitCode {
    tessera::runtime::huge::tune_system_allocator();
    // Ctrl-C, SIGTERM or SIGHUP while outputs are being written: remove their temporary files
    // (the outputs themselves are only ever renamed into place whole), then exit as
    // interrupted. Without a handler the process would just die and leave them behind.
    let handler = || tessera::io::remove_temp_files_then(|| std::process::exit(130));
    if let Err(e) = ctrlc::set_handler(handler) {
        eprintln!(
            "warning: no interrupt handler ({e}): an interrupted run may leave temporary files"
        );
    }
    // A program's fields expand into deep nests of `let`s (`transforms::stack`).
    match tessera::transforms::stack::deep(|| run_cli(Cli::parse())) {
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
