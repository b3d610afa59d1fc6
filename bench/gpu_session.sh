#!/usr/bin/env bash
# Everything issues 6-9 measure on a GPU, in one command that fits a lease (GPU time is scarce:
# 15 minutes a task, starting the machine included; one command may run 10).
#
#   bench/gpu_session.sh OUT_DIR [--deadline SECONDS] [STEP...]
#
# Steps run in the order given; by default all, most important first:
#   build      every example's harness (mugraph bench --build-only, 8 nvcc builds at a time)
#   check      mugraph bench --json on every μGraph and program in examples/: checked against
#              the interpreter on fresh inputs (bench/bench_inputs.py), timed (200 runs)
#                                                                              -> examples.jsonl
#   pairs      bench/half2_exact.cu: the device library's f16 pair ops (HADD2, HSUB2, HMUL2)
#              against its f32 path, bit for bit, on all 2^32 operand pairs      -> pairs.txt
#   chains     the paper's GQA and QKNorm bests and the examples' with attention's scores in
#              registers (the examples' split among warpgroups or not) and op by op, on the check
#              step's inputs -> chains.jsonl
#   sass       HGMMA/HMMA/UTMALDG/LDGSTS/LDSM counts in the Figure 3b and 10b harnesses
#                                                                  -> sass.txt, sass_NAME.txt
#   overlap    each loop product landing an iteration later (--matmul-overlap on) against in its
#              own iteration, with the emitter's stages and with 4 (Figure 3b and 10b)
#                                                                             -> overlap.jsonl
#   anatomy    bench/loop_anatomy.py: Figures 3b and 10b with the loop's loads, its matmul or its
#              SIMT ops left out in turn, matmul overlap off and on: which part the time is
#              (the variants compute wrong results; timed, not checked)
#                                                              -> anatomy.{md,jsonl}
#   widths     bench/tile_widths.py: O = X·W with W tiles 8 to 64 elements wide, the pieces held and
#              the bytes doubling (rows), or the bytes held and the pieces halving (blocks): is a
#              tile's load time its rows' or its bytes'? (the cost model's pieces term, issue 7)
#                                                              -> widths.{md,jsonl}
#   operands   wgmma operands in place against staged, products summed in registers against
#              stored, chosen tile layouts against row-major
#              (Figure 3b and 10b)                          -> operands.jsonl, layouts.jsonl
#   threads    each block graph's own threads per block against 128, 256 and 512 (--block-threads),
#              on Figures 3b and 10b and the paper's RMSNorm, GatedMLP, QKNorm and nTrans bests
#              (QKNorm bs 1's attention kernel: 512 op by op, 128 as the matmul chain)  -> threads.jsonl
#   torch      bench/codegen_vs_torch.py: Figure 3b and 10b, and their split-k and 64-block forms,
#              against PyTorch (issue 6; $TORCH_ARGS replaces "--stages 0 --matmul-overlap off,on",
#              e.g. "--stages 0,4 --compile-modes default"; the overlap step times 4 stages)
#                                                                  -> codegen.md, codegen.json
#   sanitize   compute-sanitizer memcheck and racecheck on the hand-written μGraphs and found/gqa
#                                                                           -> sanitizer.txt
#   paper      bench/paper/run.py on the saved searches (issue 9; $PAPER_ARGS adds arguments,
#              e.g. "--benchmarks gqa,qknorm --compile-mode default")  -> paper.{md,json,png}
#   module     bench/torch_module_vs_mugraph.py (issue 8; $MODULE_ARGS adds arguments, e.g.
#              "--time-limit 20"; where the packed extension module does not import, the step
#              builds one first)                                            -> torch_module.md
#   calibrate  every verified candidate of the paper's RMSNorm (bs 1) and GatedMLP searches,
#              verified beforehand (bench/paper/results_all, exhausted searches with --top 1000,
#              which has RMSNorm bs 8 too; $CALIBRATE_RESULTS=bench/paper/results_top100 for the
#              set of 2026-11-26), each timed: the model's calibration (issue 7;
#              $CALIBRATE_BENCHMARKS, $CALIBRATE_MEASURE candidates of each, default 100;
#              results_all has 40 each of gqa_bs8, qknorm_bs1 and qknorm_bs8 too)
#                                        -> calibration_runs.{md,json}, calibration.{md,png}
#   paper_bytes  the bytes-bound searches' bests of GQA and QKNorm     -> paper_bytes.{md,json}
#   paper_grid3d  GQA and QKNorm searched with 3-D grids (bench/paper/results_grid3d, 2026-11-28):
#              their best 4 each, timed as `paper` times them, eager baselines
#                                                               -> paper_grid3d.{md,json}
#   profile    Nsight Compute (speed of light, warp states, memory) on one run of the paper's
#              RMSNorm (bs 1) and GatedMLP bests ($PROFILE_FILES: others)          -> ncu.txt
#
# A step starts only while the deadline (default 540 s after the start) leaves it the time it
# needs at least, and runs under a timeout at the deadline: the call ends inside the device
# tool's 10 minutes. After every step everything written so far is bundled into
# OUT_DIR/results.tar.gz, so OUT_DIR holds three files (results.tar.gz, summary.txt, log.txt;
# the tool brings back 8 at most) and a call cut short still returns what it measured.
#
# Needs: a CUDA GPU, nvcc, python3 with PyTorch and NumPy, and the mugraph binary ($MUGRAPH_BIN,
# default build/bin/mugraph). To run it on a lent machine that cannot build mugraph, pack the
# binary with the shared libraries it needs here first: `bench/gpu_session.sh --pack .gpu` puts
# them in .gpu/, with the Python package and what building it there takes (.gpu/deps: the module
# step builds the extension module when that machine's python3 is another version than this one's).
# Carry .gpu, then there:
#   MUGRAPH_BIN=.gpu/mugraph LD_LIBRARY_PATH=.gpu MUGRAPH_PYTHONPATH=.gpu/python bench/gpu_session.sh $OUT
# Builds are cached in $MUGRAPH_CACHE_DIR (default .gpu_cache/), so that later steps and later
# calls on a machine still warm reuse them.
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${MUGRAPH_BIN:-$ROOT/build/bin/mugraph}
CACHE=${MUGRAPH_CACHE_DIR:-$ROOT/.gpu_cache}
ALL_STEPS="build check overlap anatomy widths pairs chains sass operands threads torch sanitize paper paper_grid3d module calibrate paper_bytes profile"

if [[ "${1:-}" == "--pack" ]]; then
  dest=${2:?usage: gpu_session.sh --pack DIR}
  mkdir -p "$dest"
  bin=${MUGRAPH_BIN:-$ROOT/build/bin/mugraph}
  cp "$bin" "$dest/mugraph"
  # The libraries outside glibc and libstdc++ (a GPU image has those): BLAS and its runtime, and
  # jemalloc where the binary was linked with it.
  ldd "$bin" | awk '/=> \// {print $3}' | grep -E 'openblas|gfortran|quadmath|blas|lapack|jemalloc' |
    while read -r lib; do cp -L "$lib" "$dest/"; done
  # The Python package as built here (its extension module is for this Python's version).
  if [[ -d "$ROOT/build/python/mugraph" ]]; then
    rm -rf "$dest/python" && mkdir -p "$dest/python" && cp -rL "$ROOT/build/python/mugraph" "$dest/python/"
  fi
  # The extension module for the lent machine's Python too ($MUGRAPH_PACK_PYTHONS: interpreters
  # here with nanobind, default python3.12; empty: none), built in $ROOT/build-pack-NAME with
  # this machine's compiler as the binary is:
  # the module built there with its own GCC crashed inside build_library (2026-11-27).
  for py in ${MUGRAPH_PACK_PYTHONS-python3.12}; do  # set and empty: none
    # The interpreter itself, where a pyenv shim stands for it (a version pyenv has but has not
    # selected runs with PYENV_VERSION).
    exe=$("$py" -c 'import sys; print(sys.executable)' 2> /dev/null) ||
      exe=$(PYENV_VERSION=$(pyenv versions --bare 2> /dev/null | grep -E "^${py#python}(\.|$)" | tail -1) \
        "$py" -c 'import sys; print(sys.executable)' 2> /dev/null) || continue
    py=$exe
    b=$ROOT/build-pack-$(basename "$py")
    # nanobind is sources and CMake files, the same for every Python: an interpreter without it
    # (a fresh machine's pyenv one) builds with the project environment's.
    nb=()
    if ! "$py" -m nanobind --cmake_dir > /dev/null 2>&1; then
      nb_dir=$("$ROOT/.venv/bin/python" -m nanobind --cmake_dir 2> /dev/null) && nb=(-Dnanobind_DIR="$nb_dir")
    fi
    if cmake -S "$ROOT" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMUGRAPH_PYTHON=ON -DMUGRAPH_TESTS=OFF \
         -DMUGRAPH_BENCH=OFF -DPython_EXECUTABLE="$py" "${nb[@]}" > "$b.log" 2>&1 &&
       cmake --build "$b" --target _core >> "$b.log" 2>&1; then
      cp "$b"/python/mugraph/_core.*.so "$dest/python/mugraph/"
    else
      echo "no extension module for $py: see $b.log" >&2
    fi
  done
  # What building the extension module there needs and a GPU image lacks (the module step builds it when
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


# The least time (seconds) a step needs to be worth starting.
min_seconds() {
  if [[ -n "${GPU_SESSION_MIN_SECONDS:-}" ]]; then  # one figure for every step (the script's tests)
    min_seconds_of "$1" > /dev/null && echo "$GPU_SESSION_MIN_SECONDS"
    return
  fi
  min_seconds_of "$1"
}
min_seconds_of() {
  case $1 in
    build) echo 20 ;; check) echo 60 ;; pairs) echo 30 ;; chains) echo 60 ;; sass) echo 10 ;; operands) echo 30 ;; threads) echo 55 ;; torch) echo 90 ;;
    overlap) echo 40 ;; anatomy) echo 60 ;; widths) echo 40 ;;
    sanitize) echo 60 ;; paper) echo 150 ;; module) echo 90 ;;
    calibrate) echo $((60 + 18 * ${CALIBRATE_MEASURE:-100} / 10)) ;;  # 100 candidates: 240 s
    paper_bytes) echo 60 ;; paper_grid3d) echo 90 ;; profile) echo 30 ;;
    *) echo "unknown step '$1' (steps: $ALL_STEPS)" >&2; return 1 ;;
  esac
}

# The build directory of FILE's harness (cached after the build step; builds it otherwise).
build_dir() {
  "$BIN" bench "$1" --cache-dir "$CACHE" --build-only --json |
    python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["build_dir"])'
}

# One JSON line: KEY=VALUE pairs (strings) and the last line of a mugraph command's output as
# "result" (its JSON object, or the error it printed as a string).
json_line() {
  python3 -c '
import json, sys
*pairs, out = sys.argv[1:]
line = out.strip().splitlines()[-1] if out.strip() else ""
try:
    result = json.loads(line)
except ValueError:
    result = line
print(json.dumps({**dict(p.split("=", 1) for p in pairs), "result": result}))' "$@"
}

# Runs mugraph bench with the given arguments and appends its result to FILE as one JSON line
# tagged with the KEY=VALUE pairs before "--"; returns bench's exit status.
bench_line() {
  local file=$1 tags=() out rc
  shift
  while [[ $1 != -- ]]; do tags+=("$1"); shift; done
  shift
  out=$("$BIN" bench "$@" --json 2>&1)
  rc=$?
  json_line "${tags[@]}" "$out" | tee -a "$file"
  return $rc
}

# One step, writing into $W (the results directory). Run by the script itself under a timeout.
run_step() {
  local W=$1 step=$2
  mapfile -t FILES < <(ls "$ROOT"/examples/ugraphs/*.json "$ROOT"/examples/found/*/best.json "$ROOT"/examples/*.mg)
  case $step in
  build)
    printf '%s\n' "${FILES[@]}" |
      xargs -P 8 -I{} sh -c "'$BIN' bench {} --cache-dir '$CACHE' --build-only > /dev/null 2> /dev/null || echo 'build failed: {}'"
    ;;
  check)
    # Inputs on which the f16 reference stays finite (bench/bench_inputs.py: attention overflows
    # on standard normal ones), kept beside the builds, not in the results; drawn by mugraph itself
    # at the same scale where NumPy is missing.
    local failed=0 inputs rel
    for f in "${FILES[@]}"; do
      rel=${f#"$ROOT"/examples/}
      inputs=$(python3 "$ROOT/bench/bench_inputs.py" "$(build_dir "$f")/manifest.json" "$f" \
        "$CACHE/inputs/${rel%.*}" 2> /dev/null) || inputs="--seed 1 --input-scale 0.25"
      # shellcheck disable=SC2086  # inputs is a list of arguments
      bench_line "$W/examples.jsonl" file="${f#"$ROOT"/}" -- "$f" --cache-dir "$CACHE" $inputs --warmup 20 \
        --repeats 200 || failed=$((failed + 1))
    done
    echo "check: $failed of ${#FILES[@]} failed or did not match the interpreter"
    ((failed == 0))
    ;;
  pairs)
    nvcc -std=c++17 -O3 -arch=native -I "$ROOT/runtime/include" "$ROOT/bench/half2_exact.cu" -o "$CACHE/half2_exact" &&
      "$CACHE/half2_exact" | tee "$W/pairs.txt"
    ;;
  sass)
    # The toolkit's cuobjdump, else the PyPI wheels' that scripts/install_deps.sh puts in .venv
    # (a toolkit without it printed counts of 0 here, as if the code had no tensor-core op).
    objdump=$(command -v cuobjdump) || {
      for d in "$ROOT"/.venv/lib/python3*/site-packages/nvidia/*/bin; do
        [[ -x $d/cuobjdump ]] && objdump=$d/cuobjdump
        [[ -x $d/nvdisasm ]] && PATH=$d:$PATH
      done
    }
    [[ -n $objdump ]] || { echo "sass: no cuobjdump (the CUDA toolkit's, or pip's nvidia-cuda-cuobjdump)"; return 1; }
    for name in rmsnorm_fig3b gated_mlp_fig10b; do
      dir=$(build_dir "$ROOT/examples/ugraphs/$name.json")
      "$objdump" --dump-sass "$dir/bench" > "$W/sass_$name.txt" 2>&1 ||
        { echo "sass: cuobjdump failed on $dir/bench (sass_$name.txt)"; return 1; }
      echo "$name: HMMA $(grep -c HMMA "$W/sass_$name.txt") HGMMA $(grep -c HGMMA "$W/sass_$name.txt")" \
           "LDGSTS $(grep -c LDGSTS "$W/sass_$name.txt") LDSM $(grep -c LDSM "$W/sass_$name.txt")" \
           "UTMALDG $(grep -c UTMALDG "$W/sass_$name.txt")" | tee -a "$W/sass.txt"
    done
    ;;
  chains)
    # Attention's loop body as one chain with its scores in registers (mgd::matmul_chain_wgmma,
    # the default since 2026-11-27; its sums in registers since the fifth session of that day)
    # against op by op through shared memory: the paper's four attention bests (one or more
    # 64-row jobs per warpgroup), and the examples' GQA and QKNorm (16 query rows for 4
    # warpgroups) with S's n-blocks split among the warpgroups (--chain-split on, the default
    # from the sixth session of 2026-11-27 until it was timed on 2026-11-28) or not (off: then op
    # by op, as the emitter's rule has them). Inputs as the
    # check step draws them (attention's f16 reference overflows on standard normal ones), the
    # same for every variant of a μGraph.
    local failed=0 inputs f name variant
    for f in "$ROOT"/bench/paper/results/{gqa_bs1,gqa_bs8,qknorm_bs1,qknorm_bs8}/best.json \
             "$ROOT"/examples/found/{gqa,qknorm}/best.json; do
      name=$(basename "$(dirname "$f")")
      [[ $f == */examples/* ]] && name=found_$name
      inputs=$(python3 "$ROOT/bench/bench_inputs.py" "$(build_dir "$f")/manifest.json" "$f" \
        "$CACHE/inputs/chains/$name" 2> /dev/null) || inputs="--seed 1 --input-scale 0.25"
      for variant in registers:on op-by-op:on registers:off; do
        [[ $f != */examples/* && $variant == registers:off ]] && continue  # one job per warpgroup: no split
        # shellcheck disable=SC2086  # inputs is a list of arguments
        bench_line "$W/chains.jsonl" name="$name" matmul_chains="${variant%:*}" chain_split="${variant#*:}" \
          -- "$f" --cache-dir "$CACHE" --matmul-chains "${variant%:*}" --chain-split "${variant#*:}" $inputs \
          --warmup 20 --repeats 200 || failed=$((failed + 1))
      done
    done
    echo "chains: $failed of 14 failed or did not match the interpreter"
    ((failed == 0))
    ;;
  overlap)
    # The tensor cores compute iteration it's product while iteration it + 1's element-wise ops
    # run (wgmma_deferred.h), or the threads wait for it (the default until this is timed).
    # (At 256 or 512 threads their one 64-row job would leave warpgroups idle: not deferred.)
    local failed=0
    for name in rmsnorm_fig3b gated_mlp_fig10b; do
      for stages in 0 4; do  # 0: the emitter's choice (two, three with the option)
        local extra=()
        ((stages == 0)) || extra=(--stages "$stages")
        for overlap in off on; do
          bench_line "$W/overlap.jsonl" name="$name" matmul_overlap="$overlap" stages="$stages" -- \
            "$ROOT/examples/ugraphs/$name.json" --cache-dir "$CACHE" --matmul-overlap "$overlap" "${extra[@]}" \
            --seed 1 --warmup 20 --repeats 200 || failed=$((failed + 1))
        done
      done
    done
    echo "overlap: $failed of 8 failed or did not match the interpreter"
    ((failed == 0))
    ;;
  anatomy)
    local failed=0 overlap
    for overlap in off on; do
      MUGRAPH_BIN=$BIN python3 "$ROOT/bench/loop_anatomy.py" --work "$CACHE/anatomy-$overlap" \
        --codegen-args "--matmul-overlap $overlap" --json "$W/anatomy.jsonl" --markdown "$W/anatomy_$overlap.md" \
        --warmup 20 --repeats 200 --run-timeout 60 || failed=$((failed + 1))
    done
    cat "$W"/anatomy_*.md > "$W/anatomy.md" 2> /dev/null
    ((failed == 0))
    ;;
  widths)
    MUGRAPH_BIN=$BIN MUGRAPH_CACHE_DIR=$CACHE python3 "$ROOT/bench/tile_widths.py" --work "$CACHE/widths" \
      --json "$W/widths.jsonl" --markdown "$W/widths.md" --warmup 20 --repeats 200
    ;;
  operands)
    for name in rmsnorm_fig3b gated_mlp_fig10b; do
      for operands in in-place staged; do
        bench_line "$W/operands.jsonl" name="$name" wgmma_operands="$operands" -- "$ROOT/examples/ugraphs/$name.json" \
          --cache-dir "$CACHE" --wgmma-operands "$operands" --seed 1 --warmup 20 --repeats 200
      done
      # The products stored and added by the accumulator op, barrier between (the default adds
      # them in registers). (Both kernels read every operand in place since 2026-11-28: nothing
      # is staged, so the stage buffers no longer differ.)
      bench_line "$W/operands.jsonl" name="$name" wgmma_operands=in-place matmul_accumulators=shared -- \
        "$ROOT/examples/ugraphs/$name.json" --cache-dir "$CACHE" --matmul-accumulators shared --seed 1 --warmup 20 \
        --repeats 200
      for layouts in chosen row-major; do
        bench_line "$W/layouts.jsonl" name="$name" layouts="$layouts" -- "$ROOT/examples/ugraphs/$name.json" \
          --cache-dir "$CACHE" --layouts "$layouts" --seed 1 --warmup 20 --repeats 200
      done
    done
    ;;
  threads)
    # The kernels are instruction-bound with one warp per scheduler (ncu, 2026-11-26): more warps
    # per block should hide more of that latency. Timed as the other variants, inputs alike.
    for f in "$ROOT"/examples/ugraphs/{rmsnorm_fig3b,gated_mlp_fig10b}.json \
             "$ROOT"/bench/paper/results/{rmsnorm_bs1,gated_mlp,qknorm_bs1,ntrans_bs1}/best.json; do
      for threads in 0 128 256 512; do  # 0: the block graph's own
        local extra=()
        ((threads == 0)) || extra=(--block-threads "$threads")
        bench_line "$W/threads.jsonl" file="${f#"$ROOT"/}" block_threads="$threads" -- "$f" --cache-dir "$CACHE" \
          "${extra[@]}" --seed 1 --warmup 20 --repeats 200
      done
    done
    ;;
  torch)
    # shellcheck disable=SC2086  # TORCH_ARGS is a list of arguments
    MUGRAPH_BIN=$BIN python3 "$ROOT/bench/codegen_vs_torch.py" ${TORCH_ARGS:---stages 0 --matmul-overlap off,on} \
      --markdown "$W/codegen.md" --json "$W/codegen.json"
    ;;
  sanitize)
    # The hand-written μGraphs, and the examples' GQA, whose chain splits S among warpgroups.
    for f in "$ROOT"/examples/ugraphs/*.json "$ROOT"/examples/found/gqa/best.json; do
      dir=$(build_dir "$f")
      "$BIN" bench "$f" --cache-dir "$CACHE" --warmup 0 --repeats 1 > /dev/null 2>&1  # writes io/args.txt
      read -r -a args < "$dir/io/args.txt"  # the harness's file arguments, as mugraph bench ran it
      for tool in memcheck racecheck; do
        {
          echo "== $tool ${f#"$ROOT"/}"
          (cd "$dir/io" && timeout 90 compute-sanitizer --tool "$tool" --error-exitcode 9 "$dir/bench" --warmup 0 \
             --repeats 1 "${args[@]}") 2>&1
          echo "exit $?"
        } >> "$W/sanitizer.txt"
      done
    done
    ;;
  paper)
    # shellcheck disable=SC2086  # PAPER_ARGS is a list of arguments
    MUGRAPH_BIN=$BIN MUGRAPH_CACHE_DIR=$CACHE python3 "$ROOT/bench/paper/run.py" --search never ${PAPER_ARGS:-} \
      --markdown "$W/paper.md" --json "$W/paper.json" --chart "$W/paper.png"
    ;;
  module)
    local pypath=${MUGRAPH_PYTHONPATH:-$ROOT/build/python}
    # An extension module built for another Python (the packed one: this machine's python3 may be
    # another version) does not import; then it is built here, in $CACHE/python-build, from the
    # libraries --pack put beside the binary ($MUGRAPH_DEPS, default $(dirname $BIN)/deps).
    if ! PYTHONPATH=$pypath python3 -c 'import mugraph._core' 2> /dev/null; then
      # Built here, in this step, not beside the others: a compiler on every core inflates
      # host-bound timings (eager PyTorch took 133 us instead of 77 beside it, 2026-11-26).
      echo "mugraph._core does not import in $(python3 --version) from $pypath: building it here"
      pypath=$(build_python_package "$W") || { echo "building the extension failed: see python_build.txt"; return 1; }
    fi
    # shellcheck disable=SC2086  # MODULE_ARGS is a list of arguments
    # -X faulthandler: a crash prints the Python stack (a segfault left nothing else, 2026-11-26).
    local rc=0
    PYTHONPATH=$pypath python3 -X faulthandler "$ROOT/bench/torch_module_vs_mugraph.py" ${MODULE_ARGS:-} \
      --markdown "$W/torch_module.md" || rc=$?
    if [[ $rc -ge 128 ]] && command -v gdb > /dev/null; then
      # Killed by a signal: once more under gdb, for the native stack and the libraries loaded.
      echo "exit $rc: again under gdb"
      # shellcheck disable=SC2086
      PYTHONPATH=$pypath gdb -q -batch -ex run -ex bt -ex 'info sharedlibrary' --args python3 \
        "$ROOT/bench/torch_module_vs_mugraph.py" ${MODULE_ARGS:-} > "$W/module_gdb.txt" 2>&1
      grep -A40 -m1 'received signal' "$W/module_gdb.txt"
    fi
    return $rc
    ;;
  calibrate)
    # The verified candidates of the paper's RMSNorm and GatedMLP searches were searched and
    # verified beforehand (bench/paper/results_all): the lease only builds and times them.
    MUGRAPH_BIN=$BIN MUGRAPH_CACHE_DIR=$CACHE python3 "$ROOT/bench/paper/run.py" --search never \
      --results "$ROOT/${CALIBRATE_RESULTS:-bench/paper/results_all}" --benchmarks "${CALIBRATE_BENCHMARKS:-rmsnorm_bs1,gated_mlp}" \
      --measure "${CALIBRATE_MEASURE:-100}" --compile-mode '' --markdown "$W/calibration_runs.md" --json "$W/calibration_runs.json"
    python3 "$ROOT/bench/calibrate_cost_model.py" "$W/calibration_runs.json" --markdown "$W/calibration.md" \
      --png "$W/calibration.png"
    ;;
  paper_bytes)
    # Where the bytes bound and the model disagree (GQA's split of the keys, QKNorm's two kernels):
    # the bytes-bound searches' one-kernel bests, timed the same way against the eager baselines.
    MUGRAPH_BIN=$BIN MUGRAPH_CACHE_DIR=$CACHE python3 "$ROOT/bench/paper/run.py" --search never \
      --results "$ROOT/bench/paper/results_bytes" --benchmarks gqa_bs1,gqa_bs8,qknorm_bs1 --compile-mode '' \
      --markdown "$W/paper_bytes.md" --json "$W/paper_bytes.json"
    ;;
  paper_grid3d)
    # The attention benchmarks searched again once the search had (keys, heads, queries) grids:
    # the same measured selection as `paper`, on the new saved searches.
    MUGRAPH_BIN=$BIN MUGRAPH_CACHE_DIR=$CACHE python3 "$ROOT/bench/paper/run.py" --search never \
      --results "$ROOT/bench/paper/results_grid3d" --benchmarks gqa_bs1,gqa_bs8,qknorm_bs1,qknorm_bs8 \
      --compile-mode '' --markdown "$W/paper_grid3d.md" --json "$W/paper_grid3d.json"
    ;;
  profile)
    local files=${PROFILE_FILES:-$ROOT/bench/paper/results/rmsnorm_bs1/best.json $ROOT/bench/paper/results/gated_mlp/best.json}
    for f in $files; do
      dir=$(build_dir "$f")
      "$BIN" bench "$f" --cache-dir "$CACHE" --warmup 0 --repeats 1 > /dev/null 2>&1  # writes io/args.txt
      read -r -a args < "$dir/io/args.txt"
      {
        echo "== ncu ${f#"$ROOT"/}"
        # The checked run's launches (the first of each kernel); the card's clocks as they are.
        (cd "$dir/io" && timeout 120 ncu --clock-control none --launch-count 4 --section SpeedOfLight \
           --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy \
           "$dir/bench" --warmup 0 --repeats 1 "${args[@]}") 2>&1
        echo "exit $?"
        # Where the warps wait: each stall reason's cycles per issued instruction (the sections
        # above give only their total, 4.2 cycles on Figure 3b on 2026-11-28). A run of its own,
        # so that a metric this ncu lacks cannot cost the sections.
        echo "== ncu stall reasons ${f#"$ROOT"/}"
        local reasons="barrier branch_resolving dispatch_stall drain lg_throttle long_scoreboard math_pipe_throttle
          membar mio_throttle misc no_instruction not_selected selected short_scoreboard sleeping wait"
        local metrics=""
        for r in $reasons; do metrics+="${metrics:+,}smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
        (cd "$dir/io" && timeout 120 ncu --clock-control none --launch-count 1 --metrics "$metrics" \
           "$dir/bench" --warmup 0 --repeats 1 "${args[@]}") 2>&1
        echo "exit $?"
      } >> "$W/ncu.txt"
    done
    ;;
  esac
}

build_python_package() {
  local W=$1 deps=${MUGRAPH_DEPS:-$(dirname "$BIN")/deps} build=$CACHE/python-build
  local blas
  blas=$(ls "$(dirname "$BIN")"/libopenblas.so* 2>/dev/null | head -1)
  cmake -S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMUGRAPH_PYTHON=ON -DMUGRAPH_TESTS=OFF \
    -DMUGRAPH_BENCH=OFF -DPython_EXECUTABLE="$(command -v python3)" -DCMAKE_PREFIX_PATH="$deps" \
    ${blas:+-DMUGRAPH_OPENBLAS_LIBRARY="$blas"} -DMUGRAPH_CBLAS_INCLUDE_DIR="$deps/include" \
    -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,$(dirname "$BIN")" > "$W/python_build.txt" 2>&1 &&
    cmake --build "$build" -j "$(nproc)" --target _core mugraph_python_sources >> "$W/python_build.txt" 2>&1 &&
    echo "$build/python"
}

if [[ "${1:-}" == "--one-step" ]]; then  # the script calling itself for one step, under timeout
  run_step "$2" "$3"
  exit $?
fi

OUT=${1:?usage: gpu_session.sh OUT_DIR [--deadline SECONDS] [STEP...]}
shift
DEADLINE_S=540
if [[ "${1:-}" == "--deadline" ]]; then
  DEADLINE_S=${2:?--deadline takes seconds}
  shift 2
fi
STEPS=("$@")
[[ ${#STEPS[@]} -gt 0 ]] || read -r -a STEPS <<< "$ALL_STEPS"
for step in "${STEPS[@]}"; do min_seconds "$step" > /dev/null || exit 2; done

START=$SECONDS
mkdir -p "$OUT" "$CACHE"
WORK=$(mktemp -d)
exec > >(tee "$OUT/log.txt") 2>&1
: > "$OUT/summary.txt"
bundle() {
  cp "$OUT/log.txt" "$OUT/summary.txt" "$WORK/" 2> /dev/null
  tar -czf "$OUT/results.tar.gz.part" -C "$WORK" . && mv "$OUT/results.tar.gz.part" "$OUT/results.tar.gz"
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv || echo "no nvidia-smi"
nvcc --version | tail -1
date -u
echo "steps: ${STEPS[*]} (deadline ${DEADLINE_S} s)"
for step in "${STEPS[@]}"; do
  left=$((DEADLINE_S - (SECONDS - START)))
  need=$(min_seconds "$step")
  if ((left < need)); then
    echo "$step: skipped, ${left} s left of the deadline, needs ${need}" | tee -a "$OUT/summary.txt"
    continue
  fi
  echo "== $step (${left} s left)"
  t0=$SECONDS
  timeout -k 15 "$left" bash "$0" --one-step "$WORK" "$step"
  rc=$?
  case $rc in
    0) verdict=ok ;; 124 | 137) verdict="cut at the deadline" ;; *) verdict="failed (exit $rc)" ;;
  esac
  echo "$step: $verdict, $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
  bundle
done
echo "done: $(date -u), $((SECONDS - START)) s"
bundle
cat "$OUT/summary.txt"
