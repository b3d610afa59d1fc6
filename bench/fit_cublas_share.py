#!/usr/bin/env python3
"""What share of the HBM bandwidth cuBLAS reaches on the benchmarks' matmuls (issue 7): reads the
--json files of `bench/paper/run.py` (the GPU session's paper and calibrate steps) and, for every
timed μGraph with a pre-defined matmul, takes from its measured time what the model says its other
kernels and every launch cost; what is left is the matmuls' time, and their DRAM term over it is
the share of peak bandwidth they reached. The model's other terms come from
`mugraph check FILE --target TARGET`, as bench/fit_cost_model_terms.py reads them.

    bench/fit_cublas_share.py --at 2701e17 docs/gpu_runs/2026-11-28-h200-a/paper.json \
        --rank docs/gpu_runs/*/calibration_runs.json

prints one line per timed μGraph (its shapes, measured µs, the other kernels' estimate, the share)
and the median share over them, which is GpuSpec::cublas_dram_share when the model is refitted.
Then it ranks every timed set of the --rank files again with the matmuls at the peak and at the
fitted share: each set's Spearman coefficient and the model's pick's gap to its fastest. A
file whose μGraph is no longer the one timed (its structure differs from the recorded one) is
skipped and said so. The share is a fit to whole-μGraph timings, not a profile of cuBLAS: the
other kernels' estimates carry their own error into it."""
import argparse
import functools
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from search_common import checkout_path, describe_ugraph, kernel_breakdowns, kernel_graph, spearman  # noqa: E402


AT = None  # --at: the revision whose μGraph files the timings were of
COPIES = None  # where the files read from AT are written for `mugraph check`


def in_checkout(path):
    """The path relative to this checkout where it lies in it, else as it is."""
    return path.relative_to(ROOT) if path.is_absolute() and ROOT in path.parents else path


def ugraph_file(recorded):
    """(a path `mugraph check` can read, its JSON) for a μGraph a run.py file recorded, from this
    checkout or, with --at REV, from that revision; None where there is no such file."""
    path = checkout_path(recorded)
    if AT is None:
        return (path, json.loads(path.read_text(encoding="utf-8"))) if path.exists() else None
    rel = in_checkout(path)
    shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{AT}:{rel}"], capture_output=True, text=True)
    if shown.returncode != 0:
        return None
    copy = Path(COPIES) / (str(rel).replace("/", "_"))
    copy.write_text(shown.stdout, encoding="utf-8")
    return copy, json.loads(shown.stdout)


def matmul_shapes(doc):
    """'MxKxN' of each pre-defined matmul of a μGraph file."""
    g = kernel_graph(doc)
    tensors = g.get("tensors", [])
    shapes = []
    for op in g.get("ops", []):
        if op.get("op") == "matmul":
            a, b = (tensors[t]["shape"] for t in op["inputs"][:2])
            shapes.append(f"{a[-2]}x{a[-1]}x{b[-1]}")
    return shapes


@functools.lru_cache(maxsize=None)
def breakdown(path, target):
    """kernel_breakdowns, once per file: the fitted files are often among the ranked ones."""
    return kernel_breakdowns(path, target)


def timed_candidates(files, target):
    """(the run.py file, its run, row name, recorded file's name in this checkout, measured µs, its μGraph JSON, its
    breakdown) for each checked and timed candidate of the run.py --json files whose μGraph is
    still the one timed; the others are said on stderr."""
    for f in files:
        doc = json.loads(Path(f).read_text(encoding="utf-8"))
        run = Path(f).parent.name
        for row in doc.get("rows", []):
            for c in row.get("candidates") or []:
                if not c.get("ok") or not c.get("median_us"):
                    continue
                found = ugraph_file(c["path"])
                if found is None:
                    print(f"skipped {c['path']}: not in this checkout", file=sys.stderr)
                    continue
                path, ugraph = found
                name = in_checkout(checkout_path(c["path"]))
                if c.get("structure") and describe_ugraph(ugraph) != c["structure"]:
                    print(f"skipped {name} ({run}): no longer the μGraph timed", file=sys.stderr)
                    continue
                yield f, run, row["name"], name, c["median_us"], ugraph, breakdown(path, target)


def points(files, target):
    """(label, measured µs, other kernels' µs, matmul launches µs, matmul DRAM µs) per timed μGraph."""
    seen = set()
    out = []
    for _, run, row_name, name, measured, ugraph, kernels in timed_candidates(files, target):
        matmuls = [k for k in kernels if k[0] == "matmul"]
        key = (run, str(name), measured)
        if not matmuls or key in seen:  # the paper step and calibrate can time the same file in one run
            continue
        seen.add(key)
        other = sum(total for kind, total, _ in kernels if kind != "matmul")
        launches = sum(t["launch"] for _, _, t in matmuls)
        dram = sum(t["dram"] * t["share"] for _, _, t in matmuls)  # at the peak
        label = f"{run} {row_name} {name} ({', '.join(matmul_shapes(ugraph))})"
        out.append((label, measured, other, launches, dram))
    return out


def estimate_at(kernels, share):
    """The μGraph's estimate with its matmuls' DRAM term at `share` of the peak instead of the
    share the model took (a pre-defined kernel costs launch + max(dram, tensor, fma))."""
    total = 0.0
    for kind, kernel_total, t in kernels:
        if kind != "matmul":
            total += kernel_total
            continue
        dram = t["dram"] * t["share"] / share
        total += t["launch"] + max(dram, t["tensor"], t["fma"])
    return total


def set_scores(files, target, shares, min_points):
    """Each timed set (a row of a file) of at least min_points candidates: its name, size, matmul
    candidates, and (Spearman, the model's pick's gap to the fastest) at each share."""
    sets = {}  # by file and row: a run's paper.json and calibration_runs.json may share row names
    for f, run, row_name, _, measured, _, kernels in timed_candidates(files, target):
        sets.setdefault((f, f"{row_name} ({run})"), []).append((kernels, measured))
    out = []
    for (_, name), timed in sets.items():
        if len(timed) < min_points:
            continue
        measured = [m for _, m in timed]
        with_matmul = sum(any(k[0] == "matmul" for k in kernels) for kernels, _ in timed)
        scores = []
        for share in shares:
            est = [estimate_at(k, share) for k, _ in timed]
            pick = measured[min(range(len(timed)), key=est.__getitem__)]
            scores.append((spearman(est, measured), pick / min(measured) - 1))
        out.append((name, len(timed), with_matmul, scores))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="run.py --json files with timed candidates")
    ap.add_argument("--target", default="h200")
    ap.add_argument("--rank", nargs="+", metavar="FILE",
                    help="run.py --json files whose timed sets to rank again (default: the files fitted)")
    ap.add_argument("--min-points", type=int, default=20, help="smallest timed set to rank again")
    ap.add_argument("--at", metavar="REV",
                    help="read the timed μGraph files as they were at this git revision (saved searches are "
                         "redone from time to time; the model is still this checkout's binary)")
    args = ap.parse_args(argv)
    global AT, COPIES
    AT = args.at
    with tempfile.TemporaryDirectory(prefix="fit_cublas_") as COPIES:
        return fit(args)


def fit(args):
    rows = points(args.files, args.target)
    if not rows:
        raise SystemExit("no timed μGraph with a pre-defined matmul")
    shares = []
    print("| timed μGraph | measured µs | other kernels µs | matmul launches µs | matmul DRAM at peak µs | share |")
    print("|---|---|---|---|---|---|")
    for label, measured, other, launches, dram in rows:
        left = measured - other - launches
        share = dram / left if left > 0 else None
        if share is not None:
            shares.append(share)
        print(f"| {label} | {measured:.2f} | {other:.2f} | {launches:.2f} | {dram:.2f} | "
              f"{'—' if share is None else f'{share:.3f}'} |")
    if not shares:
        raise SystemExit("every point's other kernels take longer than it did")
    fitted = statistics.median(shares)
    print(f"\n{len(shares)} points: median share {fitted:.3f} "
          f"(least {min(shares):.3f}, most {max(shares):.3f})")
    sets = set_scores(args.rank or args.files, args.target, (1.0, fitted), args.min_points)
    if sets:
        print(f"\nEach timed set of {args.min_points} or more ranked again, cuBLAS at peak → at {fitted:.2f} of it:\n")
        print("| timed set | candidates (with a matmul) | Spearman | model's pick's gap to the fastest |")
        print("|---|---|---|---|")
        for name, n, with_matmul, ((r0, g0), (r1, g1)) in sets:
            rho = " → ".join("—" if r is None else f"{r:.3f}" for r in (r0, r1))  # None: a single point
            print(f"| {name} | {n} ({with_matmul}) | {rho} | {g0:.1%} → {g1:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
