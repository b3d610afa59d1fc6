"""`mugraph codegen` on every μGraph and program in examples/: the generated CUDA compiles with
nvcc for sm_80 and sm_90a without warnings, and, compiled with the benchmark harness it ships
(mugraph_device/bench_main.cu) against the device library's host emulation, computes what the CPU
interpreter computes (max error ≤ 1e-2 of the largest output
magnitude, f16 data, outputs poisoned before the run)."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import NVCC, SOURCE_DIR, run_cli

sys.path.insert(0, str(SOURCE_DIR / "bench"))
from bench_inputs import program_of, random_inputs  # noqa: E402  (one recipe with the GPU session's)

EXAMPLES = SOURCE_DIR / "examples"
UGRAPHS = sorted(EXAMPLES.glob("ugraphs/*.json")) + sorted(EXAMPLES.glob("found/*/best.json"))
PROGRAMS = sorted(EXAMPLES.glob("*.mg"))
ALL = UGRAPHS + PROGRAMS
# The code target of each GPU a search may target (--target).
SEARCH_TARGET_ARCH = {"a100": "sm_80", "h100": "sm_90a", "h200": "sm_90a"}
TARGETS = ["sm_80", "sm_90a"]
# ptxas "Potential Performance Loss" infos known for an example (docs/codegen.md, "Open"): any
# other makes the compile test fail. gqa_split_kv's first kernel has two wgmma matmuls in its loop
# body; either alone compiles without it.
# ptxas "Potential Performance Loss" infos known per (example, target); none since the matmul
# chain took gqa_split_kv's two matmuls (op by op it still gets C7514, docs/codegen.md).
KNOWN_PTXAS_LOSSES = {}
CXX = shutil.which("c++") or shutil.which("g++")


def find_cuobjdump():
    """cuobjdump and the directory of the nvdisasm it runs: the toolkit's, or those of the PyPI
    wheels scripts/install_deps.sh installs (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm)."""
    found = shutil.which("cuobjdump")
    if found and shutil.which("nvdisasm"):
        return found, str(Path(shutil.which("nvdisasm")).parent)
    try:
        import nvidia
    except ImportError:
        return None, None
    for root in nvidia.__path__:
        for bin_dir in sorted(Path(root).glob("*/bin")):
            if os.access(bin_dir / "cuobjdump", os.X_OK) and os.access(bin_dir / "nvdisasm", os.X_OK):
                return str(bin_dir / "cuobjdump"), str(bin_dir)
    return None, None


CUOBJDUMP, NVDISASM_DIR = find_cuobjdump()
NP_DTYPE = {"f16": np.float16, "f32": np.float32}


def example_id(path):
    rel = path.relative_to(EXAMPLES)
    return str(rel.parent / rel.stem) if rel.parent.name else rel.stem


def need_emulation(sanitized_build):
    """Skips a test that builds and runs generated code on the host emulation, in the sanitized
    pass: the host compiler builds that code without sanitizers, so the pass would repeat the
    Release pass's runs unchanged (about 15 minutes of CI). The sanitized binary's own share, the
    emitter, runs there in the nvcc tests; `bench --emulate` runs there on a small μGraph."""
    if CXX is None:
        pytest.skip("no C++ compiler to build the emulated code")
    if sanitized_build:
        pytest.skip("the emulated code is not sanitized: the Release pass runs it")


def codegen(mugraph_bin, path, target, out, *options):
    r = run_cli(mugraph_bin, "codegen", path, "--target", target, "-o", out, *options)
    assert r.returncode == 0, r.stderr
    return json.loads((out / "manifest.json").read_text())


@pytest.mark.parametrize("path", ALL, ids=example_id)
def test_generated_code_matches_the_interpreter(mugraph_bin, sanitized_build, tmp_path, path):
    need_emulation(sanitized_build)
    manifest = codegen(mugraph_bin, path, "sm_90a", tmp_path)
    assert manifest["format"] == "mugraph-codegen-manifest" and manifest["target"] == "sm_90a"
    exe = tmp_path / "emu"
    r = subprocess.run([CXX, "-std=c++20", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{tmp_path}", "-x", "c++",
                        str(tmp_path / "ugraph.cu"), "-x", "c++", str(tmp_path / "mugraph_device" / "bench_main.cu"),
                        "-o", str(exe)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rng = np.random.default_rng(7)
    inputs = random_inputs(program_of(path), manifest, rng)
    args, ref_args = ["--warmup", "0", "--repeats", "1"], []
    for i, (t, a) in enumerate(zip(manifest["inputs"], inputs)):
        raw, npy = tmp_path / f"in_{i}.bin", tmp_path / f"in_{i}.npy"
        a.tofile(raw)
        np.save(npy, a)
        args.append(str(raw))
        ref_args += ["--input", f"{t['name']}={npy}"]
    args.append("--")
    for j, t in enumerate(manifest["outputs"]):
        nbytes = int(np.prod(t["shape"])) * np.dtype(NP_DTYPE[t["dtype"]]).itemsize
        args.append(f"{tmp_path / f'out_{j}.bin'}:{nbytes}")
    r = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    r = run_cli(mugraph_bin, "run", path, "--out", tmp_path / "ref", *ref_args, timeout=600)
    assert r.returncode == 0, r.stderr
    for j, t in enumerate(manifest["outputs"]):
        got = np.fromfile(tmp_path / f"out_{j}.bin", dtype=NP_DTYPE[t["dtype"]]).reshape(t["shape"])
        ref = np.load(tmp_path / "ref" / f"{t['name']}.npy")
        got, ref = got.astype(np.float64), ref.astype(np.float64)
        assert np.isfinite(ref).all(), "the reference overflowed: choose other inputs"
        assert np.isfinite(got).all(), f"output {t['name']}: {np.size(got) - np.isfinite(got).sum()} elements not finite"
        scale = np.max(np.abs(ref))
        assert np.max(np.abs(got - ref)) <= 1e-2 * scale, (t["name"], np.max(np.abs(got - ref)), scale)


def ptxas_spills(text):
    """The nonzero spill counts in ptxas -v's report: [(bytes, "stores" or "loads"), ...]."""
    return [(int(n), kind) for n, kind in re.findall(r"(\d+) bytes spill (stores|loads)", text) if int(n)]


def test_ptxas_spills_reads_ptxas_reports():
    clean = "ptxas info    : Function properties for k\n    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"
    spilled = "ptxas info    : Function properties for k\n    24 bytes stack frame, 16 bytes spill stores, 8 bytes spill loads"
    assert ptxas_spills(clean) == []
    assert ptxas_spills(clean + "\n" + spilled) == [(16, "stores"), (8, "loads")]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("path", ALL, ids=example_id)
def test_generated_code_compiles_with_nvcc_without_warnings(mugraph_bin, tmp_path, path, target):
    if NVCC is None:
        pytest.skip("nvcc not found (install the CUDA toolkit)")
    report = path.parent / "report.json"
    if report.exists():
        # A saved search result fits the GPU it was searched for (its shared memory bounds the
        # block graphs), not necessarily the other target.
        searched_for = json.loads(report.read_text())["options"]["target"]
        if SEARCH_TARGET_ARCH[searched_for] != target:
            r = run_cli(mugraph_bin, "codegen", path, "--target", target, "-o", tmp_path)
            if r.returncode != 0 and "not a valid μGraph for" in r.stderr:
                pytest.skip(f"searched for {searched_for}: {r.stderr.strip()}")
    codegen(mugraph_bin, path, target, tmp_path)
    arch = target.replace("sm_", "")
    r = subprocess.run([NVCC, "-std=c++17", f"-gencode=arch=compute_{arch},code=sm_{arch}", "-Werror",
                        "all-warnings", "-Xcompiler", "-Wall,-Wextra", "-Xptxas", "-v", f"-I{tmp_path}", "-c",
                        str(tmp_path / "ugraph.cu"), "-o", str(tmp_path / "ugraph.o")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning" not in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
    # No kernel spills registers to local memory: a spill in a tile loop costs device-memory
    # round trips every iteration (ptxas -v says how many bytes, per kernel).
    assert not ptxas_spills(r.stdout + r.stderr), r.stdout + r.stderr
    # ptxas reports some slow code as "info": e.g. C7520, wgmma serialized because one sits under
    # a branch it cannot prove warpgroup-uniform.
    losses = set(re.findall(r"\((C\d+)\) Potential Performance Loss", r.stdout + r.stderr))
    assert losses <= KNOWN_PTXAS_LOSSES.get((path.stem, target), set()), r.stdout + r.stderr


def compile_example(mugraph_bin, tmp_path, name, target, kind):
    """Generates examples/ugraphs/<name>.json for target and compiles it with nvcc to `kind`
    ("ptx" or "cubin"): nvcc's result and the file written."""
    codegen(mugraph_bin, EXAMPLES / "ugraphs" / f"{name}.json", target, tmp_path)
    out = tmp_path / f"ugraph.{kind}"
    r = subprocess.run([NVCC, "-std=c++17", f"-arch={target}", f"-I{tmp_path}", f"-{kind}",
                        str(tmp_path / "ugraph.cu"), "-o", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r, out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["rmsnorm_fig3b", "gated_mlp_fig10b"])
def test_block_matmuls_use_tensor_cores_and_async_loads(mugraph_bin, tmp_path, name, target):
    # f16 tiles go through mma.sync.m16n8k16 with ldmatrix on sm_80 and through the warpgroup
    # instructions (wgmma.mma_async) on sm_90a; the loop's tiles load with cp.async on sm_80 and
    # by the tensor memory accelerator on sm_90a, pipelined on both.
    if NVCC is None:
        pytest.skip("nvcc not found (install the CUDA toolkit)")
    _, path = compile_example(mugraph_bin, tmp_path, name, target, "ptx")
    ptx = path.read_text()
    if target == "sm_80":
        assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx and "wgmma" not in ptx
        # B tiles ([K, N] rows of 16 bytes) load through ldmatrix.trans; Figure 3b's A ([16, 256])
        # through ldmatrix.x4; GatedMLP's A has 8 rows, half a 16-row block: ldmatrix.x2.
        assert "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16" in ptx
        assert ("ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx) == (name == "rmsnorm_fig3b")
        assert ("ldmatrix.sync.aligned.m8n8.x2.shared.b16" in ptx) == (name == "gated_mlp_fig10b")
        assert "cp.async.cg.shared.global" in ptx  # the tile loads
        # ... pipelined: committed in groups, each iteration waiting only for its own
        assert "cp.async.commit_group" in ptx and "cp.async.wait_group 1" in ptx
    else:
        # The weight tiles [256, 32] are written by the copy engine with the 64-byte swizzle and
        # read in place as the instruction's B, N-major (transpose flag 1); A (the mul's result
        # [16, 256], which the mul writes swizzled and fences to the async proxy, or X [8, 256],
        # which the copy engine writes so) is read in place as the instruction's A, K-major, its
        # job's rows past 16 or 8 read from padding. Unswapped (mgd::wgmma_orientation_swaps):
        # m64n32k16, the 16 k16 steps of k = 256 issued back to back and waited for once, nothing
        # staged; no mma.sync left.
        wgmma = re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k16)\.f32\.f16\.f16 \{[^}]*\}, %rd\d+, %rd\d+, "
                           r"1, 1, 1, (\d), (\d);", ptx)
        assert len(wgmma) == ptx.count("wgmma.mma_async") == 16 * (2 if "mlp" in name else 1), ptx
        assert set(wgmma) == {("m64n32k16", "0", "1")}, wgmma
        assert ("fence.proxy.async.shared::cta" in ptx) == (name == "rmsnorm_fig3b")
        assert "wgmma.wait_group.sync.aligned 1" not in ptx
        assert ptx.count("wgmma.wait_group.sync.aligned 0") == (2 if "mlp" in name else 1)
        assert "mma.sync" not in ptx
        # Tensor copies counted against a barrier per stage, waited for by phase.
        assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in ptx
        assert "mbarrier.arrive.expect_tx.shared::cta.b64" in ptx and "mbarrier.try_wait.parity" in ptx
        assert "cp.async.cg" not in ptx


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["rmsnorm_fig3b", "gated_mlp_fig10b"])
def test_sass_of_matmul_kernels_has_tensor_core_instructions(mugraph_bin, tmp_path, name, target):
    # What the GPU runs: HGMMA (warpgroup MMA) and UTMALDG (TMA loads) on sm_90a, HMMA and LDGSTS
    # (cp.async) on sm_80, read with cuobjdump from the cubin ptxas writes; ptxas must not
    # serialize the wgmma ops.
    if NVCC is None:
        pytest.skip("nvcc not found (install the CUDA toolkit)")
    if CUOBJDUMP is None:
        pytest.skip("cuobjdump/nvdisasm not found (scripts/install_deps.sh installs them from PyPI)")
    r, _ = compile_example(mugraph_bin, tmp_path / "code", name, target, "cubin")
    assert "serialized" not in r.stdout + r.stderr, r.stdout + r.stderr
    # The SASS of the harness mugraph bench runs, built as it builds it.
    harness = build_harness(mugraph_bin, EXAMPLES / "ugraphs" / f"{name}.json", target, tmp_path / "cache")["harness"]
    env = dict(os.environ, PATH=NVDISASM_DIR + os.pathsep + os.environ.get("PATH", ""))
    r = subprocess.run([CUOBJDUMP, "-sass", harness], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    sass = r.stdout
    if target == "sm_90a":
        # Both read their weight tile in place, N-major (.tnspB), as the instruction's B, and A
        # in place: 64 rows (16 or 8 of them the result's) by 32 columns, 16 k16 steps per matmul
        # (the first may start from zero, RZ, instead of the accumulators), waited for once.
        hgmma = re.findall(r"HGMMA\.(\w+)\.F32 R\d+, gdesc\[UR\d+\](\.\w+)?, (?:R\d+|RZ, !UPT)", sass)
        assert len(hgmma) == sass.count("HGMMA.") == 16 * (2 if "mlp" in name else 1), sass
        assert set(hgmma) == {("64x32x16", ".tnspB")}, hgmma
        assert "WARPGROUP.DEPBAR.LE gsb0, 0x0" in sass and "WARPGROUP.DEPBAR.LE gsb0, 0x1" not in sass
        assert "HMMA" not in sass
        assert "UTMALDG.2D" in sass and "LDGSTS" not in sass
    else:
        assert "HMMA.16816.F32" in sass and "HGMMA" not in sass
        assert "LDGSTS" in sass and "UTMALDG" not in sass
    if "rmsnorm" in name:
        # X · G and the squares the sum folds in, on f16 pairs (HMUL2: the f32 path's bits in a
        # quarter of its instructions), X's rows read 16 bytes at a time by both.
        assert "HMUL2" in sass and "LDS.128" in sass, sass


def input_args(program, manifest, seed, directory):
    """`--input NAME=FILE` arguments for random inputs of the manifest's shapes (bench_inputs.py's
    draw for program), each saved as DIRECTORY/NAME.npy."""
    args = []
    for t, a in zip(manifest["inputs"], random_inputs(program, manifest, np.random.default_rng(seed))):
        np.save(directory / f"{t['name']}.npy", a)
        args += ["--input", f"{t['name']}={directory / (t['name'] + '.npy')}"]
    return args


def build_harness(mugraph_bin, path, target, cache_dir, *extra):
    """`mugraph bench --build-only --json`: the harness built exactly as `mugraph bench` builds it
    on a GPU (no GPU needed), as its JSON line."""
    r = run_cli(mugraph_bin, "bench", path, "--target", target, "--build-only", "--json", "--cache-dir", cache_dir,
                *extra, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("path", ALL, ids=example_id)
def test_bench_builds_every_harness_for_sm90a(mugraph_bin, sanitized_build, tmp_path, path):
    # The build mugraph bench runs on a GPU, run here. nvcc's -arch=sm_90a also compiles a plain
    # sm_90 pass, which rejected the in-place wgmma operands: the compile tests above name the
    # target with -gencode and did not see it.
    if NVCC is None:
        pytest.skip("nvcc not found (install the CUDA toolkit)")
    if sanitized_build:
        pytest.skip("nvcc does the work; the Release pass builds every harness")
    report = path.parent / "report.json"
    if report.exists() and SEARCH_TARGET_ARCH[json.loads(report.read_text())["options"]["target"]] != "sm_90a":
        pytest.skip("searched for an A100")
    built = build_harness(mugraph_bin, path, "sm_90a", tmp_path)
    assert not built["cached"] and built["target"] == "sm_90a" and not built["emulated"], built
    harness = Path(built["harness"])
    assert harness.parent == Path(built["build_dir"]) and os.access(harness, os.X_OK), built
    # The second build is the cached one, and nothing was left half-built.
    assert build_harness(mugraph_bin, path, "sm_90a", tmp_path)["cached"]
    assert not list(Path(built["build_dir"]).parent.glob("*.partial*"))


def test_pre_defined_matmuls_link_against_cublas(mugraph_bin, tmp_path):
    # The unfused GatedMLP program: its two matmuls are cuBLAS calls; the harness links (as
    # mugraph bench builds it) with nvcc and cuBLAS from the toolkit.
    if NVCC is None:
        pytest.skip("nvcc not found (install the CUDA toolkit)")
    manifest = codegen(mugraph_bin, EXAMPLES / "gated_mlp.mg", "sm_90a", tmp_path / "code")
    assert manifest["blas_calls"] == 2 and manifest["kernels"] == 2, manifest
    harness = build_harness(mugraph_bin, EXAMPLES / "gated_mlp.mg", "sm_90a", tmp_path / "cache")["harness"]
    r = subprocess.run(["ldd", harness], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "libcublas" in r.stdout, r.stdout + r.stderr


def test_build_only_needs_a_compiler_and_reports_a_failed_build(mugraph_bin, tmp_path):
    # No nvcc: a clear error, no harness; a build that fails names the directory and nvcc's words.
    r = run_cli(mugraph_bin, "bench", EXAMPLES / "ugraphs" / "rmsnorm_fig3b.json", "--build-only", "--cache-dir",
                tmp_path, env={**os.environ, "CUDACXX": str(tmp_path / "no-nvcc"), "PATH": "/nonexistent"})
    assert r.returncode != 0 and "cannot start" in r.stderr and "no-nvcc" in r.stderr, r.stdout + r.stderr
    fake = tmp_path / "fake-nvcc"
    fake.write_text("#!/bin/sh\necho 'ugraph.cu(1): error: planted' >&2\nexit 1\n")
    fake.chmod(0o755)
    r = run_cli(mugraph_bin, "bench", EXAMPLES / "ugraphs" / "rmsnorm_fig3b.json", "--build-only", "--cache-dir",
                tmp_path, env={**os.environ, "CUDACXX": str(fake)})
    assert r.returncode == 1 and "building the generated code in" in r.stderr and "planted" in r.stderr, r.stderr
    assert not list(tmp_path.glob("*/bench")), "a failed build must not look cached"


def test_a_compiler_of_another_version_builds_again(mugraph_bin, tmp_path):
    # The cache key holds what the compiler says its version is: a toolkit upgraded in place
    # must not reuse the old one's builds. The stand-in compiler writes an empty output.
    version = tmp_path / "version.txt"
    fake = tmp_path / "fake-nvcc"
    fake.write_text('#!/bin/sh\nif [ "$1" = --version ]; then cat "%s"; exit 0; fi\n'
                    'while [ $# -gt 1 ]; do shift; done\n: > "$1"\n' % version)
    fake.chmod(0o755)
    env = {**os.environ, "CUDACXX": str(fake)}

    def build():
        r = run_cli(mugraph_bin, "bench", EXAMPLES / "ugraphs" / "exp_scale_concat.json", "--build-only", "--json",
                    "--cache-dir", tmp_path / "cache", env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        return json.loads(r.stdout)

    version.write_text("release 13.0\n")
    first = build()
    assert not first["cached"] and build()["cached"]
    version.write_text("release 13.1\n")
    upgraded = build()
    assert not upgraded["cached"] and upgraded["build_dir"] != first["build_dir"], (first, upgraded)


def test_builds_of_the_same_code_at_once_do_not_collide(mugraph_bin, tmp_path):
    # Four processes build the same harness into one cache at the same time (parallel tests, two
    # `mugraph bench` runs): each builds in a directory of its own and the first to finish moves
    # it into place, so every one succeeds, all name the same build, and nothing half-built stays.
    # The stand-in compiler waits, so that the builds overlap, then writes the size of the source
    # beside its output.
    fake = tmp_path / "fake-nvcc"
    fake.write_text('#!/bin/sh\nif [ "$1" = --version ]; then echo fake; exit 0; fi\n'
                    'for a; do out=$a; done\nsleep 1\nwc -c < "$(dirname "$out")/ugraph.cu" > "$out"\n')
    fake.chmod(0o755)
    cmd = [mugraph_bin, "bench", EXAMPLES / "ugraphs" / "exp_scale_concat.json", "--build-only", "--json",
           "--cache-dir", tmp_path / "cache"]
    runs = [subprocess.Popen(list(map(str, cmd)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "CUDACXX": str(fake)}) for _ in range(4)]
    results = []
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, out + err
        results.append(json.loads(out))
    assert len({r["build_dir"] for r in results}) == 1, results
    assert Path(results[0]["harness"]).read_text().split()[0] == str(
        (Path(results[0]["build_dir"]) / "ugraph.cu").stat().st_size)
    assert not list((tmp_path / "cache").glob("*.partial*")), list((tmp_path / "cache").iterdir())
    assert len(list((tmp_path / "cache").iterdir())) == 1


# Figure 10b skips 3 stages: the code for 3 and 4 is the same but for the constant, Figure 3b
# runs both, and each emulated run of Figure 10b takes over a minute of CI.
@pytest.mark.parametrize("name, stages", [("rmsnorm_fig3b", 1), ("rmsnorm_fig3b", 3), ("rmsnorm_fig3b", 4),
                                          ("gated_mlp_fig10b", 1), ("gated_mlp_fig10b", 4)])
def test_every_pipeline_depth_matches_the_interpreter(mugraph_bin, sanitized_build, tmp_path, name, stages):
    # The default (2 stages) runs in test_generated_code_matches_the_interpreter. The emulation
    # lands a cp.async only at its wait, so a tile read before its wait reads poison.
    need_emulation(sanitized_build)
    r = run_cli(mugraph_bin, "bench", EXAMPLES / "ugraphs" / f"{name}.json", "--emulate", "--stages", str(stages),
                "--cache-dir", tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ": OK" in r.stdout and "over 1 runs" in r.stdout, r.stdout
    src = next(tmp_path.glob("*/ugraph.cu")).read_text()
    assert (f"{stages}-stage load pipeline" in src) == (stages > 1)


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("ugraphs/*.json")))
def test_sm80_code_matches_the_interpreter(mugraph_bin, sanitized_build, tmp_path, name):
    # sm_80 code differs from sm_90a's: cp.async instead of the copy engine, mma.sync with
    # ldmatrix instead of wgmma, and so other tile layouts (padded rows for ldmatrix: the layout
    # pass, layout_choice.h). The emulation runs it all.
    need_emulation(sanitized_build)
    path = EXAMPLES / "ugraphs" / f"{name}.json"
    graph = json.loads(path.read_text())["graph"]
    manifest = {"inputs": [{"name": op["name"], "shape": op["shape"], "dtype": op["dtype"]}
                           for op in graph["ops"] if op["op"] == "input"]}
    args = input_args(program_of(path), manifest, 7, tmp_path)
    r = run_cli(mugraph_bin, "bench", path, "--emulate", "--target", "sm_80", *args, "--json", "--cache-dir",
                tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["ok"] and result["target"] == "sm_80" and result["layouts"] == "chosen", result


@pytest.mark.parametrize("target", TARGETS)
def test_row_major_layouts_match_the_interpreter(mugraph_bin, sanitized_build, tmp_path, target):
    # The layout pass off (every tile dense row-major), as before it existed.
    need_emulation(sanitized_build)
    r = run_cli(mugraph_bin, "bench", EXAMPLES / "ugraphs" / "rmsnorm_fig3b.json", "--emulate", "--target", target,
                "--layouts", "row-major", "--cache-dir", tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ": OK" in r.stdout, r.stdout
    src = next(tmp_path.glob("*/ugraph.cu")).read_text()
    assert "padded" not in src and "// layouts:" not in src


def test_codegen_writes_a_self_contained_directory(mugraph_bin, tmp_path):
    manifest = codegen(mugraph_bin, EXAMPLES / "ugraphs" / "rmsnorm_fig3b.json", "sm_80", tmp_path)
    assert [t["name"] for t in manifest["inputs"]] == ["X", "G", "W"]
    assert manifest["outputs"] == [{"name": "O", "shape": [16, 4096], "dtype": "f16"}]
    assert manifest["kernels"] == 1 and manifest["workspace_bytes"] == 0
    for f in ["ugraph.cu", "ugraph.h", "CMakeLists.txt", "mugraph_device/device.h", "mugraph_device/emulate.h"]:
        assert (tmp_path / f).is_file(), f
    assert "CMAKE_CUDA_ARCHITECTURES 80" in (tmp_path / "CMakeLists.txt").read_text()
    source = (tmp_path / "ugraph.cu").read_text()
    assert source.count("MGD_GLOBAL") == 1 and "for (int64_t it = 0; it < 16; ++it)" in source


def test_codegen_errors(mugraph_bin, tmp_path):
    r = run_cli(mugraph_bin, "codegen", EXAMPLES / "rmsnorm.mg", "--target", "sm_70", "-o", tmp_path)
    assert r.returncode == 2 and "unknown code-generation target 'sm_70'" in r.stderr and "sm_90a" in r.stderr
    r = run_cli(mugraph_bin, "codegen", tmp_path / "missing.json", "-o", tmp_path)
    assert r.returncode == 1 and "missing.json" in r.stderr


def test_names_never_reach_the_source_unescaped(mugraph_bin, tmp_path):
    # A μGraph whose input and output names would end a comment or a string if copied.
    graph = json.loads((EXAMPLES / "ugraphs" / "exp_scale_concat.json").read_text())
    evil = 'X*/ #include "evil.h" //\nq'
    for op in graph["graph"]["ops"]:
        if op["op"] == "input" and op["name"] == "X":
            op["name"] = evil
    for t in graph["graph"]["tensors"]:
        if t.get("name") == "X":
            t["name"] = evil
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(graph))
    out = tmp_path / "out"
    manifest = codegen(mugraph_bin, path, "sm_80", out)
    assert manifest["inputs"][0]["name"] == evil  # the manifest keeps it (JSON-escaped)
    for f in ["ugraph.cu", "ugraph.h"]:
        text = (out / f).read_text()
        assert "*/" not in text and '"evil.h"' not in text and "\nq" not in text, f
        assert "X\\052\\057 \\043include \\042evil.h\\042 \\057\\057\\012q" in text, f


def test_codegen_stages_out_of_range_is_a_usage_error(mugraph_bin, tmp_path):
    r = run_cli(mugraph_bin, "codegen", EXAMPLES / "ugraphs" / "rmsnorm_fig3b.json", "--stages", "5", "-o", tmp_path)
    assert r.returncode == 2 and "--stages" in r.stderr, r.stderr


def test_bench_checks_emulated_code_and_caches_the_build(mugraph_bin, tmp_path):
    args = ["bench", EXAMPLES / "ugraphs" / "exp_scale_concat.json", "--emulate", "--warmup", "0", "--repeats", "2",
            "--cache-dir", tmp_path]
    r = run_cli(mugraph_bin, *args, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "on host emulation (sm_90a)" in r.stdout and "check O:" in r.stdout and ": OK" in r.stdout
    assert "over 2 runs" in r.stdout and "cached build" not in r.stdout
    # The harness's file arguments are kept, to run it again by hand (compute-sanitizer).
    args_txt = next(tmp_path.glob("*/io/args.txt")).read_text().split()
    assert args_txt[0].endswith("in_0.bin") and "--" in args_txt and args_txt[-1].split(":")[0].endswith("out_0.bin")
    r = run_cli(mugraph_bin, *args, timeout=600)
    assert r.returncode == 0 and "cached build" in r.stdout, r.stdout + r.stderr


def test_bench_writes_what_the_generated_code_computed(mugraph_bin, tmp_path):
    # --out keeps the generated code's outputs, for checks against another reference (PyTorch:
    # bench/paper/run.py). They equal the interpreter's to the f16 tolerance, on the same inputs.
    if CXX is None:
        pytest.skip("no C++ compiler to build the emulated code")
    ugraph = EXAMPLES / "ugraphs" / "exp_scale_concat.json"
    r = run_cli(mugraph_bin, "bench", ugraph, "--emulate", "--seed", "3", "--cache-dir", tmp_path / "cache",
                "--out", tmp_path / "gpu", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"output O [16, 4096] f16 -> {tmp_path / 'gpu' / 'O.npy'}" in r.stdout, r.stdout
    r = run_cli(mugraph_bin, "run", ugraph, "--seed", "3", "--out", tmp_path / "cpu")
    assert r.returncode == 0, r.stderr
    got, want = np.load(tmp_path / "gpu" / "O.npy"), np.load(tmp_path / "cpu" / "O.npy")
    assert got.dtype == np.float16 and got.shape == (16, 4096)
    scale = np.abs(want.astype(np.float32)).max()
    assert scale > 0 and np.abs(got.astype(np.float32) - want.astype(np.float32)).max() <= 1e-2 * scale


LORA_FOUND = EXAMPLES / "found" / "lora"


def bench_batch(mugraph_bin, files, cache, out, *extra):
    r = run_cli(mugraph_bin, "bench", *files, "--emulate", "--seed", "3", "--cache-dir", cache, "--json", "--out", out,
                *extra, timeout=600)
    return r, [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def test_bench_times_several_ugraphs_in_one_batch(mugraph_bin, tmp_path):
    # Several μGraphs of one program: their code built as libraries, identical code once, and run
    # one after another by one harness on the same inputs. Each computes, bit for bit, what it
    # computes when benched alone, and is checked against the interpreter as it would be alone.
    if CXX is None:
        pytest.skip("no C++ compiler to build the emulated code")
    files = [LORA_FOUND / "top" / "00.json", LORA_FOUND / "top" / "01.json", LORA_FOUND / "best.json"]
    r, lines = bench_batch(mugraph_bin, files, tmp_path / "cache", tmp_path / "batch")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [line["file"] for line in lines] == [str(f) for f in files]
    assert all(line["ok"] and line["emulated"] and line["runs"] == 1 for line in lines), lines
    # best.json is top/00.json's μGraph: one library serves both.
    assert lines[0]["build_dir"] == lines[2]["build_dir"] != lines[1]["build_dir"]
    assert len(list((tmp_path / "cache").glob("emu-lib-*"))) == 2
    assert len(list((tmp_path / "cache").glob("emu-batch-*"))) == 1
    assert not list((tmp_path / "cache").glob("emu-batch-*/io-*")), "the batch's run directory is left behind"
    for i, f in enumerate(files[:2]):
        one = run_cli(mugraph_bin, "bench", f, "--emulate", "--seed", "3", "--cache-dir", tmp_path / "cache1",
                      "--json", "--out", tmp_path / f"alone{i}", timeout=600)
        assert one.returncode == 0, one.stderr
        alone = json.loads(one.stdout.splitlines()[-1])
        assert alone["file"] == str(f) and alone["outputs"] == lines[i]["outputs"]
        got, want = np.load(tmp_path / "batch" / str(i) / "O.npy"), np.load(tmp_path / f"alone{i}" / "O.npy")
        assert got.shape == (16, 4096) and np.array_equal(got.view(np.uint16), want.view(np.uint16))
    # A second batch finds every build in the cache.
    r, lines = bench_batch(mugraph_bin, files, tmp_path / "cache", tmp_path / "again")
    assert r.returncode == 0 and all(line["cached"] for line in lines), lines


FAKE_LIBRARIES = {
    "a file that is not a library": None,
    "a CUDA error": "return 2;",
    "a crash": "abort();",
}


@pytest.mark.parametrize("plant", FAKE_LIBRARIES)
def test_a_batch_goes_on_past_a_ugraph_it_cannot_run(mugraph_bin, tmp_path, plant):
    # The library of the batch's second μGraph is replaced: one that does not load, one whose run
    # returns an error, one whose run kills the harness. The harness goes on, or is started again
    # after it, and the third μGraph is timed and checked in the batch. The second is then run
    # alone, by a harness built from its own source, and measured, with what the batch could not
    # do kept beside it.
    if CXX is None:
        pytest.skip("no C++ compiler to build the emulated code")
    files = [LORA_FOUND / "top" / "00.json", LORA_FOUND / "top" / "01.json", LORA_FOUND / "top" / "00.json"]
    r, lines = bench_batch(mugraph_bin, files, tmp_path / "cache", tmp_path / "first")
    assert r.returncode == 0 and len(lines) == 3, r.stdout + r.stderr
    assert not any("batch_error" in line for line in lines)
    library = Path(lines[1]["build_dir"]) / "libugraph.so"
    body = FAKE_LIBRARIES[plant]
    if body is None:
        library.write_text("not a shared library\n")
    else:
        src = tmp_path / "fake.c"
        src.write_text("#include <stdlib.h>\nlong long mugraph_workspace_bytes(void) { return 0; }\n"
                       "int mugraph_run(const void* const* in, void* const* out, void* ws, void* stream) { "
                       + body + " }\n")
        subprocess.run(["cc", "-shared", "-fPIC", src, "-o", library], check=True)
    r, lines = bench_batch(mugraph_bin, files, tmp_path / "cache", tmp_path / "second")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [line["file"] for line in lines] == [str(f) for f in files]
    assert all(line["ok"] for line in lines) and "batch_error" not in lines[0] and "batch_error" not in lines[2]
    expected = {"a file that is not a library": "cannot load", "a CUDA error": "mugraph_run: emulation error",
                "a crash": "stopped (exit -1)"}[plant]
    assert expected in lines[1]["batch_error"], lines[1]
    assert Path(lines[1]["build_dir"]).name.startswith("emu-sm_90a-"), lines[1]  # its own harness
    got, want = np.load(tmp_path / "second" / "1" / "O.npy"), np.load(tmp_path / "first" / "1" / "O.npy")
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


def test_build_only_builds_what_a_batch_runs(mugraph_bin, tmp_path):
    # mugraph bench A B C --build-only: each μGraph's library (identical code once) and the batch
    # harness, no GPU needed; a batch then finds all of it in the cache.
    if CXX is None:
        pytest.skip("no C++ compiler to build the emulated code")
    files = [LORA_FOUND / "top" / "00.json", LORA_FOUND / "top" / "01.json", LORA_FOUND / "best.json"]
    cache = tmp_path / "cache"
    r = run_cli(mugraph_bin, "bench", *files, "--emulate", "--build-only", "--cache-dir", cache, "--json", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert [line["file"] for line in lines] == [str(f) for f in files]
    assert lines[0]["library"] == lines[2]["library"] != lines[1]["library"], lines
    assert all(Path(line["library"]).is_file() and Path(line["library"]).parent.name.startswith("emu-lib-")
               for line in lines), lines
    assert len({line["harness"] for line in lines}) == 1 and Path(lines[0]["harness"]).is_file()
    assert Path(lines[0]["harness"]).parent.name.startswith("emu-batch-")
    assert not list(cache.glob("emu-sm_90a-*")), "single harnesses were built"
    r = run_cli(mugraph_bin, "bench", *files, "--emulate", "--build-only", "--cache-dir", cache, timeout=600)
    assert r.returncode == 0 and r.stdout.count("(cached)") == 4, r.stdout  # the harness and three files
    r, ran = bench_batch(mugraph_bin, files, cache, tmp_path / "out")
    assert r.returncode == 0 and all(line["cached"] and line["ok"] for line in ran), ran
    # Files of two programs are refused as a batch run refuses them.
    r = run_cli(mugraph_bin, "bench", LORA_FOUND / "best.json", EXAMPLES / "found" / "rmsnorm_linear" / "best.json",
                "--emulate", "--build-only", "--cache-dir", cache)
    assert r.returncode == 1 and "its inputs are not those of" in r.stderr, r.stderr


def test_a_batch_takes_ugraphs_of_one_program(mugraph_bin, tmp_path):
    r = run_cli(mugraph_bin, "bench", LORA_FOUND / "best.json", EXAMPLES / "found" / "rmsnorm_linear" / "best.json",
                "--emulate", "--cache-dir", tmp_path)
    assert r.returncode == 1 and "its inputs are not those of" in r.stderr, r.stderr


@pytest.mark.skipif(os.path.exists("/dev/nvidia0"), reason="this machine has a GPU")
def test_bench_without_a_gpu_says_so(mugraph_bin, tmp_path):
    if NVCC is None:
        pytest.skip("nvcc not found (install the CUDA toolkit)")
    r = run_cli(mugraph_bin, "bench", EXAMPLES / "ugraphs" / "exp_scale_concat.json", "--cache-dir", tmp_path,
                timeout=600)
    assert r.returncode == 1 and "needs a GPU" in r.stderr and "no CUDA device" in r.stderr, r.stderr
    # A batch builds its libraries and harness with nvcc, then says the same.
    r = run_cli(mugraph_bin, "bench", LORA_FOUND / "top" / "00.json", LORA_FOUND / "top" / "01.json", "--cache-dir",
                tmp_path, timeout=600)
    assert r.returncode == 1 and "needs a GPU" in r.stderr and "no CUDA device" in r.stderr, r.stderr
    assert len(list(tmp_path.glob("lib-sm_90a-*/libugraph.so"))) == 2 and list(tmp_path.glob("batch-sm_90a-*/bench_*"))
    # --build-only builds the same, so it finds every piece of it in the cache.
    r = run_cli(mugraph_bin, "bench", LORA_FOUND / "top" / "00.json", LORA_FOUND / "top" / "01.json", "--cache-dir",
                tmp_path, "--build-only", timeout=600)
    assert r.returncode == 0 and r.stdout.count("(cached)") == 3, r.stdout + r.stderr


def test_wgmma_shapes_header_is_what_its_generator_writes():
    # runtime/include/mugraph_device/wgmma_shapes.h is generated (one inline-PTX form per wgmma
    # shape); a hand edit would be lost at the next regeneration.
    r = subprocess.run([os.environ.get("PYTHON", "python3"), str(SOURCE_DIR / "scripts" / "gen_wgmma_shapes.py")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (SOURCE_DIR / "runtime" / "include" / "mugraph_device" / "wgmma_shapes.h").read_text()


def rescaled_gated_mlp(tmp_path, rows, hidden, cols, grid):
    """examples/ugraphs/gated_mlp_fig10b.json at other shapes: X [rows, hidden], W1 and W2
    [hidden, cols], `grid` blocks over the columns, the same 16-step loop."""
    g = json.loads((EXAMPLES / "ugraphs" / "gated_mlp_fig10b.json").read_text())

    def shape(old, kind):
        # X and O are [8, 4096], W1 and W2 [4096, 4096]; the tiles [8, 256], [256, 32], [8, 32].
        if old == [8, 4096]:
            return [rows, hidden] if kind == "X" else [rows, cols]
        if old == [4096, 4096]:
            return [hidden, cols]
        return {(8, 256): [rows, hidden // 16], (256, 32): [hidden // 16, cols // grid],
                (8, 32): [rows, cols // grid]}[tuple(old)]

    top = g["graph"]
    for t in top["tensors"]:
        t["shape"] = shape(t["shape"], t["name"])
    for op in top["ops"]:
        if op["op"] == "input":
            op["shape"] = shape(op["shape"], op["name"])
    body = top["bodies"][0]
    for p, kind in zip(body["params"], ["X", "W", "W"]):
        p["shape"] = shape(p["shape"], kind)
    body["grid"] = [grid, 1, 1]

    def tiles(node):  # every tile shape of the block graph and of its thread graphs
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "shape" and isinstance(value, list) and tuple(value) in ((8, 256), (256, 32), (8, 32)):
                    node[key] = shape(value, "tile")
                elif key != "params" or node is not body:
                    tiles(value)
        elif isinstance(node, list):
            for item in node:
                tiles(item)

    tiles(body)
    path = tmp_path / f"gated_mlp_{rows}x{hidden}x{cols}.json"
    path.write_text(json.dumps(g))
    return path


@pytest.mark.parametrize("rows,hidden,cols,grid,in_place", [
    (64, 1024, 1024, 16, "both operands in place"),  # X [64, 64] as the instruction's A, W [64, 64] as its B
    # Swapped: W [64, 128] (two 128-byte-swizzled panels) as the instruction's A in two jobs,
    # X [8, 64] as its B.
    (8, 1024, 512, 4, "both operands in place"),
    (8, 1024, 48, 2, "A in place"),                  # W [64, 24] (48-byte rows) staged; X [8, 64] as the swapped B
    # Unswapped, X [24, 128] (two panels of 24 rows) as the instruction's A: its job's rows 24-63
    # run on into the second panel and then into the padding after X's buffer.
    (24, 2048, 256, 8, "both operands in place"),
])
def test_operand_tiles_read_in_place_match_the_interpreter(mugraph_bin, sanitized_build, tmp_path, rows, hidden, cols,
                                                           grid, in_place):
    # Tiles the copy engine writes swizzled and wgmma reads in place (wgmma_rules.h), run on the
    # emulation and checked against the interpreter by mugraph bench.
    need_emulation(sanitized_build)
    path = rescaled_gated_mlp(tmp_path, rows, hidden, cols, grid)
    codegen(mugraph_bin, path, "sm_90a", tmp_path / "cuda")
    source = (tmp_path / "cuda" / "ugraph.cu").read_text()
    assert source.count(f"on wgmma, {in_place}") == 2, source
    if NVCC is not None:  # what ptxas makes of it: no warnings, no performance loss (C7520 ...)
        r = subprocess.run([NVCC, "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-Werror", "all-warnings",
                            f"-I{tmp_path / 'cuda'}", "-c", str(tmp_path / "cuda" / "ugraph.cu"), "-o",
                            str(tmp_path / "ugraph.o")], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0 and "Performance Loss" not in r.stdout + r.stderr, r.stdout + r.stderr
    r = run_cli(mugraph_bin, "bench", path, "--emulate", "--seed", "5", "--cache-dir", tmp_path / "cache",
                timeout=900)
    assert r.returncode == 0 and ": OK" in r.stdout, r.stdout + r.stderr
    # --wgmma-operands staged stages them all, as before (to time the two on a GPU).
    codegen(mugraph_bin, path, "sm_90a", tmp_path / "staged", "--wgmma-operands", "staged")
    staged = (tmp_path / "staged" / "ugraph.cu").read_text()
    assert "in place" not in staged and "tma_load_panels" not in staged and staged.count("on wgmma") == 2


@pytest.mark.parametrize("target", TARGETS)
def test_host_code_of_blas_only_programs_and_unread_inputs_compiles_without_warnings(mugraph_bin, tmp_path, target):
    # A program of one matmul is one cuBLAS call (no kernel launch, so no launch error to keep);
    # an input the program ignores (Y) is still taken, in its place, and said to be unread.
    if NVCC is None:
        pytest.skip("nvcc not found (install the CUDA toolkit)")
    programs = {"blas": "input X[2, 512]\ninput W[512, 48]\nO = matmul(X, W)\noutput O\n",
                "unread": "input X[16, 64]\ninput Y[16, 64]\ninput W[64, 32]\nO = exp(matmul(X, W))\noutput O\n"}
    arch = target.removeprefix("sm_")
    for name, text in programs.items():
        path = tmp_path / f"{name}.mg"
        path.write_text(text)
        codegen(mugraph_bin, path, target, tmp_path / name)
        source = (tmp_path / name / "ugraph.cu").read_text()
        assert ("cudaError_t err" in source) == (name != "blas"), source
        assert ("(void)d1;  // read by nothing" in source) == (name == "unread"), source
        r = subprocess.run([NVCC, "-std=c++17", f"-gencode=arch=compute_{arch},code=sm_{arch}", "-Werror",
                            "all-warnings", f"-I{tmp_path / name}", "-c", str(tmp_path / name / "ugraph.cu"), "-o",
                            str(tmp_path / f"{name}.o")], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr


def test_loop_matmuls_sum_their_products_in_registers_or_through_a_tile(mugraph_bin, sanitized_build, tmp_path):
    # GatedMLP (X [8, 128], W1 and W2 tiles [128, 32], a 16-step loop): each matmul adds its
    # product to the loop's summing accumulator in registers, written once after the loop
    # (--matmul-accumulators registers, the default), or stores it for mgd::accumulate to add
    # (shared). Both match the interpreter on the emulation; the option is refused on bad values.
    need_emulation(sanitized_build)
    path = rescaled_gated_mlp(tmp_path, 8, 2048, 128, 4)
    for sums, in_registers, accumulate_ops in (("registers", 2, 0), ("shared", 0, 2)):
        codegen(mugraph_bin, path, "sm_90a", tmp_path / sums, "--matmul-accumulators", sums)
        source = (tmp_path / sums / "ugraph.cu").read_text()
        assert source.count("mgd::matmul_wgmma_to<") == in_registers, source
        assert source.count("mgd::store_result_registers<32, 1>(") == in_registers, source
        assert source.count("mgd::accumulate<") == accumulate_ops, source
        r = run_cli(mugraph_bin, "bench", path, "--emulate", "--seed", "4", "--matmul-accumulators", sums, "--json",
                    "--cache-dir", tmp_path / "cache", timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        result = json.loads(r.stdout.strip().splitlines()[-1])
        assert result["ok"] and result["matmul_accumulators"] == sums, result
    r = run_cli(mugraph_bin, "codegen", path, "--target", "sm_90a", "-o", tmp_path / "bad", "--matmul-accumulators", "x")
    assert r.returncode == 2 and "--matmul-accumulators" in r.stderr, r.stderr


def test_transposed_loop_products_sum_in_registers(mugraph_bin, sanitized_build, tmp_path):
    # GatedMLP with W tiles 64 wide (X [8, 128], W1 and W2 [128, 256] over 4 blocks): wgmma
    # computes each [8, 64] product as its transpose (64 rows of W's columns, N = 8 of X's rows;
    # the orientation that pads least, both operands read in place), and the registers hold the
    # transpose's fragments, [64, 8], written transposed after the loop. It matches the
    # interpreter on the emulation, as the products stored for mgd::accumulate do.
    need_emulation(sanitized_build)
    path = rescaled_gated_mlp(tmp_path, 8, 128, 256, 4)
    codegen(mugraph_bin, path, "sm_90a", tmp_path / "code")
    source = (tmp_path / "code" / "ugraph.cu").read_text()
    assert source.count("mgd::ResultRegisters<64, 8, 1>") == 2, source
    assert source.count("mgd::RegisterAccumulate<mgd::half, 64, 8, 1>") == 2, source
    assert source.count("mgd::store_result_registers<1, 64>(") == 2 and "mgd::accumulate<" not in source, source
    for sums in ("registers", "shared"):
        r = run_cli(mugraph_bin, "bench", path, "--emulate", "--seed", "5", "--matmul-accumulators", sums, "--json",
                    "--cache-dir", tmp_path / "cache", timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        result = json.loads(r.stdout.strip().splitlines()[-1])
        assert result["ok"] and result["matmul_accumulators"] == sums, result


@pytest.mark.parametrize("name", ["rmsnorm_fig3b", "gated_mlp_fig10b"])
def test_loop_products_landing_an_iteration_later_match_the_interpreter(mugraph_bin, sanitized_build, tmp_path, name):
    # --matmul-overlap on: each iteration's wgmma product is issued and added in the next
    # iteration (wgmma_deferred.h), its operands in two buffers or one more pipeline stage. The
    # emulation computes a wgmma op when it is waited for and poisons a tile from its copy's
    # issue to its wait, so an operand overwritten too early gives wrong sums. ptxas must issue
    # the wgmma ops back to back (no C7514 or C7520: reading one product's registers while
    # another is in flight, or a wgmma under a branch, would serialize them all).
    need_emulation(sanitized_build)
    path = EXAMPLES / "ugraphs" / f"{name}.json"
    codegen(mugraph_bin, path, "sm_90a", tmp_path / "code", "--matmul-overlap", "on")
    source = (tmp_path / "code" / "ugraph.cu").read_text()
    products = {"rmsnorm_fig3b": 1, "gated_mlp_fig10b": 2}[name]
    assert source.count("mgd::matmul_wgmma_issue<") == products, source
    assert source.count("mgd::matmul_wgmma_land(") == 2 * products, source
    assert "(3 stages a streamed tile, loading 1 iteration ahead" in source, source
    r = run_cli(mugraph_bin, "bench", path, "--emulate", "--seed", "5", "--matmul-overlap", "on", "--json",
                "--cache-dir", tmp_path / "cache", timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["ok"] and result["matmul_overlap"] == "on", result
    if NVCC is not None:
        r = subprocess.run([NVCC, "-std=c++17", "-arch=sm_90a", f"-I{tmp_path / 'code'}", "-cubin", "-Xptxas", "-v",
                            str(tmp_path / "code" / "ugraph.cu"), "-o", str(tmp_path / "ugraph.cubin")],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        assert "Potential Performance Loss" not in r.stdout + r.stderr, r.stdout + r.stderr
    r = run_cli(mugraph_bin, "codegen", path, "--target", "sm_90a", "-o", tmp_path / "bad", "--matmul-overlap", "x")
    assert r.returncode == 2 and "--matmul-overlap" in r.stderr, r.stderr


def test_staged_operands_take_two_buffers_or_one(mugraph_bin, sanitized_build, tmp_path):
    # GatedMLP with k = 160 per iteration: X's [8, 160] tile (rows of 320 bytes, no swizzle span
    # fits them) is staged in three chunks of k (64, 64, 32), the next staged while the tensor
    # cores read this one (two buffers, the default where it costs no resident block), or with
    # --wgmma-stage-buffers 1 each waiting for the one before it. Both match the interpreter on
    # the emulation.
    need_emulation(sanitized_build)
    path = rescaled_gated_mlp(tmp_path, 8, 2560, 128, 4)
    for buffers, marker in (("2", 2), ("1", 0)):
        codegen(mugraph_bin, path, "sm_90a", tmp_path / f"cuda{buffers}", "--wgmma-stage-buffers", buffers)
        source = (tmp_path / f"cuda{buffers}" / "ugraph.cu").read_text()
        assert source.count(", 160, ") == 2 and source.count("0, 64, 2>(") == marker, source
        r = run_cli(mugraph_bin, "bench", path, "--emulate", "--seed", "2", "--wgmma-stage-buffers", buffers, "--json",
                    "--cache-dir", tmp_path / "cache", timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        result = json.loads(r.stdout.strip().splitlines()[-1])
        assert result["ok"] and result["wgmma_stage_buffers"] == int(buffers), result
    r = run_cli(mugraph_bin, "codegen", path, "--target", "sm_90a", "-o", tmp_path / "bad", "--wgmma-stage-buffers", "3")
    assert r.returncode == 2 and "--wgmma-stage-buffers" in r.stderr, r.stderr


def test_block_threads_replace_every_block_graphs_own(mugraph_bin, sanitized_build, tmp_path):
    # --block-threads: the paper's RMSNorm at batch 1 (its search result of 2026-11-26, kept in
    # results_top100) with two warpgroups (the wgmma scratch per warpgroup doubles: 33,792 bytes)
    # and a GatedMLP with three warps (no warpgroup: the tile matmul, on mma.sync)
    # both match the interpreter on the emulation; other counts are refused.
    need_emulation(sanitized_build)
    rmsnorm = SOURCE_DIR / "bench" / "paper" / "results_top100" / "rmsnorm_bs1" / "top" / "00.json"
    gated = rescaled_gated_mlp(tmp_path, 8, 1024, 128, 4)
    for path, threads, marker in ((rmsnorm, "256", ", 33792, 0, 64, 2>("), (gated, "96", "mgd::matmul<mgd::Threads<96>,")):
        codegen(mugraph_bin, path, "sm_90a", tmp_path / f"cuda{threads}", "--block-threads", threads)
        source = (tmp_path / f"cuda{threads}" / "ugraph.cu").read_text()
        assert f"MGD_LAUNCH_BOUNDS({threads})" in source and f"dim3({threads}), " in source, source
        assert marker in source and (threads == "256") == ("on wgmma" in source), source
        r = run_cli(mugraph_bin, "bench", path, "--emulate", "--seed", "3", "--block-threads", threads, "--json",
                    "--cache-dir", tmp_path / "cache", timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        result = json.loads(r.stdout.strip().splitlines()[-1])
        assert result["ok"] and result["block_threads"] == int(threads), result
    for bad in ("100", "2048", "0"):
        r = run_cli(mugraph_bin, "codegen", gated, "-o", tmp_path / "bad", "--block-threads", bad)
        assert r.returncode == 2 and "a multiple of 32 from 32 to 1024" in r.stderr, r.stderr


def test_tiles_longer_than_a_box_load_through_a_split_view(mugraph_bin, sanitized_build, tmp_path):
    # The paper's RMSNorm at batch 1 (its search result of 2026-11-26, kept in
    # bench/paper/results_top100/rmsnorm_bs1/top/00.json): tiles [2, 1024] of X, [1024] of G and
    # [1024, 32] of W, longer than a tensor-map box (256). Each is one box of a view with the long
    # dim split (codegen::tma_view), and W is read in place by wgmma; on the emulation it matches
    # the interpreter, and the harness built for the GPU copies with 3-D tensor copies.
    need_emulation(sanitized_build)
    path = SOURCE_DIR / "bench" / "paper" / "results_top100" / "rmsnorm_bs1" / "top" / "00.json"
    codegen(mugraph_bin, path, "sm_90a", tmp_path / "cuda")
    source = (tmp_path / "cuda" / "ugraph.cu").read_text()
    assert "mgd::load_async" not in source, source
    assert source.count("mgd::tma_load<3>(") == 2 and source.count("mgd::tma_load_panels<3, 1, 32, 65536>(") == 2
    assert "make_tensor_map(&k0_tm_2, d2, {16, 256, 4096}, {4, 256, 32}, 64)" in source
    assert "on wgmma, B in place" in source
    r = run_cli(mugraph_bin, "bench", path, "--emulate", "--seed", "3", "--cache-dir", tmp_path / "cache", timeout=900)
    assert r.returncode == 0 and ": OK" in r.stdout, r.stdout + r.stderr
    if NVCC is None or CUOBJDUMP is None:
        return
    harness = build_harness(mugraph_bin, path, "sm_90a", tmp_path / "cache")["harness"]
    env = dict(os.environ, PATH=NVDISASM_DIR + os.pathsep + os.environ.get("PATH", ""))
    sass = subprocess.run([CUOBJDUMP, "-sass", harness], capture_output=True, text=True, timeout=600, env=env).stdout
    assert "UTMALDG.3D" in sass and "LDGSTS" not in sass and "HGMMA.64x32x16.F32" in sass, sass[:2000]


PAPER_RESULTS = sorted((SOURCE_DIR / "bench" / "paper" / "results").glob("*/top/*.json"))


@pytest.mark.parametrize("target,gpu", [("sm_90a", "h100"), ("sm_80", "a100")])
def test_the_cost_model_pipelines_the_loops_the_code_generator_pipelines(mugraph_bin, tmp_path, target, gpu):
    # The model's pipeline term (docs/cost_model.md) charges a loop without a load pipeline its
    # loads in every iteration; it decides which loops have one as the emitter does (the second
    # buffers fit in its memory plan: cost_model.h, loop_pipelined). Over every saved μGraph, the
    # two agree kernel by kernel (before 2026-11-26 the model took every loop as pipelined), but
    # for the direction cost_model.h allows: the model's best-fit plan may not fit where the
    # emitter's exact one does (QKNorm bs 1's search results of 2026-11-27, whose pre phase keeps
    # the normalised Q over the loop).
    checked = model_only_unpipelined = 0
    for path in UGRAPHS + PAPER_RESULTS:
        r = run_cli(mugraph_bin, "check", path, "--target", gpu)
        if r.returncode != 0:
            continue  # not valid for this GPU (a search's result for another)
        model = [line for line in r.stdout.splitlines() if re.match(r"kernel \d+ ", line)]
        out = tmp_path / path.stem
        r = run_cli(mugraph_bin, "codegen", path, "--target", target, "-o", out)
        assert r.returncode == 0, r.stderr
        source = (out / "ugraph.cu").read_text()
        # Graph-defined kernels only: a pre-defined element-wise op is a kernel too ("pre-defined mul").
        emitted = {int(i): "load pipeline" in rest for i, rest in re.findall(r"^// kernel_(\d+): (.*)$", source, re.M)
                   if not rest.startswith("pre-defined ")}
        graph_defined = [line for line in model if "graph-defined" in line]
        assert len(graph_defined) == len(emitted), (path, model, emitted)
        for line, (_, pipelined) in zip(graph_defined, sorted(emitted.items())):
            assert pipelined or "loop pipelined" not in line, (path, line)
            model_only_unpipelined += pipelined and "loop pipelined" not in line
            checked += 1
    assert checked >= 20 and model_only_unpipelined * 10 <= checked, (checked, model_only_unpipelined)


def test_tiles_element_wise_ops_write_are_read_in_place(mugraph_bin, sanitized_build, tmp_path):
    # The paper's QKNorm at batch 1 (a search's best of 2026-11-27, kept in tests/codegen/data so
    # that new searches do not change the test): the thread graphs that
    # normalize Q and K write their tiles swizzled (mgd::Swizzled) and fence them for the tensor
    # cores, and QN·KN reads both in place: in the matmul chain that keeps the scores in
    # registers (the default, wgmma_chain.h; its sums in registers through the loop, or added to
    # the accumulators' tiles in every iteration), or op by op. On the emulation each matches the
    # interpreter, as with every operand staged; the harness built for the GPU has the fences
    # (FENCE.VIEW.ASYNC.S) and no cp.async.
    need_emulation(sanitized_build)
    path = SOURCE_DIR / "tests" / "codegen" / "data" / "qknorm_bs1_best.json"
    manifest = codegen(mugraph_bin, path, "sm_90a", tmp_path / "cuda")
    source = (tmp_path / "cuda" / "ugraph.cu").read_text()
    assert source.count("mgd::Swizzled<") == 2 and source.count("mgd::fence_proxy_async();") == 2, source
    assert source.count("mgd::matmul_chain_wgmma<") == 1, source
    r = run_cli(mugraph_bin, "codegen", path, "--target", "sm_90a", "--matmul-chains", "op-by-op", "-o",
                tmp_path / "op_by_op")
    assert r.returncode == 0, r.stderr
    assert "on wgmma, both operands in place" in (tmp_path / "op_by_op" / "ugraph.cu").read_text()
    inputs = input_args("qknorm", manifest, 11, tmp_path)
    variants = (("in-place", "registers", "registers"), ("in-place", "registers", "shared"),
                ("in-place", "op-by-op", "registers"), ("staged", "registers", "registers"))
    for operands, chains, sums in variants:
        r = run_cli(mugraph_bin, "bench", path, "--emulate", "--wgmma-operands", operands, "--matmul-chains", chains,
                    "--chain-accumulators", sums, "--json", *inputs, "--cache-dir", tmp_path / "cache", timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        result = json.loads(r.stdout.strip().splitlines()[-1])
        assert result["ok"] and result["wgmma_operands"] == operands and result["matmul_chains"] == chains, result
        assert result["chain_accumulators"] == sums, result
    if NVCC is None or CUOBJDUMP is None:
        return
    harness = build_harness(mugraph_bin, path, "sm_90a", tmp_path / "cache")["harness"]
    env = dict(os.environ, PATH=NVDISASM_DIR + os.pathsep + os.environ.get("PATH", ""))
    sass = subprocess.run([CUOBJDUMP, "-sass", harness], capture_output=True, text=True, timeout=600, env=env).stdout
    assert "FENCE.VIEW.ASYNC.S" in sass and "HGMMA" in sass and "LDGSTS" not in sass, sass[:2000]


def test_split_matmul_chains_match_the_interpreter(mugraph_bin, sanitized_build, tmp_path):
    # examples/found/gqa: 16 query rows, four warpgroups, S four n-blocks wide. By default (timed
    # on an H200, docs/codegen.md) the chain is not taken there and the ops run one by one;
    # --chain-split on splits S's n-blocks among the warpgroups. Both match the interpreter on
    # the emulation.
    need_emulation(sanitized_build)
    path = EXAMPLES / "found" / "gqa" / "best.json"
    manifest = codegen(mugraph_bin, path, "sm_90a", tmp_path / "default")
    assert "matmul_chain_wgmma" not in (tmp_path / "default" / "ugraph.cu").read_text()
    codegen(mugraph_bin, path, "sm_90a", tmp_path / "split", "--chain-split", "on")
    assert "S's n-blocks split 4 ways" in (tmp_path / "split" / "ugraph.cu").read_text()
    inputs = input_args("gqa", manifest, 5, tmp_path)
    for split in ("off", "on"):
        r = run_cli(mugraph_bin, "bench", path, "--emulate", "--chain-split", split, "--json", *inputs,
                    "--cache-dir", tmp_path / "cache", timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        result = json.loads(r.stdout.strip().splitlines()[-1])
        assert result["ok"] and result["chain_split"] == split, result


def test_bench_says_when_its_inputs_overflow_the_reference_and_draws_smaller_ones(mugraph_bin, sanitized_build,
                                                                                  tmp_path):
    # Standard normal inputs overflow attention's f16 reference (exp(Q·K)): bench says that the
    # interpreter's result is not finite, rather than only that the check failed; --input-scale
    # draws inputs on which it is finite, and then the generated code matches.
    need_emulation(sanitized_build)
    path = SOURCE_DIR / "examples" / "gqa.mg"
    cache = ["--cache-dir", tmp_path / "cache"]
    r = run_cli(mugraph_bin, "bench", path, "--emulate", "--json", *cache, timeout=900)
    assert r.returncode == 1, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])["outputs"][0]
    assert not out["ok"] and out["reference_not_finite"] > 0, out
    r = run_cli(mugraph_bin, "bench", path, "--emulate", *cache, timeout=900)
    assert r.returncode == 1 and "the interpreter's own O is not finite" in r.stdout and "--input-scale" in r.stdout
    r = run_cli(mugraph_bin, "bench", path, "--emulate", "--input-scale", "0.25", "--json", *cache, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])["outputs"][0]
    assert out["ok"] and out["reference_not_finite"] == 0 and out["max_abs_reference"] > 0, out
    for bad in ("0", "-1", "x"):
        r = run_cli(mugraph_bin, "bench", path, "--emulate", "--input-scale", bad)
        assert r.returncode == 2 and "--input-scale" in r.stderr, r.stderr
