#!/usr/bin/env python3
"""Searches the paper's benchmark programs (DESIGN.md §10) and tabulates what the search found.

For each program (default: examples/rmsnorm_linear.mg, gated_mlp.mg, lora.mg, gqa.mg, qknorm.mg,
ntrans.mg) runs `mugraph search` with the CLI's defaults (or the options given) — so by default
what a user's `mugraph search FILE` does: the `both` cost bound within its 60-s time limit — and all
threads, and prints a Markdown table: search and verification
seconds, why the search stopped, states explored, and the best μGraph's kernels, graph-defined
kernels, device bytes and structure (per graph-defined kernel: grid, for-loop, block ops,
accumulators, concat, thread graphs), and what retiling did (its seconds, and the cost model's best
estimate before and after it: report.json's `retile`, docs/search.md "Retiling").

    python3 bench/search_benchmarks.py                          # six programs, up to a minute each
    python3 bench/search_benchmarks.py --save examples/found    # and keep each best.json/report.json
    python3 bench/search_benchmarks.py --programs gated_mlp,lora --time-limit 120
    python3 bench/search_benchmarks.py --quick                  # 5 s per program
    python3 bench/search_benchmarks.py --programs bench/paper/programs/rmsnorm_bs1.mg --threads 2 \
        --target h200 --cost-bound both --block-cache 0          # without the block-search cache
    python3 bench/search_benchmarks.py --programs bench/paper/programs/qknorm_bs1.mg --time-limit 60 \
        --threads 2 --top 4 --target h200 --cost-bound both      # as bench/paper/run.py searches

--save DIR copies each program's best.json (when one was found) and report.json into
DIR/<program name>/. Per-run outputs otherwise go to a temporary directory (removed at the end
unless --keep or --workdir). Ctrl-C stops the running search and prints the table so far.
"""
import argparse
import os
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import search_common as sc  # noqa: E402

# The search time the guard against a hung process allows for when the CLI's default limit applies.
GUARD_TIME_LIMIT_SECONDS = 600.0
DEFAULT_PROGRAMS = ["rmsnorm_linear", "gated_mlp", "lora", "gqa", "qknorm", "ntrans"]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mugraph", help="the mugraph binary (default: build/bin/mugraph in the source tree)")
    p.add_argument("--programs", action="append", metavar="LIST",
                   help="programs to search, comma separated: names in examples/ (gqa) or paths to .mg files; "
                        "may be repeated (default: " + ",".join(DEFAULT_PROGRAMS) + ")")
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="per-program search time limit (default: the CLI's, 60 s under its default cost "
                        "bound; --quick: 5)")
    p.add_argument("--threads", type=int, default=None, help="worker threads (default: the CLI's, all cores)")
    p.add_argument("--max-kernel-ops", type=int, help="passed to mugraph search (default: the CLI's)")
    p.add_argument("--max-block-ops", type=int, help="passed to mugraph search (default: the CLI's)")
    p.add_argument("--max-graph-kernels", type=int, help="passed to mugraph search (default: the CLI's)")
    p.add_argument("--max-kernel-inputs", type=int, help="passed to mugraph search (default: the CLI's)")
    p.add_argument("--top", type=int, help="passed to mugraph search (default: the CLI's)")
    p.add_argument("--target", help="passed to mugraph search (default: the CLI's)")
    p.add_argument("--cost-bound", help="passed to mugraph search (default: the CLI's)")
    p.add_argument("--retile-seeds", type=int, help="passed to mugraph search (default: the CLI's)")
    p.add_argument("--block-cache", type=float, metavar="MIB",
                   help="passed to mugraph search (default: the CLI's; 0 turns the block-search cache off)")
    p.add_argument("--deterministic", action="store_true", help="pass --deterministic")
    p.add_argument("--no-abstract-pruning", action="store_true", help="pass --no-abstract-pruning (ablation)")
    p.add_argument("--quick", action="store_true", help="smoke run: a 5-s time limit per program")
    p.add_argument("--save", metavar="DIR", help="copy each best.json and report.json into DIR/<program name>/")
    p.add_argument("--workdir", help="directory for the per-run outputs (kept); default: a temporary one")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory of per-run outputs")
    p.add_argument("--json", metavar="FILE", help="also write every run's report and summary to FILE")
    a = p.parse_args(argv)
    if a.time_limit is None and a.quick:
        a.time_limit = 5.0
    if (a.time_limit is not None and a.time_limit <= 0) or (a.threads is not None and a.threads < 1):
        p.error("--time-limit and --threads must be positive")
    names = [x.strip() for group in (a.programs or [",".join(DEFAULT_PROGRAMS)]) for x in group.split(",")]
    a.programs = [x for x in names if x]
    if not a.programs:
        p.error("--programs names no program")
    return a


def extra_flags(args):
    out = []
    for flag, value in (("--target", args.target), ("--cost-bound", args.cost_bound),
                        ("--retile-seeds", args.retile_seeds), ("--block-cache", args.block_cache)):
        if value is not None:
            out += [flag, str(value)]
    return out


def program_name(path):
    return pathlib.Path(path).stem


def retile_cell(rep):
    """Retiling (report.json's `retile`): its seconds, and the model's best estimate before and after."""
    rt = rep.get("retile") or {}
    if not rt.get("seeds"):
        return "—"
    before, after = rt.get("best_before_us"), rt.get("best_after_us")
    n = len(rep.get("parts") or [])
    if n and rep.get("whole_best_estimated_us") is None:
        # Searched in parts only: each part retiled its own; the whole program has no one estimate.
        return f"{sc.fmt_seconds(rt.get('seconds'))} s, in {n} part{'s' if n != 1 else ''}"
    gain = f" ({before / after:.2f}×)" if before and after and after < before else ""
    # An exhausted whole search with its parts searched beside it: the whole program's retiling.
    beside = f", {n} parts beside" if n else ""
    return f"{sc.fmt_seconds(rt.get('seconds'))} s: {before:.2f} → {after:.2f} µs{gain}{beside}"


def row_for(name, run):
    if not run.ok:
        return [name, "—", "—", f"error: {run.error}", "—", "—", "—", "—", "—", "—"]
    rep = run.report
    best = rep.get("best")
    stop = rep.get("stop_reason", "?")
    return [
        name,
        sc.fmt_seconds(rep.get("search_seconds")),
        sc.fmt_seconds(rep.get("verify_seconds")),
        stop,
        str(rep.get("states_explored", "—")),
        retile_cell(rep),
        str(best["kernels"]) if best else "—",
        str(best["graph_defined_kernels"]) if best else "—",
        sc.fmt_bytes(best.get("device_bytes")) if best else "—",
        sc.describe_ugraph(run.best) if run.best else "nothing found",
    ]


def main(argv=None):
    args = parse_args(argv)
    binary = sc.find_binary(args.mugraph)
    programs = [(sc.resolve_program(x), x) for x in args.programs]
    names = [program_name(p) for p, _ in programs]
    if len(set(names)) != len(names):
        sys.exit("error: two programs share a name: " + ", ".join(names))
    if args.workdir:
        base = pathlib.Path(args.workdir)
        base.mkdir(parents=True, exist_ok=True)
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="benchmarks-", dir=base))
    else:
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="mugraph-benchmarks-"))
    save = pathlib.Path(args.save) if args.save else None
    started = time.monotonic()
    runs = []
    interrupted = False
    try:
        for (path, _), name in zip(programs, names):
            out = workdir / name
            cmd = sc.search_command(binary, path, out, threads=args.threads, time_limit=args.time_limit,
                                    max_kernel_ops=args.max_kernel_ops, max_block_ops=args.max_block_ops,
                                    max_graph_kernels=args.max_graph_kernels,
                                    max_kernel_inputs=args.max_kernel_inputs, top=args.top,
                                    deterministic=args.deterministic,
                                    no_abstract_pruning=args.no_abstract_pruning, extra=extra_flags(args))
            print(f"[{name}] ...", end="", file=sys.stderr, flush=True)
            try:
                # Without a limit of ours the CLI's applies (60 s, or none under --cost-bound bytes,
                # which ends in seconds): the guard against a hung process assumes 600 s.
                run = sc.run_search(cmd, out, time_limit=args.time_limit or GUARD_TIME_LIMIT_SECONDS)
            except sc.Interrupted as e:
                run = e.run
                interrupted = True
            runs.append((name, path, run))
            if run.ok:
                print(f" {run.stop_reason} after {sc.fmt_seconds(run.search_seconds)} s; "
                      f"{sc.describe_ugraph(run.best) if run.best else 'nothing found'}", file=sys.stderr, flush=True)
                if save is not None:
                    sc.save_run(run, save / name)
            else:
                print(f" error: {run.error}", file=sys.stderr, flush=True)
            if interrupted:
                break
    except KeyboardInterrupt:
        interrupted = True
    if interrupted:
        print("\ninterrupted; the table below is partial", file=sys.stderr)

    opts = ["--time-limit %g" % args.time_limit] if args.time_limit is not None else []
    for k in ("threads", "max_kernel_ops", "max_block_ops", "max_graph_kernels", "max_kernel_inputs", "top",
              "target", "cost_bound", "retile_seeds", "block_cache"):
        if getattr(args, k) is not None:
            opts.append(f"--{k.replace('_', '-')} {getattr(args, k)}")
    opts += [f for f, on in (("--deterministic", args.deterministic),
                             ("--no-abstract-pruning", args.no_abstract_pruning)) if on]
    effective = next((r.report.get("options") for _, _, r in runs if r.ok), None)
    lines = sc.header_lines("The search on the paper's benchmark programs (DESIGN.md §10)", binary)
    lines.append("- Search options: " + (" ".join(opts) + " (others: the CLI's defaults)" if opts
                                           else "the CLI's defaults"))
    if effective:
        lines.append("- Effective (from report.json): " + ", ".join(
            f"{k} {effective[k]}" for k in ("cost_bound", "time_limit_seconds", "max_kernel_ops", "max_block_ops",
                                            "max_graph_kernels", "max_kernel_inputs", "threads", "abstract_pruning",
                                            "target")
            if k in effective) + f"; block ops: {effective.get('block_ops_convention', '?')}")
    lines.append("")
    header = ["program", "search s", "verify s", "stop reason", "states",
              "retiling: s, the model's best before → after", "kernels", "graph-defined",
              "device bytes", "structure of the best"]
    lines += sc.markdown_table(header, [row_for(name, run) for name, _, run in runs])
    lines += ["", f"Total wall time {time.monotonic() - started:.1f} s."
              + (" Interrupted: the table is partial." if interrupted else "")]
    if save is not None:
        lines.append(f"Saved best.json and report.json under {save}/<program>/.")
    print("\n".join(lines), flush=True)

    doc = {"command": sys.argv, "cpu_count": os.cpu_count(), "cpu_model": sc.cpu_model(),
           "interrupted": interrupted,
           "programs": {name: {"program": str(path), "summary": sc.describe_ugraph(run.best) if run.best else None,
                               **run.as_dict()} for name, path, run in runs}}
    return sc.finish(args, workdir, doc, interrupted, any(not r.ok for _, _, r in runs))


if __name__ == "__main__":
    sys.exit(main())
