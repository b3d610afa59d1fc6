#!/usr/bin/env python3
"""The cost model against GPU timings (issue 7): reads the report.json of searches run with
`mugraph search --measure K` on a GPU, or the --json file of `bench/paper/run.py --measure K`
(each configuration's saved candidates timed alike, as the GPU session's calibrate step runs it
over bench/paper/results_top100), and prints, per search, the Spearman rank correlation between
predicted and measured times over the candidates that checked, and how far the model's top
choice is from the fastest measured. Optionally writes a Markdown table and a scatter plot (PNG,
needs matplotlib).

    bench/calibrate_cost_model.py OUT/calibrate_rmsnorm_linear OUT/calibrate_gated_mlp \\
        --markdown calibration.md --png calibration.png
    bench/calibrate_cost_model.py OUT/calibration_runs.json --markdown calibration.md
    bench/calibrate_cost_model.py docs/gpu_runs/2026-11-27-h200-a/calibration_runs.json --reestimate h200

--reestimate TARGET ranks the timed candidates of run.py --json files by the cost model of the
mugraph binary at hand ($MUGRAPH_BIN, default build/bin/mugraph; `mugraph check FILE --target
TARGET`) instead of the estimates recorded when they were timed: how a changed model would have
ranked the same measurements.

Targets (issue 7): Spearman >= 0.8 and the model's choice within 10% of the fastest."""
import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from search_common import checkout_path, spearman  # noqa: E402


def current_estimate(path, target):
    """The cost model's estimate (µs) of the μGraph file at `path` (recorded on another machine:
    looked up under this checkout from its bench/ part) by the mugraph binary at hand."""
    p = checkout_path(path)
    binary = os.environ.get("MUGRAPH_BIN", str(ROOT / "build" / "bin" / "mugraph"))
    out = subprocess.run([binary, "check", str(p), "--target", target], capture_output=True, text=True)
    m = re.search(r"cost model on \S+: ([0-9.]+) us", out.stdout)
    if not m:
        raise SystemExit(f"{p}: mugraph check gave no estimate: {out.stderr.strip()}")
    return float(m.group(1))


def summary(name, device, emulated, candidates, points, spearman):
    """One search's row: points are (predicted, measured) of the candidates that checked, in the
    model's order (the first is the model's pick)."""
    fastest = min(measured for _, measured in points)
    pick = points[0][1]
    return {"name": name, "device": device, "emulated": emulated, "candidates": candidates, "checked": len(points),
            "spearman": spearman, "model_pick_us": pick, "fastest_us": fastest, "gap": pick / fastest - 1,
            "points": points}


def summarize(report_dir):
    report = json.loads((Path(report_dir) / "report.json").read_text())
    m = report.get("measured")
    if not m or "candidates" not in m:
        raise SystemExit(f"{report_dir}: no measurements in report.json ({(m or {}).get('error', 'run with --measure')})")
    ok = [c for c in m["candidates"] if c["ok"]]
    if not ok:
        raise SystemExit(f"{report_dir}: no candidate checked")
    return summary(Path(report_dir).name.removeprefix("calibrate_"), m["device"], m["emulated"],
                   len(m["candidates"]), [(c["predicted_us"], c["measured_us"]) for c in ok], m["spearman"])


def summarize_runs(path, reestimate=None):
    """One summary per configuration of a run.py --json file whose candidates were timed; with
    `reestimate` (a target), predicted by the current model instead of the recorded one."""
    doc = json.loads(Path(path).read_text())
    gpu = doc.get("gpu") or {}
    found = []
    for row in doc.get("rows", []):
        cands = row.get("candidates") or []
        ok = [c for c in cands if c.get("ok") and c.get("estimated_us") is not None and "median_us" in c]
        if len(cands) < 2 or not ok:
            continue
        if reestimate:
            points = sorted((current_estimate(c["path"], reestimate), c["median_us"]) for c in ok)
            rho = spearman([p for p, _ in points], [m for _, m in points])
        else:
            points, rho = [(c["estimated_us"], c["median_us"]) for c in ok], row.get("spearman")
        found.append(summary(row["name"], gpu.get("gpu", "?"), bool(gpu.get("emulated")), len(cands), points, rho))
    if not found:
        raise SystemExit(f"{path}: no configuration with two or more timed candidates that checked")
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", help="output directories of mugraph search --measure, or run.py --json files")
    ap.add_argument("--markdown", help="write the table here")
    ap.add_argument("--png", help="write the scatter plot here (needs matplotlib)")
    ap.add_argument("--reestimate", metavar="TARGET",
                    help="rank run.py --json files' candidates by the current binary's model on TARGET")
    args = ap.parse_args()
    rows = [r for d in args.dirs
            for r in (summarize_runs(d, args.reestimate) if Path(d).is_file() else [summarize(d)])]
    lines = ["| search | device | candidates (checked) | Spearman | model's pick | fastest | gap |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        rho = "n/a" if r["spearman"] is None else f"{r['spearman']:.3f}"
        lines.append(f"| {r['name']} | {r['device']}{' (emulated)' if r['emulated'] else ''} | "
                     f"{r['candidates']} ({r['checked']}) | {rho} | {r['model_pick_us']:.2f} us | "
                     f"{r['fastest_us']:.2f} us | {100 * r['gap']:.1f}% |")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    if args.png:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib not installed: no plot", file=sys.stderr)
            return 0
        fig, ax = plt.subplots(figsize=(6, 5))
        for r in rows:
            xs, ys = zip(*r["points"])
            ax.scatter(xs, ys, label=f"{r['name']} (ρ = {r['spearman']:.2f})" if r["spearman"] is not None else r["name"],
                       s=14)
        lo = min(min(p) for r in rows for p in r["points"])
        hi = max(max(p) for r in rows for p in r["points"])
        ax.plot([lo, hi], [lo, hi], color="grey", linewidth=0.8, linestyle="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("predicted (µs, cost model)")
        ax.set_ylabel("measured (µs, median)")
        ax.set_title(f"cost model against {rows[0]['device']}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.png, dpi=150)
    return 0


if __name__ == "__main__":
    sys.exit(main())
