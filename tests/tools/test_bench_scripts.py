"""Smoke tests of the search benchmark scripts (bench/search_table5.py, bench/search_benchmarks.py) on a
small RMSNorm program (tests/tools/data/rmsnorm_small.mg), with one thread and 1-s limits (about 10 s
in all), and of the Figure 3b recogniser they share on the hand-written μGraphs."""
import copy
import json
import os
import pathlib
import re
import subprocess
import sys
import tarfile

import pytest

from conftest import NVCC, SOURCE_DIR

sys.path.insert(0, str(SOURCE_DIR / "bench"))
import search_common as sc  # noqa: E402

SMALL = SOURCE_DIR / "tests" / "tools" / "data" / "rmsnorm_small.mg"
TABLE5 = SOURCE_DIR / "bench" / "search_table5.py"
BENCHMARKS = SOURCE_DIR / "bench" / "search_benchmarks.py"
# Kernel ops only: the search exhausts this space in well under a second and finds the program itself.
KERNEL_ONLY = ["--max-graph-kernels", "0", "--max-kernel-ops", "7"]


def run_script(script, *args, timeout=60):
    return subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def table_rows(stdout, first_header_cell):
    """The data rows of the Markdown table whose header starts with first_header_cell, as lists of cells."""
    lines = stdout.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(f"| {first_header_cell} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def load(name):
    return json.loads((SOURCE_DIR / "examples" / "ugraphs" / name).read_text())


def test_spearman_ranks_ties_by_their_average():
    assert sc.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert sc.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # Ties share their average rank: x ranks (1, 2.5, 2.5, 4), y ranks (1, 2, 3, 4).
    assert sc.spearman([1, 5, 5, 9], [1, 2, 3, 4]) == pytest.approx(4.5 / (4.5 * 5) ** 0.5)
    assert sc.spearman([1, 2], [3, 3]) is None  # a constant side has no ranking
    assert sc.spearman([1], [2]) is None


def test_save_run_keeps_the_candidates_behind_the_report(tmp_path):
    out, dest = tmp_path / "out", tmp_path / "dest"
    (out / "top").mkdir(parents=True)
    (out / "report.json").write_text(json.dumps({"best": {"kernels": 1}}))
    (out / "best.json").write_text("{}")
    (out / "top" / "00.json").write_text("{}")
    (dest / "top").mkdir(parents=True)
    (dest / "top" / "07.json").write_text("stale")  # from an earlier save with more candidates
    run = sc.SearchRun([], out, 0, 1.0, "", "", {"best": {"kernels": 1}}, {})
    sc.save_run(run, dest)
    assert sorted(f.name for f in dest.iterdir()) == ["best.json", "report.json", "top"]
    assert [f.name for f in (dest / "top").iterdir()] == ["00.json"]


def test_figure_3b_recogniser():
    fig3b = load("rmsnorm_fig3b.json")
    assert sc.is_figure_3b(fig3b) == (True, "Figure 3b")
    assert not sc.is_figure_3b(load("gated_mlp_fig10b.json"))[0]  # no sum in the loop
    assert not sc.is_figure_3b(load("rmsnorm_two_kernels.json"))[0]  # two kernels
    assert not sc.is_figure_3b(load("exp_scale_concat.json"))[0]
    assert not sc.is_figure_3b(None)[0]

    no_loop = copy.deepcopy(fig3b)
    no_loop["graph"]["bodies"][0]["forloop"] = 1
    assert sc.is_figure_3b(no_loop) == (False, "no for-loop")

    no_sqrt = copy.deepcopy(fig3b)
    for op in no_sqrt["graph"]["bodies"][0]["bodies"][0]["ops"]:
        if op["op"] == "sqrt":
            op["op"] = "exp"
    assert sc.is_figure_3b(no_sqrt) == (False, "no sqrt after the loop")

    # The structure summary counts block ops as the search does (savers not counted).
    assert sc.describe_ugraph(fig3b) == ("graph(grid 128, loop 16, 10 block ops (12 counting thread-graph ops), "
                                         "accum sum×2, thread graph×1)")


def test_table5_quick_time_limited(mugraph_bin, tmp_path):
    out_json = tmp_path / "t5.json"
    r = run_script(TABLE5, "--quick", "--mugraph", mugraph_bin, "--program", SMALL, "--block-ops", "3",
                   "--threads", "1", "--time-limit", "1", "--ablation-time-limit", "1", "--json", out_json)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "os.cpu_count()" in r.stdout and "- Command:" in r.stdout and "- Date:" in r.stdout
    header = ("| N | all threads (s) | 1 thread (s) | without abstract-expression pruning (s) | "
              "states (all threads) | found Figure 3b? |")
    assert header in r.stdout
    rows = table_rows(r.stdout, "N")
    assert len(rows) == 1 and rows[0][0] == "3"
    for cell in rows[0][1:4]:  # stopped by the 1-s limit, or finished within it on a fast machine
        assert re.fullmatch(r">1 s|[0-9.]+", cell), cell
    assert re.fullmatch(r"≥?[0-9]+", rows[0][4])
    assert rows[0][5] == "no"
    doc = json.loads(out_json.read_text())
    cells = doc["results"]["3"]
    assert len(cells["a"]["runs"]) == 1 and len(cells["b"]["runs"]) == 1 and len(cells["c"]["runs"]) == 1
    assert cells["b"]["runs"][0]["report"]["options"]["threads"] == 1
    assert cells["c"]["runs"][0]["report"]["options"]["abstract_pruning"] is False
    assert cells["a"]["runs"][0]["report"]["options"]["max_block_ops"] == 3


def test_table5_exhausted_runs_report_median(mugraph_bin, tmp_path):
    r = run_script(TABLE5, "--mugraph", mugraph_bin, "--program", SMALL, "--block-ops", "2-3",
                   "--repeats", "2", "--configs", "ab", "--threads", "1", "--time-limit", "10", *KERNEL_ONLY)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = table_rows(r.stdout, "N")
    assert [row[0] for row in rows] == ["2", "3"]
    for row in rows:
        assert re.fullmatch(r"[0-9.]+", row[1]) and re.fullmatch(r"[0-9.]+", row[2]), row
        assert row[3] == "not run"
        assert re.fullmatch(r"[0-9]+", row[4]), row  # exhausted: an exact count
        assert row[5] == "no"  # seven pre-defined kernels
    assert r.stderr.count("exhausted") == 8  # 2 N × 2 configurations × 2 repeats


def test_benchmarks_quick_and_save(mugraph_bin, tmp_path):
    save = tmp_path / "found"
    r = run_script(BENCHMARKS, "--quick", "--mugraph", mugraph_bin, "--programs", SMALL, "--threads", "1",
                   "--time-limit", "1", "--save", save, "--block-cache", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("| program | search s | verify s | stop reason | states | retiling: s, the model's best before → after | "
            "kernels | graph-defined | device bytes | structure of the best |") in r.stdout
    rows = table_rows(r.stdout, "program")
    assert len(rows) == 1 and rows[0][0] == "rmsnorm_small"
    assert rows[0][3] in ("time_limit", "exhausted")
    report = json.loads((save / "rmsnorm_small" / "report.json").read_text())
    assert report["format"] == "mugraph-search-report" and report["options"]["threads"] == 1
    assert report["options"]["block_cache_bytes"] == 0 and report["block_replays"] == 0
    assert (save / "rmsnorm_small" / "best.json").exists() == (report["best"] is not None)


def test_benchmarks_found_summary(mugraph_bin, tmp_path):
    save = tmp_path / "found"
    out_json = tmp_path / "b.json"
    r = run_script(BENCHMARKS, "--mugraph", mugraph_bin, "--programs", SMALL, "--threads", "1",
                   "--time-limit", "10", "--save", save, "--json", out_json, *KERNEL_ONLY)
    assert r.returncode == 0, r.stdout + r.stderr
    row = table_rows(r.stdout, "program")[0]
    assert row[3] == "exhausted"
    # Retiling ran (the CLI's default) on a μGraph of pre-defined kernels only: nothing to retile.
    # Exhausted early, the program was searched cut before its matmul as well.
    m = re.fullmatch(r"[0-9.]+ s: ([0-9.]+) → ([0-9.]+) µs, 2 parts beside", row[5])
    assert m and m.group(1) == m.group(2), row[5]
    assert row[6] == "7" and row[7] == "0"
    assert row[9].split(" → ")[-1] == "matmul" and "sqrt" in row[9]
    best = json.loads((save / "rmsnorm_small" / "best.json").read_text())
    assert best["format"] == "mugraph-ugraph"
    doc = json.loads(out_json.read_text())
    assert doc["programs"]["rmsnorm_small"]["report"]["stop_reason"] == "exhausted"


def test_benchmarks_unknown_program(mugraph_bin):
    r = run_script(BENCHMARKS, "--mugraph", mugraph_bin, "--programs", "no_such_program")
    assert r.returncode != 0 and "not found" in r.stderr


@pytest.mark.parametrize("script", [TABLE5, BENCHMARKS])
def test_help(script):
    r = run_script(script, "--help")
    assert r.returncode == 0 and "--mugraph" in r.stdout and "--quick" in r.stdout


CODEGEN_VS_TORCH = SOURCE_DIR / "bench" / "codegen_vs_torch.py"


def test_codegen_vs_torch_says_what_it_needs_without_a_gpu():
    # The timing harness itself runs on a GPU session (docs/codegen.md); here it must stop cleanly,
    # saying why, with its own exit status, and measure nothing.
    try:
        import torch
        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU: the harness would measure")
    except ImportError:
        pass
    r = run_script(CODEGEN_VS_TORCH, "--cases", "rmsnorm")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "needs PyTorch" in r.stderr or "needs a GPU" in r.stderr, r.stderr
    assert r.stdout == ""


def test_codegen_vs_torch_cases_are_the_example_ugraphs():
    # Each case's inputs are the μGraph's, in order, at the paper's shapes.
    sys.path.insert(0, str(SOURCE_DIR / "bench"))
    import codegen_vs_torch as cvt
    assert set(cvt.CASES) == {"rmsnorm", "gated_mlp"}
    for key, case in cvt.CASES.items():
        for path in [case["ugraph"], *case["variants"].values()]:  # the variants take the same inputs
            g = json.loads(path.read_text())["graph"]
            inputs = [(op["name"], op["shape"]) for op in g["ops"] if op["op"] == "input"]
            assert inputs == [(n, s) for n, s in case["inputs"]], path
            assert [g["tensors"][o["tensor"]]["shape"] for o in g["outputs"]] == [case["output"]], path


def test_gpu_session_packs_the_binary_with_its_libraries(mugraph_bin, tmp_path):
    # MUGRAPH_PACK_PYTHONS empty: no extension module built for another Python (a minute of
    # compiling, into the source tree).
    r = subprocess.run(["bash", str(SOURCE_DIR / "bench" / "gpu_session.sh"), "--pack", str(tmp_path / "pack")],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "MUGRAPH_BIN": str(mugraph_bin), "MUGRAPH_PACK_PYTHONS": ""})
    assert r.returncode == 0, r.stderr
    packed = tmp_path / "pack" / "mugraph"
    assert packed.exists() and os.access(packed, os.X_OK)
    # It runs from the pack with only the packed libraries added.
    v = subprocess.run([str(packed), "--version"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "LD_LIBRARY_PATH": str(tmp_path / "pack")})
    assert v.returncode == 0, v.stderr
    # A GPU image lacks the Debian libraries: those the binary loads are packed beside it.
    libs = subprocess.run(["ldd", str(mugraph_bin)], capture_output=True, text=True, timeout=60).stdout
    for lib in ["libopenblas", "libjemalloc"]:
        if lib in libs:
            assert any(p.name.startswith(lib) for p in (tmp_path / "pack").iterdir()), (lib, libs)


# A stand-in for mugraph in gpu_session.sh's tests: `bench --build-only --json` answers at once
# with a build directory; any other bench takes half a second and answers with a checked result.
FAKE_MUGRAPH = """#!/bin/sh
echo "$*" >> "ARGS_LOG"
case " $* " in
  *" --build-only "*) echo '{"build_dir": "BUILD", "harness": "BUILD/bench", "cached": true}' ;;
  *) sleep 0.5; echo '{"ok": true, "median_us": 12.5}' ;;
esac
"""


def run_gpu_session(tmp_path, *args, min_seconds="2", path=None):
    fake = tmp_path / "mugraph"
    fake.write_text(FAKE_MUGRAPH.replace("BUILD", str(tmp_path / "build")).replace("ARGS_LOG", str(tmp_path / "args")))
    fake.chmod(0o755)
    env = {**os.environ, "MUGRAPH_BIN": str(fake), "MUGRAPH_CACHE_DIR": str(tmp_path / "cache"),
           "GPU_SESSION_MIN_SECONDS": min_seconds}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(["bash", str(SOURCE_DIR / "bench" / "gpu_session.sh"), str(tmp_path / "out"), *args],
                          capture_output=True, text=True, timeout=60, env=env)


def test_gpu_session_keeps_its_deadline_and_bundles_what_it_measured(tmp_path):
    # A 4-s deadline: the build step ends at once, the check step (22 examples, half a second
    # each) is cut at the deadline, and the operands step is skipped. What the check step wrote
    # before the cut comes back in the bundle; OUT holds three files (the device tool brings back 8).
    r = run_gpu_session(tmp_path, "--deadline", "4", "build", "check", "operands")
    assert r.returncode == 0, r.stdout + r.stderr
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["log.txt", "results.tar.gz", "summary.txt"]
    summary = (out / "summary.txt").read_text().splitlines()
    assert summary[0].startswith("build: ok"), summary
    assert summary[1].startswith("check: cut at the deadline"), summary
    assert summary[2].startswith("operands: skipped"), summary
    import tarfile
    with tarfile.open(out / "results.tar.gz") as tar:
        lines = tar.extractfile("./examples.jsonl").read().decode().splitlines()
        names = tar.getnames()
    assert 1 <= len(lines) < 22, lines
    assert all(json.loads(line)["result"]["ok"] for line in lines), lines
    assert "./summary.txt" in names and "./log.txt" in names, names


def test_gpu_session_runs_steps_in_the_order_given_and_refuses_unknown_ones(tmp_path):
    r = run_gpu_session(tmp_path, "--deadline", "60", "operands", "build")
    assert r.returncode == 0, r.stdout + r.stderr
    summary = (tmp_path / "out" / "summary.txt").read_text().splitlines()
    assert [line.split(":")[0] for line in summary] == ["operands", "build"], summary
    assert all(": ok" in line for line in summary), summary
    r = run_gpu_session(tmp_path, "build", "timings")
    assert r.returncode == 2 and "unknown step 'timings'" in r.stderr, r.stdout + r.stderr


def test_gpu_session_sass_fails_where_it_cannot_read_the_harness(tmp_path):
    # The stand-in's build directory holds no harness, so cuobjdump (the toolkit's or .venv's) fails,
    # or there is none: either way the step fails. It used to count 0 of every instruction and pass,
    # which read as code without tensor-core ops.
    r = run_gpu_session(tmp_path, "--deadline", "30", "sass")
    assert r.returncode == 0, r.stdout + r.stderr
    summary = (tmp_path / "out" / "summary.txt").read_text()
    log = (tmp_path / "out" / "log.txt").read_text()
    assert summary.startswith("sass: failed"), summary
    assert "HGMMA 0" not in log and ("cuobjdump failed" in log or "no cuobjdump" in log), log


def test_gpu_session_checks_attention_on_inputs_its_f16_reference_survives(tmp_path):
    # mugraph bench's standard normal inputs overflow attention's f16 reference (exp(Q·K)), which
    # would fail every GQA and QKNorm example on the GPU for nothing. The check step passes the
    # inputs of bench/bench_inputs.py (written beside the builds, not into the results), or where
    # NumPy is missing, --input-scale 0.25.
    pytest.importorskip("numpy")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "manifest.json").write_text(json.dumps({"inputs": [
        {"name": "Q", "shape": [1, 4, 8], "dtype": "f16"}, {"name": "K", "shape": [1, 8, 16], "dtype": "f16"},
        {"name": "V", "shape": [1, 16, 8], "dtype": "f16"}]}))
    python_dir = os.path.dirname(sys.executable)  # a python3 with NumPy first on the PATH
    r = run_gpu_session(tmp_path, "--deadline", "120", "check",
                        path=python_dir + os.pathsep + os.environ.get("PATH", ""))
    assert r.returncode == 0, r.stdout + r.stderr
    runs = [line.split() for line in (tmp_path / "args").read_text().splitlines() if "--build-only" not in line]
    examples = SOURCE_DIR / "examples"
    files = [*examples.glob("ugraphs/*.json"), *examples.glob("found/*/best.json"), *examples.glob("*.mg")]
    assert len(runs) == len(files), runs  # one run each
    for words in runs:
        given = {w.split("=")[0]: w.split("=", 1)[1] for w in words if "=" in w and not w.startswith("--")}
        assert sorted(given) == ["K", "Q", "V"], words
        assert all(pathlib.Path(p).exists() and str(tmp_path / "cache" / "inputs") in p for p in given.values())
    import numpy as np
    k = np.load(tmp_path / "cache" / "inputs" / "found" / "qknorm" / "best" / "K.npy")
    assert k.dtype == np.float16 and abs(float(k.mean()) - 1.0) < 0.1  # QKNorm's K: near 1, not N(0, 0.25²)
    q = np.load(tmp_path / "cache" / "inputs" / "gqa" / "Q.npy")
    assert abs(float(q.std()) - 0.25) < 0.1
    with tarfile.open(tmp_path / "out" / "results.tar.gz") as tar:
        assert not any("inputs" in n for n in tar.getnames()), tar.getnames()
    # No NumPy (a python3 that fails comes first on the PATH): mugraph draws them, at the same scale.
    (tmp_path / "args").unlink()
    (tmp_path / "nopy").mkdir()
    (tmp_path / "nopy" / "python3").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "nopy" / "python3").chmod(0o755)
    r = run_gpu_session(tmp_path, "--deadline", "120", "check",
                        path=str(tmp_path / "nopy") + os.pathsep + os.environ.get("PATH", ""))
    assert r.returncode == 0, r.stdout + r.stderr
    runs = [line for line in (tmp_path / "args").read_text().splitlines() if "--build-only" not in line]
    assert len(runs) == len(files) and all("--seed 1 --input-scale 0.25" in line for line in runs), runs


def test_gpu_session_times_the_attention_bests_with_and_without_matmul_chains(tmp_path):
    # The chains step: each of the four attention bests of bench/paper/results with its scores in
    # registers and op by op, and the examples' GQA and QKNorm (16 query rows for four
    # warpgroups) also with the chain's split turned off, on the same inputs per μGraph; one JSON
    # line each.
    r = run_gpu_session(tmp_path, "--deadline", "60", "chains")
    assert r.returncode == 0, r.stdout + r.stderr
    with tarfile.open(tmp_path / "out" / "results.tar.gz") as tar:
        lines = [json.loads(line) for line in tar.extractfile("./chains.jsonl").read().decode().splitlines()]
    both = (("registers", "on"), ("op-by-op", "on"))
    assert [(x["name"], x["matmul_chains"], x["chain_split"]) for x in lines] == [
        (n, c, s) for n in ("gqa_bs1", "gqa_bs8", "qknorm_bs1", "qknorm_bs8") for c, s in both] + [
        (n, c, s) for n in ("found_gqa", "found_qknorm") for c, s in both + (("registers", "off"),)]
    assert all(x["result"]["ok"] for x in lines), lines
    runs = [line for line in (tmp_path / "args").read_text().splitlines() if "--build-only" not in line]
    assert len(runs) == 14, runs
    for run, x in zip(runs, lines):
        where = f"examples/found/{x['name'][6:]}" if x["name"].startswith("found_") else f"bench/paper/results/{x['name']}"
        assert f"{where}/best.json" in run
        assert f"--matmul-chains {x['matmul_chains']} --chain-split {x['chain_split']}" in run
    for first in (0, 8, 11):  # the same inputs for every variant of a μGraph
        assert len({run.split("--chain-split")[1].split(None, 1)[1] for run in runs[first:first + 2]}) == 1, runs


def test_gpu_session_times_loop_products_landing_late_against_in_their_own_iteration(tmp_path):
    # The overlap step: Figures 3b and 10b with --matmul-overlap off and on, with the emitter's
    # pipeline stages and with 4; one JSON line each, tagged with both.
    r = run_gpu_session(tmp_path, "--deadline", "60", "overlap")
    assert r.returncode == 0, r.stdout + r.stderr
    with tarfile.open(tmp_path / "out" / "results.tar.gz") as tar:
        lines = [json.loads(line) for line in tar.extractfile("./overlap.jsonl").read().decode().splitlines()]
    assert [(x["name"], x["stages"], x["matmul_overlap"]) for x in lines] == [
        (n, t, o) for n in ("rmsnorm_fig3b", "gated_mlp_fig10b") for t in ("0", "4") for o in ("off", "on")]
    runs = [line for line in (tmp_path / "args").read_text().splitlines() if "--build-only" not in line]
    assert len(runs) == 8, runs
    for run, x in zip(runs, lines):
        assert f"examples/ugraphs/{x['name']}.json" in run and f"--matmul-overlap {x['matmul_overlap']}" in run
        assert ("--stages 4" in run) == (x["stages"] == "4"), run


def test_gpu_session_profiles_sections_then_each_stall_reason(tmp_path):
    # The profile step: per file, one ncu run of the sections and one of the stall reasons' cycles
    # per issued instruction, each on the harness with the checked run's arguments.
    io = tmp_path / "build" / "io"
    io.mkdir(parents=True)
    (io / "args.txt").write_text("--inputs a.npy\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ncu = bin_dir / "ncu"
    ncu.write_text(f'#!/bin/sh\necho "$*" >> "{tmp_path / "ncu_args"}"\necho profiled\n')
    ncu.chmod(0o755)
    r = run_gpu_session(tmp_path, "--deadline", "60", "profile", path=f"{bin_dir}:{os.environ['PATH']}")
    assert r.returncode == 0, r.stdout + r.stderr
    runs = (tmp_path / "ncu_args").read_text().splitlines()
    assert len(runs) == 4, runs  # two default files, two runs each
    for sections, stalls in zip(runs[::2], runs[1::2]):
        assert "--section WarpStateStats" in sections and "--inputs a.npy" in sections, sections
        metrics = stalls.split("--metrics ")[1].split()[0].split(",")
        assert len(metrics) == 16 and all(m.startswith("smsp__average_warps_issue_stalled_") and
                                          m.endswith("_per_issue_active.ratio") for m in metrics), metrics
        assert "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio" in metrics
        assert "--inputs a.npy" in stalls, stalls
    with tarfile.open(tmp_path / "out" / "results.tar.gz") as tar:
        text = tar.extractfile("./ncu.txt").read().decode()
    assert text.count("== ncu stall reasons") == 2 and text.count("profiled") == 4, text


TORCH_MODULE = SOURCE_DIR / "bench" / "torch_module_vs_mugraph.py"


def test_torch_module_vs_mugraph_says_what_it_needs_without_a_gpu():
    # Issue 8's GPU comparison runs in a GPU session (bench/gpu_session.sh, the module step); here it must
    # stop cleanly, saying why, and measure nothing.
    try:
        import torch
        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU: the script would measure")
    except ImportError:
        pass
    r = run_script(TORCH_MODULE)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "needs PyTorch" in r.stderr or "needs a CUDA GPU" in r.stderr, r.stderr
    assert r.stdout == ""


CALIBRATE = SOURCE_DIR / "bench" / "calibrate_cost_model.py"


def test_calibrate_cost_model_reads_paper_run_json(tmp_path):
    # The GPU session's calibrate step times bench/paper/results_top100's candidates with run.py
    # and hands its --json to calibrate_cost_model.py: per configuration, Spearman (as run.py
    # computed it), the model's pick (the first candidate that checked) against the fastest.
    def cand(rank, est, med, ok=True):
        return {"rank": rank, "estimated_us": est, "median_us": med, "ok": ok}

    doc = {"gpu": {"gpu": "NVIDIA H200"}, "rows": [
        {"name": "rmsnorm_bs1", "spearman": 0.9,
         "candidates": [cand(0, 10.0, 12.0, ok=False), cand(1, 10.5, 11.0), cand(2, 11.0, 10.0), cand(3, 12.0, 13.0)]},
        {"name": "lora", "candidates": [cand(0, 3.0, 4.0)]},  # one candidate: nothing to rank
    ]}
    path = tmp_path / "calibration_runs.json"
    path.write_text(json.dumps(doc))
    r = run_script(CALIBRATE, str(path), "--markdown", str(tmp_path / "c.md"))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("| rmsnorm_bs1")]
    assert rows == ["| rmsnorm_bs1 | NVIDIA H200 | 4 (3) | 0.900 | 11.00 us | 10.00 us | 10.0% |"], r.stdout
    assert "lora" not in r.stdout
    assert (tmp_path / "c.md").read_text().strip() == r.stdout.strip()
    doc["rows"] = doc["rows"][1:]
    path.write_text(json.dumps(doc))
    r = run_script(CALIBRATE, str(path))
    assert r.returncode != 0 and "no configuration with two or more timed candidates" in r.stderr


def test_calibrate_cost_model_reestimates_with_the_current_model(mugraph_bin, tmp_path):
    # --reestimate ranks recorded timings by the binary's model: the recorded estimates are
    # ignored (here they are reversed), the candidates' files are re-read (by their bench/ part
    # when recorded on another machine). bench/paper/results_top100/gated_mlp/top/02.json (W
    # tiles 8 wide) took 137.9 µs on an H200 and 03.json (64 wide) 30.3 µs.
    top = "/elsewhere/checkout/bench/paper/results_top100/gated_mlp/top/"
    doc = {"gpu": {"gpu": "NVIDIA H200"}, "rows": [{"name": "gated_mlp", "candidates": [
        {"rank": 0, "path": top + "02.json", "estimated_us": 1.0, "median_us": 137.9, "ok": True},
        {"rank": 1, "path": top + "03.json", "estimated_us": 2.0, "median_us": 30.3, "ok": True}]}]}
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(doc))
    env_bin = {"MUGRAPH_BIN": mugraph_bin}
    r = subprocess.run([sys.executable, str(CALIBRATE), str(path), "--reestimate", "h200"], capture_output=True,
                       text=True, timeout=60, env={**os.environ, **env_bin})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| gated_mlp | NVIDIA H200 | 2 (2) | 1.000 | 30.30 us | 30.30 us | 0.0% |" in r.stdout, r.stdout
    r = run_script(CALIBRATE, str(path))  # the recorded estimates: the wrong pick
    assert "| n/a | 137.90 us | 30.30 us | 355.1% |" in r.stdout, r.stdout


FIT_TERMS = SOURCE_DIR / "bench" / "fit_cost_model_terms.py"


def test_fit_cost_model_terms_finds_the_scaled_term_behind_timings(mugraph_bin, tmp_path, monkeypatch):
    # Six saved GQA bs 8 candidates, "timed" at the model's own estimates with the pieces term
    # halved: the unscaled terms add up to mugraph check's totals, and of the grid's points only
    # a = 0.5 ranks them exactly (the candidates differ in their pieces-bound kernels).
    monkeypatch.setenv("MUGRAPH_BIN", str(mugraph_bin))
    import fit_cost_model_terms as fit  # bench/ is on the path
    top = SOURCE_DIR / "bench" / "paper" / "results_all" / "gqa_bs8" / "top"
    candidates = []
    for i in (0, 3, 7, 12, 20, 31):
        path = top / f"{i:02d}.json"
        kernels = fit.kernel_breakdowns(path, "h200")
        assert fit.estimate(kernels, 1, 1, 1) == pytest.approx(sum(k[1] for k in kernels), abs=0.03 * len(kernels))  # terms printed to 0.01
        candidates.append({"path": "/elsewhere/bench/" + str(path.relative_to(SOURCE_DIR / "bench")),
                           "median_us": fit.estimate(kernels, 0.5, 1, 1), "ok": True})
    assert len({round(c["median_us"], 3) for c in candidates}) == len(candidates)
    doc = tmp_path / "runs.json"
    doc.write_text(json.dumps({"date": "2026-11-28", "rows": [{"name": "gqa_bs8", "candidates": candidates}]}))
    r = subprocess.run([sys.executable, str(FIT_TERMS), str(doc), "--min-points", "3", "--pieces", "0.5:1:0.5",
                        "--issue", "1:1:1", "--shared", "1:1:1", "--max-gap", "1"], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "MUGRAPH_BIN": str(mugraph_bin)})
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "sets: gqa_bs8 (2026-11-28): 6", r.stdout
    assert lines[2].startswith("a=0.5 ") and "min Spearman 1.000, largest gap 0.0%" in lines[2], r.stdout
    assert "min Spearman 1.000" not in lines[1], r.stdout  # the model at hand orders them otherwise


def test_half2_exactness_check_builds_and_says_when_there_is_no_gpu(tmp_path):
    # bench/half2_exact.cu (the gpu_session.sh `pairs` step) compiles against the device library
    # for both targets without warnings; without a GPU it says so (exit 2), with one it checks
    # every f16 pair and exits 0 only if each pair op gave the f32 path's bits.
    if NVCC is None:
        pytest.skip("nvcc not found (install the CUDA toolkit)")
    source = SOURCE_DIR / "bench" / "half2_exact.cu"
    for arch in ("sm_80", "sm_90a"):
        exe = tmp_path / f"half2_exact_{arch}"
        r = subprocess.run([NVCC, "-std=c++17", "-O3", f"-arch={arch}", "-Werror", "all-warnings",
                            f"-I{SOURCE_DIR / 'runtime' / 'include'}", str(source), "-o", str(exe)],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
    # The sm_80 build (its PTX too) runs on any GPU from sm_80 on.
    r = subprocess.run([str(tmp_path / "half2_exact_sm_80")], capture_output=True, text=True, timeout=120)
    if r.returncode == 2:
        assert "no CUDA GPU" in r.stderr, r.stderr
    else:
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.count("all the f32 path's bits") == 4, r.stdout


# bench/loop_anatomy.py: the loop's parts left out of the generated code in turn.
import loop_anatomy as la  # noqa: E402

ANATOMY = SOURCE_DIR / "bench" / "loop_anatomy.py"
FIG3B = SOURCE_DIR / "examples" / "ugraphs" / "rmsnorm_fig3b.json"
FIG10B = SOURCE_DIR / "examples" / "ugraphs" / "gated_mlp_fig10b.json"


def generated_source(mugraph_bin, path, target, tmp_path, *options):
    out = tmp_path / f"{path.stem}-{target}-{len(options)}"
    subprocess.run([mugraph_bin, "codegen", str(path), "--target", target, "-o", str(out), *options], check=True,
                   capture_output=True, timeout=60)
    return (out / "ugraph.cu").read_text()


def loop_lines(source):
    lines = source.split("\n")
    first, end = la.loop_body(lines)
    return lines[first:end]


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_loop_anatomy_leaves_out_each_part_and_nothing_else(mugraph_bin, tmp_path, target):
    source = generated_source(mugraph_bin, FIG3B, target, tmp_path)
    calls = {"loads": la.LOAD_CALLS, "matmul": la.MATMUL_CALLS, "simt": la.SIMT_CALLS}
    def count(text, part, loop_only=False):
        lines = loop_lines(text) if loop_only else text.split("\n")
        return sum(1 for line in lines if line.strip().startswith(calls[part]))
    for part in calls:
        assert count(source, part, loop_only=True) > 0, (part, source)
    for variant, parts in la.VARIANTS.items():
        cut, removed = la.remove_parts(source, parts)
        kept = set(source.split("\n")) - set(cut.split("\n"))
        assert all(line.strip().startswith(tuple(c for p in parts for c in calls[p])) for line in kept), kept
        for part in calls:
            if part in parts:  # gone from the loop; loads from the whole kernel (the pipeline's first tiles)
                assert count(cut, part, loop_only=part != "loads") == 0, (variant, part)
            else:
                assert count(cut, part) == count(source, part), (variant, part)
        assert removed == sum(count(source, p, loop_only=p != "loads") for p in parts), (variant, removed)
        # Everything else stays: the barriers, the kernel's braces, the code after the loop.
        assert cut.count("mgd::sync_block();") == source.count("mgd::sync_block();")
        assert cut.count("{") - cut.count("}") == source.count("{") - source.count("}")


def test_loop_anatomy_takes_a_deferred_products_land_with_its_matmul(mugraph_bin, tmp_path):
    # With --matmul-overlap on, a product issued in the last iteration lands after the loop: the
    # land goes with the matmul, or it would wait for a group never issued.
    source = generated_source(mugraph_bin, FIG3B, "sm_90a", tmp_path, "--matmul-overlap", "on")
    assert source.count("mgd::matmul_wgmma_land(") == 2 and "mgd::matmul_wgmma_issue<" in source
    cut, removed = la.remove_parts(source, ("matmul",))
    assert "mgd::matmul_wgmma" not in cut, cut
    assert removed == 3, removed  # the loop's land and issue, and the land after the loop
    # The μGraph without a loop has nothing to leave out.
    assert la.remove_parts("__global__ void k() {\n  x();\n}\n", ("loads",)) == ("__global__ void k() {\n  x();\n}\n", 0)


def test_loop_anatomy_builds_every_variant_with_nvcc(mugraph_bin, sanitized_build, tmp_path):
    if NVCC is None:
        pytest.skip("nvcc not found (install the CUDA toolkit)")
    if sanitized_build:
        pytest.skip("nvcc does the work; the Release pass builds the variants")
    r = subprocess.run([sys.executable, str(ANATOMY), str(FIG3B), str(FIG10B), "--build-only", "--work", str(tmp_path),
                        "--codegen-args", "--matmul-overlap on"], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "MUGRAPH_BIN": mugraph_bin})
    assert r.returncode == 0, r.stdout + r.stderr
    # Figure 10b's loop has no SIMT op: that variant is the full code, so it is not built.
    assert "gated_mlp_fig10b: no_simt: nothing to leave out" in r.stderr, r.stderr
    assert "built 9 of 9 variants" in r.stdout, r.stdout
    for name, variant in [("rmsnorm_fig3b", "no_loads"), ("gated_mlp_fig10b", "loads_only")]:
        assert os.access(tmp_path / name / variant / "bench", os.X_OK)
        assert "tma_load" not in (tmp_path / name / "no_loads" / "ugraph.cu").read_text()


def test_loop_anatomy_runs_a_variant_without_loads_to_the_end(mugraph_bin, sanitized_build, tmp_path):
    # On a GPU a variant that waits for a load it never issued would hang and take the lease with
    # it; the emulation runs Figure 3b without its loads to the end and reports a time. (With the
    # pipeline's first tiles still loaded, the emulation aborts: copies never waited for.)
    pytest.importorskip("numpy")
    if sanitized_build:
        pytest.skip("the host compiler and the emulation do the work; the Release pass runs it")
    json_out = tmp_path / "anatomy.jsonl"
    r = subprocess.run([sys.executable, str(ANATOMY), str(FIG3B), "--emulate", "--variants", "no_loads",
                        "--work", str(tmp_path / "work"), "--json", str(json_out)],
                       capture_output=True, text=True, timeout=600, env={**os.environ, "MUGRAPH_BIN": mugraph_bin})
    assert r.returncode == 0, r.stdout + r.stderr
    line = json.loads(json_out.read_text())
    assert line["variant"] == "no_loads" and line["statements_removed"] == 9 and line["emulated"], line
    assert line["result"]["median_us"] > 0, line
    assert "| no_loads | 9 |" in r.stdout and "emulated: times mean nothing" in r.stdout, r.stdout


# bench/tile_widths.py: the pieces term's experiment, W tiles of one width after another.
TILE_WIDTHS = SOURCE_DIR / "bench" / "tile_widths.py"


def test_tile_widths_holds_the_pieces_or_the_bytes_as_its_families_say(mugraph_bin, tmp_path):
    # --write-only: the eight μGraphs and the model's view of them. In the rows family every
    # width has the same pieces (and so the same pieces term) while W's bytes double; in the
    # blocks family W's bytes are fixed while the pieces halve.
    out = tmp_path / "widths.jsonl"
    r = subprocess.run([sys.executable, str(TILE_WIDTHS), "--write-only", "--work", str(tmp_path / "w"), "--json",
                        str(out)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "MUGRAPH_BIN": mugraph_bin})
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    rows = [x for x in lines if x["family"] == "rows"]
    blocks = [x for x in lines if x["family"] == "blocks"]
    assert [x["width"] for x in rows] == [8, 16, 32, 64] == [x["width"] for x in blocks]
    assert {x["pieces"] for x in rows} == {128 * 4096} and len({round(x["model_pieces_us"], 6) for x in rows}) == 1
    assert [x["w_mib"] for x in rows] == [8, 16, 32, 64] and all(x["blocks"] == 128 for x in rows)
    assert [x["pieces"] for x in blocks] == [4096 * 4096 // w for w in (8, 16, 32, 64)]
    assert {x["w_mib"] for x in blocks} == {32} and [x["blocks"] for x in blocks] == [512, 256, 128, 64]
    assert all(x["model_dram_us"] > 0 and "median_us" not in x for x in lines)
    assert "| rows | 64 (128) | 128 | 64 |" in r.stdout, r.stdout


def test_tile_widths_cases_match_the_interpreter_on_the_emulation(mugraph_bin, sanitized_build, tmp_path):
    # Every width's code (16-byte rows staged, 32 to 128-byte rows read in place, the 64-wide
    # product summed in registers as its transpose) computes O = X·W: at K = 512 on the emulation.
    if sanitized_build:
        pytest.skip("the host compiler and the emulation do the work; the Release pass runs it")
    r = subprocess.run([sys.executable, str(TILE_WIDTHS), "--emulate", "--hidden", "512", "--widths", "8,32,64",
                        "--families", "rows", "--work", str(tmp_path)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "MUGRAPH_BIN": mugraph_bin, "MUGRAPH_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("| OK |") == 3 and "on the host emulation (times mean nothing)" in r.stdout, r.stdout
    for w, expected in ((8, "A in place"), (32, "both operands in place, added to"),
                        (64, "both operands in place, added to")):
        code = subprocess.run([mugraph_bin, "codegen", str(tmp_path / f"matmul_rows_w{w}.json"), "--target", "sm_90a",
                               "-o", str(tmp_path / f"code{w}")], capture_output=True, text=True)
        assert code.returncode == 0 and expected in (tmp_path / f"code{w}" / "ugraph.cu").read_text(), code.stderr


def test_fit_cublas_share_takes_the_matmul_time_left(mugraph_bin, tmp_path):
    """bench/fit_cublas_share.py: a timed μGraph of one cuBLAS matmul gives the share its DRAM term at
    the peak is of its measured time less the launch; a file whose structure is not the one recorded
    is skipped, and said so."""
    program = tmp_path / "mm.mg"
    program.write_text("input X[16, 4096]\ninput W[4096, 4096]\nO = matmul(X, W)\noutput O\n")
    out = tmp_path / "search"
    r = subprocess.run([mugraph_bin, "search", str(program), *KERNEL_ONLY, "--threads", "1", "-o", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    best = out / "best.json"
    check = subprocess.run([mugraph_bin, "check", str(best), "--target", "h200"], capture_output=True, text=True)
    m = re.search(r"kernel 0 matmul: .*dram ([0-9.]+), .*dram at ([0-9.]+) of peak", check.stdout)
    assert m, check.stdout
    dram_at_peak = float(m.group(1)) * float(m.group(2))
    structure = sc.describe_ugraph(json.loads(best.read_text()))
    assert structure == "matmul"
    timed = {"rows": [{"name": "mm", "candidates": [
        {"path": str(best), "median_us": 20.0, "ok": True, "structure": structure},
        {"path": str(best), "median_us": 99.0, "ok": True, "structure": "graph(grid 8, loop 1)"},
        {"path": str(best), "median_us": 30.0, "ok": False, "structure": structure}]}]}
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps(timed))
    env = dict(os.environ, MUGRAPH_BIN=mugraph_bin)
    r = subprocess.run([sys.executable, str(SOURCE_DIR / "bench" / "fit_cublas_share.py"), str(runs),
                        "--min-points", "1"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    rows = table_rows(r.stdout, "timed μGraph")
    assert len(rows) == 1, rows  # the mismatched one skipped, the unchecked one not counted
    assert "no longer the μGraph timed" in r.stderr
    launch = 2.5  # GpuSpec::launch_us of the H200
    assert float(rows[0][5]) == pytest.approx(dram_at_peak / (20.0 - launch), abs=1e-3)
    assert f"1 points: median share {float(rows[0][5]):.3f}" in r.stdout
