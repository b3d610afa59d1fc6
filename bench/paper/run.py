#!/usr/bin/env python3
"""The paper's evaluation (its Figure 7) end to end: for each benchmark of bench/paper/benchmarks.py,
search (or reuse the saved search), then on a GPU build the generated code of the best few
μGraphs by the cost model, check them against PyTorch, time them next to PyTorch's variants and
keep the fastest (measured selection); write a Markdown table and a bar chart normalised to
mugraph.

    python3 bench/paper/run.py                      # paper shapes; reuse bench/paper/results/ where saved
    python3 bench/paper/run.py --search always      # search again (and save) even where saved
    python3 bench/paper/run.py --small              # small shapes (CI): search in a temporary directory
    python3 bench/paper/run.py --benchmarks gqa,rmsnorm_bs8 --markdown out.md --json out.json --chart out.png
    python3 bench/paper/run.py --from-json out.json --markdown out.md --chart out.png   # render saved results

Without a GPU (or PyTorch, or --no-gpu) it only searches, and reports each search's times and the
structure of each best μGraph.

On a GPU, every variant is timed alike: CUDA events around each call, warm-up calls first, the
median of many calls, and the inputs rotated over enough copies (at least twice the L2 cache) that
no call finds them in L2. mugraph's time comes from `mugraph bench`, whose harness times the
generated code the same way; its outputs (--out) are checked here against the program computed by
PyTorch in f32 on the same f16 inputs (largest error ≤ 1e-2 of the largest output), as is every
baseline's. mugraph's time is that of the fastest of its best --measure candidates (the saved
search's top/NN.json, in the model's order) that passes the check; each one's predicted and
measured time, and their rank correlation, are reported too. The baselines, per benchmark:
PyTorch eager (library RMSNorm and softmax), the same under torch.compile (--compile-mode, default max-autotune-no-cudagraphs), and for the attention
benchmarks scaled_dot_product_attention; each also replayed as a CUDA graph (one graph per input
copy), as the paper does where it helps.

Exit status: 0, or 1 when a search found nothing or a check failed, 130 when interrupted.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import benchmarks as bm  # noqa: E402
import search_common as sc  # noqa: E402

DEFAULT_RESULTS = HERE / "results"
TOLERANCE = 1e-2
# Candidates per `mugraph bench` call: built together and timed in one harness process (the GPU's
# context and the inputs' copies once per batch), few enough that a run cut at its deadline keeps
# most of what it measured.
BATCH = 10


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mugraph", default=os.environ.get("MUGRAPH_BIN"),
                    help="the mugraph binary (default: $MUGRAPH_BIN, else build/bin/mugraph)")
    ap.add_argument("--benchmarks", help="comma-separated benchmark keys or configuration names "
                    "(default: all: " + ", ".join(n for _, _, n in bm.configurations()) + ")")
    ap.add_argument("--small", action="store_true", help="small shapes (CI); searches go to a temporary directory "
                    "unless --results is given")
    ap.add_argument("--results", help="where searches are saved and reused, one DIR/<name>/ per configuration "
                    "(default: bench/paper/results; with --small, a temporary directory)")
    ap.add_argument("--search", choices=["auto", "always", "never"], default="auto",
                    help="auto: search where no saved result is; always: search again; never: only saved results")
    ap.add_argument("--time-limit", type=float, default=60.0, help="per-search time limit in seconds (default 60)")
    ap.add_argument("--threads", type=int, help="search threads (default: the CLI's, all cores)")
    ap.add_argument("--top", type=int, help="verified candidates each search keeps (default: the CLI's, 8); "
                    "verification at the paper's shapes takes minutes per candidate for attention at bs 8")
    ap.add_argument("--cost-target", default="h200", help="the cost model's GPU for the search (default h200)")
    ap.add_argument("--cost-bound", choices=["bytes", "model", "both"], default="both",
                    help="the search's cost bound (docs/search.md); both (the default): the fast bytes-bound search "
                         "to its end, then the model-bound one until --time-limit, which finds what the bytes bound "
                         "cuts (GQA's split of the keys, QKNorm's two kernels)")
    ap.add_argument("--bound-ratio", type=float,
                    help="the search's --bound-ratio (default: the CLI's, 2); 0 for calibration sets, which rank "
                         "every verified candidate however far behind the best (docs/search.md, \"The ratio bound\")")
    ap.add_argument("--target", default="sm_90a", help="code-generation target (default sm_90a)")
    ap.add_argument("--measure", type=int, default=4,
                    help="on a GPU, time this many of the saved search's best candidates by the cost model and "
                         "keep the fastest that checks (measured selection; 1: the model's choice only; default 4)")
    ap.add_argument("--no-gpu", action="store_true", help="search only, even where a GPU is present")
    ap.add_argument("--emulate", action="store_true",
                    help="without a GPU, check the whole pipeline on the CPU: mugraph's generated code under the "
                         "host emulation, PyTorch on the CPU (one timed call each; the times mean nothing)")
    ap.add_argument("--compile-mode", default="max-autotune-no-cudagraphs",
                    help="torch.compile's mode for the compiled baseline ('' for none)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--markdown", help="write the tables to this file")
    ap.add_argument("--json", help="write everything measured to this file")
    ap.add_argument("--chart", help="write the Figure 7-style bar chart (PNG; needs matplotlib) to this file")
    ap.add_argument("--from-json", help="render --markdown/--chart from a file written by --json; runs nothing")
    a = ap.parse_args(argv)
    if a.emulate:
        a.warmup, a.repeats = 0, 1
    if (a.time_limit <= 0 or (a.threads is not None and a.threads < 1) or a.warmup < 0 or a.repeats < 1
            or a.measure < 1):
        ap.error("--time-limit, --threads, --repeats and --measure must be positive, --warmup not negative")
    try:
        a.configs = bm.configurations(None if not a.benchmarks else [k.strip() for k in a.benchmarks.split(",") if k.strip()])
    except ValueError as e:
        ap.error(str(e))
    return a


# --------------------------------------------------------------------------------------------------
# Searching


def saved_search(dest):
    """The saved report and best μGraph of a configuration, or None when none is saved."""
    try:
        report = json.loads((dest / "report.json").read_text(encoding="utf-8"))
        best = json.loads((dest / "best.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if report.get("format") != "mugraph-search-report" or report.get("best") is None:
        return None
    return report, best


def search_one(args, binary, program, dest, workdir):
    """Searches one program and saves report.json and best.json (when found) into dest. Returns
    (report, best or None, error or None)."""
    out = workdir / dest.name
    cmd = sc.search_command(binary, program, out, threads=args.threads, time_limit=args.time_limit, top=args.top,
                            extra=["--target", args.cost_target, "--cost-bound", args.cost_bound] +
                            ([] if args.bound_ratio is None else ["--bound-ratio", str(args.bound_ratio)]))
    # Verification is outside the time limit and long at the paper's shapes (QKNorm at bs 8: tens
    # of minutes on two cores), so the guard against a hung search allows it three hours.
    run = sc.run_search(cmd, out, time_limit=args.time_limit, verify_allowance=3 * 3600)  # raises sc.Interrupted
    if not run.ok:
        return None, None, run.error
    sc.save_run(run, dest)
    return run.report, run.best, None if run.best is not None else "the search found no μGraph"


def search_row(name, bench, bs, program, report, best, reused, error):
    row = {"name": name, "benchmark": bench.title, "key": bench.key, "bs": bs, "program": str(program),
           "reused": reused, "error": error}
    if report is not None:
        row.update({"search_seconds": report.get("search_seconds"), "verify_seconds": report.get("verify_seconds"),
                    "stop_reason": report.get("stop_reason"), "states": report.get("states_explored"),
                    "options": report.get("options")})
    if best is not None:
        row.update({"structure": sc.describe_ugraph(best), "kernels": report["best"].get("kernels"),
                    "device_bytes": report["best"].get("device_bytes"),
                    "estimated_us": report["best"].get("estimated_us")})
    return row


def saved_candidates(dest, report, limit):
    """The saved search's best `limit` verified candidates in the model's order, each with its rank,
    path, estimate and structure: top/NN.json beside report.json, whose `top` lists their estimates
    in the same order; best.json alone where no top/ was saved."""
    top = report.get("top") or []
    found = []
    for i in range(min(limit, len(top))):
        path = dest / "top" / f"{i:02d}.json"
        if not path.is_file():
            break
        found.append(path)
    if not found:
        found = [dest / "best.json"]
        top = [report.get("best") or {}]
    return [{"rank": i, "path": str(path), "estimated_us": top[i].get("estimated_us"),
             "structure": sc.describe_ugraph(json.loads(path.read_text(encoding="utf-8")))}
            for i, path in enumerate(found)]


# --------------------------------------------------------------------------------------------------
# Timing on a GPU


def gpu_unavailable_reason(args):
    if args.no_gpu:
        return "--no-gpu"
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not args.emulate and not torch.cuda.is_available():
        return "no GPU (torch.cuda.is_available() is False)"
    return None


def gpu_environment(torch, emulate):
    if emulate:
        return {"gpu": "host emulation", "sms": 0, "l2_bytes": 0,
                "torch": torch.__version__, "cuda": None, "python": platform.python_version(), "emulated": True}
    props = torch.cuda.get_device_properties(0)
    return {"gpu": props.name, "sms": props.multi_processor_count,
            "l2_bytes": getattr(props, "L2_cache_size", 50 << 20), "torch": torch.__version__,
            "cuda": torch.version.cuda, "python": platform.python_version()}


def relative_error(got, want):
    scale = want.abs().max().item()
    err = (got.float() - want).abs().max().item()
    finite = bool(got.float().isfinite().all().item())
    return (err / scale if scale > 0 else err), finite


def time_torch(torch, fn, copies, warmup, repeats, graph):
    """Median and min microseconds of fn over the rotated input copies; with graph, each copy's call
    is captured once as a CUDA graph and replayed."""
    from codegen_vs_torch import time_calls, time_graphs

    if copies[0][0].device.type == "cpu":  # --emulate: one untimed and `repeats` timed calls
        fn(*copies[0])
        us = []
        for i in range(repeats):
            t0 = time.perf_counter()
            fn(*copies[i % len(copies)])
            us.append((time.perf_counter() - t0) * 1e6)
        return sorted(us)[len(us) // 2], min(us)
    if not graph:
        return time_calls(torch, lambda a: fn(*a), copies, warmup, repeats)
    return time_graphs(torch, fn, copies, warmup, repeats)


def measure_one(args, torch, np, binary, row, rng, tmp, l2_bytes):
    """Checks and times mugraph and the baselines on one configuration; fills row["variants"]."""
    bench = bm.BY_KEY[row["key"]]
    shapes = program_inputs(binary, pathlib.Path(row["program"]))
    host = {name: (bm.INPUT_STD * rng.standard_normal(shape)).astype(np.float16) for name, shape in shapes}
    device = "cpu" if args.emulate else "cuda"
    base = [torch.from_numpy(host[name]).to(device) for name, _ in shapes]
    want = bm.reference(bench.key, [t.float() for t in base])
    in_bytes = sum(a.nbytes for a in host.values())
    copies_n = 1 if args.emulate else max(1, -(-2 * l2_bytes // in_bytes))
    row.update({"input_bytes": in_bytes, "output_bytes": want.numel() * 2, "input_copies": copies_n, "variants": []})

    # mugraph: each candidate's own harness times it, on the same inputs; its outputs come back
    # for the check against PyTorch. The fastest that checks is mugraph's time.
    d = pathlib.Path(tmp) / row["name"]
    d.mkdir(parents=True, exist_ok=True)
    input_args = []
    for name, a in host.items():
        np.save(d / f"{name}.npy", a)
        input_args += ["--input", f"{name}={d / f'{name}.npy'}"]
    # In batches (mugraph bench with several files): each batch's candidates are built at once and
    # timed in one harness process; a batch's results come when it ends, so an interrupted run
    # keeps the batches done.
    cands = row["candidates"]
    for first in range(0, len(cands), BATCH):
        batch = cands[first:first + BATCH]
        out = d / f"out{first:03d}"
        r = subprocess.run(bench_command(args, binary, *[c["path"] for c in batch]) + input_args + ["--out", str(out)],
                           capture_output=True, text=True)
        by_file = {}
        for line in r.stdout.splitlines():
            if line.startswith("{"):
                m = json.loads(line)
                by_file.setdefault(m.get("file"), []).append(m)
        for i, c in enumerate(batch):
            ms = by_file.get(str(c["path"]))
            m = ms.pop(0) if ms else None
            if m is None or "error" in m:
                why = m["error"] if m else (r.stderr.strip() or r.stdout.strip())[-2000:]
                c["error"] = f"mugraph bench failed (exit {r.returncode}): {why}"
                continue
            # One file's outputs go to --out itself, several files' to --out/N.
            got = torch.from_numpy(np.load(next((out / str(i) if len(batch) > 1 else out).glob("*.npy")))).to(device)
            rel, finite = relative_error(got, want)
            c.update({"median_us": m["median_us"], "min_us": m["min_us"], "ok": finite and rel <= TOLERANCE and m["ok"],
                      "rel_error": rel, "checked_against_interpreter": m["ok"], "input_copies": m["input_copies"]})
            if "graph_median_us" in m:  # the same runs replayed from CUDA graphs by the harness
                c.update({"graph_median_us": m["graph_median_us"], "graph_min_us": m["graph_min_us"]})
    row["variants"].append(selected_variant(row["candidates"], args.emulate))
    if not args.emulate:
        timed = [c for c in row["candidates"] if c.get("ok") and c.get("estimated_us") is not None]
        row["spearman"] = sc.spearman([c["estimated_us"] for c in timed], [c["median_us"] for c in timed])

    copies = [base] + [[t.clone() for t in base] for _ in range(copies_n - 1)]
    with torch.no_grad():
        for vname, fn, prepare in bm.torch_variants(bench):
            vcopies = [prepare(c) if prepare else c for c in copies]
            impls = [(vname, fn)]
            if args.compile_mode and not args.emulate:
                torch._dynamo.reset()
                impls.append((f"{vname} + torch.compile", torch.compile(fn, mode=args.compile_mode)))
            for iname, impl in impls:
                for graph in ((False,) if args.emulate else (False, True)):
                    label = iname + (" + CUDA graph" if graph else "")
                    try:
                        rel, finite = relative_error(impl(*vcopies[0]), want)
                        med, mn = time_torch(torch, impl, vcopies, args.warmup, args.repeats, graph)
                    except Exception as e:  # a baseline that cannot run is reported, not fatal
                        row["variants"].append({"name": label, "error": f"{type(e).__name__}: {e}"[:500]})
                        continue
                    row["variants"].append({"name": label, "median_us": med, "min_us": mn,
                                            "ok": finite and rel <= TOLERANCE, "rel_error": rel})


def bench_command(args, binary, *paths, warmup=None, repeats=None):
    return [str(binary), "bench", *[str(p) for p in paths], "--target", args.target, "--json",
            "--warmup", str(args.warmup if warmup is None else warmup),
            "--repeats", str(args.repeats if repeats is None else repeats)] + (["--emulate"] if args.emulate else [])


def selected_variant(candidates, emulated):
    """mugraph's entry in the table: the fastest candidate that checked (with --emulate, whose times
    mean nothing, the model's choice), else the model's choice with what went wrong."""
    ok = [c for c in candidates if c.get("ok")]
    pick = (ok[0] if emulated else min(ok, key=lambda c: c["median_us"])) if ok else candidates[0]
    if "error" in pick:
        return {"name": "mugraph", "error": pick["error"], "rank": pick["rank"]}
    keys = ("median_us", "min_us", "ok", "rel_error", "checked_against_interpreter", "input_copies", "rank",
            "graph_median_us", "graph_min_us")
    return {"name": "mugraph", **{k: pick[k] for k in keys if k in pick}}


def program_inputs(binary, program):
    """(name, shape) of each input of a program, in order, as the parser reads it (mugraph export)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "graph.json"
        r = subprocess.run([str(binary), "export", str(program), "-o", str(out)], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"mugraph export {program} failed: {r.stderr.strip()}")
        graph = json.loads(out.read_text(encoding="utf-8"))["graph"]
    tensors = graph["tensors"]
    return [(tensors[op["outputs"][0]]["name"], tensors[op["outputs"][0]]["shape"])
            for op in graph["ops"] if op["op"] == "input"]


# --------------------------------------------------------------------------------------------------
# Reporting


def best_baseline(row):
    ok = [v for v in row.get("variants", []) if v["name"] != "mugraph" and v.get("ok")]
    return min(ok, key=lambda v: v["median_us"]) if ok else None


def mugraph_variant(row):
    return next((v for v in row.get("variants", []) if v["name"] == "mugraph"), None)


def mugraph_us(m):
    """mugraph's time for the comparison: its runs launched, or replayed from CUDA graphs where
    that is faster, as the baselines' fastest variant may be one with CUDA graphs."""
    return min(m["median_us"], m.get("graph_median_us", m["median_us"]))


def markdown(doc):
    lines = [f"- Command: `{doc['command']}`", f"- Date: {doc['date']}",
             f"- Search machine: os.cpu_count() = {doc['cpu_count']}, CPU \"{doc['cpu_model']}\"",
             f"- Shapes: {'small (CI)' if doc['small'] else 'the paper’s'}"]
    if doc.get("gpu", {}).get("emulated"):
        lines.append(f"- No GPU (--emulate): mugraph's generated code ran under the host emulation and PyTorch "
                     f"{doc['gpu']['torch']} on the CPU, to check them; the times mean nothing")
    elif doc.get("gpu"):
        g = doc["gpu"]
        lines.append(f"- GPU: {g['gpu']} ({g['sms']} SMs, L2 {g['l2_bytes'] >> 20} MiB), PyTorch {g['torch']}, "
                     f"CUDA {g['cuda']}, Python {g['python']}; median of {doc['repeats']} calls after "
                     f"{doc['warmup']} warm-up calls, CUDA events, inputs rotated")
    else:
        lines.append(f"- GPU timings: none ({doc['no_gpu_reason']})")
    lines += ["", "Searches (`search s`: generation and pruning; `verify s`: the finite-field verification of "
              "the candidates; `reused`: read from a saved search):", ""]
    rows = []
    for r in doc["rows"]:
        rows.append([r["benchmark"], r["bs"], sc.fmt_seconds(r.get("search_seconds")),
                     sc.fmt_seconds(r.get("verify_seconds")), r.get("stop_reason") or "—",
                     r.get("states") if r.get("states") is not None else "—",
                     "yes" if r.get("reused") else "no",
                     r.get("structure") or f"nothing found ({r.get('error')})"])
    lines += sc.markdown_table(["benchmark", "bs", "search s", "verify s", "stop", "states", "reused",
                                "structure of the best μGraph"], rows)
    if doc.get("gpu"):
        names = []
        for r in doc["rows"]:
            for v in r.get("variants", []):
                if v["name"] != "mugraph" and v["name"] not in names:
                    names.append(v["name"])
        lines += ["", "Times in µs (median; `FAILED`: the output differs from the program by more than "
                  f"{TOLERANCE:g} of its largest value; `error`: it did not run):", ""]
        header = ["benchmark", "bs", "mugraph", "mugraph + CUDA graph"] + names + ["best baseline", "speedup",
                                                                                 "paper (H100)"]
        rows = []
        for r in doc["rows"]:
            by = {v["name"]: v for v in r.get("variants", [])}

            def cell(v):
                if v is None:
                    return "—"
                if "error" in v:
                    return "error"
                return f"{v['median_us']:.1f}" + ("" if v["ok"] else " FAILED")

            m, b = mugraph_variant(r), best_baseline(r)
            speedup = (f"{b['median_us'] / mugraph_us(m):.2f}×" if m and b and "error" not in m and m["ok"] else "—")
            graph = (f"{m['graph_median_us']:.1f}" if m and "graph_median_us" in m else "—")
            rows.append([r["benchmark"], r["bs"], cell(m), graph] + [cell(by.get(n)) for n in names]
                        + [b["name"] if b else "—", speedup, bm.BY_KEY[r["key"]].paper_h100])
        lines += sc.markdown_table(header, rows)
        lines += selection_table(doc)
        errors = [(r["name"], v["name"], v["error"]) for r in doc["rows"] for v in r.get("variants", []) if "error" in v]
        errors += [(r["name"], f"mugraph candidate {c['rank']}", c["error"]) for r in doc["rows"]
                   for c in r.get("candidates", []) if "error" in c and len(r["candidates"]) > 1]
        if errors:
            lines += ["", "Errors:"] + [f"- {n}, {v}: {e}" for n, v, e in errors]
    return "\n".join(lines) + "\n"


def selection_table(doc):
    """Measured selection, per configuration: the model's choice against the fastest candidate that
    checked, and the rank correlation of predicted and measured times (issue 7's calibration)."""
    rows = []
    for r in doc["rows"]:
        cands = [c for c in r.get("candidates", []) if "median_us" in c]
        ok = [c for c in cands if c["ok"]]
        if len(r.get("candidates", [])) < 2 or not ok:
            continue
        fastest = min(ok, key=lambda c: c["median_us"])
        model = ok[0]  # the model's choice, or where it failed its check the next that passed

        def timed(c):
            est = c.get("estimated_us")
            return f"{c['median_us']:.1f}" + ("" if est is None else f" (est. {est:.1f})")

        rho = r.get("spearman")
        rows.append([r["benchmark"], r["bs"], f"{len(r['candidates'])} ({len(ok)})",
                     timed(model) if model["rank"] == 0 else f"FAILED; rank {model['rank']}: {timed(model)}",
                     timed(fastest), fastest["rank"], f"{100 * (model['median_us'] / fastest['median_us'] - 1):.1f}%",
                     "—" if rho is None else f"{rho:.2f}"])
    if not rows:
        return []
    return ["", "Measured selection: the best candidates by the cost model (`est.`: its estimate on the search's "
            "target, µs), each timed alike; mugraph's time above is the fastest that checked:", ""] + \
        sc.markdown_table(["benchmark", "bs", "candidates (checked)", "model's choice µs", "fastest µs",
                           "fastest's model rank", "model's choice slower by", "Spearman"], rows)


def chart(doc, path):
    """Figure 7's form: per configuration, each variant's performance relative to mugraph (mugraph's
    time over the variant's: higher is better, mugraph is 1)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart", file=sys.stderr)
        return False
    rows = [r for r in doc["rows"] if mugraph_variant(r) and "error" not in mugraph_variant(r)]
    if not rows:
        print("no GPU timings: no chart", file=sys.stderr)
        return False
    def drawn(v):  # a variant that ran and computed the program (a failed check is in the table only)
        return "error" not in v and v["ok"]

    names = ["mugraph"]
    for r in rows:
        for v in r["variants"]:
            if v["name"] not in names and drawn(v):
                names.append(v["name"])
    fig, ax = plt.subplots(figsize=(max(8, 1.3 * len(rows)), 4.5))
    width = 0.8 / len(names)
    for i, n in enumerate(names):
        xs, ys = [], []
        for j, r in enumerate(rows):
            v = next((v for v in r["variants"] if v["name"] == n and drawn(v)), None)
            if v is not None:
                xs.append(j + (i - (len(names) - 1) / 2) * width)
                ys.append(mugraph_us(mugraph_variant(r)) / v["median_us"])
        ax.bar(xs, ys, width, label=n)
    for j, r in enumerate(rows):
        b = best_baseline(r)
        if b:
            ax.annotate(f"{b['median_us'] / mugraph_us(mugraph_variant(r)):.2f}×",
                        (j - (len(names) - 1) / 2 * width, 1.0), ha="center",
                        va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
    ax.axhline(1.0, color="black", linewidth=0.6)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{r['benchmark']}\nbs={r['bs']}" for r in rows], fontsize=8)
    ax.set_ylabel("performance relative to mugraph")
    g = doc.get("gpu") or {}
    ax.set_title(f"{g.get('gpu', '')}, {doc['date']} (numbers: mugraph's speedup over the best baseline)", fontsize=9)
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    return True


def write_outputs(args, doc):
    # JSON first: a run stopped at a deadline has seconds to write, and the tables and the chart
    # can be made again from it (--from-json).
    if args.json and not args.from_json:
        pathlib.Path(args.json).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    text = markdown(doc)
    print(text, end="")
    if args.markdown:
        pathlib.Path(args.markdown).write_text(text, encoding="utf-8")
    if args.chart:
        chart(doc, args.chart)


# --------------------------------------------------------------------------------------------------


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv=None):
    args = parse_args(argv)
    # A timeout (bench/gpu_session.sh's deadline) stops the run with SIGTERM: it is handled as
    # Ctrl-C, so that what was measured so far is written.
    signal.signal(signal.SIGTERM, _interrupt)
    if args.from_json:
        write_outputs(args, json.loads(pathlib.Path(args.from_json).read_text(encoding="utf-8")))
        return 0
    binary = sc.find_binary(args.mugraph)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="mugraph-paper-"))
    results = pathlib.Path(args.results) if args.results else (workdir / "results" if args.small else DEFAULT_RESULTS)
    no_gpu = gpu_unavailable_reason(args)
    doc = {"command": " ".join(["python3 bench/paper/run.py"] + (argv if argv is not None else sys.argv[1:])),
           "date": datetime.date.today().isoformat(), "cpu_count": os.cpu_count(), "cpu_model": sc.cpu_model(),
           "small": args.small, "no_gpu_reason": no_gpu, "warmup": args.warmup, "repeats": args.repeats, "rows": []}
    failed = interrupted = False
    started = time.monotonic()
    try:
        # Searches first (CPU), then the GPU work, so that a GPU session spends no time searching
        # in between timings.
        for bench, bs, name in args.configs:
            if args.small:
                program = workdir / "programs" / f"{name}.mg"
                program.parent.mkdir(parents=True, exist_ok=True)
                program.write_text(bench.program(bs, bm.SMALL), encoding="utf-8")
            else:
                program = bm.program_path(name)
            dest = results / name
            saved = saved_search(dest) if args.search != "always" else None
            print(f"[{name}] ", end="", file=sys.stderr, flush=True)
            if saved is not None:
                report, best = saved
                row = search_row(name, bench, bs, program, report, best, True, None)
                print(f"saved search: {row['structure']}", file=sys.stderr)
            elif args.search == "never":
                row = search_row(name, bench, bs, program, None, None, False, f"no saved search in {dest}")
                print(row["error"], file=sys.stderr)
            else:
                try:
                    report, best, error = search_one(args, binary, program, dest, workdir)
                except sc.Interrupted:
                    interrupted = True
                    print("interrupted", file=sys.stderr)
                    break
                row = search_row(name, bench, bs, program, report, best, False, error)
                print(f"{row.get('stop_reason')} after {sc.fmt_seconds(row.get('search_seconds'))} s + "
                      f"{sc.fmt_seconds(row.get('verify_seconds'))} s verification: "
                      f"{row.get('structure') or error}", file=sys.stderr)
            row["best_path"] = str(dest / "best.json") if row.get("structure") else None
            if row["best_path"] is not None:
                row["candidates"] = saved_candidates(dest, report, args.measure)
            failed = failed or row["best_path"] is None
            doc["rows"].append(row)

        if no_gpu is None and not interrupted:
            import numpy as np
            import torch

            doc["gpu"] = gpu_environment(torch, args.emulate)
            rng = np.random.default_rng(args.seed)
            for row in doc["rows"]:
                if row["best_path"] is None:
                    continue
                print(f"[{row['name']}] building and timing {len(row['candidates'])} candidates ...", file=sys.stderr,
                      flush=True)
                measure_one(args, torch, np, binary, row, rng, workdir, doc["gpu"]["l2_bytes"])
                m = mugraph_variant(row)
                failed = failed or m is None or "error" in m or not m["ok"]
        elif no_gpu is not None:
            print(f"GPU timings skipped: {no_gpu}", file=sys.stderr)
    except KeyboardInterrupt:
        interrupted = True
    doc["wall_seconds"] = time.monotonic() - started
    write_outputs(args, doc)
    shutil.rmtree(workdir, ignore_errors=True)
    if interrupted:
        print("interrupted: the tables are partial", file=sys.stderr)
        return 130
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
