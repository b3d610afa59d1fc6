"""check, export and run on the bundled examples, and program ⇄ μGraph JSON agreement."""
import json
import subprocess

import numpy as np

from conftest import run_cli


def test_check_prints_shapes_and_outputs(mugraph_bin, source_dir):
    r = run_cli(mugraph_bin, "check", source_dir / "examples" / "rmsnorm_linear.mg")
    assert r.returncode == 0, r.stderr
    assert "[16, 4096]" in r.stdout and "[4096, 4096]" in r.stdout
    assert "O" in r.stdout and "valid for h100" in r.stdout


def test_check_prints_the_cost_model_estimate(mugraph_bin, source_dir):
    # The fused Figure 3b μGraph: one kernel; the program it implements: one kernel per op (7),
    # each paying a launch. On an H200 the fused kernel took 70.4 µs and the program in PyTorch
    # (cuBLAS, replayed from a CUDA graph) 32.9 µs (docs/cost_model.md): the model ranks them so.
    totals = {}
    for name in ["ugraphs/rmsnorm_fig3b.json", "rmsnorm_linear.mg"]:
        for target in ["a100", "h100", "h200"]:
            r = run_cli(mugraph_bin, "check", source_dir / "examples" / name, "--target", target)
            assert r.returncode == 0, r.stderr
            line = next(l for l in r.stdout.splitlines() if l.startswith("cost model on "))
            assert line.startswith(f"cost model on {target}: ") and line.endswith(" us"), line
            totals[name, target] = float(line.split(": ")[1].split()[0])
            kernels = [l for l in r.stdout.splitlines() if l.startswith("kernel ")]
            assert len(kernels) == (1 if name.endswith(".json") else 7), r.stdout
            assert all("-bound; launch " in l for l in kernels), kernels
    assert totals["ugraphs/rmsnorm_fig3b.json", "h200"] > totals["rmsnorm_linear.mg", "h200"]


def test_check_every_example(mugraph_bin, source_dir):
    files = sorted((source_dir / "examples").glob("*.mg")) + sorted((source_dir / "examples" / "ugraphs").glob("*.json"))
    assert len(files) >= 6
    for f in files:
        r = run_cli(mugraph_bin, "check", f)
        assert r.returncode == 0, f"{f}: {r.stderr}"


def test_export_then_run_json_matches_program(mugraph_bin, tmp_path, source_dir):
    prog = source_dir / "examples" / "rmsnorm_linear.mg"
    out_json = tmp_path / "p.json"
    r = run_cli(mugraph_bin, "export", prog, "-o", out_json)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out_json.read_text())
    assert doc["format"] == "mugraph-ugraph" and doc["version"] == 1
    assert doc["graph"]["level"] == "kernel"
    a = run_cli(mugraph_bin, "run", prog, "--seed", 5, "--out", tmp_path / "a")
    b = run_cli(mugraph_bin, "run", out_json, "--seed", 5, "--out", tmp_path / "b")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "a" / "O.npy"), np.load(tmp_path / "b" / "O.npy"))
    # Exporting the exported graph gives the same document.
    again = tmp_path / "again.json"
    assert run_cli(mugraph_bin, "export", out_json, "-o", again).returncode == 0
    assert again.read_text() == out_json.read_text()


def test_version_names_the_allocator_the_binary_is_linked_with(mugraph_bin):
    # The command links jemalloc where it is installed (tools/CMakeLists.txt); the version line
    # says so, and says so only when the dynamic linker loads it.
    v = run_cli(mugraph_bin, "--version")
    assert v.returncode == 0 and v.stdout.startswith("mugraph "), v.stdout
    libs = subprocess.run(["ldd", str(mugraph_bin)], capture_output=True, text=True, timeout=60).stdout
    assert ("jemalloc" in v.stdout) == ("libjemalloc" in libs), (v.stdout, libs)
