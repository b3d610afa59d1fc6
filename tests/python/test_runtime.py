"""Generated code called in-process (python/mugraph/_runtime.py): built against the host
emulation without a GPU, and on CUDA tensors where there is one."""

import numpy as np
import pytest

import mugraph
from conftest import assert_close_f16, needs_compiler, needs_cuda, needs_nvcc, needs_torch, rmsnorm_linear_reference


def small_rmsnorm_linear():
    p = mugraph.Program()
    X = p.input("X", [16, 64])
    G = p.input("G", [64])
    W = p.input("W", [64, 64])
    S = mugraph.sum(mugraph.sqr(X), dim=1)
    p.output((X * G / mugraph.sqrt(S / 64)) @ W, "O")
    return p


@pytest.fixture(scope="module")
def best():
    return mugraph.superoptimize(small_rmsnorm_linear(), time_limit=30, threads=2, top=1)


@needs_compiler
@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_emulated_build_matches_the_interpreter(best, target, tmp_path):
    compiled = best.compile(target=target, emulate=True, cache_dir=str(tmp_path))
    assert compiled.library.endswith("libugraph.so") and not compiled.cached
    rng = np.random.default_rng(2)
    x, g, w = rng.standard_normal((16, 64)), rng.standard_normal(64), rng.standard_normal((64, 64)) * 0.1
    (out,) = compiled.run_numpy([x, g, w])
    assert out.dtype == np.float16 and out.shape == (16, 64)
    assert_close_f16(out, rmsnorm_linear_reference(x, g, w))
    # The build is cached.
    again = mugraph.UGraph(best.graph).compile(target=target, emulate=True, cache_dir=str(tmp_path))
    assert again.cached and again.library == compiled.library
    with pytest.raises(mugraph.MugraphError, match="expected shape"):
        compiled.run_numpy([x[:8], g, w])


@needs_nvcc
@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_gpu_build_compiles_and_loads_without_a_gpu(examples_dir, target, tmp_path):
    # The library CUDA tensors run, built as on a GPU: Figure 3b, whose weight tile wgmma reads in
    # place on sm_90a (nvcc's -arch=sm_90a shorthand would not build it). Loading it needs no GPU.
    ugraph = mugraph.load_ugraph(str(examples_dir / "ugraphs" / "rmsnorm_fig3b.json"))
    compiled = ugraph.compile(target=target, cache_dir=str(tmp_path))
    assert compiled.library.endswith("libugraph.so") and not compiled.cached and not compiled.emulate
    assert compiled._run is not None
    with pytest.raises(mugraph.MugraphError, match="run_numpy runs an emulated build"):
        compiled.run_numpy([np.zeros((16, 1024)), np.zeros(1024), np.zeros((1024, 6144))])


def test_compile_errors(best):
    with pytest.raises(mugraph.MugraphError, match="sm_75"):
        best.compile(target="sm_75", emulate=True)


@needs_torch
@needs_cuda
def test_cuda_tensors_run_the_generated_kernels(best):
    import torch

    torch.manual_seed(0)
    x = torch.randn(16, 64, dtype=torch.float16, device="cuda")
    g = torch.randn(64, dtype=torch.float16, device="cuda")
    w = (torch.randn(64, 64, device="cuda") * 0.1).half()
    out = best(x, g, w)
    assert out.is_cuda and out.dtype == torch.float16
    assert_close_f16(out.float().cpu().numpy(), rmsnorm_linear_reference(x.cpu(), g.cpu(), w.cpu()))
    with pytest.raises(mugraph.MugraphError, match="expected torch.float16"):
        best(x.float(), g, w)
