"""from_torch: a PyTorch function or module, captured with torch.fx and run once on example
inputs, becomes a Program. Module parameters become program inputs bound to the module, so the
optimized μGraph is called with the function's own arguments."""

from __future__ import annotations

import math
import operator
import re
from typing import Callable, Optional

import numpy as np

from . import _core
from . import program as mg
from ._runtime import torch_dtype
from .program import Program, Tensor

_DTYPES = {"torch.float16": "f16", "torch.bfloat16": "bf16", "torch.float32": "f32"}


class _Unsupported(Exception):
    pass


def _where(node) -> str:
    """"file:line" of the source line a node was traced from, if fx recorded it."""
    trace = getattr(node, "stack_trace", None) or ""
    found = re.findall(r'File "([^"]+)", line (\d+)', trace)
    if not found:
        return "an unknown source line"
    path, line = found[-1]
    code = trace.strip().splitlines()[-1].strip()
    return f"{path}:{line}" + (f" ({code})" if code and not code.startswith("File ") else "")


def _name_of(target) -> str:
    if isinstance(target, str):
        return target
    import torch

    name = getattr(target, "__name__", None)
    for namespace, prefix in ((torch, "torch."), (torch.nn.functional, "torch.nn.functional.")):
        if name and getattr(namespace, name, None) is target:
            return prefix + name
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    return f"{module}.{name}" if module and module != "builtins" else name


def _safe_name(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return name if re.match(r"[A-Za-z_]", name) else "_" + name


class _ModuleTensor:
    """A module tensor (parameter or buffer) not bound yet: bound as it is where an op reads it,
    and transposed where a transpose or F.linear (as its weight) does."""

    def __init__(self, path: str, value):
        self.path = path
        self.value = value


def _dims(x: Tensor, dims) -> list:
    """dims as PyTorch's reductions take them (None: all; an int; negatives from the end), sorted."""
    if dims is None:
        dims = range(x.ndim)
    elif isinstance(dims, int):
        dims = [dims]
    return sorted({d % x.ndim for d in dims})


class _Builder:
    def __init__(self, module, program: Program):
        self.module = module
        self.p = program
        self.parameters: dict = {}  # (path, suffix) -> the input bound to it
        self.arguments: set = set()  # names of the inputs that are the function's arguments
        self.transposed: dict = {}  # (argument, dim0, dim1) -> the input bound to its transpose

    # --- values --------------------------------------------------------------------------------

    def parameter(self, path: str, value, transform: Optional[Callable] = None, suffix: str = "") -> Tensor:
        """A program input bound to the module's tensor at path (a parameter or buffer), through
        transform (a transpose, say), re-read when the tensor changes."""
        import torch

        if (path, suffix) in self.parameters:
            return self.parameters[(path, suffix)]
        # Distinct paths get distinct inputs even where their safe names agree (a.c and a_c).
        name = self.p._free_name(_safe_name(path + suffix))
        materialized = transform(value) if transform else value
        t = self.p.input(name, list(materialized.shape), _dtype_of(materialized))
        self.parameters[(path, suffix)] = t
        module = self.module
        parts = path.split(".")
        last_key = None  # the (storage, version, device) the last value handed out came from
        last_value = None

        def current(device, given=None):
            # Called on every call of the optimized callable: re-read from the module (it may have
            # been given a new tensor), cheaply.
            nonlocal last_key, last_value
            source = module
            for part in parts:
                source = _module_attribute(source, part)
            key = (source.data_ptr(), source._version, device)
            if key != last_key:
                with torch.no_grad():
                    v = transform(source) if transform else source
                    last_value = v.detach().to(device).contiguous() if device is not None else v.detach()
                last_key = key
            return last_value

        self.p.bindings[name] = current
        return t

    def argument_transposed(self, x: Tensor, dim0: int, dim1: int) -> Tensor:
        """A program input bound to argument x with dims dim0 and dim1 swapped: the transpose
        happens when the callable is called, on what it is given for x (a copy, as
        .contiguous() makes). x stays an input of the program, unread where only its transpose
        is."""
        rank = len(x.shape)
        d0, d1 = sorted((dim0 % rank, dim1 % rank))
        key = (x.name, d0, d1)
        if key in self.transposed:
            return self.transposed[key]
        shape = list(x.shape)
        shape[d0], shape[d1] = shape[d1], shape[d0]
        suffix = "_t" if (d0, d1) == (rank - 2, rank - 1) else f"_t{d0}{d1}"
        name = self.p._free_name(x.name + suffix)
        t = self.p.input(name, shape, x.dtype)
        self.transposed[key] = t
        source = x.name

        def current(device, given):
            v = given[source]
            if isinstance(v, np.ndarray) or not type(v).__module__.startswith("torch"):
                return np.ascontiguousarray(np.swapaxes(np.asarray(v), d0, d1))
            return v.transpose(d0, d1).contiguous()

        self.p.bindings[name] = current
        return t

    # --- ops -----------------------------------------------------------------------------------

    def softmax(self, x: Tensor, dim: int) -> Tensor:
        """exp(x) / its sum along dim: softmax without the subtraction of each row's maximum."""
        e = mg.exp(x)
        return e / self.reduce_sum(e, dim, keepdim=True)

    def reduce_sum(self, x: Tensor, dims, keepdim: bool, mean: bool = False) -> Tensor:
        dims = _dims(x, dims)
        count = 1
        for d in dims:
            count *= x.shape[d]
            x = mg.sum(x, dim=d)
        if mean:
            x = x / count
        if not keepdim:
            shape = [e for i, e in enumerate(x.shape) if i not in dims]
            x = mg.reshape(x, shape or [1])
        return x

    def linear(self, x: Tensor, weight: Tensor, bias) -> Tensor:
        y = x @ weight
        return y + bias if bias is not None else y

    def rms_norm(self, x: Tensor, shape, weight, eps: float) -> Tensor:
        dims = list(range(x.ndim - len(shape), x.ndim))
        ms = self.reduce_sum(mg.sqr(x), dims, keepdim=True, mean=True)
        y = x / mg.sqrt(ms + eps)
        return y * weight if weight is not None else y

    def variance(self, x: Tensor, dims, keepdim: bool, correction: float) -> Tensor:
        """Σ (x − mean)² / (n − correction) over dims, as torch.var computes it."""
        dims = _dims(x, dims)
        count = math.prod(x.shape[d] for d in dims)
        if count - correction <= 0:
            raise _Unsupported(f"a variance of {count} values with correction {correction} divides by "
                               f"{count - correction}")
        centred = x - self.reduce_sum(x, dims, keepdim=True, mean=True)
        squares = self.reduce_sum(mg.sqr(centred), dims, keepdim=keepdim)
        return squares / (count - correction)

    def layer_norm(self, x: Tensor, shape, weight, bias, eps: float) -> Tensor:
        dims = list(range(x.ndim - len(shape), x.ndim))
        centred = x - self.reduce_sum(x, dims, keepdim=True, mean=True)
        var = self.reduce_sum(mg.sqr(centred), dims, keepdim=True, mean=True)
        y = centred / mg.sqrt(var + eps)
        if weight is not None:
            y = y * weight
        return y + bias if bias is not None else y

    @staticmethod
    def sigmoid(x: Tensor) -> Tensor:
        # 1 / (1 + e^−x): where e^−x overflows (x below −88 in f32, −11 in f16) the quotient is
        # 1 / inf = 0, sigmoid's limit.
        return 1 / (mg.exp(-x) + 1)

    @staticmethod
    def tanh(x: Tensor) -> Tensor:
        # tanh x = 2 sigmoid(2x) − 1; it loses relative precision near 0 (the subtraction), not
        # absolute precision, which stays that of the sigmoid.
        return 2 / (mg.exp(x * -2) + 1) - 1

    @staticmethod
    def gelu_tanh(x: Tensor) -> Tensor:
        # ½ x (1 + tanh(√(2/π) (x + 0.044715 x³))) = x sigmoid(2 √(2/π) (x + 0.044715 x³)):
        # one exponential, and no subtraction to lose precision in. 1.59576912 is 2 √(2/π) to
        # the same f32, and its numerator and denominator (10^8) stay within the verifier's
        # coefficient bound, where 1.5957691216057308's would cost the guarantee (docs/verifier.md,
        # "What is assumed").
        inner = (x + mg.sqr(x) * x * 0.044715) * -1.59576912
        return x / (mg.exp(inner) + 1)


def _tracer_class():
    """A torch.fx Tracer that records, for every node, the user's frames that made it (fx's own
    filter keeps only frames below a `forward`, so a plain function would get none)."""
    import os
    import traceback

    import torch
    import torch.fx

    skip = (os.path.dirname(torch.__file__), os.path.dirname(__file__))

    class Tracer(torch.fx.Tracer):
        def _filter_traceback_frames(self, summary):
            return traceback.StackSummary.from_list(
                [f for f in summary if not f.filename.startswith(skip)])

    return Tracer


def _lookup(module, path: str):
    obj = module
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _module_attribute(obj, part: str):
    """getattr(obj, part), without the detour through nn.Module.__getattr__ (a Python function,
    about 1.5 µs a step) for what a module registered: its parameters, buffers and submodules,
    which that function looks in, in that order. An instance attribute comes first, as with
    getattr; a class attribute cannot share a registered name (nn.Module refuses to register
    one that exists)."""
    d = getattr(obj, "__dict__", None)
    if d is not None and "_parameters" in d and part not in d:
        for store in ("_parameters", "_buffers", "_modules"):
            registered = d.get(store)
            if registered is not None and part in registered:
                return registered[part]
    return getattr(obj, part)


def _dtype_of(t) -> str:
    dtype = _DTYPES.get(str(t.dtype))
    if dtype is None:
        raise _core.MugraphError(f"mugraph programs hold f16, bf16 or f32 tensors, not {t.dtype}")
    return dtype


def from_torch(fn, example_inputs, name: Optional[str] = None, bounded_softmax: bool = False) -> Program:
    """Captures fn (a function or torch.nn.Module) with torch.fx, runs it on example_inputs (a
    tuple of tensors) to learn every shape, and maps its ops to a Program: matmul and @, + − × ÷
    (with tensors or numbers), exp, sqrt, rsqrt, square and ** 2, sum, mean and var, silu, relu,
    gelu (erf and tanh forms), sigmoid, tanh, reshape and view (and unsqueeze, squeeze, flatten,
    x[:, None]), repeat, expand, repeat_interleave, cat, nn.Linear, nn.RMSNorm, F.rms_norm,
    nn.LayerNorm, F.layer_norm, dropout when not training, and transposes of module tensors and
    of the function's arguments. Module parameters become program inputs bound to the module
    (Program.bindings), and an argument read transposed an input bound to its transpose. An op
    outside that list raises MugraphError naming the op and the source line it came from.

    bounded_softmax: map softmax (torch.softmax, F.softmax, Tensor.softmax, nn.Softmax) to
    e = exp(x); e / e.sum(dim, keepdim=True), and F.scaled_dot_product_attention (no mask, not
    causal, no dropout) to that softmax of q @ kᵀ · scale, times v. PyTorch subtracts each row's
    maximum first, which the program format cannot (it has no maximum): the values are the same
    where exp does not overflow (above 11 in f16, 88 in f32), which the caller asserts of its
    logits by passing True. Without it, both are refused."""
    import torch
    import torch.fx
    import torch.nn.functional as F

    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    module = fn if isinstance(fn, torch.nn.Module) else None
    # The examples only give shapes and dtypes; running the module on them needs them where its
    # tensors are (CPU examples of a CUDA module, say).
    devices = {t.device for t in (*module.parameters(), *module.buffers())} if module is not None else set()
    if len(devices) == 1:
        (device,) = devices
        example_inputs = tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in example_inputs)
    tracer = _tracer_class()()
    tracer.record_stack_traces = True
    graph = tracer.trace(fn)
    gm = torch.fx.GraphModule(tracer.root, graph)
    p = Program(filename=name or f"<from_torch {getattr(fn, '__name__', type(fn).__name__)}>")
    # Bound tensors are read from the user's module (the tracer's root), not from gm, which holds
    # the submodules it was built with: a submodule replaced later is the one read.
    b = _Builder(tracer.root, p)

    class Capture(torch.fx.Interpreter):
        def __init__(self):
            super().__init__(gm)
            self.values = {}  # node -> Tensor or Python constant

        def run_node(self, n):
            result = super().run_node(n)
            try:
                self.values[n] = self.convert(n, result)
            except _Unsupported as e:
                raise _core.MugraphError(f"from_torch: {e} at {_where(n)}") from None
            except _core.MugraphError as e:
                raise _core.MugraphError(f"from_torch: {_name_of(n.target)} at {_where(n)}: {e}") from None
            return result

        def arg(self, a):
            if isinstance(a, torch.fx.Node):
                return self.values[a]
            if isinstance(a, (list, tuple)):
                return type(a)(self.arg(x) for x in a)
            return a

        def convert(self, n, result):
            if n.op == "placeholder":
                if not isinstance(result, torch.Tensor):
                    return result
                # An argument called input, sum or t1 (nn.Linear's is `input`) is renamed.
                t = p.input(p._free_name(_safe_name(n.target)), list(result.shape), _dtype_of(result))
                b.arguments.add(t.name)
                return t
            if n.op == "get_attr":
                value = _lookup(gm, n.target)
                if not isinstance(value, torch.Tensor):
                    return value
                if value.dim() == 0:  # a scalar constant (x * torch.tensor(2.0)): a number
                    return value.item()
                # Bound where it is used: as it is, or transposed by F.linear (a top-level
                # nn.Linear traces to one) or a transpose.
                return _ModuleTensor(n.target, value)
            if n.op == "output":
                outs = bound(self.arg(n.args[0]))
                outs = outs if isinstance(outs, (list, tuple)) else [outs]
                results = result if isinstance(result, (list, tuple)) else [result]
                for i, t in enumerate(outs):
                    if not isinstance(t, Tensor):
                        raise _Unsupported(f"output {i} is not a tensor")
                    if isinstance(results[i], torch.Tensor) and _dtype_of(results[i]) != t.dtype:
                        raise _Unsupported(
                            f"output {i} is {results[i].dtype} in PyTorch but {t.dtype} in the program: a cast "
                            f"(.to, .float, .half) is no op of the program format, so it cannot change an output's "
                            f"dtype; cast the result after the call")
                    p.output(t, "out" if len(outs) == 1 else f"out{i}")
                return None
            args = [self.arg(a) for a in n.args]
            kwargs = {k: self.arg(v) for k, v in n.kwargs.items()}
            if not transposes(n):  # bind module tensors as they are
                args, kwargs = bound(args), {k: bound(v) for k, v in kwargs.items()}
            if n.op == "call_module":
                return convert_module(n, _lookup(gm, n.target), args, kwargs)
            target = n.target
            if n.op == "call_method":
                return convert_method(n, target, args, kwargs, result)
            return convert_function(n, target, args, kwargs, result)

    # Tensors made from one argument by layout ops alone (repeat_kv's expand and reshape), so that a
    # transpose of one can be moved onto the argument: name -> (argument, steps), a step being
    # ("reshape", shape before, shape after) or ("repeat", dim counted from the end, times).
    layouts = {}

    def layout_step(x, y, step):
        if not isinstance(x, Tensor):
            return y
        if x.name in b.arguments:
            layouts[y.name] = (x, [step])
        elif x.name in layouts:
            source, steps = layouts[x.name]
            layouts[y.name] = (source, steps + [step])
        return y

    def reshape(x, shape):
        return layout_step(x, mg.reshape(x, shape), ("reshape", list(x.shape), list(shape)))

    def repeat_dim(x, dim, times):
        return layout_step(x, mg.repeat(x, dim=dim, times=times), ("repeat", dim - x.ndim, times))

    def transposed_layout(x, dims, what):
        """transpose(x, *dims) for x made from an argument by layout ops: the argument's own dims
        transposed (an input bound to that), then the same ops with those dims swapped. Only
        where every reshape on the way keeps the two dims whole (they lie in the trailing extents
        it leaves as they are), as repeat_kv's does with a key's (position, head dim)."""
        rank = len(x.shape)
        n0, n1 = sorted(d % rank - rank for d in dims)  # counted from the end
        source, steps = layouts[x.name]
        kept = len(source.shape)
        for kind, *a in steps:
            if kind == "reshape":
                before, after = a
                k = 0
                while k < min(len(before), len(after)) and before[-1 - k] == after[-1 - k]:
                    k += 1
                kept = min(kept, k)
        if -n0 > kept:
            raise _Unsupported(f"the transpose {what} of a tensor reshaped across the dims it swaps is not "
                               f"supported (the program format has no transpose op)")

        def swapped(shape):
            shape = list(shape)
            shape[n0], shape[n1] = shape[n1], shape[n0]
            return shape

        t = b.argument_transposed(source, len(source.shape) + n0, len(source.shape) + n1)
        for kind, *a in steps:
            if kind == "reshape":
                t = mg.reshape(t, swapped(a[1]))
            else:
                d = {n0: n1, n1: n0}.get(a[0], a[0])
                t = mg.repeat(t, dim=len(t.shape) + d, times=a[1])
        return t

    def transposes(n):
        """Whether n may read a module tensor transposed (a transpose; F.linear, its weight), so
        that it binds the tensors it reads itself."""
        if n.op == "call_method":
            return n.target in ("t", "transpose")
        if n.op == "call_function":
            if n.target is getattr:  # x.T, x.mT, and x.shape, which binds nothing
                return True
            if n.target in (F.linear, F.scaled_dot_product_attention):
                return True
            return n.target in (torch.t, torch.transpose)
        return False

    def bound(v):
        if isinstance(v, _ModuleTensor):
            return b.parameter(v.path, v.value)
        if isinstance(v, (list, tuple)):
            return type(v)(bound(x) for x in v)
        return v

    def operand(x):
        if isinstance(x, (Tensor, int, float)) and not isinstance(x, bool):
            return x
        raise _Unsupported(f"an operand of type {type(x).__name__}")

    def convert_module(n, m, args, kwargs):
        if isinstance(m, torch.nn.Linear):
            w = b.parameter(f"{n.target}.weight", m.weight, lambda t: t.t(), suffix="_t")
            bias = b.parameter(f"{n.target}.bias", m.bias) if m.bias is not None else None
            return b.linear(args[0], w, bias)
        if hasattr(torch.nn, "RMSNorm") and isinstance(m, torch.nn.RMSNorm):
            weight = b.parameter(f"{n.target}.weight", m.weight) if m.weight is not None else None
            eps = m.eps if m.eps is not None else torch.finfo(torch_dtype(args[0].dtype)).eps
            return b.rms_norm(args[0], m.normalized_shape, weight, eps)
        if isinstance(m, torch.nn.LayerNorm):
            weight = b.parameter(f"{n.target}.weight", m.weight) if m.weight is not None else None
            bias = b.parameter(f"{n.target}.bias", m.bias) if getattr(m, "bias", None) is not None else None
            return b.layer_norm(args[0], m.normalized_shape, weight, bias, m.eps)
        simple = {torch.nn.SiLU: mg.silu, torch.nn.ReLU: mg.relu, torch.nn.Sigmoid: b.sigmoid,
                  torch.nn.Tanh: b.tanh, torch.nn.Identity: lambda x: x}
        for cls, f in simple.items():
            if isinstance(m, cls):
                return f(args[0])
        if isinstance(m, torch.nn.GELU):
            return gelu(n, args[0], approximate=m.approximate)
        if isinstance(m, torch.nn.Dropout):
            return dropout(n, args[0], m.p, m.training)
        if isinstance(m, torch.nn.Softmax):
            return softmax(n, args[0], m.dim, what=type(m).__name__)
        if isinstance(m, torch.nn.LogSoftmax):
            raise _Unsupported(softmax_message(type(m).__name__, log=True))
        raise _Unsupported(f"module {type(m).__module__}.{type(m).__name__} ({n.target}) is not supported")

    def convert_method(n, name, args, kwargs, result):
        x = args[0]
        if name in ("view", "reshape"):
            return reshape(x, list(result.shape))
        if name in ("contiguous", "float", "half", "bfloat16", "to", "type") and isinstance(x, Tensor):
            # A cast between f16, bf16 and f32 (LlamaRMSNorm's upcast) maps to nothing: the
            # program format has no cast, each value keeps the dtype its operands give it, and
            # kernels compute in f32 registers whatever the dtype. An output it would change is
            # refused below. Other dtypes raise here (_dtype_of).
            if isinstance(result, torch.Tensor):
                _dtype_of(result)
                return x
        if name in ("size",):
            return result
        if name == "repeat":
            return repeat(x, args[1:] if len(args) > 2 or not isinstance(args[1], (list, tuple)) else args[1])
        if name in ("unsqueeze", "squeeze", "flatten", "unflatten"):
            return reshape(x, list(result.shape))  # the same elements in the same order
        if name == "expand":
            return expand(x, list(result.shape))
        if name == "repeat_interleave":
            return repeat_interleave(n, *args, **kwargs)
        if name in ("t", "transpose"):
            return transpose(n, name, *args, **kwargs)
        if name == "softmax":
            return softmax(n, *args, what="Tensor.softmax", **kwargs)
        if name == "log_softmax":
            raise _Unsupported(softmax_message(f"Tensor.{name}", log=True))
        if name in METHODS:
            return METHODS[name](n, *args, **kwargs)
        raise _Unsupported(f"method Tensor.{name} is not supported")

    def repeat(x, sizes):
        sizes = list(sizes)
        if len(sizes) != x.ndim:
            raise _Unsupported(f"repeat with {len(sizes)} sizes of a rank-{x.ndim} tensor is not supported")
        for d, t in enumerate(sizes):
            if t != 1:
                x = repeat_dim(x, d, t)
        return x

    def expand(x, shape):
        # Extent-1 dims (and new leading ones) broadcast to the result's: copies, as repeat
        # makes them; the search reads them back as broadcasts where it can.
        if len(shape) > x.ndim:
            x = reshape(x, [1] * (len(shape) - x.ndim) + list(x.shape))
        for d, (have, want) in enumerate(zip(list(x.shape), shape)):
            if have != want:
                x = repeat_dim(x, d, want)
        return x

    def repeat_interleave(n, x, repeats, dim=None, output_size=None):
        # Each element `repeats` times in a row along dim: a unit dim after it, repeated, merged.
        if not isinstance(repeats, int):
            raise _Unsupported("repeat_interleave with a tensor of repeats is not supported (an int is)")
        if dim is None:
            x, dim = reshape(x, [math.prod(x.shape)]), 0
        dim %= x.ndim
        s = list(x.shape)
        x = repeat_dim(reshape(x, s[:dim + 1] + [1] + s[dim + 1:]), dim + 1, repeats)
        return reshape(x, s[:dim] + [s[dim] * repeats] + s[dim + 1:])

    def pow_(n, x, e):
        if not isinstance(x, Tensor) and not isinstance(e, Tensor):
            return x ** e  # shape arithmetic, such as q.shape[-1] ** 0.5: known when captured
        if not isinstance(x, Tensor):
            raise _Unsupported("pow with a tensor exponent is not supported")
        if e == 2:
            return mg.sqr(x)
        if e == 0.5:
            return mg.sqrt(x)
        if e == -0.5:
            return 1 / mg.sqrt(x)
        raise _Unsupported(f"pow with exponent {e} is not supported (2, 0.5 and -0.5 are)")

    def binary(op):
        def f(n, a, c, alpha=1, **kw):
            if kw or alpha != 1:
                raise _Unsupported(f"{_name_of(n.target)} with {', '.join(list(kw) + (['alpha'] if alpha != 1 else []))}"
                                   " is not supported")
            return op(operand(a), operand(c))
        return f

    def reduce(mean):
        def f(n, x, dim=None, keepdim=False, dtype=None):
            if dtype is not None:
                raise _Unsupported(f"{_name_of(n.target)} with dtype= is not supported")
            return b.reduce_sum(x, dim, keepdim, mean=mean)
        return f

    def unary(op):
        def f(n, x, inplace=False):
            return op(x)
        return f

    def gelu(n, x, approximate="none"):
        if approximate == "none":
            return mg.gelu(x)
        if approximate == "tanh":
            return b.gelu_tanh(x)
        raise _Unsupported(f"gelu with approximate={approximate!r} is not supported ('none' and 'tanh' are)")

    def dropout(n, x, p=0.5, training=True, inplace=False):
        # Dropout draws random masks while training; evaluating (module.eval(), or training=False
        # in the functional form) it is the identity, and so is p = 0.
        if training and p != 0:
            raise _Unsupported("dropout while training (random masks) is not supported; capture the module "
                               "after module.eval()")
        return x

    def softmax_message(what, log=False):
        if log:
            return (f"{what} is not supported: it takes a logarithm, and subtracts each row's maximum, and the "
                    f"program format has neither")
        return (f"{what} is not supported: it subtracts each row's maximum before exponentiating, and the "
                f"program format has no maximum. Where the logits are bounded (e^x overflows f16 above 11 "
                f"and f32 above 88), pass bounded_softmax=True, which maps it to exp(x) / its sum")

    def softmax(n, x, dim=None, _stacklevel=3, dtype=None, what=None):
        what = what or _name_of(n.target)
        if not bounded_softmax:
            raise _Unsupported(softmax_message(what))
        if dim is None:
            raise _Unsupported(f"{what} without dim is not supported (give the dim it normalizes)")
        if not isinstance(x, Tensor):
            raise _Unsupported(f"{what} of a module tensor is not supported")
        return b.softmax(x, dim % len(x.shape))

    def log_softmax(n, *args, **kwargs):
        raise _Unsupported(softmax_message(_name_of(n.target), log=True))

    def scaled_dot_product_attention(n, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                     enable_gqa=False):
        what = _name_of(n.target)
        if not bounded_softmax:
            raise _Unsupported(
                f"{what} is not supported: its softmax subtracts each row's maximum before exponentiating, and "
                f"the program format has no maximum. Where the scores are bounded, pass bounded_softmax=True")
        if attn_mask is not None or is_causal:
            raise _Unsupported(f"{what} with a mask (attn_mask, is_causal) is not supported: the program format "
                               f"has no comparison to build one from")
        if dropout_p:
            raise _Unsupported(f"{what} with dropout_p={dropout_p} is not supported: its masks are random")
        if enable_gqa:
            raise _Unsupported(f"{what} with enable_gqa is not supported (repeat_kv's expand or "
                               f"repeat_interleave of k and v maps)")
        q, v = bound(q), bound(v)  # k is bound by its transpose
        scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
        scores = operand(q) @ transpose(n, "transpose", k, -2, -1)
        return b.softmax(scores * scale, len(scores.shape) - 1) @ operand(v)

    def transpose(n, name, x, *dims, dim0=None, dim1=None):
        # A transpose is no op of the program format, but a module's weight can be bound
        # transposed, as nn.Linear's is: the transpose happens when the weight is read.
        dims = {"t": (0, 1), "T": (0, 1), "mT": (-2, -1)}.get(name, dims + tuple(d for d in (dim0, dim1) if d is not None))
        what = {"t": "x.t()", "T": "x.T", "mT": "x.mT"}.get(name, f"transpose{tuple(dims)}")
        if isinstance(x, Tensor) and x.name in b.arguments:
            # An argument read transposed (attention's k.transpose(-2, -1)): an input bound to its
            # transpose, made when the callable is called.
            rank = len(x.shape)
            if name == "T" and rank != 2:  # which reverses every dim
                raise _Unsupported(f"x.T of a rank-{rank} argument is not supported (x.mT swaps the last two dims)")
            if len(dims) != 2 or rank < 2:
                raise _Unsupported(f"the transpose {what} of a rank-{rank} argument is not supported")
            return b.argument_transposed(x, dims[0], dims[1])
        if isinstance(x, Tensor) and x.name in layouts and len(dims) == 2 and not (name == "T" and len(x.shape) != 2):
            return transposed_layout(x, dims, what)
        if not isinstance(x, _ModuleTensor):
            raise _Unsupported(f"the transpose {what} of a computed tensor is not supported (the program format "
                               f"has no transpose op; a module's weight or the function's argument can be "
                               f"transposed)")
        rank = x.value.dim()
        if name in ("t", "T") and rank != 2:
            raise _Unsupported(f"{name} of a rank-{rank} weight is not supported")
        if rank < 2 or len(dims) != 2 or {d % rank for d in dims} != {rank - 2, rank - 1}:
            raise _Unsupported(f"transpose{tuple(dims)} of a rank-{rank} weight is not supported (its last two "
                               f"dims are)")
        return b.parameter(x.path, x.value, lambda t: t.transpose(-2, -1), suffix="_t")

    def cat(n, tensors, dim=0):
        return mg.concat(list(tensors), dim=dim)

    def layer_norm(n, x, normalized_shape, weight=None, bias=None, eps=1e-5):
        shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
        return b.layer_norm(x, shape, weight, bias, eps)

    def var(n, x, dim=None, unbiased=None, keepdim=False, correction=None):
        if unbiased is not None and correction is not None:
            raise _Unsupported("var with both unbiased= and correction=")
        c = correction if correction is not None else (0 if unbiased is False else 1)
        return b.variance(x, dim, keepdim, c)

    def rms_norm(n, x, normalized_shape, weight=None, eps=None):
        return b.rms_norm(x, normalized_shape, weight, eps if eps is not None else 1.1920928955078125e-07)

    def neg(n, x):
        return -operand(x)

    def rsqrt(n, x):
        return 1 / mg.sqrt(x)

    def getitem(n, x, i):
        if isinstance(x, Tensor):
            raise _Unsupported("indexing a tensor is not supported (beyond full slices and None)")
        return x[i]

    def linear(n, x, weight, bias=None):
        # F.linear(x, W) takes W [out, in]: a parameter is bound transposed; a computed W would
        # need a transpose op, which the program format does not have.
        if not isinstance(weight, _ModuleTensor):
            raise _Unsupported("torch.nn.functional.linear on a computed weight is not supported "
                               "(its transpose is not an op; use a parameter or nn.Linear)")
        w = b.parameter(weight.path, weight.value, lambda t: t.t(), suffix="_t")
        return b.linear(bound(x), w, bound(bias))

    FUNCTIONS = {
        operator.add: binary(operator.add), torch.add: binary(operator.add),
        operator.sub: binary(operator.sub), torch.sub: binary(operator.sub),
        operator.mul: binary(operator.mul), torch.mul: binary(operator.mul),
        operator.truediv: binary(operator.truediv), torch.div: binary(operator.truediv),
        operator.matmul: binary(operator.matmul), torch.matmul: binary(operator.matmul),
        torch.mm: binary(operator.matmul), torch.bmm: binary(operator.matmul),
        torch.exp: unary(mg.exp), torch.sqrt: unary(mg.sqrt), torch.square: unary(mg.sqr),
        torch.rsqrt: rsqrt, torch.relu: unary(mg.relu), F.relu: unary(mg.relu), F.silu: unary(mg.silu),
        F.gelu: gelu, torch.sigmoid: unary(b.sigmoid), F.sigmoid: unary(b.sigmoid), torch.tanh: unary(b.tanh),
        F.tanh: unary(b.tanh), F.dropout: dropout, F.layer_norm: layer_norm, torch.var: var,
        torch.softmax: softmax, F.softmax: softmax, F.log_softmax: log_softmax, torch.log_softmax: log_softmax,
        F.scaled_dot_product_attention: scaled_dot_product_attention,
        torch.t: lambda n, x: transpose(n, "t", x),
        torch.transpose: lambda n, x, *d, **k: transpose(n, "transpose", x, *d, **k),
        torch.sum: reduce(False), torch.mean: reduce(True), torch.cat: cat,
        torch.concat: cat, operator.pow: pow_, torch.pow: pow_, operator.getitem: getitem,
        operator.neg: neg, torch.neg: neg,
        F.linear: linear,
    }
    if hasattr(F, "rms_norm"):
        FUNCTIONS[F.rms_norm] = rms_norm
    METHODS = {
        "add": FUNCTIONS[operator.add], "sub": FUNCTIONS[operator.sub], "mul": FUNCTIONS[operator.mul],
        "div": FUNCTIONS[operator.truediv], "matmul": FUNCTIONS[operator.matmul], "exp": unary(mg.exp),
        "sqrt": unary(mg.sqrt), "rsqrt": rsqrt, "square": unary(mg.sqr), "relu": unary(mg.relu),
        "sum": reduce(False), "mean": reduce(True), "pow": pow_, "neg": neg, "sigmoid": unary(b.sigmoid),
        "tanh": unary(b.tanh), "var": var,
    }

    def convert_function(n, target, args, kwargs, result):
        if target in (torch.reshape, torch.unsqueeze, torch.squeeze, torch.flatten):
            return reshape(args[0], list(result.shape))
        if target is operator.getitem and isinstance(args[0], Tensor):
            # x[:, :, None] and the like: full slices, new axes and ellipses alone are a reshape.
            index = args[1] if isinstance(args[1], tuple) else (args[1],)
            if all(k is None or k is Ellipsis or k == slice(None) for k in index):
                return reshape(args[0], list(result.shape))
        if target is torch.repeat_interleave:
            return repeat_interleave(n, *args, **kwargs)
        if target is getattr and args[1] in ("T", "mT") and isinstance(args[0], (Tensor, _ModuleTensor)):
            return transpose(n, args[1], args[0])
        if target is getattr and not isinstance(args[0], Tensor):
            return result
        if target is getattr and args[1] in ("H", "mH"):
            raise _Unsupported(f"the transpose x.{args[1]} is not supported (the program format has no transpose op)")
        if target is getattr and args[1] in ("shape", "dtype", "device"):
            return result if args[1] != "shape" else tuple(result)
        f = FUNCTIONS.get(target)
        if f is None:
            raise _Unsupported(f"{_name_of(target)} is not supported")
        return f(n, *args, **kwargs)

    # Node by node rather than Interpreter.run, which would append its own notes to our errors.
    capture = Capture()
    capture.args_iter = iter(example_inputs)
    with torch.no_grad():
        for node in gm.graph.nodes:
            capture.env[node] = capture.run_node(node)
    return p
