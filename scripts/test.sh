#!/usr/bin/env bash
# The whole test suite, as README.md gives it and `.ci/run` runs it: the Rust workspace first;
# the MPI crate (under mpirun) and the Python package (under pytest) join as further steps,
# each of which installs nothing itself — `.ci/run` installs their tools on a fresh machine —
# except the Python step, which makes its own venv under target/ from the package registry.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --all-targets --all-features
# `--all-targets` leaves out the examples in doc comments; they are tests too.
cargo test --release --all-features --doc
scripts/test-mpi.sh
scripts/test-python.sh
