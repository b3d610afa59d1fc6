#!/usr/bin/env bash
# Builds the fuzz targets with clang in their own build directory and runs each for a bounded
# time on a copy of its seed corpus.
#
#   fuzz/run_fuzz.sh [SECONDS] [extra libFuzzer flags...]      (default: 60 seconds per target)
#
# Targets (FUZZ_TARGETS, default all four): program (the program format), ugraph_json (the
# μGraph JSON format, then what the commands do with a graph they load: validate, print, cost,
# generate CUDA), npy (NPY inputs) and checkpoint (search checkpoints, then a resume from them). Seeds: fuzz/corpus/<target>/, and for ugraph_json also
# every μGraph in examples/ugraphs/ and examples/found/.
#
# Environment: BUILD_DIR (default <repo>/build-fuzz), CXX (default clang++, then clang++-14),
# JOBS (build parallelism, default 2). Exits non-zero if a fuzzer finds a crash, a leak, a
# timeout or a sanitizer report; the reproducer is left in the build directory as crash-*,
# leak-*, timeout-* or oom-* (add it to fuzz/corpus/<target>/ once fixed).
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
targets="${FUZZ_TARGETS:-program ugraph_json npy checkpoint}"
cxx="${CXX:-}"
if [[ -z "$cxx" ]]; then
  if command -v clang++ >/dev/null; then cxx=clang++; else cxx=clang++-14; fi
fi

cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMUGRAPH_FUZZ=ON -DMUGRAPH_TESTS=OFF -DMUGRAPH_BENCH=OFF -DMUGRAPH_PYTHON=OFF >/dev/null
read -r -a target_list <<< "$targets"
cmake --build "$build" --target "${target_list[@]/%/_fuzzer}" -j "$jobs"

status=0
for t in "${target_list[@]}"; do
  # libFuzzer adds what it finds to its first corpus directory: work on a copy so the seed corpus
  # in the repository stays small and reviewed.
  work="$build/fuzz-corpus/$t"
  rm -rf "$work"
  mkdir -p "$work"
  cp "$repo/fuzz/corpus/$t"/* "$work"/
  flags=(-max_len=4096)
  case "$t" in
    ugraph_json)
      for f in "$repo"/examples/ugraphs/*.json "$repo"/examples/found/*/best.json; do
        cp "$f" "$work/example_$(basename "$(dirname "$f")")_$(basename "$f")"
      done
      flags=(-max_len=65536) ;;
    checkpoint) flags=(-max_len=65536) ;;
  esac
  [[ -f "$repo/fuzz/${t}_fuzzer.dict" ]] && flags+=(-dict="$repo/fuzz/${t}_fuzzer.dict")
  echo "fuzzing $t for ${seconds} s; corpus copy in $work"
  (cd "$build" && "$build/bin/${t}_fuzzer" "$work" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "${flags[@]}" "$@") || {
    echo "the $t fuzzer found a problem; reproducers:" >&2
    ls -1 "$build"/crash-* "$build"/leak-* "$build"/timeout-* "$build"/oom-* 2>/dev/null >&2 || true
    status=1
  }
done
[[ $status -eq 0 ]] && echo "no findings"
exit $status
