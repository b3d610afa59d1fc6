#!/usr/bin/env bash
# The install check of the Python package: in a new virtual environment, `pip install .` from
# this tree, then the README's Python example (the first ```python block of README.md), run from
# another directory so that only the installed package can be imported. It checks what the
# example prints (the verdict "equivalent" and the output's shape) and writes (best.json, read
# back by the installed CLI, and best.svg), and prints how long each part took.
#
# Needs what scripts/install_deps.sh installs (the Debian packages the C++ core builds against,
# python3-venv, Graphviz) and PyPI (pip fetches scikit-build-core, nanobind and NumPy). The C++
# build goes to build/pip/ (pyproject.toml), so a second run is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 -m venv "$work/env"
start=$SECONDS
"$work/env/bin/python" -m pip install --quiet --disable-pip-version-check "$root"
echo "check_pip_install: pip install . took $((SECONDS - start)) s"

# The example, exactly as the README shows it.
python3 - "$root/README.md" >"$work/example.py" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
block = re.search(r"^```python\n(.*?)^```", text, re.S | re.M)
if block is None:
    sys.exit("check_pip_install: README.md has no ```python block")
print(block.group(1), end="")
PY

cd "$work"
start=$SECONDS
out="$("$work/env/bin/python" example.py)"
echo "check_pip_install: the README's example took $((SECONDS - start)) s and printed: $out"
case "$out" in
  "equivalent "*" (16, 64)") ;;
  *) echo "check_pip_install: expected 'equivalent <cost> (16, 64)'" >&2; exit 1 ;;
esac
test -s best.svg || { echo "check_pip_install: the example wrote no best.svg" >&2; exit 1; }
"$work/env/bin/mugraph" check best.json >/dev/null
echo "check_pip_install: ok"
