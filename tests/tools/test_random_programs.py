"""Random programs through search, verify, the interpreter, code generation and the host emulation
(fuzz/random_programs.py, which runs any number of seeds)."""
import importlib.util
import shutil

import pytest

from conftest import SOURCE_DIR

_spec = importlib.util.spec_from_file_location("random_programs", SOURCE_DIR / "fuzz" / "random_programs.py")
random_programs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(random_programs)

CXX = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")


def test_the_generators_draw_valid_programs_of_every_kind():
    # Over the seeds the tests and the fuzz runs use, the programs are valid (checked by the
    # pipeline tests below), differ, and hold every op each family can draw.
    dags = [random_programs.dag_program(s) for s in range(200)]
    layers = [random_programs.layer_program(s) for s in range(200)]
    assert len(set(dags)) > 190 and len(set(layers)) > 120
    for op in ("matmul(", "sum(", "add(", "sub(", "mul(", "div(", "exp(", "sqrt(", "sqr(", "silu(", "relu(",
               "gelu(", "concat(", "repeat(", "reshape(", ", to=4"):
        assert any(op in d for d in dags), op
    for part in ("sqrt(div(S", "1e-6", "sub(X, MU)", "mul(XN, G)", "add(H, B)", "H2 = matmul", "exp(mul(",
                 "D = matmul", "R = add(D, X)"):
        assert any(part in d for d in layers), part
    assert random_programs.dag_program(7) == random_programs.dag_program(7)


def run_seeds(mugraph_bin, tmp_path, family, seeds, emulate=False, time_limit=3.0):
    failures = []
    for seed in seeds:
        text = random_programs.FAMILIES[family](seed)
        record = random_programs.check_program(mugraph_bin, text, str(tmp_path / f"{family}-{seed}"), seed,
                                               time_limit=time_limit, emulate=emulate,
                                               cache_dir=str(tmp_path / "cache"))
        if record["failure"]:
            failures.append(f"{family} seed {seed}: {record['failure']}\n{text}{record.get('output', '')}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("family", ["dag", "layer"])
def test_random_programs_get_a_verified_ugraph_that_computes_them(mugraph_bin, sanitized_build, tmp_path, family):
    # Searched (3 s limits), verified, run against the program on the interpreter and generated
    # as CUDA for sm_90a and sm_80. The sanitized binary searches about ten times slower: fewer
    # programs, longer limits.
    if sanitized_build:
        run_seeds(mugraph_bin, tmp_path, family, range(6), time_limit=10.0)
    else:
        run_seeds(mugraph_bin, tmp_path, family, range(16))


@pytest.mark.parametrize("family", ["dag", "layer"])
def test_random_programs_generated_code_matches_the_interpreter(mugraph_bin, sanitized_build, tmp_path, family):
    # The best μGraphs' generated code, built against the host emulation and run on the same
    # inputs as the interpreter (about 5 s a program).
    if CXX is None:
        pytest.skip("no C++ compiler to build the emulated code")
    if sanitized_build:
        pytest.skip("the emulated code is not sanitized: the Release pass runs it")
    run_seeds(mugraph_bin, tmp_path, family, range(100, 104), emulate=True)
