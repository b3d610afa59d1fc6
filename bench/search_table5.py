#!/usr/bin/env python3
"""The paper's Table 5 for RMSNorm: search time against the most block ops allowed.

For each N in a range of `--max-block-ops` values (block ops count input iterators, not output
savers, as the paper's implementation does), runs `mugraph search` on the RMSNorm program
(examples/rmsnorm_linear.mg at the paper's shapes by default)

  (a) with all threads (os.cpu_count(), or --threads), R times;
  (b) with one thread, R times;
  (c) without abstract-expression pruning (--no-abstract-pruning), all threads, once;

each under a time limit, and prints a Markdown table of the median search times (report.json's
search_seconds, which excludes verification), the states explored, and whether the best μGraph
found is the paper's Figure 3b.

    python3 bench/search_table5.py                       # N = 5..12, R = 3, 600 s limits: hours
    python3 bench/search_table5.py --quick               # a smoke run: N = 4, 5, one repeat, 5-s limits
    python3 bench/search_table5.py --block-ops 6-8 --repeats 5 --json table5.json

Per-run outputs go to a temporary directory (removed at the end unless --keep or --workdir).
Ctrl-C stops the running search (it writes its report) and prints the table so far.
"""
import argparse
import json
import math
import os
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import search_common as sc  # noqa: E402

CONFIGS = {
    "a": "all threads",
    "b": "1 thread",
    "c": "without abstract-expression pruning",
}


def parse_range(text):
    """"5-12", "5..12", "7" or "5,7,9" → a sorted list of distinct positive integers."""
    out = set()
    try:
        for part in text.split(","):
            part = part.strip()
            sep = ".." if ".." in part else ("-" if "-" in part else None)
            if sep:
                lo, hi = (int(x) for x in part.split(sep, 1))
                if lo > hi:
                    raise ValueError
                out.update(range(lo, hi + 1))
            elif part:
                out.add(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad range {text!r}; expected e.g. 5-12, 5..12 or 5,7,9")
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"bad range {text!r}")
    return sorted(out)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mugraph", help="the mugraph binary (default: build/bin/mugraph in the source tree)")
    p.add_argument("--program", default=str(sc.REPO_ROOT / "examples" / "rmsnorm_linear.mg"),
                   help="the RMSNorm program (default: examples/rmsnorm_linear.mg)")
    p.add_argument("--block-ops", type=parse_range, default=None, metavar="RANGE",
                   help="values of --max-block-ops, e.g. 5-12 or 5,7,9 (default 5-12; --quick: 4-5)")
    p.add_argument("--repeats", type=int, default=None, metavar="R",
                   help="runs of (a) and (b) per N; the median is reported (default 3; --quick: 1)")
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="per-run limit for (a) and (b) (default 600; --quick: 5)")
    p.add_argument("--ablation-time-limit", type=float, default=None, metavar="S",
                   help="per-run limit for (c), without abstract-expression pruning (default: --time-limit)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help=f"threads for (a) and (c) (default os.cpu_count() = {os.cpu_count()})")
    p.add_argument("--configs", default="abc",
                   help="which of (a) all threads, (b) one thread, (c) no abstract pruning to run (default abc)")
    p.add_argument("--quick", action="store_true", help="smoke run: small N range, one repeat, 5-s limits")
    p.add_argument("--all-repeats", action="store_true",
                   help="keep repeating a measurement after a run hit its time limit (default: the cell is "
                        "reported as over the limit and its remaining repeats are skipped)")
    p.add_argument("--skip-after-limit", action="store_true",
                   help="once a configuration hits its time limit at some N, skip it for larger N "
                        "(a larger N only enlarges the space)")
    p.add_argument("--max-kernel-ops", type=int, help="passed to mugraph search (default: the CLI's)")
    p.add_argument("--max-graph-kernels", type=int, help="passed to mugraph search (default: the CLI's)")
    p.add_argument("--max-kernel-inputs", type=int, help="passed to mugraph search (default: the CLI's)")
    p.add_argument("--deterministic", action="store_true", help="pass --deterministic to every search")
    p.add_argument("--workdir", help="directory for the per-run outputs (kept); default: a temporary one")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory of per-run outputs")
    p.add_argument("--json", metavar="FILE", help="also write every run's report and the table's cells to FILE")
    p.add_argument("-v", "--verbose", action="store_true", help="say why each best μGraph is or is not Figure 3b")
    a = p.parse_args(argv)
    if a.block_ops is None:
        a.block_ops = [4, 5] if a.quick else list(range(5, 13))
    if a.repeats is None:
        a.repeats = 1 if a.quick else 3
    if a.time_limit is None:
        a.time_limit = 5.0 if a.quick else 600.0
    if a.ablation_time_limit is None:
        a.ablation_time_limit = a.time_limit
    if a.repeats < 1 or a.threads < 1 or a.time_limit <= 0 or a.ablation_time_limit <= 0:
        p.error("--repeats, --threads and the time limits must be positive")
    a.configs = [c for c in "abc" if c in a.configs]
    if not a.configs:
        p.error("--configs must name at least one of a, b, c")
    return a


def config_options(args, cfg):
    if cfg == "a":
        return dict(threads=args.threads, time_limit=args.time_limit)
    if cfg == "b":
        return dict(threads=1, time_limit=args.time_limit)
    return dict(threads=args.threads, time_limit=args.ablation_time_limit, no_abstract_pruning=True)


def time_key(run):
    """A run's time for the median: +inf when it stopped at its time limit."""
    return math.inf if run.limited else run.search_seconds


def median_run(runs):
    """The run at the (lower) median of the times."""
    ordered = sorted(runs, key=time_key)
    return ordered[(len(ordered) - 1) // 2]


def time_cell(cell, limit):
    runs = cell["runs"]
    if cell.get("skipped"):
        return f"skipped ({sc.fmt_limit(limit)} at a smaller N)"
    if not runs:
        return "—"
    if any(not r.ok for r in runs):
        return "error"
    if any(r.stop_reason == "interrupted" for r in runs):
        return f"interrupted ({sc.fmt_seconds(max(r.search_seconds for r in runs))} s)"
    med = statistics.median(time_key(r) for r in runs)
    return sc.fmt_limit(limit) if math.isinf(med) else sc.fmt_seconds(med)


def states_cell(cell):
    runs = [r for r in cell["runs"] if r.ok]
    if not runs:
        return "—"
    r = median_run(runs)
    n = r.report.get("states_explored")
    if n is None:
        return "—"
    return f"≥{n}" if r.stop_reason in ("time_limit", "interrupted") else str(n)


def fig3b_cell(cells, args):
    verdicts = {}
    for cfg in args.configs:
        runs = [r for r in cells[cfg]["runs"] if r.ok]
        if runs:
            verdicts[cfg] = [sc.is_figure_3b(r.best)[0] for r in runs]
    if not verdicts:
        return "—"
    flat = [v for vs in verdicts.values() for v in vs]
    if all(flat):
        return "yes"
    if not any(flat):
        return "no"
    return ", ".join(f"{cfg}: {sum(vs)}/{len(vs)}" for cfg, vs in verdicts.items())


def print_table(args, binary, program, results, conventions, started, interrupted):
    lines = sc.header_lines("Search time against the most block ops (the paper's Table 5, RMSNorm)", binary)
    lines += [
        f"- Program: `{program}`",
        "- Runs: " + "; ".join(
            {"a": f"(a) --threads {args.threads}, {args.repeats}× per N, --time-limit {args.time_limit:g}",
             "b": f"(b) --threads 1, {args.repeats}× per N, --time-limit {args.time_limit:g}",
             "c": f"(c) --no-abstract-pruning --threads {args.threads}, once per N, "
                  f"--time-limit {args.ablation_time_limit:g}"}[c] for c in args.configs)
        + ("; all with --deterministic" if args.deterministic else "")
        + "".join(f"; --{k.replace('_', '-')} {getattr(args, k)}" for k in
                  ("max_kernel_ops", "max_graph_kernels", "max_kernel_inputs") if getattr(args, k) is not None),
        f"- Block ops: {'; '.join(sorted(conventions)) or 'input iterators counted, output savers not'}",
        "",
    ]
    header = ["N", "all threads (s)", "1 thread (s)", "without abstract-expression pruning (s)",
              "states (all threads)", "found Figure 3b?"]
    rows = []
    for n, cells in results.items():
        if not any(cells[c]["runs"] or cells[c]["skipped"] for c in args.configs):
            continue  # not reached (interrupted)
        rows.append([
            str(n),
            time_cell(cells["a"], args.time_limit) if "a" in args.configs else "not run",
            time_cell(cells["b"], args.time_limit) if "b" in args.configs else "not run",
            time_cell(cells["c"], args.ablation_time_limit) if "c" in args.configs else "not run",
            states_cell(cells["a"]) if "a" in args.configs else "—",
            fig3b_cell(cells, args),
        ])
    lines += sc.markdown_table(header, rows)
    lines += [
        "",
        "Times are report.json's search_seconds (generation and pruning; verification excluded), the median "
        f"of {args.repeats} run(s) for (a) and (b); \">L s\": stopped by its time limit L"
        + ("" if args.all_repeats else " (its remaining repeats were skipped)")
        + ". States: states_explored of the median (a) run (\"≥\": stopped early). Found Figure 3b: the best "
        "μGraph is one graph-defined kernel with a for-loop, matmul and sum in the loop body, two "
        "accumulators and sqrt after the loop; \"a: k/n\" when the runs disagree.",
        f"Total wall time {time.monotonic() - started:.1f} s." + (" Interrupted: the table is partial." if interrupted else ""),
    ]
    if args.verbose:
        lines += ["", "Per run:"]
        for n, cells in results.items():
            for cfg in args.configs:
                for r in cells[cfg]["runs"]:
                    why = sc.is_figure_3b(r.best)[1] if r.ok else r.error
                    lines.append(f"- N={n} ({cfg}) {r.stop_reason or 'error'} "
                                 f"{sc.fmt_seconds(r.search_seconds)} s: {why}; {sc.describe_ugraph(r.best)}")
    print("\n".join(lines), flush=True)


def main(argv=None):
    args = parse_args(argv)
    binary = sc.find_binary(args.mugraph)
    program = sc.resolve_program(args.program)
    if args.workdir:
        workdir = pathlib.Path(args.workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="table5-", dir=workdir))
    else:
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="mugraph-table5-"))
    started = time.monotonic()
    results = {n: {cfg: {"runs": [], "skipped": False} for cfg in "abc"} for n in args.block_ops}
    conventions = set()
    limited_at = {}  # config -> smallest N at which it hit its time limit
    interrupted = False
    try:
        for n in args.block_ops:
            for cfg in args.configs:
                cell = results[n][cfg]
                if args.skip_after_limit and cfg in limited_at:
                    cell["skipped"] = True
                    continue
                reps = args.repeats if cfg in ("a", "b") else 1
                opts = config_options(args, cfg)
                for rep in range(reps):
                    out = workdir / f"n{n:02d}-{cfg}-{rep}"
                    cmd = sc.search_command(binary, program, out, max_block_ops=n,
                                            max_kernel_ops=args.max_kernel_ops,
                                            max_graph_kernels=args.max_graph_kernels,
                                            max_kernel_inputs=args.max_kernel_inputs,
                                            deterministic=args.deterministic, **opts)
                    print(f"[N={n} {CONFIGS[cfg]} run {rep + 1}/{reps}] ...", end="", file=sys.stderr, flush=True)
                    try:
                        run = sc.run_search(cmd, out, time_limit=opts["time_limit"])
                    except sc.Interrupted as e:
                        cell["runs"].append(e.run)
                        raise
                    cell["runs"].append(run)
                    if run.ok:
                        conventions.add(run.report.get("options", {}).get("block_ops_convention", ""))
                        print(f" {run.stop_reason} after {sc.fmt_seconds(run.search_seconds)} s, "
                              f"{run.report.get('states_explored')} states, best: "
                              f"{'Figure 3b' if sc.is_figure_3b(run.best)[0] else sc.describe_ugraph(run.best)}",
                              file=sys.stderr, flush=True)
                    else:
                        print(f" error: {run.error}", file=sys.stderr, flush=True)
                    if run.limited:
                        limited_at.setdefault(cfg, n)
                        if not args.all_repeats:
                            break
    except (KeyboardInterrupt, sc.Interrupted):
        interrupted = True
        print("\ninterrupted; the table below is partial", file=sys.stderr)
    conventions.discard("")
    print_table(args, binary, program, results, conventions, started, interrupted)
    doc = {
        "command": sys.argv,
        "cpu_count": os.cpu_count(),
        "cpu_model": sc.cpu_model(),
        "program": str(program),
        "threads": args.threads,
        "time_limit": args.time_limit,
        "ablation_time_limit": args.ablation_time_limit,
        "repeats": args.repeats,
        "interrupted": interrupted,
        "results": {
            str(n): {cfg: {"skipped": cells[cfg]["skipped"],
                           "figure_3b": [sc.is_figure_3b(r.best)[0] for r in cells[cfg]["runs"] if r.ok],
                           "runs": [r.as_dict() for r in cells[cfg]["runs"]]}
                     for cfg in args.configs}
            for n, cells in results.items()
        },
    }
    errors = any(not r.ok for cells in results.values() for c in cells.values() for r in c["runs"])
    return sc.finish(args, workdir, doc, interrupted, errors)


if __name__ == "__main__":
    sys.exit(main())
