#!/usr/bin/env bash
# The Python package's tests (python/tests, pytest): makes a venv under target/ (reused when
# present), installs python/requirements-test.txt and the package itself (`pip install
# ./python`, which builds crates/tessera-py with maturin into the workspace's target/, so the
# core's compiled dependencies are shared with the Rust build), then runs pytest. Without
# python3 on the machine it prints SKIPPED and exits 0; any other failure fails.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIPPED: the Python package tests (no python3 on this machine)"
    exit 0
fi
export CARGO_TARGET_DIR="$PWD/target"
venv="$PWD/target/pyenv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
# The build backend runs `maturin` from PATH.
export PATH="$venv/bin:$PATH"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -r python/requirements-test.txt
# The build backend (maturin) is installed above: build without an isolated environment so
# nothing is downloaded twice.
"$venv/bin/python" -m pip install -q --no-build-isolation --force-reinstall --no-deps ./python
# Modest example counts (the `ci` profile of python/tests/conftest.py) keep this under a
# few minutes on 2 cores; HYPOTHESIS_PROFILE=long searches longer.
# From the repository root: inside python/ the source folder `tessera` (without the built
# extension) would shadow the installed package.
HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}" "$venv/bin/python" -m pytest python/tests -q -p no:cacheprovider
