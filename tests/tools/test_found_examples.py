"""The saved search results in examples/found/: every best.json is a valid μGraph that computes its
program (one finite-field test here; the search verified each to δ = 1e-9), and every report says
what docs/benchmarks.md quotes from it."""
import json

import pytest

from conftest import SOURCE_DIR, run_cli

FOUND = SOURCE_DIR / "examples" / "found"
PROGRAMS = sorted(p.name for p in FOUND.iterdir() if p.is_dir())


def test_every_benchmark_has_a_report():
    assert {"rmsnorm_linear", "gated_mlp", "lora", "gqa", "qknorm", "ntrans"} <= set(PROGRAMS)


@pytest.mark.parametrize("name", PROGRAMS)
def test_report_matches_best(name):
    report = json.loads((FOUND / name / "report.json").read_text())
    assert report["format"] == "mugraph-search-report"
    best = FOUND / name / "best.json"
    if report["best"] is None:
        assert not best.exists()
        return
    assert best.exists()
    graph = json.loads(best.read_text())["graph"]
    # A reshape whose result is no program output is a view of its operand: no kernel.
    outputs = {o["tensor"] for o in graph["outputs"]}
    kernel_ops = [op for op in graph["ops"]
                  if op["op"] != "input" and not (op["op"] == "reshape" and op["outputs"][0] not in outputs)]
    assert len(kernel_ops) == report["best"]["kernels"]
    assert sum(op["op"] == "graph_kernel" for op in kernel_ops) == report["best"]["graph_defined_kernels"]


@pytest.mark.parametrize("name", [n for n in PROGRAMS if (FOUND / n / "best.json").exists()])
def test_best_computes_its_program(mugraph_bin, name):
    program = SOURCE_DIR / "examples" / f"{name}.mg"
    best = FOUND / name / "best.json"
    r = run_cli(mugraph_bin, "check", best, timeout=300)
    assert r.returncode == 0, r.stderr
    r = run_cli(mugraph_bin, "verify", program, best, "--delta", "1", "--no-float-check", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "EQUIVALENT" in r.stdout


def test_rmsnorm_is_figure_3b():
    graph = json.loads((FOUND / "rmsnorm_linear" / "best.json").read_text())["graph"]
    (kernel,) = [op for op in graph["ops"] if op["op"] != "input"]
    assert kernel["op"] == "graph_kernel"
    body = graph["bodies"][0]
    kinds = [op["op"] for op in body["ops"]]
    assert body["forloop"] > 1
    assert kinds.count("accum") == 2 and "matmul" in kinds and "sum" in kinds and "thread_graph" in kinds


def test_qknorm_fuses_both_norms_into_flash_attention():
    graph = json.loads((FOUND / "qknorm" / "best.json").read_text())["graph"]
    (kernel,) = [op for op in graph["ops"] if op["op"] != "input"]
    assert kernel["op"] == "graph_kernel"
    body = graph["bodies"][0]
    kinds = [op["op"] for op in body["ops"]]
    # A loop over the key/value sequence with two accumulators (FlashAttention), and the squares
    # of Q and K summed in the same kernel, their sqrt/div in thread graphs.
    assert body["forloop"] > 1
    assert kinds.count("accum") == 2 and kinds.count("matmul") == 2 and "exp" in kinds
    assert kinds.count("sqr") == 2 and kinds.count("thread_graph") >= 2


def test_ntrans_is_one_kernel_with_everything_in_shared_memory():
    graph = json.loads((FOUND / "ntrans" / "best.json").read_text())["graph"]
    (kernel,) = [op for op in graph["ops"] if op["op"] != "input"]
    assert kernel["op"] == "graph_kernel"
    body = graph["bodies"][0]
    assert body["forloop"] == 1 and body["grid"][0] == 8  # a block per row
    assert [op["op"] for op in body["ops"]].count("sum") == 2


def test_lora_is_one_kernel_with_concat():
    # (X‖X·A)·(W‖B), the paper's Figure 9b: X·A, two concats, and one matmul instead of two.
    graph = json.loads((FOUND / "lora" / "best.json").read_text())["graph"]
    (kernel,) = [op for op in graph["ops"] if op["op"] != "input"]
    assert kernel["op"] == "graph_kernel"
    kinds = [op["op"] for op in graph["bodies"][0]["ops"]]
    assert kinds.count("concat") == 2 and kinds.count("matmul") == 2 and "add" not in kinds
