#!/usr/bin/env bash
# Set-up command 2: run every test. Builds what it needs first, so it works on a fresh clone.
#   1. unit and integration tests (ctest) on the Release build, warnings as errors
#   2. the NumPy cross-checks of the CLI (pytest, a worker per core: pytest-xdist), the Python
#      package's tests, and its install: `pip install .` in a new virtual environment, then the
#      README's Python example (scripts/check_pip_install.sh)
#   3. the unit tests and the CLI tests again under AddressSanitizer + UndefinedBehaviorSanitizer
#   4. the fuzz targets of the four file readers (program, μGraph JSON, NPY, checkpoint), each for a bounded
#      time (MUGRAPH_FUZZ_SECONDS, default 60 per target)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
JOBS="$(nproc)"

echo "== 1/4 build (Release, -Werror) and ctest"
bash scripts/build.sh -DMUGRAPH_WERROR=ON
ctest --test-dir build --output-on-failure -j "$JOBS"

echo "== 2/4 CLI cross-checks against NumPy, and the Python package (pytest)"
MUGRAPH_BIN="$PWD/build/bin/mugraph" .venv/bin/python -m pytest -q -n "$JOBS" --durations=15 tests/tools
PYTHONPATH="$PWD/build/python" .venv/bin/python -m pytest -q -p no:cacheprovider tests/python
bash scripts/check_pip_install.sh

echo "== 3/4 ASan + UBSan build and ctest"
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMUGRAPH_SANITIZE=ON -DMUGRAPH_BENCH=OFF >/dev/null
cmake --build build-sanitize -j "$JOBS"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
ctest --test-dir build-sanitize --output-on-failure -j "$JOBS"
MUGRAPH_BIN="$PWD/build-sanitize/bin/mugraph" .venv/bin/python -m pytest -q -n "$JOBS" --durations=15 tests/tools
unset ASAN_OPTIONS UBSAN_OPTIONS

echo "== 4/4 fuzz the program, μGraph JSON, NPY and checkpoint readers for ${MUGRAPH_FUZZ_SECONDS:-60} s each"
bash fuzz/run_fuzz.sh "${MUGRAPH_FUZZ_SECONDS:-60}"
echo "== all tests passed"
