#!/usr/bin/env bash
# Set-up command 1: install dependencies, build, and run the main job on the bundled example.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
echo "== main job: mugraph search on examples/rmsnorm_linear.mg (the paper's RMSNorm + projection)"
build/bin/mugraph search examples/rmsnorm_linear.mg -o build/out/rmsnorm_linear --top 2
build/bin/mugraph check build/out/rmsnorm_linear/best.json
