#!/usr/bin/env bash
# The Array API standard's own conformance suite (data-apis/array-api-tests) against the
# installed `tessera.array_api` (the venv of scripts/test-python.sh, target/pyenv; another
# with TESSERA_VENV). CI cannot fetch GitHub, so this is not part of .ci/run: give a checkout
# of the suite, with its `array-api` spec submodule checked out, as the first argument or as
# ARRAY_API_TESTS_DIR. Further arguments go to pytest (`-k test_sum`, `--max-examples 200`).
#
#   scripts/array-api-tests.sh ~/src/array-api-tests
#
# The suite's requirements (pytest, pytest-json-report, hypothesis, ndindex) are installed
# into the venv when missing. The checkout is copied to a temporary directory and
# scripts/array-api-tests.patch is applied there: the suite assumes complex dtypes exist and
# fails to start without them (Tessera has none); the patch makes it skip the complex cases.
# Known failures are xfailed by python/array-api-xfails.txt (each with its reason); a
# failure not in it fails the run. The dtypes Tessera lacks are skipped
# (ARRAY_API_TESTS_SKIP_DTYPES), and the linalg and fft extensions, which it does not have.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
suite="${1:-${ARRAY_API_TESTS_DIR:-}}"
if [ -z "$suite" ]; then
    echo "usage: scripts/array-api-tests.sh PATH-TO-array-api-tests [pytest arguments]" >&2
    exit 2
fi
[ $# -gt 0 ] && shift
if [ ! -d "$suite/array_api_tests" ]; then
    echo "error: $suite is not a checkout of data-apis/array-api-tests" >&2
    exit 2
fi
if [ ! -d "$suite/array-api/spec" ]; then
    echo "error: $suite/array-api (the spec submodule) is not checked out:" >&2
    echo "  git -C $suite submodule update --init" >&2
    exit 2
fi
venv="${TESSERA_VENV:-$root/target/pyenv}"
python="$venv/bin/python"
if ! "$python" -c "import tessera.array_api" 2>/dev/null; then
    echo "error: tessera is not installed in $venv (run scripts/test-python.sh first)" >&2
    exit 2
fi
if ! "$python" -c "import pytest_jsonreport, hypothesis, ndindex" 2>/dev/null; then
    "$python" -m pip install -q pytest pytest-json-report "hypothesis>=6.151.0" "ndindex>=1.8"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tar -C "$suite" --exclude=.git -cf - . | tar -C "$work" -xf -
if (cd "$work" && patch -p1 --dry-run -s < "$root/scripts/array-api-tests.patch" >/dev/null 2>&1); then
    (cd "$work" && patch -p1 -s < "$root/scripts/array-api-tests.patch")
else
    echo "note: scripts/array-api-tests.patch does not apply to this checkout (fixed upstream?);" \
         "running the suite as it is" >&2
fi

export ARRAY_API_TESTS_MODULE=tessera.array_api
export ARRAY_API_TESTS_VERSION="${ARRAY_API_TESTS_VERSION:-2023.12}"
export ARRAY_API_TESTS_SKIP_DTYPES=int16,uint16,uint32,complex64,complex128
cd "$work"
# Kernels compile on first use, so Hypothesis's per-example deadline is off.
"$python" -m pytest array_api_tests -p no:cacheprovider -q -rfX \
    --disable-deadline --disable-extension linalg fft \
    --max-examples "${MAX_EXAMPLES:-20}" \
    --xfails-file "$root/python/array-api-xfails.txt" "$@"
