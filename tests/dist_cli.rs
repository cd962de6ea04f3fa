//! `tessera dist` hands over to the `tessera-mpi` binary beside the `tessera` executable
//! (crates/tessera-mpi, tested by scripts/test-mpi.sh under mpirun). Without that binary it
//! must fail with an error telling how to build it, whatever the arguments.

use std::process::Command;

#[test]
fn dist_without_the_mpi_binary_says_how_to_build_it() {
    let dir = std::env::temp_dir().join(format!("tessera-dist-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A copy of the CLI alone in a folder: no tessera-mpi next to it.
    let exe = dir.join("tessera");
    std::fs::copy(env!("CARGO_BIN_EXE_tessera"), &exe).unwrap();
    let out = Command::new(&exe)
        .args(["dist", "spmv", "--in", "A=a.mtx", "--json"])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "dist succeeded without tessera-mpi");
    assert!(
        err.contains("tessera-mpi") && err.contains("cargo build --release -p tessera-mpi"),
        "unhelpful error: {err}"
    );
}
