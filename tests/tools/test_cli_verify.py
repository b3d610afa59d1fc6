"""mugraph verify: verdicts, exit codes (0 equivalent, 1 not equivalent, 2 cannot compare) and output."""
import pytest
from conftest import run_cli


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_equivalent_example_and_its_ugraph(mugraph_bin, source_dir):
    ex = source_dir / "examples"
    r = run_cli(mugraph_bin, "verify", ex / "exp_scale.mg", ex / "ugraphs" / "exp_scale_concat.json", "--threads", 2)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("EQUIVALENT\n")
    for field in ("tests run:", "per-test bound:", "bound reached:", "guarantee:       yes", "seed:            0",
                  "float error:"):
        assert field in r.stdout, r.stdout


def test_not_equivalent_names_the_element(mugraph_bin, tmp_path):
    a = write(tmp_path, "a.mg", "input X[4, 8]\nO = mul(X, 4096)\noutput O\n")
    b = write(tmp_path, "b.mg", "input X[4, 8]\nO = mul(X, 4096.4)\noutput O\n")
    r = run_cli(mugraph_bin, "verify", a, b, "--seed", 9)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.startswith("NOT EQUIVALENT\n")
    assert "output 0 (O) differs at element [" in r.stdout
    assert "seed:            9" in r.stdout
    # The same seed replays the same verdict.
    assert run_cli(mugraph_bin, "verify", a, b, "--seed", 9).stdout == r.stdout


def test_cannot_compare(mugraph_bin, tmp_path):
    a = write(tmp_path, "a.mg", "input X[4]\nO = X\noutput O\n")
    b = write(tmp_path, "b.mg", "input Y[4]\nO = Y\noutput O\n")
    r = run_cli(mugraph_bin, "verify", a, b)
    assert r.returncode == 2
    assert r.stdout.startswith("CANNOT COMPARE\n")
    assert "the candidate has an input Y that the reference does not have" in r.stdout


def test_load_and_usage_errors_exit_2(mugraph_bin, tmp_path):
    a = write(tmp_path, "a.mg", "input X[4]\nO = X\noutput O\n")
    bad = write(tmp_path, "bad.mg", "input X[4]\nO = nope(X)\noutput O\n")
    r = run_cli(mugraph_bin, "verify", a, bad)
    assert r.returncode == 2 and "bad.mg:2:" in r.stderr, r.stderr
    assert run_cli(mugraph_bin, "verify", a, tmp_path / "missing.mg").returncode == 2
    assert run_cli(mugraph_bin, "verify", a).returncode == 2
    assert run_cli(mugraph_bin, "verify", a, a, "--delta", 0).returncode == 2


def test_relu_is_an_unknown_function_with_a_guarantee(mugraph_bin, tmp_path):
    a = write(tmp_path, "a.mg", "input X[4]\nO = mul(relu(X), 2)\noutput O\n")
    b = write(tmp_path, "b.mg", "input X[4]\nR = relu(X)\nO = add(R, R)\noutput O\n")
    r = run_cli(mugraph_bin, "verify", a, b, "--no-float-check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "guarantee:       yes" in r.stdout and "tested as unknown functions" in r.stdout, r.stdout
    assert "is not multilinear" in r.stdout  # the reference's Lax report still says why Theorem 2 does not apply
    assert "not run (--no-float-check)" in r.stdout
    r = run_cli(mugraph_bin, "verify", a, b, "--no-float-check", "--no-unknown-functions")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "guarantee:       no" in r.stdout and "unknown functions" not in r.stdout, r.stdout


def test_relu_beside_an_exp_identity_has_no_guarantee(mugraph_bin, tmp_path):
    # exp(2X) = exp(X)² holds by what exp is: the unknown-function test disagrees, Theorem 2 decides.
    a = write(tmp_path, "a.mg", "input X[4]\nO = mul(relu(X), 2)\nP = exp(add(X, X))\noutput O, P\n")
    b = write(tmp_path, "b.mg", "input X[4]\nR = relu(X)\nO = add(R, R)\nP = sqr(exp(X))\noutput O, P\n")
    r = run_cli(mugraph_bin, "verify", a, b, "--no-float-check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "guarantee:       no" in r.stdout and "is not multilinear" in r.stdout
    assert "functions:" not in r.stdout and "as unknown functions the graphs differ" in r.stdout, r.stdout


def test_a_verification_that_cannot_fit_in_memory_exits_2_with_the_figures(mugraph_bin, tmp_path):
    # Inputs and outputs at 8 bytes an element over one and a half times the machine's memory, whose
    # f16 device tensors (a quarter of that) still fit the default target's 80 GiB: `check` accepts
    # the program, and verify refuses it before drawing inputs rather than being OOM-killed.
    mem_kib = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal:"))
    rows = -(-mem_kib * 1024 * 3 // 2 // 16 // 65536)
    if rows * 65536 * 2 * 2 > 80 << 30:
        pytest.skip(f"this machine has {mem_kib >> 20} GiB: a program that cannot be verified here is too large for the target")
    a = write(tmp_path, "a.mg", f"input X[{rows}, 65536]\nO = exp(X)\noutput O\n")
    r = run_cli(mugraph_bin, "verify", a, a)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "verify: verification runs the graphs on random inputs" in r.stderr, r.stderr
    assert "of memory this process may use" in r.stderr and r.stderr.rstrip().endswith("CANNOT COMPARE"), r.stderr
