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

Targets (issue 7): Spearman >= 0.8 and the model's choice within 10% of the fastest."""
import argparse
import json
import sys
from pathlib import Path


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


def summarize_runs(path):
    """One summary per configuration of a run.py --json file whose candidates were timed."""
    doc = json.loads(Path(path).read_text())
    gpu = doc.get("gpu") or {}
    found = []
    for row in doc.get("rows", []):
        cands = row.get("candidates") or []
        ok = [c for c in cands if c.get("ok") and c.get("estimated_us") is not None and "median_us" in c]
        if len(cands) < 2 or not ok:
            continue
        found.append(summary(row["name"], gpu.get("gpu", "?"), bool(gpu.get("emulated")), len(cands),
                             [(c["estimated_us"], c["median_us"]) for c in ok], row.get("spearman")))
    if not found:
        raise SystemExit(f"{path}: no configuration with two or more timed candidates that checked")
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", help="output directories of mugraph search --measure, or run.py --json files")
    ap.add_argument("--markdown", help="write the table here")
    ap.add_argument("--png", help="write the scatter plot here (needs matplotlib)")
    args = ap.parse_args()
    rows = [r for d in args.dirs for r in (summarize_runs(d) if Path(d).is_file() else [summarize(d)])]
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
