#!/usr/bin/env python3
"""Which cost-model term is off (issue 7): reads the --json files of `bench/paper/run.py --measure K`
(the GPU session's calibrate step) and ranks each timed set again with the pieces, issue and shared
terms of every graph-defined kernel scaled by factors a, b and c, from the breakdowns that
`mugraph check FILE --target TARGET` prints. A kernel costs launch + max(throughput terms) + issue +
barrier + pipeline (docs/cost_model.md), so scaling a term shows what a changed constant would do
without rebuilding: a = 0.8 is pieces_per_us × 1.25.

    bench/fit_cost_model_terms.py docs/gpu_runs/2026-11-28-h200-a/calibration_runs.json \\
        docs/gpu_runs/2026-11-27-h200-a/calibration_runs.json --max-gap 0.01

prints, for each (a, b, c) on its grid whose every set's pick is within --max-gap of that set's
fastest, the smallest and each set's Spearman coefficient, best first; the first line is the model
at hand (1, 1, 1). Sets of fewer than --min-points checked candidates are left out."""
import argparse
import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from search_common import checkout_path, kernel_breakdowns, spearman  # noqa: E402

THROUGHPUT = ("dram", "l2", "sm_load", "shared", "tensor", "fma", "pieces")


def estimate(kernels, a, b, c):
    total = 0.0
    for kind, kernel_total, t in kernels:
        if kind != "graph-defined":  # cuBLAS and generated element-wise kernels have no such terms
            total += kernel_total
            continue
        scaled = dict(t, pieces=t["pieces"] * a, shared=t["shared"] * c)
        total += t["launch"] + max(scaled[k] for k in THROUGHPUT) + t["issue"] * b + t["barrier"] + t["pipeline"]
    return total


def timed_sets(files, target, min_points):
    sets = {}
    for f in files:
        doc = json.loads(Path(f).read_text())
        for row in doc["rows"]:
            points = [(kernel_breakdowns(checkout_path(c["path"]), target), c["median_us"])
                      for c in row.get("candidates") or [] if c.get("ok") and c.get("median_us")]
            if len(points) >= min_points:
                sets[f"{row['name']} ({doc.get('date', Path(f).parent.name)})"] = points
    return sets


def score(sets, a, b, c):
    """{set: (Spearman, the model's pick's gap to the fastest)} under the scaled terms."""
    out = {}
    for name, points in sets.items():
        est = [estimate(k, a, b, c) for k, _ in points]
        measured = [m for _, m in points]
        pick = measured[min(range(len(points)), key=est.__getitem__)]
        out[name] = (spearman(est, measured), pick / min(measured) - 1)
    return out


def grid(spec):
    lo, hi, step = (float(x) for x in spec.split(":"))
    n = int(round((hi - lo) / step))
    return [round(lo + i * step, 6) for i in range(n + 1)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="run.py --json files with timed candidates")
    ap.add_argument("--target", default="h200")
    ap.add_argument("--pieces", default="0.5:1:0.05", help="grid of a, LO:HI:STEP")
    ap.add_argument("--issue", default="0.75:2:0.25", help="grid of b, LO:HI:STEP")
    ap.add_argument("--shared", default="0.5:1:0.125", help="grid of c, LO:HI:STEP")
    ap.add_argument("--max-gap", type=float, default=0.1, help="largest pick's gap to the fastest to list")
    ap.add_argument("--min-points", type=int, default=20)
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args(argv)
    sets = timed_sets(args.files, args.target, args.min_points)
    if not sets:
        raise SystemExit("no timed set with enough checked candidates")
    names = sorted(sets)
    print("sets:", "; ".join(f"{n}: {len(sets[n])}" for n in names))

    def line(a, b, c, s):
        rhos = [s[n][0] for n in names]
        return (f"a={a:<5g} b={b:<5g} c={c:<5g} min Spearman {min(rhos):.3f}, largest gap "
                f"{max(s[n][1] for n in names) * 100:.1f}% | " + " ".join(f"{r:.2f}" for r in rhos))

    print("model at hand:", line(1, 1, 1, score(sets, 1, 1, 1)))
    rows = []
    for a, b, c in itertools.product(grid(args.pieces), grid(args.issue), grid(args.shared)):
        s = score(sets, a, b, c)
        if max(g for _, g in s.values()) <= args.max_gap + 1e-12:
            rows.append((min(r for r, _ in s.values()), a, b, c, s))
    rows.sort(key=lambda r: -r[0])
    for _, a, b, c, s in rows[:args.top]:
        print(line(a, b, c, s))
    if not rows:
        print(f"no point of the grid keeps every pick within {args.max_gap:.0%} of the fastest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
