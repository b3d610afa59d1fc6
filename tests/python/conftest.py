"""Tests of the Python package (python/mugraph). They import the package from the environment
(pip install .) or, in CI, from the CMake build (PYTHONPATH=build/python)."""

import importlib.util
import os
import shutil

import numpy as np
import pytest

HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not installed")


def cuda_available() -> bool:
    if not HAVE_TORCH:
        return False
    import torch

    return torch.cuda.is_available()


needs_cuda = pytest.mark.skipif(not cuda_available(), reason="no CUDA GPU (PyTorch sees none)")
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
needs_compiler = pytest.mark.skipif(shutil.which("c++") is None, reason="no host C++ compiler")
HAVE_NVCC = shutil.which("nvcc") is not None or os.access("/usr/local/cuda/bin/nvcc", os.X_OK)
needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found (install the CUDA toolkit)")


def rmsnorm_linear_reference(x, g, w):
    """NumPy RMSNorm then projection, in float64, from f16-rounded inputs (the program's dtype)."""
    x, g, w = (np.asarray(a, dtype=np.float16).astype(np.float64) for a in (x, g, w))
    y = x * g / np.sqrt((x * x).sum(axis=1, keepdims=True) / x.shape[1])
    return y @ w


def gated_mlp_reference(x, w1, w2):
    x, w1, w2 = (np.asarray(a, dtype=np.float16).astype(np.float64) for a in (x, w1, w2))
    a, b = x @ w1, x @ w2
    return a / (1 + np.exp(-a)) * b


def assert_close_f16(got, want, rel=2e-2):
    got = np.asarray(got, dtype=np.float64)
    scale = np.abs(want).max()
    err = np.abs(got - want).max()
    assert err <= rel * scale, f"max |error| {err:.3g} > {rel} x max |reference| {scale:.3g}"


@pytest.fixture
def examples_dir():
    import pathlib

    return pathlib.Path(__file__).resolve().parents[2] / "examples"
