"""Where a graph-defined kernel's for-loop spends its time, by leaving parts of it out.

Nsight Compute says why warps stall, not which of the loop's ops the time belongs to. This script
answers the second question the way METHOD.md suggests without counters: it times variants of
the generated code with one part of the loop body removed, and reads each part's share from the
differences. For each μGraph (default: Figures 3b and 10b):

    full         the generated code as `mugraph codegen` writes it
    no_loads     no tile loads: neither the copies (TMA or cp.async) nor their waits, before or
                 in the loop; the loop computes on whatever shared memory holds
    no_matmul    no matmul in the loop (wgmma, mma.sync or a chain; a deferred product's lands too)
    no_simt      none of the loop's other tile ops (sums, element-wise ops, accumulators,
                 copies) and no fence for the tensor cores
    loads_only   no matmul and no SIMT ops: the loads, their waits and the barriers

The block barriers stay in every variant: without them a warp could fall two phases of a load
barrier behind the thread that issues the loads, and wait forever for a phase that has passed.

The variants compute wrong results: they are timed, not checked (the gpu_session check step
checks the full code). Each is built as `mugraph bench` builds its harness (nvcc, or the host
compiler against the emulation with --emulate, where the times mean nothing but every variant
must still build and run: the CI test) and run on the same random inputs, drawn as the check
step draws them (bench/bench_inputs.py: 0.25·N(0, 1) for these figures).

    python3 bench/loop_anatomy.py [FILE ...] [--target sm_90a] [--codegen-args "--matmul-overlap on"]
        [--emulate] [--build-only] [--work DIR] [--json OUT.jsonl] [--markdown OUT.md] [--warmup 20]
        [--repeats 200]

Prints a table per μGraph: each variant's median, and what leaving the part out saved.
"""
import argparse
import concurrent.futures
import json
import math
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from bench_inputs import program_of, random_inputs  # noqa: E402  (the check step's inputs)
DEFAULT_FILES = [ROOT / "examples" / "ugraphs" / "rmsnorm_fig3b.json",
                 ROOT / "examples" / "ugraphs" / "gated_mlp_fig10b.json"]

# What each part of a loop is, by the device library call a statement makes.
LOAD_CALLS = ("mgd::tma_load", "mgd::mbarrier_arrive_expect_tx", "mgd::mbarrier_wait", "mgd::load_async",
              "mgd::async_commit", "mgd::async_wait")
MATMUL_CALLS = ("mgd::matmul",)  # matmul<, matmul_wgmma_to/_issue/_land, matmul_chain_*
SIMT_CALLS = ("mgd::sum<", "mgd::binary<", "mgd::binary_scalar<", "mgd::unary<", "mgd::accumulate<", "mgd::copy<",
              "mgd::repeat<", "mgd::for_each<", "mgd::fence_proxy_async()")

VARIANTS = {
    "full": (),
    "no_loads": ("loads",),
    "no_matmul": ("matmul",),
    "no_simt": ("simt",),
    "loads_only": ("matmul", "simt"),
}


def statements(lines, start, end):
    """The statements of lines[start:end] as (first, last) line indices. A line is one, unless its
    parentheses stay open: then it runs until they close (a for_each's lambda spans lines). A
    line that opens a block (`if (...) {`) is a statement of its own, and so are those inside."""
    out, i = [], start
    while i < end:
        depth, j = 0, i
        while True:
            code = lines[j].split("//", 1)[0]
            depth += code.count("(") - code.count(")")
            if depth <= 0 or j + 1 >= end:
                break
            j += 1
        out.append((i, j))
        i = j + 1
    return out


def loop_body(lines):
    """(first, end) line indices of the first kernel for-loop's body, or None."""
    for i, line in enumerate(lines):
        if re.match(r"\s*for \(int64_t it = 0; it < \d+; \+\+it\) \{$", line):
            indent = len(line) - len(line.lstrip())
            for j in range(i + 1, len(lines)):
                if lines[j] == " " * indent + "}":
                    return i + 1, j
            raise ValueError("the for-loop at line %d has no closing brace" % (i + 1))
    return None


def part_of(statement_text):
    code = statement_text.strip()
    if code.startswith(LOAD_CALLS):
        return "loads"
    if code.startswith(MATMUL_CALLS):
        return "matmul"
    if code.startswith(SIMT_CALLS):
        return "simt"
    return None


def remove_parts(source, parts):
    """The generated source without the loop's statements of the given parts. Loads are removed
    before the loop too (the pipeline's first tiles), and a deferred product's last land after
    it, so that nothing waits for what was never issued. Returns (source, statements removed)."""
    lines = source.split("\n")
    body = loop_body(lines)
    if body is None:
        return source, 0
    first, end = body
    drop, removed = set(), 0
    # The kernel around the loop: from its signature to the loop, and from the loop to the
    # kernel's closing brace; only loads and lands are taken from there.
    kernel_start = max(i for i in range(first) if "MGD_GLOBAL" in lines[i])
    kernel_end = next(i for i in range(end, len(lines)) if lines[i] == "}")
    for a, b in statements(lines, kernel_start + 1, kernel_end):
        text = "\n".join(lines[a:b + 1])
        part = part_of(text)
        in_loop = first <= a < end
        if part in parts and (in_loop or part == "loads" or
                              (part == "matmul" and "matmul_wgmma_land" in text)):
            drop.update(range(a, b + 1))
            removed += 1
    kept = [line for i, line in enumerate(lines) if i not in drop]
    return "\n".join(kept), removed


def build_command(d, target, emulate):
    """The harness build, as src/codegen/build.cpp makes it."""
    if emulate:
        cxx = os.environ.get("CXX", "c++")
        return [cxx, "-std=c++20", "-O2", "-I" + str(d), "-x", "c++", str(d / "ugraph.cu"),
                "-x", "c++", str(d / "mugraph_device" / "bench_main.cu"), "-o", str(d / "bench")]
    arch = target[len("sm_"):]
    nvcc = os.environ.get("CUDACXX") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    return [nvcc, "-std=c++17", "-O3", f"-gencode=arch=compute_{arch},code=sm_{arch}", "-I" + str(d),
            str(d / "ugraph.cu"), str(d / "mugraph_device" / "bench_main.cu"), "-lcublas", "-o", str(d / "bench")]


def write_inputs(path, manifest, d, seed):
    """The harness's raw input files, drawn as the check step draws them (bench/bench_inputs.py),
    and its output arguments."""
    import numpy as np
    paths = []
    for i, (t, a) in enumerate(zip(manifest["inputs"],
                                   random_inputs(program_of(path), manifest, np.random.default_rng(seed)))):
        if t["dtype"] != "f16":
            raise SystemExit(f"loop_anatomy: input {t['name']} is {t['dtype']}; only f16 inputs are drawn")
        p = d / f"in_{i}.bin"
        a.tofile(p)
        paths.append(str(p))
    outs = [f"{d / f'out_{i}.bin'}:{2 * math.prod(t['shape'])}" for i, t in enumerate(manifest["outputs"])]
    return paths, outs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=pathlib.Path, default=DEFAULT_FILES)
    ap.add_argument("--target", default="sm_90a")
    ap.add_argument("--codegen-args", default="", help="more arguments for mugraph codegen (one string)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, of: " + ", ".join(VARIANTS))
    ap.add_argument("--emulate", action="store_true", help="build against the host emulation (times mean nothing)")
    ap.add_argument("--work", type=pathlib.Path, help="build directory (default: a temporary one)")
    ap.add_argument("--json", type=pathlib.Path, help="append one JSON line per variant here")
    ap.add_argument("--markdown", type=pathlib.Path, help="write the tables here")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="builds at once")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--build-only", action="store_true", help="generate and build the variants, run none")
    ap.add_argument("--run-timeout", type=float, default=120, help="seconds a variant's run may take")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            ap.error(f"unknown variant '{v}' (variants: {', '.join(VARIANTS)})")
    mugraph = os.environ.get("MUGRAPH_BIN", str(ROOT / "build" / "bin" / "mugraph"))
    work = args.work or pathlib.Path(tempfile.mkdtemp(prefix="loop_anatomy-"))

    # Generate, cut and build every variant first (builds in parallel), then time one after another.
    jobs = []  # (file, variant, dir, statements removed)
    for f in args.files:
        base = work / f.stem / "generated"
        subprocess.run([mugraph, "codegen", str(f), "--target", args.target, "-o", str(base),
                        *shlex.split(args.codegen_args)], check=True, stdout=subprocess.DEVNULL)
        source = (base / "ugraph.cu").read_text()
        for v in variants:
            d = work / f.stem / v
            if d.exists():
                shutil.rmtree(d)
            shutil.copytree(base, d)
            cut, removed = remove_parts(source, VARIANTS[v])
            if v != "full" and removed == 0:
                print(f"{f.stem}: {v}: nothing to leave out", file=sys.stderr)
                continue
            (d / "ugraph.cu").write_text(cut)
            jobs.append((f, v, d, removed))

    def build(job):
        r = subprocess.run(build_command(job[2], args.target, args.emulate), capture_output=True, text=True)
        return job, r

    failed = 0
    built = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for job, r in pool.map(build, jobs):
            if r.returncode != 0:
                failed += 1
                print(f"{job[0].stem}: {job[1]}: build failed:\n{r.stderr[-3000:]}", file=sys.stderr)
            else:
                built.append(job)

    results = {}
    for f, v, d, removed in ([] if args.build_only else built):
        manifest = json.loads((d / "manifest.json").read_text())
        ins, outs = write_inputs(f, manifest, d, args.seed)
        warmup, repeats = (0, 1) if args.emulate else (args.warmup, args.repeats)
        try:
            r = subprocess.run([str(d / "bench"), "--warmup", str(warmup), "--repeats", str(repeats), *ins, "--",
                                *outs], capture_output=True, text=True, timeout=args.run_timeout)
        except subprocess.TimeoutExpired as e:  # a variant that hangs must not take the lease with it
            r = subprocess.CompletedProcess(e.cmd, 124, "", f"timed out after {args.run_timeout:g} s")
        line = {"name": f.stem, "variant": v, "statements_removed": removed, "target": args.target,
                "emulated": args.emulate, "codegen_args": args.codegen_args}
        try:
            line["result"] = json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            line["result"] = (r.stdout + r.stderr).strip()[-500:]
        if r.returncode != 0:
            failed += 1
            print(f"{f.stem}: {v}: exit {r.returncode}: {line['result']}", file=sys.stderr)
        results[(f.stem, v)] = line
        if args.json:
            with args.json.open("a") as out:
                out.write(json.dumps(line) + "\n")

    if args.build_only:
        print(f"loop_anatomy: built {len(built)} of {len(jobs)} variants in {work}")
        return 1 if failed else 0

    tables = []
    for f in args.files:
        rows = [(v, results[(f.stem, v)]) for v in variants if (f.stem, v) in results]
        full = results.get((f.stem, "full"), {}).get("result")
        full_us = full.get("median_us") if isinstance(full, dict) else None
        t = [f"**{f.stem}** ({args.target}{', emulated: times mean nothing' if args.emulate else ''}"
             f"{', ' + args.codegen_args if args.codegen_args else ''})", "",
             "| variant | statements left out | median (us) | saved against full (us) |", "|---|---|---|---|"]
        for v, line in rows:
            res = line["result"]
            us = res.get("median_us") if isinstance(res, dict) else None
            saved = f"{full_us - us:.2f}" if us is not None and full_us is not None and v != "full" else ""
            t.append(f"| {v} | {line['statements_removed']} | {us:.2f} | {saved} |" if us is not None
                     else f"| {v} | {line['statements_removed']} | failed | |")
        tables.append("\n".join(t))
    text = "\n\n".join(tables) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    print(f"loop_anatomy: {failed} of {len(jobs)} variants failed to build or run", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
