#!/usr/bin/env bash
# Configures and builds mugraph in build/ (Release): the libraries, the CLI, the tests and the
# Python extension module (build/python is the importable package). Extra arguments go to
# cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMUGRAPH_PYTHON=ON \
  -DPython_EXECUTABLE="$PWD/.venv/bin/python" "$@" >/dev/null
cmake --build build -j "$(nproc)"
