#!/usr/bin/env bash
# Set-up command 1: install dependencies, build, and run the main job on the bundled example.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
echo "== main job: mugraph check + run on examples/rmsnorm_linear.mg"
build/bin/mugraph check examples/rmsnorm_linear.mg
build/bin/mugraph run examples/rmsnorm_linear.mg --seed 0 --out build/out/rmsnorm_linear
