"""Programs built with calls: each call writes one statement of the program format (docs/
program-format.md) and the C++ parser checks it at once, so a program built in Python means
exactly what its text means, and a bad call fails where it is made, with the parser's message."""

from __future__ import annotations

import math
import numbers
import re
from typing import Iterable, Optional, Sequence, Union

from . import _core

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_LOCATION = re.compile(r"^[^\n]*?:\d+:\d+: error: ")
_DTYPES = ("f16", "bf16", "f32")

Operand = Union["Tensor", numbers.Real]


class Tensor:
    """A value of a Program: its name in the program text, shape and dtype. Arithmetic operators
    (+ - * / @) and the methods below add statements to the program it belongs to."""

    __slots__ = ("program", "name", "shape", "dtype")

    def __init__(self, program: "Program", name: str, shape: Sequence[int], dtype: str):
        self.program = program
        self.name = name
        self.shape = tuple(shape)
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"mugraph.Tensor({self.name}: {list(self.shape)} {self.dtype})"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __add__(self, other: Operand) -> "Tensor":
        return add(self, other)

    def __radd__(self, other: Operand) -> "Tensor":
        return add(other, self)

    def __sub__(self, other: Operand) -> "Tensor":
        return sub(self, other)

    def __neg__(self) -> "Tensor":
        return self * -1

    def __rsub__(self, other: Operand) -> "Tensor":
        return sub(other, self)

    def __mul__(self, other: Operand) -> "Tensor":
        return mul(self, other)

    def __rmul__(self, other: Operand) -> "Tensor":
        return mul(other, self)

    def __truediv__(self, other: Operand) -> "Tensor":
        return div(self, other)

    def __rtruediv__(self, other: Operand) -> "Tensor":
        return div(other, self)

    def __matmul__(self, other: "Tensor") -> "Tensor":
        return matmul(self, other)

    def exp(self) -> "Tensor":
        return exp(self)

    def sqr(self) -> "Tensor":
        return sqr(self)

    def sqrt(self) -> "Tensor":
        return sqrt(self)

    def silu(self) -> "Tensor":
        return silu(self)

    def relu(self) -> "Tensor":
        return relu(self)

    def gelu(self) -> "Tensor":
        return gelu(self)

    def sum(self, dim: int, to: Optional[int] = None) -> "Tensor":
        return sum(self, dim=dim, to=to)

    def repeat(self, dim: int, times: int) -> "Tensor":
        return repeat(self, dim=dim, times=times)

    def reshape(self, shape: Sequence[int]) -> "Tensor":
        return reshape(self, shape)


class Program:
    """A tensor program. ``input`` declares inputs, op calls (``mugraph.matmul``, operators,
    Tensor methods) add statements, ``output`` marks outputs. ``text`` is the program in the
    program format; ``graph`` is what the C++ parser made of it."""

    def __init__(self, text: Optional[str] = None, filename: str = "<program>"):
        # No text: a program to build. Text, even empty: a program to parse (which must have an
        # output statement).
        self._lines: list = []
        self._names: set = set()
        self._outputs: list = []
        self._filename = filename
        self._counter = 0
        #: Program inputs whose values come with the program (from_torch's module tensors, and the
        #: transposes of its arguments): name -> a function of (device, {argument name: the value
        #: given}) returning the current value.
        self.bindings: dict = {}
        self._graph: Optional[_core.Graph] = None
        if text is not None:
            self._graph = _core.parse(text, filename)
            self._outputs = [name for name, _, _ in self._graph.outputs()]
            self._names = {name for name, _, _ in self._graph.inputs()}
            self._lines = [line for line in text.splitlines() if not re.match(r"\s*output\b", line)]
            self._names |= set(re.findall(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=", text, re.M))

    # --- building ---------------------------------------------------------------------------

    def input(self, name: str, shape: Sequence[int], dtype: str = "f16") -> Tensor:
        """Declares a program input: ``input NAME[shape] dtype``."""
        self._check_name(name)
        if dtype not in _DTYPES:
            raise _core.MugraphError(f"input {name}: dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
        dims = [_integer(d, f"the shape of input {name}") for d in shape]
        if not dims:
            raise _core.MugraphError(f"input {name}: a shape needs at least one extent")
        return self._add(name, f"input {name}[{', '.join(map(str, dims))}] {dtype}")

    def output(self, tensor: Tensor, name: Optional[str] = None) -> None:
        """Marks a tensor as a program output, under ``name`` (default: the tensor's own)."""
        self._own(tensor)
        if name is not None and name != tensor.name:
            # An alias names the same tensor, so its type is the tensor's.
            self._check_name(name)
            tensor = self._add(name, f"{name} = {tensor.name}", known=(tensor.shape, tensor.dtype))
        if tensor.name in self._outputs:
            raise _core.MugraphError(f"{tensor.name} is already an output")
        self._outputs.append(tensor.name)
        self._graph = None

    def tensor(self, name: str) -> Tensor:
        """The tensor a statement of this program named."""
        if name not in self._names:
            raise _core.MugraphError(f"the program has no tensor named {name!r}")
        shape, dtype = self._parse(self._lines, [name]).named_type(name)
        return Tensor(self, name, shape, dtype)

    def call(self, op: str, operands: Sequence[Operand], name: Optional[str] = None, **keywords) -> Tensor:
        """Adds ``name = op(operands..., key=value...)``; the result's name is made up if not given."""
        args = []
        for x in operands:
            if isinstance(x, Tensor):
                self._own(x)
                args.append(x.name)
            elif isinstance(x, numbers.Real) and not isinstance(x, bool):
                args.append(_number(x))
            else:
                raise _core.MugraphError(f"{op}: an operand must be a mugraph.Tensor or a number, got {type(x).__name__}")
        for key, value in keywords.items():
            if value is None:
                continue
            if isinstance(value, (list, tuple)):
                args.append(f"{key}=[{', '.join(str(_integer(v, key)) for v in value)}]")
            else:
                args.append(f"{key}={_integer(value, key)}")
        if name is None:
            name = self._fresh()
        else:
            self._check_name(name)
        return self._add(name, f"{name} = {op}({', '.join(args)})")

    # --- what it is -------------------------------------------------------------------------

    @property
    def text(self) -> str:
        """The program in the program format."""
        lines = list(self._lines)
        if self._outputs:
            lines.append("output " + ", ".join(self._outputs))
        return "\n".join(lines) + "\n"

    @property
    def graph(self) -> _core.Graph:
        """The program as a kernel-level μGraph (one pre-defined kernel per op)."""
        if not self._outputs:
            raise _core.MugraphError("the program has no outputs; mark one with Program.output")
        if self._graph is None:
            self._graph = _core.parse(self.text, self._filename)
        return self._graph

    def inputs(self) -> list:
        """(name, shape, dtype) of each input, in order."""
        return self.graph.inputs()

    def outputs(self) -> list:
        """(name, shape, dtype) of each output, in order."""
        return self.graph.outputs()

    def save(self, path: str) -> None:
        """Writes the program text (a .mg file)."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.text)

    def __call__(self, *inputs, **named):
        """Runs the program itself on the CPU interpreter (see UGraph.__call__)."""
        from .ugraph import UGraph

        return UGraph(self.graph, program=self)(*inputs, **named)

    def __repr__(self) -> str:
        return f"mugraph.Program(\n{self.text})"

    # --- internals --------------------------------------------------------------------------

    def _own(self, t: Tensor) -> None:
        if not isinstance(t, Tensor):
            raise _core.MugraphError(f"expected a mugraph.Tensor, got {type(t).__name__}")
        if t.program is not self:
            raise _core.MugraphError(f"{t.name} belongs to another Program")

    def _check_name(self, name: str) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise _core.MugraphError(f"{name!r} is not a name: names match [A-Za-z_][A-Za-z0-9_]*")
        if name in self._names:
            raise _core.MugraphError(f"{name} is already defined")

    def _free_name(self, base: str) -> str:
        """base if the program can define it, else base_1, base_2, ... (the first it can): for
        names taken from elsewhere (Python arguments, module paths) that may be keywords, op
        names or names already used."""
        name, n = base, 0
        while name in self._names or _core.is_reserved_name(name):
            n += 1
            name = f"{base}_{n}"
        return name

    def _fresh(self) -> str:
        while True:
            self._counter += 1
            name = f"t{self._counter}"
            if name not in self._names:
                return name

    def _parse(self, lines: list, outputs: list) -> _core.Graph:
        text = "\n".join(lines + ([f"output {', '.join(outputs)}"] if outputs else [])) + "\n"
        return _core.parse(text, self._filename)

    def _add(self, name: str, line: str, known=None) -> Tensor:
        try:
            graph = self._parse(self._lines + [line], [name])
        except _core.MugraphError as e:
            # The statement is ours, so its position in the text says nothing to the caller;
            # the traceback points at the call.
            raise _core.MugraphError(_LOCATION.sub("", getattr(e, "message", None) or str(e))) from None
        shape, dtype = known if known is not None else graph.named_type(name)
        self._lines.append(line)
        self._names.add(name)
        self._graph = None
        return Tensor(self, name, shape, dtype)


def _integer(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _core.MugraphError(f"{what}: expected an integer, got {value!r}")
    return int(value)


def _number(x: numbers.Real) -> str:
    """x spelled as the program format's number: exact for integers, the shortest decimal that
    reads back as the same double otherwise."""
    if isinstance(x, numbers.Integral):
        return str(int(x))
    f = float(x)
    if not math.isfinite(f):
        raise _core.MugraphError(f"constants must be finite, got {f}")
    return repr(f)


def _program_of(args: Iterable) -> Program:
    for a in args:
        if isinstance(a, Tensor):
            return a.program
    raise _core.MugraphError("at least one operand must be a mugraph.Tensor")


def _unary(op: str):
    def f(x: Tensor, name: Optional[str] = None) -> Tensor:
        return _program_of([x]).call(op, [x], name=name)

    f.__name__ = op
    f.__doc__ = f"Element-wise {op} (program format: {op}(x))."
    return f


def _binary(op: str):
    def f(a: Operand, b: Operand, name: Optional[str] = None) -> Tensor:
        return _program_of([a, b]).call(op, [a, b], name=name)

    f.__name__ = op
    f.__doc__ = f"Element-wise {op} with NumPy broadcasting; either operand may be a number."
    return f


exp = _unary("exp")
sqr = _unary("sqr")
sqrt = _unary("sqrt")
silu = _unary("silu")
relu = _unary("relu")
gelu = _unary("gelu")
add = _binary("add")
sub = _binary("sub")
mul = _binary("mul")
div = _binary("div")


def matmul(a: Tensor, b: Tensor, name: Optional[str] = None) -> Tensor:
    """Batched matrix product on the last two dims; leading dims broadcast."""
    return _program_of([a, b]).call("matmul", [a, b], name=name)


def sum(x: Tensor, dim: int, to: Optional[int] = None, name: Optional[str] = None) -> Tensor:  # noqa: A001
    """Sums dim down to extent ``to`` (default 1, keeping the dim)."""
    return _program_of([x]).call("sum", [x], name=name, dim=dim, to=to)


def repeat(x: Tensor, dim: int, times: int, name: Optional[str] = None) -> Tensor:
    """Tiles x ``times`` times along dim (like torch.Tensor.repeat)."""
    return _program_of([x]).call("repeat", [x], name=name, dim=dim, times=times)


def reshape(x: Tensor, shape: Sequence[int], name: Optional[str] = None) -> Tensor:
    """Row-major reshape to the same number of elements."""
    return _program_of([x]).call("reshape", [x], name=name, shape=list(shape))


def concat(tensors: Sequence[Tensor], dim: int, name: Optional[str] = None) -> Tensor:
    """Concatenation along dim."""
    return _program_of(tensors).call("concat", list(tensors), name=name, dim=dim)


def parse(text: str, filename: str = "<program>") -> Program:
    """A Program from program-format text; errors carry file:line:column."""
    return Program(text, filename)


def load(path: str) -> Program:
    """A Program from a .mg file."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return Program(text, path)
