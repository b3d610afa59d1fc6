"""Helpers shared by bench/search_table5.py and bench/search_benchmarks.py (standard library only).

They run `mugraph search` as a subprocess, read what it writes (report.json, best.json; formats in
docs/json-format.md and the CLI's help), describe the machine, and summarise μGraphs.
"""
import datetime
import json
import math
import os
import pathlib
import platform
import re
import shlex
import shutil
import subprocess
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_MUGRAPH = REPO_ROOT / "build" / "bin" / "mugraph"


class Interrupted(Exception):
    """Raised after Ctrl-C once the running search has written its report: callers print what they have."""


def find_binary(path):
    """The mugraph binary: the given path, or build/bin/mugraph under the repository root."""
    p = pathlib.Path(path) if path else DEFAULT_MUGRAPH
    if not (p.is_file() and os.access(p, os.X_OK)):
        sys.exit(f"error: mugraph binary not found at {p}; build it (bash scripts/build.sh) or pass --mugraph")
    return p


def resolve_program(arg, examples_dir=REPO_ROOT / "examples"):
    """A program given as a path (absolute or relative to the working directory), or as the name of one
    in examples/ ("gqa" or "gqa.mg")."""
    p = pathlib.Path(arg)
    if p.is_file():
        return p.resolve()
    for cand in (examples_dir / arg, examples_dir / f"{arg}.mg"):
        if cand.is_file():
            return cand
    sys.exit(f"error: program {arg!r} not found (neither a file nor a name in {examples_dir})")


# --------------------------------------------------------------------------------------------------
# The machine and the invocation


def checkout_path(path):
    """A file recorded on another machine (a μGraph a GPU session timed), looked up under this
    checkout from its bench/ part; the path itself where it exists."""
    p = pathlib.Path(path)
    if not p.exists() and "/bench/" in str(path):
        p = REPO_ROOT / ("bench/" + str(path).split("/bench/", 1)[1])
    return p


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def memory_gib():
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / (1024 * 1024)
    except (OSError, ValueError, IndexError):
        pass
    return None


def git_revision():
    try:
        r = subprocess.run(["git", "-C", str(REPO_ROOT), "describe", "--always", "--dirty"],
                           capture_output=True, text=True, timeout=10)
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def header_lines(title, binary):
    """Markdown lines naming what ran, where and when."""
    mem = memory_gib()
    lines = [
        f"# {title}",
        "",
        f"- Command: `{shlex.join([sys.executable, *sys.argv])}`",
        f"- Date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- Machine: {platform.node()}, os.cpu_count() = {os.cpu_count()}, CPU \"{cpu_model()}\""
        + (f", {mem:.1f} GiB memory" if mem else ""),
        f"- mugraph: `{binary}`" + (f" (source tree at git {git_revision()})" if git_revision() else ""),
    ]
    return lines


# --------------------------------------------------------------------------------------------------
# Running a search


class SearchRun:
    """One `mugraph search` invocation and what it left behind."""

    def __init__(self, cmd, out_dir, returncode, wall_seconds, stdout, stderr, report, best, error=None):
        self.cmd = cmd
        self.out_dir = out_dir
        self.returncode = returncode
        self.wall_seconds = wall_seconds
        self.stdout = stdout
        self.stderr = stderr
        self.report = report  # dict or None
        self.best = best  # μGraph document (dict) or None
        self.error = error  # a string when the run produced no usable report

    @property
    def ok(self):
        return self.report is not None

    @property
    def stop_reason(self):
        return self.report.get("stop_reason") if self.report else None

    @property
    def limited(self):
        return self.stop_reason == "time_limit"

    @property
    def search_seconds(self):
        return self.report.get("search_seconds") if self.report else None

    def as_dict(self):
        return {
            "command": shlex.join(self.cmd),
            "out_dir": str(self.out_dir),
            "returncode": self.returncode,
            "wall_seconds": self.wall_seconds,
            "error": self.error,
            "report": self.report,
        }


def search_command(binary, program, out_dir, *, threads=None, time_limit=None, max_kernel_ops=None,
                   max_block_ops=None, max_graph_kernels=None, max_kernel_inputs=None, top=None,
                   deterministic=False, no_abstract_pruning=False, extra=()):
    cmd = [str(binary), "search", str(program), "-o", str(out_dir), "-q"]
    for flag, value in (("--threads", threads), ("--time-limit", time_limit), ("--max-kernel-ops", max_kernel_ops),
                        ("--max-block-ops", max_block_ops), ("--max-graph-kernels", max_graph_kernels),
                        ("--max-kernel-inputs", max_kernel_inputs), ("--top", top)):
        if value is not None:
            cmd += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if deterministic:
        cmd.append("--deterministic")
    if no_abstract_pruning:
        cmd.append("--no-abstract-pruning")
    cmd += list(extra)
    return cmd


def _load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def run_search(cmd, out_dir, time_limit=None, verify_allowance=300):
    """Runs one search (cmd from search_command, writing into the fresh directory out_dir).

    A run whose search finds nothing exits with 1 and still writes report.json; a run is usable when
    report.json exists. As a guard against a hung process the run is killed after
    1.5 × time_limit + verify_allowance seconds (verification is not covered by the search's time
    limit). On Ctrl-C the
    search (same process group) stops itself and writes its report; this waits for that, then raises
    Interrupted with the run attached."""
    out_dir = pathlib.Path(out_dir)
    if (out_dir / "report.json").exists():
        raise RuntimeError(f"{out_dir} already holds a report; every run needs a fresh directory")
    guard = None if time_limit is None else 1.5 * time_limit + verify_allowance
    start = datetime.datetime.now()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    error = None
    interrupted = False
    try:
        stdout, stderr = proc.communicate(timeout=guard)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        error = f"killed after {guard:.0f} s (the guard against a hung process)"
    except KeyboardInterrupt:
        interrupted = True
        try:
            stdout, stderr = proc.communicate(timeout=60)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            proc.kill()
            stdout, stderr = proc.communicate()
    wall = (datetime.datetime.now() - start).total_seconds()
    report = _load_json(out_dir / "report.json")
    if report is not None and report.get("format") != "mugraph-search-report":
        report = None
        error = error or "report.json is not a mugraph search report"
    if report is None and error is None:
        tail = (stderr or "").strip().splitlines()[-3:]
        error = f"exit {proc.returncode}, no report.json" + (": " + " / ".join(tail) if tail else "")
    best = _load_json(out_dir / "best.json") if report is not None and report.get("best") is not None else None
    run = SearchRun(cmd, out_dir, proc.returncode, wall, stdout, stderr, report, best, error)
    if report is not None and report.get("stop_reason") == "interrupted":
        interrupted = True  # the search was sent SIGINT directly
    if interrupted:
        exc = Interrupted("interrupted")
        exc.run = run
        raise exc
    return run


def save_run(run, dest):
    """Copies a usable run's report.json, best.json when it found one, and the verified candidates
    behind report.json's `top` (top/NN.json, in the model's order; best.json is top/00.json) into
    dest, so that a GPU session can time the best few without searching again."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run.out_dir / "report.json", dest / "report.json")
    best_src = run.out_dir / "best.json"
    if run.report.get("best") is not None and best_src.is_file():
        shutil.copyfile(best_src, dest / "best.json")
    elif (dest / "best.json").exists():
        (dest / "best.json").unlink()  # a stale best from an earlier save would contradict report.json
    # Stale candidates from an earlier save would not match this report.json's `top`.
    shutil.rmtree(dest / "top", ignore_errors=True)
    if (run.out_dir / "top").is_dir():
        shutil.copytree(run.out_dir / "top", dest / "top")


def spearman(xs, ys):
    """Spearman's rank correlation of two equally long sequences (tied values share their average
    rank), as `mugraph search --measure` reports it; None for fewer than two points or when either
    side is constant. Written out because SciPy is no dependency of ours and the GPU image may
    lack it."""
    if len(xs) != len(ys) or len(xs) < 2:
        return None

    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r

    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / (sxx * syy) ** 0.5


# --------------------------------------------------------------------------------------------------
# The cost model's breakdown (docs/cost_model.md)


def kernel_breakdowns(path, target, binary=None):
    """[(kind, total µs, {term: µs})] of each kernel of a μGraph file, as `mugraph check FILE --target
    TARGET` prints them (binary: $MUGRAPH_BIN or build/bin/mugraph). A pre-defined kernel's terms
    also hold "share": the share of the HBM peak its dram term is at (1 but for cuBLAS matmuls)."""
    binary = binary or os.environ.get("MUGRAPH_BIN", str(REPO_ROOT / "build" / "bin" / "mugraph"))
    out = subprocess.run([binary, "check", str(path), "--target", target], capture_output=True, text=True)
    kernels = []
    for m in re.finditer(r"^kernel \d+ (\S+): ([0-9.]+) us \(([^)]*)\)", out.stdout, re.M):
        terms = {name: float(v) for name, v in re.findall(r"(\w+) ([0-9.]+)(?=[,;])", m.group(3))}
        share = re.search(r"dram at ([0-9.]+) of peak", m.group(3))
        terms["share"] = float(share.group(1)) if share else 1.0
        kernels.append((m.group(1), float(m.group(2)), terms))
    if not kernels:
        raise SystemExit(f"{path}: mugraph check gave no breakdown: {out.stderr.strip()}")
    return kernels


# --------------------------------------------------------------------------------------------------
# Reading μGraphs (docs/json-format.md)


def kernel_graph(doc):
    """The kernel graph of a μGraph document (or the graph itself when given a graph)."""
    if doc is None:
        return None
    return doc.get("graph", doc) if isinstance(doc, dict) else None


def _is_concat_accum(op):
    return op.get("op") == "accum" and isinstance(op.get("accum"), dict) and "concat" in op["accum"]


def _ops_recursive(graph):
    """Every op of a graph and of its bodies (thread graphs inside block graphs)."""
    for op in graph.get("ops", []):
        yield op
    for body in graph.get("bodies", []):
        yield from _ops_recursive(body)


def _body_of(graph, op):
    bodies = graph.get("bodies", [])
    idx = op.get("body")
    return bodies[idx] if isinstance(idx, int) and 0 <= idx < len(bodies) else None


def _op_kinds(graph, op):
    """The kinds an op stands for: itself, plus every op of its body for a thread_graph."""
    kinds = [op.get("op")]
    if op.get("op") == "thread_graph":
        body = _body_of(graph, op)
        if body is not None:
            kinds += [o.get("op") for o in _ops_recursive(body)]
    return kinds


def block_graph_parts(block):
    """Splits a block graph's ops into the loop body (computed every iteration, before an accumulator)
    and the post-processing (computed from an accumulator's result, after the loop).

    Returns (loop_kinds, post_kinds, accums): op kinds (thread-graph bodies expanded) excluding
    iterators, savers and accumulators; and the accum ops."""
    ops = block.get("ops", [])
    producer = {}
    for i, op in enumerate(ops):
        for t in op.get("outputs", []):
            producer[t] = i
    after_accum = [False] * len(ops)  # op reads (transitively) an accumulator's output
    for i, op in enumerate(ops):  # ops are in a topological order
        for t in op.get("inputs", []):
            p = producer.get(t)
            if p is not None and (ops[p].get("op") == "accum" or after_accum[p]):
                after_accum[i] = True
    loop_kinds, post_kinds, accums = [], [], []
    for i, op in enumerate(ops):
        kind = op.get("op")
        if kind == "accum":
            accums.append(op)
            continue
        if kind in ("input_iterator", "output_saver"):
            continue
        (post_kinds if after_accum[i] else loop_kinds).extend(_op_kinds(block, op))
    return loop_kinds, post_kinds, accums


def block_op_count(block):
    """Ops in a block graph as the search counts them: input iterators counted, output savers not
    (a thread_graph counts as one op)."""
    return sum(1 for op in block.get("ops", []) if op.get("op") != "output_saver")


def expanded_block_op_count(block):
    """Block ops with each thread graph replaced by the ops of its body (its iterators and savers not
    counted): the count the search's --max-block-ops bounds, since the search builds block graphs of
    single ops and the fusion pass gathers element-wise ops into thread graphs afterwards."""
    n = 0
    for op in block.get("ops", []):
        kind = op.get("op")
        if kind == "output_saver":
            continue
        body = _body_of(block, op) if kind == "thread_graph" else None
        if body is None:
            n += 1
        else:
            n += sum(1 for o in _ops_recursive(body) if o.get("op") not in ("input_iterator", "output_saver"))
    return n


def non_input_kernel_ops(graph):
    return [op for op in graph.get("ops", []) if op.get("op") != "input"]


def is_figure_3b(doc):
    """Whether a μGraph has the structure of the paper's Figure 3b. Returns (bool, reason).

    Exactly one kernel op (besides the inputs), graph-defined; its block graph has a for-loop of more
    than one iteration; the loop body holds a matmul and a sum (reduction); there are two accumulators;
    the post-processing (after the accumulators, possibly inside a thread graph) holds a sqrt."""
    g = kernel_graph(doc)
    if g is None:
        return False, "no μGraph"
    kops = non_input_kernel_ops(g)
    if len(kops) != 1:
        return False, f"{len(kops)} kernel ops"
    if kops[0].get("op") != "graph_kernel":
        return False, f"the one kernel op is {kops[0].get('op')}, not graph-defined"
    block = _body_of(g, kops[0])
    if block is None:
        return False, "graph_kernel without a body"
    if int(block.get("forloop", 1)) <= 1:
        return False, "no for-loop"
    loop_kinds, post_kinds, accums = block_graph_parts(block)
    missing = [k for k in ("matmul", "sum") if k not in loop_kinds]
    if missing:
        return False, "loop body lacks " + " and ".join(missing)
    if len(accums) != 2:
        return False, f"{len(accums)} accumulators"
    if "sqrt" not in post_kinds:
        return False, "no sqrt after the loop"
    return True, "Figure 3b"


def _axes(v):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    while len(v) > 1 and v[-1] == 1:
        v.pop()
    return "×".join(str(x) for x in v)


def describe_graph_kernel(block):
    """One phrase for a block graph: grid, for-loop, block ops, accumulators, concat, thread graphs."""
    ops = block.get("ops", [])
    n_accum_sum = sum(1 for op in ops if op.get("op") == "accum" and not _is_concat_accum(op))
    n_accum_cat = sum(1 for op in ops if _is_concat_accum(op))
    n_concat = sum(1 for op in _ops_recursive(block) if op.get("op") == "concat")
    n_tg = sum(1 for op in ops if op.get("op") == "thread_graph")
    n_ops, n_expanded = block_op_count(block), expanded_block_op_count(block)
    parts = [f"grid {_axes(block.get('grid', [1, 1, 1]))}", f"loop {block.get('forloop', 1)}",
             f"{n_ops} block ops" + (f" ({n_expanded} counting thread-graph ops)" if n_expanded != n_ops else "")]
    if n_accum_sum or n_accum_cat:
        parts.append("accum " + ", ".join(
            s for s in ((f"sum×{n_accum_sum}" if n_accum_sum else ""), (f"concat×{n_accum_cat}" if n_accum_cat else "")) if s))
    else:
        parts.append("no accum")
    if n_concat:
        parts.append(f"concat op×{n_concat}")
    parts.append(f"thread graph×{n_tg}" if n_tg else "no thread graph")
    return "graph(" + ", ".join(parts) + ")"


def describe_ugraph(doc):
    """One line for a μGraph: its kernel ops in order, graph-defined ones described."""
    g = kernel_graph(doc)
    if g is None:
        return "—"
    items = []
    for op in non_input_kernel_ops(g):
        if op.get("op") == "graph_kernel":
            block = _body_of(g, op)
            items.append(describe_graph_kernel(block) if block is not None else "graph(?)")
        else:
            items.append(op.get("op", "?"))
    return " → ".join(items) if items else "(no ops)"


# --------------------------------------------------------------------------------------------------
# Formatting


def fmt_seconds(s):
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "—"
    if s >= 100:
        return f"{s:.0f}"
    if s >= 10:
        return f"{s:.1f}"
    if s >= 0.1:
        return f"{s:.2f}"
    return f"{s:.3f}"


def fmt_limit(limit):
    return f">{limit:g} s"


def fmt_bytes(n):
    if n is None:
        return "—"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n} ({n / scale:.1f} {unit})"
    return f"{n} B"


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |")
    return lines


def finish(args, workdir, doc, interrupted, failed):
    """The common end of the search benchmarks: writes --json, removes (or names) the per-run
    outputs, and returns the exit code (130 interrupted, 1 if a run failed, else 0)."""
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
    if args.workdir or args.keep:
        print(f"\nPer-run outputs: {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    if interrupted:
        return 130
    return 1 if failed else 0
