"""`mugraph run` against an independent NumPy evaluation.

Programs are generated at random together with a NumPy evaluation of the same expression tree,
so the reference never goes through mugraph's parser or interpreter. Every op of DESIGN.md §2 is
covered, with broadcasting, negative dims, grouped sums, constants on either side and several
outputs. Inputs are f32 so that the comparison measures the interpreter, not f16 rounding.
"""
import math
import random

import numpy as np
import pytest

from conftest import run_cli


def erf(x):
    return np.vectorize(math.erf)(x)


UNARY = {
    "exp": np.exp,
    "sqr": np.square,
    "sqrt": np.sqrt,
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": lambda x: 0.5 * x * (1.0 + erf(x / math.sqrt(2.0))),
}
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


class ProgramBuilder:
    """Builds a program text and the NumPy values of its tensors side by side."""

    def __init__(self, rng):
        self.rng = rng
        self.lines = []
        self.values = {}  # name -> np.ndarray (float64)
        self.inputs = {}  # name -> np.ndarray (float32), what the CLI reads
        self.count = 0

    def fresh(self):
        self.count += 1
        return f"t{self.count}"

    def add_input(self, shape, positive=False):
        name = f"in{len(self.inputs)}"
        value = self.rng.standard_normal(shape).astype(np.float32)
        if positive:
            value = np.abs(value) + np.float32(0.5)
        self.inputs[name] = value
        self.values[name] = value.astype(np.float64)
        dims = ", ".join(map(str, shape))
        self.lines.append(f"input {name}[{dims}] f32")
        return name

    def define(self, expr, value):
        name = self.fresh()
        self.lines.append(f"{name} = {expr}")
        self.values[name] = value
        return name


def positive_expr(b, name):
    """An expression that is safely positive (for sqrt and division)."""
    choice = b.rng.integers(3)
    v = b.values[name]
    if choice == 0:
        return f"add(sqr({name}), 1)", np.square(v) + 1.0
    if choice == 1:
        return f"exp(mul({name}, 0.5))", np.exp(v * 0.5)
    return f"add(relu({name}), 0.25)", np.maximum(v, 0.0) + 0.25


def generate(seed):
    rng = np.random.default_rng(seed)
    pyrng = random.Random(seed)
    b = ProgramBuilder(rng)
    m, n = pyrng.choice([2, 3, 4, 8]), pyrng.choice([4, 6, 8, 12])
    x = b.add_input([m, n])
    row = b.add_input([n])
    col = b.add_input([m, 1], positive=True)
    live = [x]
    outputs = []
    for _ in range(pyrng.randint(3, 7)):
        src = pyrng.choice(live)
        v = b.values[src]
        shape = v.shape
        kind = pyrng.choice(["unary", "binary", "bcast", "scalar", "sum", "matmul", "layout", "sqrtdiv"])
        if kind == "unary":
            op = pyrng.choice(["exp", "sqr", "silu", "relu", "gelu"])
            arg, av = (f"mul({src}, 0.25)", v * 0.25) if op == "exp" else (src, v)
            t = b.define(f"{op}({arg})", UNARY[op](av))
        elif kind == "sqrtdiv":
            pe, pv = positive_expr(b, src)
            t = b.define(f"div({src}, sqrt({pe}))", v / np.sqrt(pv))
        elif kind == "binary" and len(live) > 1:
            other = pyrng.choice([s for s in live if b.values[s].shape == shape] or [src])
            op = pyrng.choice(["add", "sub", "mul"])
            t = b.define(f"{op}({src}, {other})", BINARY[op](v, b.values[other]))
        elif kind == "bcast" and shape == (m, n):
            if pyrng.random() < 0.5:
                op = pyrng.choice(["add", "mul", "sub"])
                t = b.define(f"{op}({row}, {src})", BINARY[op](b.values[row], v))
            else:
                t = b.define(f"div({src}, {col})", v / b.values[col])
        elif kind == "scalar":
            op = pyrng.choice(["add", "sub", "mul", "div"])
            c = pyrng.choice(["0.125", "-2", "3", "1e-1", "4096"])
            if pyrng.random() < 0.5 and op != "div":
                t = b.define(f"{op}({c}, {src})", BINARY[op](float(c), v))
            else:
                t = b.define(f"{op}({src}, {c})", BINARY[op](v, float(c)))
        elif kind == "sum":
            dim = pyrng.choice([-1, len(shape) - 1, 0])
            axis = dim % len(shape)
            extent = shape[axis]
            to = pyrng.choice([d for d in range(1, extent + 1) if extent % d == 0])
            grouped = v.reshape(shape[:axis] + (to, extent // to) + shape[axis + 1:]).sum(axis=axis + 1)
            extra = f", to={to}" if to != 1 or pyrng.random() < 0.3 else ""
            t = b.define(f"sum({src}, dim={dim}{extra})", grouped)
        elif kind == "matmul" and len(shape) >= 2:
            k = shape[-1]
            w = b.add_input([k, pyrng.choice([3, 5, 8])])
            t = b.define(f"matmul({src}, {w})", v @ b.values[w])
        else:
            op = pyrng.choice(["repeat", "reshape", "concat"])
            if op == "repeat":
                dim = pyrng.choice([0, -1])
                times = pyrng.choice([2, 3])
                reps = [1] * len(shape)
                reps[dim] = times
                t = b.define(f"repeat({src}, dim={dim}, times={times})", np.tile(v, reps))
            elif op == "reshape":
                new = [int(np.prod(shape))] if len(shape) > 1 else [1, shape[0]]
                t = b.define(f"reshape({src}, shape=[{', '.join(map(str, new))}])", v.reshape(new))
            else:
                dim = pyrng.choice([0, -1])
                t = b.define(f"concat({src}, {src}, sqr({src}), dim={dim})",
                             np.concatenate([v, v, np.square(v)], axis=dim))
        live.append(t)
        if pyrng.random() < 0.4:
            outputs.append(t)
    if live[-1] not in outputs:
        outputs.append(live[-1])
    b.lines.append("output " + ", ".join(outputs))
    return b, outputs


def write_inputs(tmp_path, builder):
    args = []
    for name, value in builder.inputs.items():
        path = tmp_path / f"{name}.npy"
        np.save(path, value)
        args += ["--input", f"{name}={path}"]
    return args


def max_rel_error(got, want):
    scale = max(float(np.max(np.abs(want))), 1e-30)
    return float(np.max(np.abs(got.astype(np.float64) - want))) / scale


@pytest.mark.parametrize("seed", range(40))
def test_random_program_matches_numpy(mugraph_bin, tmp_path, seed):
    builder, outputs = generate(seed)
    program = tmp_path / "p.mg"
    program.write_text("\n".join(builder.lines) + "\n")
    out = tmp_path / "out"
    r = run_cli(mugraph_bin, "run", program, "--out", out, *write_inputs(tmp_path, builder))
    assert r.returncode == 0, f"{r.stderr}\nprogram:\n{program.read_text()}"
    for name in outputs:
        got = np.load(out / f"{name}.npy")
        want = builder.values[name]
        assert got.dtype == np.float32
        assert got.shape == want.shape, name
        err = max_rel_error(got, want)
        assert err <= 1e-5, f"{name}: relative error {err}\nprogram:\n{program.read_text()}"


def test_design_example_shapes_and_outputs(mugraph_bin, tmp_path):
    program = tmp_path / "rms.mg"
    program.write_text(
        "input X[4, 64] f32\ninput G[64] f32\ninput W[64, 32] f32\n"
        "S = sum(sqr(X), dim=1)\nY = div(mul(X, G), sqrt(div(S, 64)))\nO = matmul(Y, W)\noutput O, S\n")
    rng = np.random.default_rng(7)
    vals = {k: rng.standard_normal(s).astype(np.float32) for k, s in [("X", (4, 64)), ("G", (64,)), ("W", (64, 32))]}
    args = []
    for k, v in vals.items():
        np.save(tmp_path / f"{k}.npy", v)
        args += ["--input", f"{k}={tmp_path / (k + '.npy')}"]
    r = run_cli(mugraph_bin, "run", program, "--out", tmp_path / "o", *args)
    assert r.returncode == 0, r.stderr
    X, G, W = (vals[k].astype(np.float64) for k in "XGW")
    S = np.sum(X * X, axis=1, keepdims=True)
    O = (X * G / np.sqrt(S / 64)) @ W
    assert max_rel_error(np.load(tmp_path / "o" / "O.npy"), O) <= 1e-5
    assert max_rel_error(np.load(tmp_path / "o" / "S.npy"), S) <= 1e-5


def test_f16_outputs_are_float16_and_rounded(mugraph_bin, tmp_path):
    program = tmp_path / "h.mg"
    program.write_text("input X[8, 16]\nY = mul(X, 3)\noutput Y\n")
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float16)
    np.save(tmp_path / "x.npy", x)
    r = run_cli(mugraph_bin, "run", program, "--input", f"X={tmp_path / 'x.npy'}", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    y = np.load(tmp_path / "o" / "Y.npy")
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, (x.astype(np.float32) * 3).astype(np.float16))


def test_seeded_inputs_are_reproducible(mugraph_bin, tmp_path, source_dir):
    prog = source_dir / "examples" / "rmsnorm_linear.mg"
    a = run_cli(mugraph_bin, "run", prog, "--seed", 3, "--out", tmp_path / "a")
    b = run_cli(mugraph_bin, "run", prog, "--seed", 3, "--out", tmp_path / "b")
    c = run_cli(mugraph_bin, "run", prog, "--seed", 4, "--out", tmp_path / "c")
    assert a.returncode == b.returncode == c.returncode == 0, a.stderr + b.stderr + c.stderr
    oa, ob, oc = (np.load(tmp_path / d / "O.npy") for d in "abc")
    np.testing.assert_array_equal(oa, ob)
    assert not np.array_equal(oa, oc)


def test_input_scale_draws_the_same_inputs_scaled(mugraph_bin, tmp_path):
    # A bilinear program in f32: inputs drawn at scale 0.5 give a quarter of the output at scale 1.
    prog = tmp_path / "mm.mg"
    prog.write_text("input A[4, 8] f32\ninput B[8, 3] f32\nO = matmul(A, B)\noutput O\n")
    one = run_cli(mugraph_bin, "run", prog, "--seed", 5, "--out", tmp_path / "one")
    half = run_cli(mugraph_bin, "run", prog, "--seed", 5, "--input-scale", 0.5, "--out", tmp_path / "half")
    assert one.returncode == half.returncode == 0, one.stderr + half.stderr
    o1, oh = np.load(tmp_path / "one" / "O.npy"), np.load(tmp_path / "half" / "O.npy")
    np.testing.assert_allclose(oh, 0.25 * o1, rtol=1e-6)
    assert np.abs(o1).max() > 0
