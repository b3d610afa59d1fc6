#!/usr/bin/env bash
# Builds the program-format fuzzer with clang in its own build directory and runs it for a bounded
# time on a copy of the seed corpus.
#
#   fuzz/run_fuzz.sh [SECONDS] [extra libFuzzer flags...]      (default: 60 seconds)
#
# Environment: BUILD_DIR (default <repo>/build-fuzz), CXX (default clang++, then clang++-14),
# JOBS (build parallelism, default 2). Exits non-zero if the fuzzer finds a crash, a leak, a
# timeout or a sanitizer report; the reproducer is left in the build directory as crash-*,
# leak-*, timeout-* or oom-* (add it to fuzz/corpus/ once fixed).
set -euo pipefail

seconds="${1:-60}"
shift || true
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 [SECONDS] [libFuzzer flags...]" >&2
  exit 2
fi

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$repo/build-fuzz}"
jobs="${JOBS:-2}"
cxx="${CXX:-}"
if [[ -z "$cxx" ]]; then
  if command -v clang++ >/dev/null; then cxx=clang++; else cxx=clang++-14; fi
fi

cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMUGRAPH_FUZZ=ON -DMUGRAPH_TESTS=OFF -DMUGRAPH_BENCH=OFF >/dev/null
cmake --build "$build" --target program_fuzzer -j "$jobs"

# libFuzzer adds what it finds to its first corpus directory: work on a copy so the seed corpus
# in the repository stays small and reviewed.
work="$build/fuzz-corpus"
rm -rf "$work"
mkdir -p "$work"
cp "$repo"/fuzz/corpus/* "$work"/

cd "$build"
echo "fuzzing for ${seconds} s; corpus copy in $work"
status=0
"$build/bin/program_fuzzer" "$work" -max_total_time="$seconds" -max_len=4096 -timeout=5 \
  -rss_limit_mb=2048 -dict="$repo/fuzz/program.dict" -print_final_stats=1 "$@" || status=$?
if [[ $status -ne 0 ]]; then
  echo "fuzzer found a problem (exit $status); reproducers:" >&2
  ls -1 "$build"/crash-* "$build"/leak-* "$build"/timeout-* "$build"/oom-* 2>/dev/null >&2 || true
  exit 1
fi
echo "no findings"
