"""Malformed or inconsistent input gives exit 1 and a located message, never a signal; bad usage
gives exit 2."""
import re

import pytest

from conftest import run_cli

LOCATED = re.compile(r"^mugraph: .*p\.mg:\d+:\d+: error: .+", re.S)

MALFORMED = {
    "syntax": ("input X[4, 4]\nY = exp(X\noutput Y\n", "p.mg:2:"),
    "undefined": ("input X[4]\nY = exp(Z)\noutput Y\n", "'Z'"),
    "redefined": ("input X[4]\nX = exp(X)\noutput X\n", "'X'"),
    "shape_mismatch": ("input A[4, 8]\ninput B[4, 8]\nC = matmul(A, B)\noutput C\n", "inner extents"),
    "broadcast_mismatch": ("input A[4, 8]\ninput B[3]\nC = add(A, B)\noutput C\n", "broadcast"),
    "absurd_size": ("input X[99999999999999999999, 4]\nY = exp(X)\noutput Y\n", "p.mg:1:"),
    "huge_product": ("input X[2147483648, 2147483648, 4]\noutput X\n", "p.mg:1:"),
    "zero_dim": ("input X[0, 4]\noutput X\n", "p.mg:1:"),
    "bad_dtype": ("input X[4] f64\noutput X\n", "f64"),
    "unknown_op": ("input X[4]\nY = softmax(X)\noutput Y\n", "softmax"),
    "bad_sum_to": ("input X[4, 6]\nY = sum(X, dim=1, to=4)\noutput Y\n", "p.mg:2:"),
    "bad_dim": ("input X[4, 6]\nY = sum(X, dim=2)\noutput Y\n", "p.mg:2:"),
    "no_output": ("input X[4]\nY = exp(X)\n", "output"),
    "output_undefined": ("input X[4]\noutput Q\n", "'Q'"),
    "binary_garbage": ("\x00\x01\xff\xfe garbage \x80\n", "p.mg:1:"),
    "deep_nesting": ("input X[4]\nY = " + "exp(" * 5000 + "X" + ")" * 5000 + "\noutput Y\n", "p.mg:2:"),
    "trailing_junk": ("input X[4]\nY = exp(X) exp(X)\noutput Y\n", "p.mg:2:"),
    "missing_keyword": ("input X[4, 4]\nY = repeat(X, dim=0)\noutput Y\n", "times"),
    "reshape_count": ("input X[4, 4]\nY = reshape(X, shape=[3, 5])\noutput Y\n", "p.mg:2:"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
@pytest.mark.parametrize("command", ["check", "run"])
def test_malformed_program_exits_1_with_location(mugraph_bin, tmp_path, case, command):
    text, needle = MALFORMED[case]
    program = tmp_path / "p.mg"
    program.write_bytes(text.encode("latin-1"))
    args = [command, program] + (["--out", tmp_path / "o"] if command == "run" else [])
    r = run_cli(mugraph_bin, *args)
    assert r.returncode == 1, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    assert LOCATED.match(r.stderr), r.stderr
    assert needle in r.stderr, r.stderr


def test_unreadable_file(mugraph_bin, tmp_path):
    r = run_cli(mugraph_bin, "check", tmp_path / "missing.mg")
    assert r.returncode == 1
    assert "missing.mg" in r.stderr


def test_bad_json(mugraph_bin, tmp_path):
    f = tmp_path / "g.json"
    f.write_text('{"format": "mugraph-ugraph", "version": 1, "graph": {"level": "kernel",}')
    r = run_cli(mugraph_bin, "check", f)
    assert r.returncode == 1, r.stderr
    assert re.search(r"g\.json:\d+:\d+: error: ", r.stderr), r.stderr


def test_wrong_json_version(mugraph_bin, tmp_path):
    f = tmp_path / "g.json"
    f.write_text('{"format": "mugraph-ugraph", "version": 2, "graph": {}}')
    r = run_cli(mugraph_bin, "check", f)
    assert r.returncode == 1
    assert "version" in r.stderr


@pytest.mark.parametrize("args", [[], ["frobnicate"], ["check"], ["run", "x.mg"], ["check", "a", "--target"],
                                  ["run", "x.mg", "-o", "out", "--input", "X"],
                                  ["bench", "x.mg", "--input", "=x.npy"],
                                  ["search", "x.mg", "-o", "out", "--time-limit", "-1"],
                                  ["search", "x.mg", "-o", "out", "--time-limit", "inf"],
                                  ["codegen", "x.mg", "-o", "out", "--target", "sm_70"]])
def test_usage_errors_exit_2(mugraph_bin, args):
    r = run_cli(mugraph_bin, *args)
    assert r.returncode == 2, r.stderr


def test_unknown_target_is_a_usage_error(mugraph_bin, source_dir):
    # A value of a command-line option, refused as the command line is read (exit 2), naming the
    # targets there are.
    r = run_cli(mugraph_bin, "check", source_dir / "examples" / "rmsnorm_linear.mg", "--target", "v100")
    assert r.returncode == 2
    assert "--target: unknown target 'v100'; the targets are a100, h100, h200" in r.stderr


def test_input_errors(mugraph_bin, tmp_path, source_dir):
    import numpy as np
    prog = source_dir / "examples" / "rmsnorm_linear.mg"
    np.save(tmp_path / "bad.npy", np.zeros((3, 3), np.float32))
    r = run_cli(mugraph_bin, "run", prog, "--input", f"X={tmp_path / 'bad.npy'}", "--out", tmp_path / "o")
    assert r.returncode == 1 and "shape" in r.stderr, r.stderr
    r = run_cli(mugraph_bin, "run", prog, "--input", f"Nope={tmp_path / 'bad.npy'}", "--out", tmp_path / "o")
    assert r.returncode == 1 and "no input named 'Nope'" in r.stderr, r.stderr
    (tmp_path / "garbage.npy").write_bytes(b"\x93NUMPY garbage")
    r = run_cli(mugraph_bin, "run", prog, "--input", f"X={tmp_path / 'garbage.npy'}", "--out", tmp_path / "o")
    assert r.returncode == 1, r.stderr


def test_too_large_for_the_interpreter(mugraph_bin, tmp_path):
    program = tmp_path / "p.mg"
    program.write_text("input X[65536, 65536] f32\nY = exp(X)\noutput Y\n")
    r = run_cli(mugraph_bin, "run", program, "--out", tmp_path / "o")
    assert r.returncode == 1, r.stderr
    assert "memory" in r.stderr
