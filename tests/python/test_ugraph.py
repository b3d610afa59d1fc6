"""superoptimize and the optimized object (python/mugraph/ugraph.py): search, call, save, load,
verify, report, drawing, interruption."""

import os
import signal
import threading

import numpy as np
import pytest

import mugraph
from conftest import (assert_close_f16, gated_mlp_reference, needs_dot, needs_torch, rmsnorm_linear_reference)
from test_program import rmsnorm_linear


def gated_mlp(m=8, k=256, n=128):
    p = mugraph.Program()
    X = p.input("X", [m, k])
    W1 = p.input("W1", [k, n])
    W2 = p.input("W2", [k, n])
    p.output(mugraph.silu(X @ W1) * (X @ W2), "O")
    return p


def lora(m=16, k=256, n=64, r=16):
    p = mugraph.Program()
    X = p.input("X", [m, k])
    W = p.input("W", [k, n])
    A = p.input("A", [k, r])
    B = p.input("B", [r, n])
    p.output(X @ W + (X @ A) @ B, "O")
    return p


@pytest.fixture(scope="module")
def rmsnorm_best():
    return mugraph.superoptimize(rmsnorm_linear(), time_limit=30, target="h100", threads=2, top=4)


def inputs_for(ugraph, seed=0, scale=None):
    rng = np.random.default_rng(seed)
    out = []
    for name, shape, _ in ugraph.inputs():
        a = rng.standard_normal(shape)
        if scale and name in scale:
            a = a * scale[name]
        out.append(a)
    return out


def test_superoptimize_rmsnorm_finds_a_fused_kernel(rmsnorm_best):
    best = rmsnorm_best
    assert isinstance(best, mugraph.UGraph)
    # Figure 3b's shape: one graph-defined kernel does it all.
    assert best.graph.graph_defined_kernels() == 1
    assert best.report["format"] == "mugraph-search-report"
    assert best.report["stop_reason"] in ("exhausted", "time_limit")
    # What a stopped model-bound search has not reached is estimated at this floor or more; an
    # exhausted search (or the bytes bound) has none.
    floor = best.report["unsearched_floor_us"]
    assert floor is None if best.report["stop_reason"] == "exhausted" else floor is None or floor >= 0
    # Retiling ran on the best structures (superoptimize's default) and ranks nothing worse first.
    assert best.report["options"]["retile_seeds"] == 4
    assert best.report["retile"]["seeds"] >= 1
    assert best.report["retile"]["best_after_us"] <= best.report["retile"]["best_before_us"]
    assert best.candidates[0] is best and len(best.candidates) >= 2
    costs = [c.cost("h100") for c in best.candidates]
    assert costs == sorted(costs)
    assert best.cost("h100") < mugraph.UGraph(best.program.graph).cost("h100")


def test_results_match_numpy_on_arrays(rmsnorm_best):
    x, g, w = inputs_for(rmsnorm_best, scale={"W": 0.05})
    out = rmsnorm_best(x, g, w)
    assert out.shape == (16, 64) and out.dtype == np.float16
    assert_close_f16(out, rmsnorm_linear_reference(x, g, w))
    # By name, and mixed.
    assert np.array_equal(rmsnorm_best(X=x, G=g, W=w), out)
    assert np.array_equal(rmsnorm_best(x, W=w, G=g), out)
    for c in rmsnorm_best.candidates:
        assert_close_f16(c(x, g, w), rmsnorm_linear_reference(x, g, w))


@needs_torch
def test_results_match_numpy_on_torch_cpu_tensors(rmsnorm_best):
    import torch

    x, g, w = inputs_for(rmsnorm_best, scale={"W": 0.05})
    out = rmsnorm_best(*(torch.tensor(a, dtype=torch.float16) for a in (x, g, w)))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float16 and tuple(out.shape) == (16, 64)
    assert_close_f16(out.float().numpy(), rmsnorm_linear_reference(x, g, w))


@pytest.mark.parametrize("make, reference, scale", [
    (gated_mlp, gated_mlp_reference, {"W1": 0.05, "W2": 0.05}),
    (lora, None, {"W": 0.05, "A": 0.05, "B": 0.2}),
])
def test_superoptimize_the_small_benchmark_programs(make, reference, scale):
    program = make()
    best = mugraph.superoptimize(program, time_limit=30, threads=2, top=2)
    values = inputs_for(best, seed=3, scale=scale)
    out = best(*values)
    if reference is None:  # LoRA: X·W + (X·A)·B
        x, w, a, b = (np.asarray(v, dtype=np.float16).astype(np.float64) for v in values)
        want = x @ w + (x @ a) @ b
    else:
        want = reference(*values)
    assert_close_f16(out, want)
    assert best.verify().verdict == "equivalent"


def test_model_cost_bound_ranks_at_least_as_well():
    # The model bound never cuts what could rank ahead: on a space both exhaust, its best is
    # estimated no slower than the bytes bound's.
    by_bytes = mugraph.superoptimize(gated_mlp(), time_limit=30, threads=2, top=1, cost_bound="bytes")
    by_model = mugraph.superoptimize(gated_mlp(), time_limit=30, threads=2, top=1, cost_bound="model")
    assert by_model.report["options"]["cost_bound"] == "model"
    assert by_model.report["options"]["bound_ratio"] == 2.0
    assert by_bytes.report["options"]["cost_bound"] == "bytes"
    assert by_model.report["stop_reason"] == "exhausted", by_model.report["stop_reason"]
    assert by_model.cost("h100") <= by_bytes.cost("h100") * (1 + 1e-9)
    assert by_model.verify().verdict == "equivalent"


def test_save_and_load_round_trip(rmsnorm_best, tmp_path):
    path = tmp_path / "best.json"
    rmsnorm_best.save(str(path))
    loaded = mugraph.load_ugraph(str(path))
    assert loaded.graph == rmsnorm_best.graph
    values = inputs_for(loaded, scale={"W": 0.05})
    assert np.array_equal(loaded(*values), rmsnorm_best(*values))
    # A loaded μGraph has no program: verify needs one given.
    with pytest.raises(mugraph.MugraphError, match="needs a reference"):
        loaded.verify()
    assert loaded.verify(rmsnorm_linear()).verdict == "equivalent"


def test_verify_reports_the_bound_and_catches_a_wrong_graph(rmsnorm_best, tmp_path):
    r = rmsnorm_best.verify(delta=1e-9)
    assert r.verdict == "equivalent" and r.tests_run >= 1 and 0 < r.bound <= 1e-9
    # sqrt as an unknown function gives RMSNorm a guarantee; Theorem 2 alone does not cover sqrt.
    assert r.opaque_functions and r.guarantee
    t = rmsnorm_best.verify(delta=1e-9, unknown_functions=False)
    assert t.verdict == "equivalent" and not t.opaque_functions and not t.guarantee
    # A different function: the reference without the normalization.
    p = mugraph.Program()
    X, G, W = p.input("X", [16, 256]), p.input("G", [256]), p.input("W", [256, 64])
    p.output((X * G) @ W, "O")
    r = rmsnorm_best.verify(p)
    assert r.verdict == "not_equivalent" and r.reason
    with pytest.raises(mugraph.MugraphError, match="delta"):
        rmsnorm_best.verify(delta=0)


def test_to_dot_shows_grid_loop_and_maps(examples_dir):
    fig3b = mugraph.load_ugraph(str(examples_dir / "ugraphs" / "rmsnorm_fig3b.json"))
    dot = fig3b.to_dot()
    assert dot.startswith("digraph ugraph {")
    assert "subgraph cluster_" in dot
    assert "grid=(128,1,1) threads=(128,1,1) forloop=16" in dot
    assert "imap={x:1} fmap=0" in dot and "omap={x:1}" in dot and "accum(%4) sum" in dot


@needs_dot
def test_draw_renders_svg(rmsnorm_best, tmp_path):
    path = rmsnorm_best.draw(str(tmp_path / "best.svg"))
    text = open(path, encoding="utf-8").read()
    assert "<svg" in text and "forloop=" in text


def test_call_errors_are_clear(rmsnorm_best):
    x, g, w = inputs_for(rmsnorm_best)
    with pytest.raises(mugraph.MugraphError, match="takes 3 inputs"):
        rmsnorm_best(x, g, w, w)
    with pytest.raises(mugraph.MugraphError, match="missing input: W"):
        rmsnorm_best(x, g)
    with pytest.raises(mugraph.MugraphError, match="no input named 'Q'"):
        rmsnorm_best(x, g, Q=w)
    with pytest.raises(mugraph.MugraphError, match="given twice"):
        rmsnorm_best(x, g, w, X=x)
    with pytest.raises(mugraph.MugraphError, match=r"input X has shape \[16, 256\], given \[16, 255\]"):
        rmsnorm_best(x[:, :255], g, w)


def test_memory_limit_stops_the_search_and_says_so():
    # 1 KiB: the process is bigger from the start, so the search stops before its first task.
    with pytest.raises(mugraph.MugraphError, match=r"found within the limits \(memory_limit"):
        mugraph.superoptimize(rmsnorm_linear(), threads=2, top=1, memory_limit=1 / 2**20)


def test_superoptimize_defaults_to_the_model_ranked_search_within_a_minute():
    # As the command line: cost bound "both" with 60 s unless told otherwise; "bytes" gets no
    # limit, and 0 asks for none.
    p = rmsnorm_linear(k=64, n=32)
    options = mugraph.superoptimize(p, threads=2, top=1, max_graph_kernels=1).report["options"]
    assert (options["cost_bound"], options["time_limit_seconds"]) == ("both", 60)
    options = mugraph.superoptimize(p, threads=2, top=1, max_graph_kernels=1, cost_bound="bytes").report["options"]
    assert (options["cost_bound"], options["time_limit_seconds"]) == ("bytes", 0)
    options = mugraph.superoptimize(p, threads=2, top=1, max_graph_kernels=1, time_limit=0).report["options"]
    assert (options["cost_bound"], options["time_limit_seconds"]) == ("both", 0)
    # Three inputs: four per kernel; the number given stands.
    assert options["max_kernel_inputs"] == 4
    options = mugraph.superoptimize(p, threads=2, top=1, max_graph_kernels=1, max_kernel_inputs=3).report["options"]
    assert options["max_kernel_inputs"] == 3


def test_superoptimize_errors():
    with pytest.raises(mugraph.MugraphError, match="unknown target 'v100'"):
        mugraph.superoptimize(rmsnorm_linear(), target="v100")
    for bad in (-1, float("inf"), float("nan")):
        with pytest.raises(mugraph.MugraphError, match="time_limit must be a finite number of seconds"):
            mugraph.superoptimize(rmsnorm_linear(), time_limit=bad)
    with pytest.raises(mugraph.MugraphError, match="resume=True needs checkpoint"):
        mugraph.superoptimize(rmsnorm_linear(), resume=True)
    with pytest.raises(mugraph.MugraphError, match="takes a mugraph.Program"):
        mugraph.superoptimize(42)
    with pytest.raises(mugraph.MugraphError, match="unknown cost bound 'fast'; the cost bounds are bytes, model and both"):
        mugraph.superoptimize(rmsnorm_linear(), cost_bound="fast")
    # Checked before the search runs, as the command line checks them.
    with pytest.raises(mugraph.MugraphError, match="top is 0, expected 1 or more"):
        mugraph.superoptimize(rmsnorm_linear(), top=0)
    with pytest.raises(mugraph.MugraphError, match="finite number of seconds"):
        mugraph.superoptimize(rmsnorm_linear(), time_limit=float("nan"))
    with pytest.raises(mugraph.MugraphError, match="threads is -1"):
        mugraph.superoptimize(rmsnorm_linear(), threads=-1)
    with pytest.raises(mugraph.MugraphError, match="memory_limit must be a positive number of GiB"):
        mugraph.superoptimize(rmsnorm_linear(), memory_limit=0)
    with pytest.raises(mugraph.MugraphError, match="retile_seeds is 65, expected 0..64"):
        mugraph.superoptimize(rmsnorm_linear(), retile_seeds=65)
    with pytest.raises(mugraph.MugraphError, match="bound ratio is 0.5"):
        mugraph.superoptimize(rmsnorm_linear(), cost_bound="model", bound_ratio=0.5)


def test_a_sum_to_several_values_is_kept_as_it_is():
    # The generator grows no sum to several values: the search keeps it as a pre-defined kernel.
    p = mugraph.Program()
    X = p.input("X", [8, 64])
    p.output(mugraph.sum(X, dim=1, to=4), "E")
    best = mugraph.superoptimize(p, threads=2)
    assert best.report["kept_ops"] == ["sum(..., to=4) (E)"] and best.report["parts"] == []
    x = np.random.default_rng(0).standard_normal((8, 64))
    want = x.astype(np.float16).astype(np.float64).reshape(8, 4, 16).sum(axis=2)
    assert_close_f16(best(x), want)


def test_load_ugraph_refuses_an_invalid_ugraph(rmsnorm_best, tmp_path):
    # A block-graph matmul given the same [16, k] tile twice: well-formed JSON that breaks the
    # shape rules. Running or verifying it would read out of bounds; loading refuses it.
    import json

    d = json.loads(rmsnorm_best.graph.to_json())
    body = d["graph"]["bodies"][0]
    mm = next(op for op in body["ops"] if op["op"] == "matmul")
    mm["inputs"] = [mm["inputs"][0], mm["inputs"][0]]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(mugraph.MugraphError, match="bad.json: not a valid μGraph for h100"):
        mugraph.load_ugraph(str(path))
    with pytest.raises(mugraph.MugraphError, match="max_tests is 0"):
        rmsnorm_best.verify(max_tests=0)


def test_ctrl_c_stops_the_search_and_keeps_its_checkpoint(tmp_path):
    # Group-query attention over 4,096 keys: generation takes about 0.1 s and verifying 100
    # candidates about 8 s on the development VM (2 tests each, with exp an unknown function);
    # SIGINT arrives after 2 s, as Ctrl-C would.
    p = mugraph.parse("input Q[2, 16, 64]\ninput K[2, 64, 4096]\ninput V[2, 4096, 64]\nE = exp(matmul(Q, K))\n"
                      "O = matmul(div(E, sum(E, dim=2)), V)\noutput O\n")
    checkpoint = tmp_path / "checkpoint.json"
    timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.warns(RuntimeWarning, match="interrupted"):
            best = mugraph.superoptimize(p, threads=2, top=100, checkpoint=str(checkpoint))
        assert best.report["stop_reason"] == "interrupted"
        assert 0 < len(best.candidates) < 100
    except KeyboardInterrupt:
        pass  # stopped before anything was verified: also a clean stop
    finally:
        timer.cancel()
    assert checkpoint.exists()
    # The search resumes from it.
    again = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT))
    again.start()
    try:
        with pytest.warns(RuntimeWarning):
            again_best = mugraph.superoptimize(p, threads=2, top=100, checkpoint=str(checkpoint), resume=True)
        assert again_best.report["resumed"] and again_best.report["stop_reason"] == "interrupted"
    except KeyboardInterrupt:
        pass
    finally:
        again.cancel()
