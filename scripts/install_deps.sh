#!/usr/bin/env bash
# Installs everything mugraph needs to build and test, from Debian packages and PyPI only.
# Safe to run again: it skips apt when every package is already installed.
set -euo pipefail

DEB_PACKAGES=(
  cmake ninja-build g++ pkg-config      # toolchain
  nlohmann-json3-dev                    # JSON format
  libcli11-dev                          # command-line parsing
  libopenblas-dev                       # sgemm for the CPU interpreter
  libjemalloc-dev                       # the mugraph command's allocator (the search's speed)
  libgtest-dev libbenchmark-dev         # tests and benchmarks
  libz3-dev                             # tests only: Z3 cross-checks the subexpression oracle
  clang libclang-rt-14-dev              # libFuzzer for the fuzz targets
  python3 python3-pip python3-venv      # the Python package and the NumPy cross-check tests
  graphviz                              # drawing μGraphs (UGraph.draw) and its test
)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install_deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python packages for the tests, in a virtual environment of the project's own so that the
# system Python stays untouched.
VENV="${MUGRAPH_VENV:-$(cd "$(dirname "$0")/.." && pwd)/.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
# cuobjdump and nvdisasm (not in every CUDA toolkit install) let the tests read the SASS of the
# generated kernels without a GPU. nanobind builds the Python extension module; PyTorch is for
# the package's from_torch and tensor tests (MUGRAPH_NO_TORCH=1 skips it: those tests then skip).
# matplotlib draws the benchmark charts (bench/paper/run.py, bench/calibrate_cost_model.py).
# pytest-xdist runs the CLI tests a worker per core (most of them wait on one single-threaded
# compiler or emulated kernel at a time).
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "numpy>=1.24" "pytest>=7" "pytest-xdist>=3" \
  "nvidia-cuda-cuobjdump>=13" "nvidia-cuda-nvdisasm>=13" "nanobind>=2.0" "matplotlib>=3.5"
if [ "${MUGRAPH_NO_TORCH:-0}" != 1 ]; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "torch>=2.1"
fi
echo "install_deps: ok"
