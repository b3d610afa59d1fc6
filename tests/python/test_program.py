"""mugraph.Program, parse and load (python/mugraph/program.py)."""

import numpy as np
import pytest

import mugraph
from conftest import rmsnorm_linear_reference, assert_close_f16


def rmsnorm_linear(m=16, k=256, n=64):
    p = mugraph.Program()
    X = p.input("X", [m, k], "f16")
    G = p.input("G", [k])
    W = p.input("W", [k, n])
    S = mugraph.sum(mugraph.sqr(X), dim=1)
    O = (X * G / mugraph.sqrt(S / k)) @ W
    p.output(O, "O")
    return p


def test_calls_write_the_program_format():
    p = rmsnorm_linear()
    assert p.text.splitlines()[:4] == ["input X[16, 256] f16", "input G[256] f16", "input W[256, 64] f16",
                                       "t1 = sqr(X)"]
    assert p.text.endswith("O = t7\noutput O\n")
    assert p.inputs() == [("X", [16, 256], "f16"), ("G", [256], "f16"), ("W", [256, 64], "f16")]
    assert p.outputs() == [("O", [16, 64], "f16")]
    # The text parses back to the same μGraph.
    assert mugraph.parse(p.text).graph == p.graph


def test_tensors_know_their_shapes_and_operators_map_to_ops():
    p = mugraph.Program()
    A = p.input("A", [4, 8], "f32")
    B = p.input("B", [8], "bf16")
    assert (A + B).shape == (4, 8) and (A + B).dtype == "f32"
    assert (2 - A).shape == (4, 8)
    assert (A @ p.input("C", [8, 3], "f32")).shape == (4, 3)
    assert A.sum(dim=1).shape == (4, 1)
    assert A.sum(dim=1, to=2).shape == (4, 2)
    assert A.reshape([32]).shape == (32,)
    assert A.repeat(dim=0, times=3).shape == (12, 8)
    assert mugraph.concat([A, A], dim=-1).shape == (4, 16)
    for f in (mugraph.exp, mugraph.sqrt, mugraph.silu, mugraph.relu, mugraph.gelu):
        assert f(A).shape == (4, 8)
    named = mugraph.mul(A, 0.125, name="scaled")
    assert named.name == "scaled" and "scaled = mul(A, 0.125)" in p.text


def test_bad_calls_fail_at_the_call_with_the_parsers_message():
    p = mugraph.Program()
    X = p.input("X", [4, 8])
    with pytest.raises(mugraph.MugraphError, match=r"^matmul: \[4, 8\] times \[4, 8\]: inner extents 8 and 4 differ"):
        X @ X
    with pytest.raises(mugraph.MugraphError, match="out of range"):
        mugraph.sum(X, dim=5)
    with pytest.raises(mugraph.MugraphError, match="already defined"):
        p.input("X", [1])
    with pytest.raises(mugraph.MugraphError, match="is not a name"):
        p.input("1x", [1])
    with pytest.raises(mugraph.MugraphError, match="dtype must be one of f16, bf16, f32"):
        p.input("Y", [1], "f64")
    with pytest.raises(mugraph.MugraphError, match="finite"):
        X * float("nan")
    with pytest.raises(mugraph.MugraphError, match="another Program"):
        X + mugraph.Program().input("Z", [4, 8])
    with pytest.raises(mugraph.MugraphError, match="no outputs"):
        p.graph
    # A failed call leaves the program as it was.
    assert "matmul" not in p.text
    # MugraphError is a ValueError, so generic handlers catch it.
    assert issubclass(mugraph.MugraphError, ValueError)


def test_parse_errors_carry_file_line_and_column(tmp_path):
    bad = tmp_path / "bad.mg"
    bad.write_text("input X[4, 8]\nY = matmul(X, X)\noutput Y\n")
    with pytest.raises(mugraph.MugraphError) as info:
        mugraph.load(str(bad))
    e = info.value
    assert str(e).startswith(f"{bad}:2:5: error: matmul")
    assert (e.file, e.line, e.column) == (str(bad), 2, 5)
    assert e.message.startswith("matmul: [4, 8] times [4, 8]")
    with pytest.raises(mugraph.MugraphError, match=r"^<program>:1:6: error: expected .=. after the name .bogus."):
        mugraph.parse("bogus\n")
    # Empty text is a program without outputs, like any other text without an output line.
    for text in ("", "\n", "# nothing\n"):
        with pytest.raises(mugraph.MugraphError, match="output"):
            mugraph.parse(text)
    empty = tmp_path / "empty.mg"
    empty.write_text("")
    with pytest.raises(mugraph.MugraphError, match="output"):
        mugraph.load(str(empty))


def test_load_and_save_round_trip(tmp_path, examples_dir):
    p = mugraph.load(str(examples_dir / "rmsnorm_linear.mg"))
    assert p.inputs()[0] == ("X", [16, 4096], "f16")
    assert p.tensor("S").shape == (16, 1)
    # A loaded program can be extended with calls.
    p2 = mugraph.load(str(examples_dir / "rmsnorm.mg"))
    out = p2.tensor(p2.outputs()[0][0])
    p2.output(mugraph.exp(out), "E")
    assert p2.outputs()[-1][0] == "E"
    path = tmp_path / "p.mg"
    p.save(str(path))
    assert mugraph.load(str(path)).graph == p.graph


def test_a_program_runs_on_the_interpreter():
    p = rmsnorm_linear()
    rng = np.random.default_rng(1)
    x, g, w = rng.standard_normal((16, 256)), rng.standard_normal(256), rng.standard_normal((256, 64)) * 0.05
    out = p(x, g, w)
    assert out.dtype == np.float16 and out.shape == (16, 64)
    assert_close_f16(out, rmsnorm_linear_reference(x, g, w))
