//! `tessera dist spmv|spgemm|bfs ...`: the distributed commands live in the `tessera-mpi`
//! binary (crates/tessera-mpi), which links MPI; this CLI does not, so that building and
//! testing it never needs MPI. Under `mpirun -np P tessera dist ...` each of the P processes
//! replaces itself (Unix `exec`) with `tessera-mpi` from the directory of this executable,
//! keeping the environment mpirun gave it (the MPI job's identity is in it).

use clap::Args;
use tessera::error::{Error, Result};

#[derive(Args, Debug)]
pub struct DistArgs {
    /// spmv|spgemm|bfs and its options (`tessera dist spmv --help` lists them)
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 1..)]
    pub args: Vec<String>,
}

pub const BINARY: &str = "tessera-mpi";

pub fn dist(a: &DistArgs) -> Result<String> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::Usage(format!("tessera dist: cannot find this executable: {e}")))?;
    let mpi = exe.with_file_name(BINARY);
    if !mpi.is_file() {
        return Err(Error::Usage(format!(
            "tessera dist needs the `{BINARY}` binary next to this one ({} is missing): install \
             Open MPI (e.g. apt-get install openmpi-bin libopenmpi-dev libclang-dev) and build it \
             with `cargo build --release -p tessera-mpi`, then run `mpirun -np P tessera dist ...`",
            mpi.display()
        )));
    }
    exec(&mpi, &a.args)
}

#[cfg(unix)]
fn exec(binary: &std::path::Path, args: &[String]) -> Result<String> {
    use std::os::unix::process::CommandExt;
    // `exec` returns only on failure.
    let e = std::process::Command::new(binary).args(args).exec();
    Err(Error::Usage(format!(
        "tessera dist: cannot run {}: {e}",
        binary.display()
    )))
}

#[cfg(not(unix))]
fn exec(binary: &std::path::Path, _args: &[String]) -> Result<String> {
    Err(Error::Usage(format!(
        "tessera dist runs {} by exec, which needs a Unix system",
        binary.display()
    )))
}
