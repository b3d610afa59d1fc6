"""mugraph: a multi-level superoptimizer for tensor programs.

Build a program with calls that mirror the program format, or load one; superoptimize it; call
the result on NumPy arrays or PyTorch tensors::

    import mugraph
    p = mugraph.Program()
    X = p.input("X", [16, 4096], "f16")
    G = p.input("G", [4096])
    W = p.input("W", [4096, 4096])
    S = mugraph.sum(mugraph.sqr(X), dim=1)
    O = (X * G / mugraph.sqrt(S / 4096)) @ W
    p.output(O, "O")
    best = mugraph.superoptimize(p, time_limit=30, target="h100")
    out = best(x, g, w)          # NumPy arrays or CPU tensors: the CPU interpreter;
                                 # CUDA tensors: the generated kernels, on the current stream
"""

from ._core import InternalError, MugraphError
from .program import (Program, Tensor, add, concat, div, exp, gelu, load, matmul, mul, parse, relu, repeat,
                      reshape, silu, sqr, sqrt, sub, sum)
from .ugraph import UGraph, load_ugraph, superoptimize
from .torch_frontend import from_torch

__version__ = "0.1.0"

__all__ = [
    "InternalError", "MugraphError", "Program", "Tensor", "UGraph", "add", "concat", "div", "exp", "from_torch",
    "gelu", "load", "load_ugraph", "matmul", "mul", "parse", "relu", "repeat", "reshape", "silu", "sqr", "sqrt",
    "sub", "sum", "superoptimize",
]
