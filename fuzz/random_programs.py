#!/usr/bin/env python3
"""Random programs through the whole pipeline: search, verify, interpret, generate code, emulate.

Two families of programs, each drawn from a seed:
- `dag`: small expression DAGs over a few inputs ([M, N] activations, [N, P] weights, [N] rows,
  [P, N] matrices) with every op of the program format: matmul, sum (also to several values), the
  element-wise ops with tensors, broadcasts and numbers, exp (at most one on a path), sqrt and
  div of positive values, silu, relu, gelu, concat, repeat and reshape.
- `layer`: what a model's layer is made of: an RMS, L2 or layer norm (with or without a scale),
  a projection, a bias, an activation, a gate, a softmax over rows, a down projection and a
  residual add, at shapes small enough to search in seconds.

For each program, `check_program` runs `mugraph search` and checks what it returns: a μGraph
exists (the program itself is one), `mugraph verify` finds it equivalent, the interpreter gives
the program's outputs on the same inputs, the generated CUDA is written for sm_90a (and sm_80
where the μGraph fits an A100), and, with `emulate`, the generated code run on the host emulation
matches the interpreter. tests/tools/test_random_programs.py runs a few seeds of each family in
CI; run this file for more:

    python3 fuzz/random_programs.py --seeds 0:200 --family layer --emulate

which prints a JSON line per program and exits 1 if any failed.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np


class _Value:
    def __init__(self, name, shape, positive=False, exp_inside=False):
        self.name, self.shape, self.positive, self.exp_inside = name, tuple(shape), positive, exp_inside


def _broadcast(a, b):
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(reversed(out))


def dag_program(seed: int) -> str:
    r = random.Random(seed)
    m, n, p = r.choice([8, 16, 32]), r.choice([16, 32, 64]), r.choice([8, 16, 32, 64])
    inputs = [_Value("X", (m, n))]
    for name, shape, chance in (("W", (n, p), 0.7), ("G", (n,), 0.5), ("Y", (m, n), 0.3), ("V", (p, n), 0.2)):
        if r.random() < chance:
            inputs.append(_Value(name, shape))
    pool, body = list(inputs), []

    def new(expr, shape, positive=False, exp_inside=False):
        v = _Value(f"t{len(body) + 1}", shape, positive, exp_inside)
        body.append(f"{v.name} = {expr}")
        pool.append(v)

    for _ in range(r.randint(2, 7)):
        for _attempt in range(50):
            a = pool[-1] if r.random() < 0.5 else r.choice(pool)
            kind = r.choice(["binary", "binary", "number", "matmul", "matmul", "sum", "unary", "unary", "sqrt", "div",
                             "concat", "repeat", "reshape"])
            if kind == "binary":
                b = r.choice([v for v in pool if _broadcast(a.shape, v.shape) is not None])
                op = r.choice(["add", "sub", "mul"])
                x, y = (a, b) if r.random() < 0.5 else (b, a)
                new(f"{op}({x.name}, {y.name})", _broadcast(a.shape, b.shape), op != "sub" and a.positive and b.positive,
                    a.exp_inside or b.exp_inside)
            elif kind == "number":
                op, c = r.choice(["add", "sub", "mul", "div"]), r.choice(["2", "0.5", "3", "0.125", "64"])
                new(f"{op}({a.name}, {c})", a.shape, a.positive and op != "sub", a.exp_inside)
            elif kind == "matmul":
                bs = [v for v in pool if len(a.shape) == 2 and len(v.shape) == 2 and v.shape[0] == a.shape[1]]
                if not bs:
                    continue
                b = r.choice(bs)
                new(f"matmul({a.name}, {b.name})", (a.shape[0], b.shape[1]), False, a.exp_inside or b.exp_inside)
            elif kind == "sum":
                d = r.randrange(len(a.shape))
                if a.shape[d] == 1:
                    continue
                to = 4 if a.shape[d] % 8 == 0 and r.random() < 0.2 else 1
                shape = list(a.shape)
                shape[d] = to
                new(f"sum({a.name}, dim={d}{'' if to == 1 else f', to={to}'})", shape, a.positive, a.exp_inside)
            elif kind == "unary":
                op = r.choice(["sqr", "sqr", "exp", "silu", "relu", "gelu"])
                if op == "exp" and a.exp_inside:
                    op = "sqr"
                new(f"{op}({a.name})", a.shape, op in ("sqr", "exp") or a.positive, a.exp_inside or op == "exp")
            elif kind == "sqrt":
                if not a.positive:
                    continue
                new(f"sqrt(add({a.name}, 1))", a.shape, True, a.exp_inside)
            elif kind == "div":
                bs = [v for v in pool if v.positive and _broadcast(a.shape, v.shape) is not None]
                if not bs:
                    continue
                b = r.choice(bs)
                new(f"div({a.name}, add({b.name}, 1))", _broadcast(a.shape, b.shape), a.positive,
                    a.exp_inside or b.exp_inside)
            elif kind == "concat":
                d = r.randrange(len(a.shape))
                b = r.choice([v for v in pool if len(v.shape) == len(a.shape)
                              and all(v.shape[i] == a.shape[i] for i in range(len(a.shape)) if i != d)])
                shape = list(a.shape)
                shape[d] += b.shape[d]
                new(f"concat({a.name}, {b.name}, dim={d})", shape, a.positive and b.positive, a.exp_inside or b.exp_inside)
            elif kind == "repeat":
                d, times = r.randrange(len(a.shape)), r.choice([2, 4])
                shape = list(a.shape)
                shape[d] *= times
                new(f"repeat({a.name}, dim={d}, times={times})", shape, a.positive, a.exp_inside)
            else:
                if len(a.shape) != 2 or a.shape[1] % 2:
                    continue
                new(f"reshape({a.name}, shape=[{a.shape[0] * 2}, {a.shape[1] // 2}])", (a.shape[0] * 2, a.shape[1] // 2),
                    a.positive, a.exp_inside)
            break
    made = pool[len(inputs):]
    outputs = [made[-1]]
    if len(made) > 2 and r.random() < 0.3:
        outputs.append(r.choice(made[:-1]))
    # Keep what the outputs read: no dead statements, no unused inputs.
    live = {v.name for v in outputs}
    kept = []
    for line in reversed(body):
        name, expr = line.split(" = ", 1)
        if name in live:
            kept.append(line)
            live |= set(re.findall(r"[A-Za-z_]\w*", expr))
    heads = [f"input {v.name}[{', '.join(map(str, v.shape))}] f16" for v in inputs if v.name in live]
    return "\n".join(heads + kept[::-1] + ["output " + ", ".join(v.name for v in outputs)]) + "\n"


def layer_program(seed: int) -> str:
    r = random.Random(seed)
    m, k, n = r.choice([4, 8, 16, 32]), r.choice([64, 128, 256]), r.choice([32, 64, 128])
    inputs = {"X": (m, k), "W": (k, n)}
    lines, x = [], "X"
    norm = r.choice(["none", "rms", "rms", "l2", "layer"])
    if norm == "rms":
        mean = f"div(S, {k})" if r.random() < 0.5 else f"add(div(S, {k}), 1e-6)"
        lines += ["S = sum(sqr(X), dim=1)", f"XN = div(X, sqrt({mean}))"]
    elif norm == "l2":
        lines += ["XN = div(X, sqrt(sum(sqr(X), dim=1)))"]
    elif norm == "layer":
        lines += [f"MU = div(sum(X, dim=1), {k})", "C = sub(X, MU)",
                  f"XN = div(C, sqrt(add(div(sum(sqr(C), dim=1), {k}), 1e-5)))"]
    if norm != "none":
        x = "XN"
        if r.random() < 0.6:
            inputs["G"] = (k,)
            lines.append("XG = mul(XN, G)")
            x = "XG"
    lines.append(f"H = matmul({x}, W)")
    h = "H"
    if r.random() < 0.3:
        inputs["B"] = (n,)
        lines.append("HB = add(H, B)")
        h = "HB"
    act = r.choice(["none", "silu", "relu", "gelu", "sqr", "gate", "softmax"])
    if act in ("silu", "relu", "gelu", "sqr"):
        lines.append(f"A = {act}({h})")
        h = "A"
    elif act == "gate":
        inputs["W2"] = (k, n)
        lines += [f"H2 = matmul({x}, W2)", f"A = mul({r.choice(['silu', 'gelu', 'relu'])}({h}), H2)"]
        h = "A"
    elif act == "softmax":
        lines += [f"E = exp(mul({h}, 0.125))", "A = div(E, sum(E, dim=1))"]
        h = "A"
    if r.random() < 0.4:
        inputs["WO"] = (n, k)
        lines.append(f"D = matmul({h}, WO)")
        h = "D"
        if r.random() < 0.5:
            lines.append("R = add(D, X)")
            h = "R"
    heads = [f"input {name}[{', '.join(map(str, shape))}] f16" for name, shape in inputs.items()]
    return "\n".join(heads + lines + [f"output {h}"]) + "\n"


FAMILIES = {"dag": dag_program, "layer": layer_program}


def _run(args, timeout):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def _inputs(text: str, seed: int, directory: str) -> list:
    """Standard normal inputs scaled by 0.5, rounded to f16, as --input arguments."""
    rng = np.random.default_rng(seed)
    args = []
    for m in re.finditer(r"^input (\w+)\[([\d, ]+)\]", text, re.M):
        path = os.path.join(directory, m.group(1) + ".npy")
        np.save(path, (0.5 * rng.standard_normal([int(e) for e in m.group(2).split(",")])).astype(np.float16))
        args += ["--input", f"{m.group(1)}={path}"]
    return args


def check_program(binary: str, text: str, directory: str, seed: int = 0, time_limit: float = 3.0,
                  emulate: bool = False, cache_dir: str = "") -> dict:
    """Runs the pipeline on one program; returns a record whose `failure` is None when every check
    held (else what failed, with the command's output in `output`)."""
    os.makedirs(directory, exist_ok=True)
    program = os.path.join(directory, "p.mg")
    with open(program, "w") as f:
        f.write(text)
    found = os.path.join(directory, "found")
    record = {"failure": None}

    def fail(what, output=""):
        record.update(failure=what, output=output[-3000:])
        return record

    rc, out = _run([binary, "check", program], 60)
    if rc != 0:
        return fail("check", out)
    start = time.monotonic()
    rc, out = _run([binary, "search", program, "-o", found, "--threads", "2", "--time-limit", time_limit, "-q"],
                   timeout=time_limit * 20 + 120)
    record["search_seconds"] = round(time.monotonic() - start, 2)
    if rc != 0:
        return fail(f"search exited {rc}", out)
    report = json.load(open(os.path.join(found, "report.json")))
    best = os.path.join(found, "best.json")
    record.update(stop=report["stop_reason"], kernels=report["best"]["kernels"],
                  graph_defined=report["best"]["graph_defined_kernels"])
    rc, out = _run([binary, "verify", program, best], 600)
    if rc != 0:
        return fail(f"verify exited {rc}", out)
    inputs = _inputs(text, seed, directory)
    for source, name in ((program, "program"), (best, "ugraph")):
        rc, out = _run([binary, "run", source, "--out", os.path.join(directory, name), "--threads", "1", *inputs], 600)
        if rc != 0:
            return fail(f"run {name} exited {rc}", out)
    worst, overflows = 0.0, False
    for output in sorted(os.listdir(os.path.join(directory, "program"))):
        want = np.load(os.path.join(directory, "program", output)).astype(np.float64)
        got = np.load(os.path.join(directory, "ugraph", output)).astype(np.float64)
        if got.shape != want.shape or not np.array_equal(np.isfinite(got), np.isfinite(want)):
            return fail(f"{output}: shape or non-finite elements differ")
        finite = np.isfinite(want)
        overflows |= not finite.all()
        scale = max(1e-3, float(np.abs(want[finite]).max(initial=0)))
        worst = max(worst, float(np.abs(got[finite] - want[finite]).max(initial=0)) / scale)
    record["max_relative_error"] = worst
    # A program that overflows f16 on these inputs (exp of a large matmul, say) is compared where
    # it is finite; the emulated check below would refuse it (`bench` checks finite references).
    record["overflows"] = overflows
    if worst > 1e-2:
        return fail(f"the μGraph's outputs differ from the program's by {worst:.3g} of the largest")
    rc, out = _run([binary, "check", best, "--target", "a100"], 60)
    for target in ("sm_90a", "sm_80") if rc == 0 else ("sm_90a",):
        rc, out = _run([binary, "codegen", best, "--target", target, "-o", os.path.join(directory, target)], 120)
        if rc != 0:
            return fail(f"codegen {target} exited {rc}", out)
    if emulate and not overflows:
        rc, out = _run([binary, "bench", best, "--emulate", *inputs,
                        *(["--cache-dir", cache_dir] if cache_dir else [])], 900)
        record["emulated"] = True
        if rc != 0:
            return fail(f"bench --emulate exited {rc}", out)
    return record


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0:20", help="START:END (default 0:20)")
    ap.add_argument("--family", choices=sorted(FAMILIES) + ["both"], default="both")
    ap.add_argument("--time-limit", type=float, default=3.0, help="each search's --time-limit (default 3)")
    ap.add_argument("--emulate", action="store_true", help="also run the generated code on the host emulation")
    ap.add_argument("--binary", default=os.environ.get("MUGRAPH_BIN", "build/bin/mugraph"))
    ap.add_argument("--keep", help="directory to keep each program's files in (default: a temporary one)")
    args = ap.parse_args()
    start, end = (int(s) for s in args.seeds.split(":"))
    families = sorted(FAMILIES) if args.family == "both" else [args.family]
    work = args.keep or tempfile.mkdtemp(prefix="mugraph-random-")
    failures = 0
    for family in families:
        for seed in range(start, end):
            directory = os.path.join(work, f"{family}-{seed}")
            record = check_program(args.binary, FAMILIES[family](seed), directory, seed, args.time_limit, args.emulate,
                                   os.path.join(work, "cache"))
            failures += record["failure"] is not None
            print(json.dumps({"family": family, "seed": seed, **record}), flush=True)
            if not args.keep and record["failure"] is None:
                shutil.rmtree(directory, ignore_errors=True)
    print(f"{failures} of {(end - start) * len(families)} programs failed", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
