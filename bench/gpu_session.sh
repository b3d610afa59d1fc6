#!/usr/bin/env bash
# Everything issues 6-9 measure on a GPU, in as few commands as possible (GPU time is scarce).
#
#   bench/gpu_session.sh OUT_DIR [STEP...]      # steps 1-9, default all
#
# Needs: a CUDA GPU, nvcc, python3 with PyTorch and NumPy, and the mugraph binary ($MUGRAPH_BIN,
# default build/bin/mugraph). To run it on a lent machine that cannot build mugraph, pack the
# binary with the shared libraries it needs here first: `bench/gpu_session.sh --pack .gpu` puts
# them in .gpu/, with the Python package and what building it there takes (.gpu/deps: step 7
# builds the extension module when that machine's python3 is another version than this one's).
# Add `/.gpu/` to .git/info/exclude and carry .gpu, then there:
#   MUGRAPH_BIN=.gpu/mugraph LD_LIBRARY_PATH=.gpu MUGRAPH_PYTHONPATH=.gpu/python bench/gpu_session.sh $OUT
#
# Writes to OUT_DIR: examples.jsonl (mugraph bench --json on every μGraph and program in
# examples/), sass.txt (tensor-core instructions in the matmul kernels), sanitizer.txt
# (compute-sanitizer memcheck and racecheck where the runtime supports it), codegen.md and
# codegen.json (bench/codegen_vs_torch.py), layouts.jsonl, operands.jsonl and calibration.* (issue 7),
# torch_module.md (bench/torch_module_vs_mugraph.py, issue 8), paper.{md,json,png}
# (bench/paper/run.py, issue 9; $PAPER_ARGS adds arguments, e.g. --benchmarks gqa,qknorm),
# paper_bytes.{md,json} (step 9), and log.txt. Builds are cached in $MUGRAPH_CACHE_DIR (default .gpu_cache/), so that later steps and
# later calls on a machine still warm reuse them.
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

if [[ "${1:-}" == "--pack" ]]; then
  dest=${2:?usage: gpu_session.sh --pack DIR}
  mkdir -p "$dest"
  bin=${MUGRAPH_BIN:-$ROOT/build/bin/mugraph}
  cp "$bin" "$dest/mugraph"
  # The libraries outside glibc and libstdc++ (a GPU image has those): BLAS and its runtime.
  ldd "$bin" | awk '/=> \// {print $3}' | grep -E 'openblas|gfortran|quadmath|blas|lapack' |
    while read -r lib; do cp -L "$lib" "$dest/"; done
  # The Python package as built here (its extension module is for this Python's version).
  if [[ -d "$ROOT/build/python/mugraph" ]]; then
    rm -rf "$dest/python" && mkdir -p "$dest/python" && cp -rL "$ROOT/build/python/mugraph" "$dest/python/"
  fi
  # What building the extension module there needs and a GPU image lacks (step 7 builds it when
  # that Python cannot import the one above): the header-only libraries with their CMake files,
  # and OpenBLAS's headers (its library is already beside the binary).
  rm -rf "$dest/deps" && mkdir -p "$dest/deps/include" "$dest/deps/share/cmake"
  for pkg in nlohmann-json3-dev libcli11-dev; do
    dpkg -L "$pkg" | grep -E '^/usr/(include|share/cmake)/.+' | while read -r f; do
      [[ -f "$f" ]] || continue
      mkdir -p "$dest/deps/$(dirname "${f#/usr/}")" && cp "$f" "$dest/deps/${f#/usr/}"
    done
  done
  cblas=$(echo '#include <cblas.h>' | cpp -H -o /dev/null 2>&1 | awk '/cblas.h$/ {print $2; exit}')
  cp "$(dirname "$cblas")"/{cblas.h,openblas_config.h} "$dest/deps/include/"
  du -sh "$dest"
  ls -la "$dest"
  exit 0
fi

OUT=${1:?usage: gpu_session.sh OUT_DIR [STEP...]}
shift
# Steps to run (default all). One call may not fit them all in the device tool's 10 minutes: split
# them over calls (the builds are cached in $CACHE, kept while the machine stays warm).
STEPS=" ${*:-1 2 3 4 5 6 7 8 9} "
want() { [[ "$STEPS" == *" $1 "* ]]; }
mkdir -p "$OUT"
BIN=${MUGRAPH_BIN:-$ROOT/build/bin/mugraph}
CACHE=${MUGRAPH_CACHE_DIR:-$ROOT/.gpu_cache}
mkdir -p "$CACHE"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv
nvcc --version | tail -1
date -u

# The build directory of FILE's harness (cached: no rebuild after step 1).
build_dir() {
  "$BIN" bench "$1" --cache-dir "$CACHE" --warmup 0 --repeats 1 --json |
    python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["build_dir"])'
}

# Builds (and checks once) the harness of each file given, 8 at a time: nvcc is the slow part.
prebuild() {
  printf '%s\n' "$@" |
    xargs -P 8 -I{} sh -c "'$BIN' bench {} --cache-dir '$CACHE' --warmup 0 --repeats 1 --json > /dev/null 2>&1 || echo 'first run failed: {}'"
}

mapfile -t FILES < <(ls "$ROOT"/examples/ugraphs/*.json "$ROOT"/examples/found/*/best.json "$ROOT"/examples/*.mg)

# 1. Build every harness in parallel (nvcc is the slow part), checking each once.
if want 1; then
  prebuild "${FILES[@]}"
fi

# 2. Time them one at a time (cached builds), correctness checked again on fresh inputs.
if want 2; then
  : > "$OUT/examples.jsonl"
  for f in "${FILES[@]}"; do
    rel=${f#"$ROOT"/}
    line=$("$BIN" bench "$f" --cache-dir "$CACHE" --seed 1 --warmup 20 --repeats 200 --json 2>&1 | tail -1)
    echo "{\"file\": \"$rel\", \"result\": $line}" >> "$OUT/examples.jsonl" || true
    echo "$rel: $line"
  done
fi

# 3. SASS: the fused matmul kernels use tensor cores (HMMA on sm_80 code, HGMMA on sm_90a) and
#    load their tiles with cp.async (LDGSTS, sm_80) or the tensor memory accelerator (UTMALDG).
if want 3; then
  : > "$OUT/sass.txt"
  for name in rmsnorm_fig3b gated_mlp_fig10b; do
    dir=$(build_dir "$ROOT/examples/ugraphs/$name.json")
    cuobjdump --dump-sass "$dir/bench" > "$OUT/sass_$name.txt" 2>&1
    echo "$name: HMMA $(grep -c HMMA "$OUT/sass_$name.txt") HGMMA $(grep -c HGMMA "$OUT/sass_$name.txt")" \
         "LDGSTS $(grep -c LDGSTS "$OUT/sass_$name.txt") LDSM $(grep -c LDSM "$OUT/sass_$name.txt")" \
         "UTMALDG $(grep -c UTMALDG "$OUT/sass_$name.txt")" | tee -a "$OUT/sass.txt"
  done
fi

# 4. compute-sanitizer on the harness of each hand-written μGraph (one run each).
if want 4; then
  : > "$OUT/sanitizer.txt"
  for f in "$ROOT"/examples/ugraphs/*.json; do
    dir=$(build_dir "$f")
    read -r -a args < "$dir/io/args.txt"  # the harness's file arguments, as mugraph bench ran it
    for tool in memcheck racecheck; do
      {
        echo "== $tool ${f#"$ROOT"/}"
        (cd "$dir/io" && timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 9 "$dir/bench" --warmup 0 \
           --repeats 1 "${args[@]}") 2>&1
        echo "exit $?"
      } >> "$OUT/sanitizer.txt"
    done
  done
fi

# 5. Against PyTorch, with a sweep of pipeline depths.
if want 5; then
  MUGRAPH_BIN=$BIN python3 "$ROOT/bench/codegen_vs_torch.py" --stages 0,1,3,4 --markdown "$OUT/codegen.md" \
    --json "$OUT/codegen.json"
fi

# 6. Issue 7: the tile layouts the layout pass chose against row-major ones, wgmma operands read in
#    place against staged ones, then measured
#    selection over every verified candidate of the RMSNorm and GatedMLP searches (as many as
#    the search keeps: --top 100) and the model's calibration (Spearman, top choice's gap,
#    scatter plot).
if want 6; then
  : > "$OUT/layouts.jsonl"
  for name in rmsnorm_fig3b gated_mlp_fig10b; do
    for layouts in chosen row-major; do
      line=$("$BIN" bench "$ROOT/examples/ugraphs/$name.json" --cache-dir "$CACHE" --layouts "$layouts" --seed 1 \
             --warmup 20 --repeats 200 --json 2>&1 | tail -1)
      echo "{\"name\": \"$name\", \"layouts\": \"$layouts\", \"result\": $line}" | tee -a "$OUT/layouts.jsonl"
    done
  done
  # wgmma operands read in place (swizzled by the copy engine) against staged ones.
  : > "$OUT/operands.jsonl"
  for name in rmsnorm_fig3b gated_mlp_fig10b; do
    for operands in in-place staged; do
      line=$("$BIN" bench "$ROOT/examples/ugraphs/$name.json" --cache-dir "$CACHE" --wgmma-operands "$operands" \
             --seed 1 --warmup 20 --repeats 200 --json 2>&1 | tail -1)
      echo "{\"name\": \"$name\", \"wgmma_operands\": \"$operands\", \"result\": $line}" | tee -a "$OUT/operands.jsonl"
    done
  done
  # $CALIBRATE_PROGRAMS splits the step over two calls of the device tool where one would not fit.
  for prog in ${CALIBRATE_PROGRAMS:-rmsnorm_linear gated_mlp}; do
    "$BIN" search "$ROOT/examples/$prog.mg" -o "$OUT/calibrate_$prog" --target h200 --time-limit 120 --top 100 \
      --measure 100 -q || echo "search $prog failed"
  done
  python3 "$ROOT/bench/calibrate_cost_model.py" "$OUT"/calibrate_* --markdown "$OUT/calibration.md" \
    --png "$OUT/calibration.png" || echo "calibration report failed"
fi

# 7. Issue 8: a PyTorch module with its RMSNorm + Linear replaced by the optimized callable.
#    An extension module built for another Python (the packed one: this machine's python3 may be
#    another version) does not import; then it is built here, in $CACHE/python-build, from the
#    libraries --pack put beside the binary ($MUGRAPH_DEPS, default $(dirname $BIN)/deps).
build_python_package() {
  local deps=${MUGRAPH_DEPS:-$(dirname "$BIN")/deps} build=$CACHE/python-build
  local blas
  blas=$(ls "$(dirname "$BIN")"/libopenblas.so* 2>/dev/null | head -1)
  cmake -S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMUGRAPH_PYTHON=ON -DMUGRAPH_TESTS=OFF \
    -DMUGRAPH_BENCH=OFF -DPython_EXECUTABLE="$(command -v python3)" -DCMAKE_PREFIX_PATH="$deps" \
    ${blas:+-DMUGRAPH_OPENBLAS_LIBRARY="$blas"} -DMUGRAPH_CBLAS_INCLUDE_DIR="$deps/include" \
    -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,$(dirname "$BIN")" > "$OUT/python_build.txt" 2>&1 &&
    cmake --build "$build" -j "$(nproc)" --target _core mugraph_python_sources >> "$OUT/python_build.txt" 2>&1 &&
    echo "$build/python"
}
if want 7; then
  pypath=${MUGRAPH_PYTHONPATH:-$ROOT/build/python}
  if ! PYTHONPATH=$pypath python3 -c 'import mugraph._core' 2> /dev/null; then
    echo "mugraph._core does not import in $(python3 --version) from $pypath: building it here"
    pypath=$(build_python_package) || { pypath=""; echo "building the extension failed: $OUT/python_build.txt"; tail -20 "$OUT/python_build.txt"; }
  fi
  [[ -n "$pypath" ]] && PYTHONPATH=$pypath python3 "$ROOT/bench/torch_module_vs_mugraph.py" \
    --markdown "$OUT/torch_module.md" || echo "torch_module_vs_mugraph failed"
fi

# 8. Issue 9: the paper's six benchmarks at the paper's shapes, from the searches saved in
#    bench/paper/results/, against PyTorch eager, torch.compile and SDPA (docs/benchmarks.md):
#    the best 4 candidates of each by the cost model timed, the fastest kept (run.py builds all
#    their harnesses in parallel first).
if want 8; then
  # shellcheck disable=SC2086  # PAPER_ARGS is a list of arguments
  MUGRAPH_BIN=$BIN MUGRAPH_CACHE_DIR=$CACHE python3 "$ROOT/bench/paper/run.py" --search never ${PAPER_ARGS:-} \
    --markdown "$OUT/paper.md" --json "$OUT/paper.json" --chart "$OUT/paper.png" || echo "paper benchmarks failed"
fi
# 9. Issues 7 and 9: where the bytes bound and the model disagree (GQA's split of the keys, QKNorm's
#    two kernels), the bytes-bound searches' one-kernel bests (bench/paper/results_bytes/), timed
#    the same way against the eager baselines: is the model's preference right on the H200?
if want 9; then
  MUGRAPH_BIN=$BIN MUGRAPH_CACHE_DIR=$CACHE python3 "$ROOT/bench/paper/run.py" --search never \
    --results "$ROOT/bench/paper/results_bytes" --benchmarks gqa_bs1,gqa_bs8,qknorm_bs1 --compile-mode '' \
    --markdown "$OUT/paper_bytes.md" --json "$OUT/paper_bytes.json" || echo "bytes-bound bests failed"
fi
echo "done: $(date -u)"
