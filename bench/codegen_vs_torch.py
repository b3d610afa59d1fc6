#!/usr/bin/env python3
"""Generated CUDA against PyTorch, on a GPU: the Figure 3b RMSNorm+Linear and the Figure 10b
GatedMLP μGraphs (examples/ugraphs/) at the paper's shapes, against PyTorch eager and
torch.compile on the same inputs, timed the same way, next to each μGraph's memory-bandwidth
floor. Each case also times two variants with the emitter's pipeline stages: split k
(`*_split_k.json`: the reduced dim split across blocks too, so that each block reads W in wider
rows, and a second kernel sums the partials) and grid 64 (`*_grid64.json`: 64 blocks of 64
columns, wider rows on half the SMs).

Every variant is timed alike: CUDA events around each call, warm-up calls first, the median of
many calls, and the inputs rotated over enough copies (at least twice the L2 cache) that no call
finds its inputs in L2. mugraph's time comes from `mugraph bench --json`, which builds the
generated code with nvcc, checks its outputs against the CPU interpreter on these very inputs
(outputs poisoned before every run) and times it with the same method in its own harness.

The floor is the bytes a kernel must move (every input read once, every output written once)
over the copy bandwidth measured here (a device-to-device copy of a large buffer, bytes read and
written). Issue 6's targets: mugraph faster than both PyTorch variants and within 1.3x of the floor.

    python3 bench/codegen_vs_torch.py [--mugraph build/bin/mugraph] [--stages 1,2,3,4]
        [--markdown docs/codegen-h200.md] [--json results.json]

Exit status 3 when there is no PyTorch or no GPU (nothing was measured), 1 when a check failed.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXIT_UNAVAILABLE = 3


def rmsnorm_linear(X, G, W):
    # examples/rmsnorm_linear.mg, op for op (no epsilon: the program has none).
    S = (X * X).sum(dim=1, keepdim=True)
    return (X * G / (S / X.shape[1]).sqrt()) @ W


def gated_mlp(X, W1, W2):
    # examples/gated_mlp.mg
    import torch
    return torch.nn.functional.silu(X @ W1) * (X @ W2)


CASES = {
    "rmsnorm": {
        "title": "RMSNorm + Linear (Figure 3b)",
        "ugraph": ROOT / "examples/ugraphs/rmsnorm_fig3b.json",
        "variants": {"split k": ROOT / "examples/ugraphs/rmsnorm_fig3b_split_k.json",
                     "grid 64": ROOT / "examples/ugraphs/rmsnorm_fig3b_grid64.json"},
        "inputs": [("X", [16, 4096]), ("G", [4096]), ("W", [4096, 4096])],
        "output": [16, 4096],
        "fn": rmsnorm_linear,
    },
    "gated_mlp": {
        "title": "GatedMLP (Figure 10b)",
        "ugraph": ROOT / "examples/ugraphs/gated_mlp_fig10b.json",
        "variants": {"split k": ROOT / "examples/ugraphs/gated_mlp_fig10b_split_k.json",
                     "grid 64": ROOT / "examples/ugraphs/gated_mlp_fig10b_grid64.json"},
        "inputs": [("X", [8, 4096]), ("W1", [4096, 4096]), ("W2", [4096, 4096])],
        "output": [8, 4096],
        "fn": gated_mlp,
    },
}


def fail_unavailable(what):
    print(f"codegen_vs_torch needs {what}; nothing was measured", file=sys.stderr)
    sys.exit(EXIT_UNAVAILABLE)


def time_calls(torch, call, copies, warmup, repeats):
    """Median and min microseconds of call(inputs) over `repeats` calls, rotating over copies."""
    for i in range(warmup):
        call(copies[i % len(copies)])
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for i in range(repeats):
        args = copies[i % len(copies)]
        starts[i].record()
        call(args)
        ends[i].record()
    torch.cuda.synchronize()
    us = [s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends)]
    return statistics.median(us), min(us)


def time_graphs(torch, fn, copies, warmup, repeats):
    """time_calls of fn with each input copy's call captured once as a CUDA graph and replayed."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for a in copies:  # warm up on the side stream before capture, as CUDA graphs require
            fn(*a)
    torch.cuda.current_stream().wait_stream(stream)
    graphs = {}
    for a in copies:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):  # the outputs live in the graph's own memory pool
            fn(*a)
        graphs[id(a)] = g
    return time_calls(torch, lambda a: graphs[id(a)].replay(), copies, warmup, repeats)


def copy_bandwidth(torch, warmup, repeats):
    """Bytes per second of a device-to-device copy of a 2 GiB buffer, read and written."""
    n = 1 << 30  # f16 elements: 2 GiB
    src = torch.empty(n, dtype=torch.float16, device="cuda").uniform_()
    dst = torch.empty_like(src)
    median_us, _ = time_calls(torch, lambda a: dst.copy_(a[0]), [(src,)], warmup, repeats)
    return 2 * n * 2 / (median_us * 1e-6)


def run_mugraph(args, ugraph, npy_paths, stages, overlap="off"):
    cmd = [args.mugraph, "bench", str(ugraph), "--target", args.target, "--json", "--warmup",
           str(args.warmup), "--repeats", str(args.repeats), "--matmul-overlap", overlap]
    if stages:
        cmd += ["--stages", str(stages)]
    for name, path in npy_paths.items():
        cmd += ["--input", f"{name}={path}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in (0, 1) or not r.stdout.strip():
        raise SystemExit(f"{' '.join(cmd)} failed (exit {r.returncode}):\n{r.stdout}{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mugraph", default=os.environ.get("MUGRAPH_BIN", str(ROOT / "build/bin/mugraph")))
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--target", default="sm_90a")
    ap.add_argument("--stages", default="0", help="pipeline depths to time, comma-separated (0: mugraph's choice)")
    ap.add_argument("--matmul-overlap", default="off",
                    help="mugraph's --matmul-overlap values to time, comma-separated (off, on)")
    ap.add_argument("--compile-modes", default="default,max-autotune-no-cudagraphs",
                    help="torch.compile modes to time, comma-separated ('' for none)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--markdown", help="write the results as a Markdown section to this file")
    ap.add_argument("--json", help="write the results as JSON to this file")
    args = ap.parse_args()

    try:
        import torch
    except ImportError:
        fail_unavailable("PyTorch (import torch failed)")
    if not torch.cuda.is_available():
        fail_unavailable("a GPU (torch.cuda.is_available() is False)")

    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    env = {
        "date": datetime.date.today().isoformat(),
        "gpu": props.name,
        "sms": props.multi_processor_count,
        "l2_bytes": l2,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "command": " ".join(["python3 bench/codegen_vs_torch.py"] + sys.argv[1:]),
    }
    bandwidth = copy_bandwidth(torch, 5, 50)
    env["copy_bandwidth_gbs"] = bandwidth / 1e9
    print(f"{env['gpu']} ({env['sms']} SMs, L2 {l2 >> 20} MiB), torch {env['torch']}, CUDA {env['cuda']}; "
          f"copy bandwidth {bandwidth / 1e12:.2f} TB/s (read + written)")

    rng = np.random.default_rng(args.seed)
    results, failed = [], False
    with tempfile.TemporaryDirectory() as tmp:
        for key in args.cases.split(","):
            case = CASES[key]
            host = {name: (0.25 * rng.standard_normal(shape)).astype(np.float16) for name, shape in case["inputs"]}
            npy = {}
            for name, a in host.items():
                npy[name] = pathlib.Path(tmp) / f"{key}_{name}.npy"
                np.save(npy[name], a)
            in_bytes = sum(a.nbytes for a in host.values())
            out_bytes = int(np.prod(case["output"])) * 2
            floor_us = (in_bytes + out_bytes) / bandwidth * 1e6
            copies_n = max(1, -(-2 * l2 // in_bytes))
            base = [torch.from_numpy(host[name]).cuda() for name, _ in case["inputs"]]
            copies = [base] + [[t.clone() for t in base] for _ in range(copies_n - 1)]
            row = {"case": key, "title": case["title"], "bytes": in_bytes + out_bytes, "floor_us": floor_us,
                   "input_copies": copies_n, "variants": []}

            fn = case["fn"]
            with torch.no_grad():
                reference = fn(*base).float()
                scale = reference.abs().max().item()
                med, mn = time_calls(torch, lambda a: fn(*a), copies, args.warmup, args.repeats)
                row["variants"].append({"name": "PyTorch eager", "median_us": med, "min_us": mn, "ok": True})
                med, mn = time_graphs(torch, fn, copies, args.warmup, args.repeats)
                row["variants"].append({"name": "PyTorch eager + CUDA graph", "median_us": med, "min_us": mn,
                                        "ok": True})
                for mode in [m for m in args.compile_modes.split(",") if m]:
                    torch._dynamo.reset()
                    compiled = torch.compile(fn, mode=None if mode == "default" else mode)
                    err = (compiled(*base).float() - reference).abs().max().item()
                    for graph in (False, True):
                        med, mn = (time_graphs(torch, compiled, copies, args.warmup, args.repeats) if graph else
                                   time_calls(torch, lambda a: compiled(*a), copies, args.warmup, args.repeats))
                        row["variants"].append({"name": f"torch.compile ({mode})" + (" + CUDA graph" if graph else ""),
                                                "median_us": med, "min_us": mn, "ok": err <= 1e-2 * scale,
                                                "max_rel_error_vs_eager": err / scale})
            overlaps = args.matmul_overlap.split(",")
            runs = [(None, case["ugraph"], int(s), o) for s in args.stages.split(",") for o in overlaps]
            runs += [(label, path, 0, o) for label, path in case.get("variants", {}).items() for o in overlaps]
            for label, ugraph, stages, overlap in runs:
                m = run_mugraph(args, ugraph, npy, stages, overlap)
                rel = max((o["max_abs_error"] / max(o["max_abs_reference"], 1e-30)) for o in m["outputs"])
                notes = (([label] if label else []) + ([f"{stages} stages"] if stages else []) +
                         (["products landing late"] if overlap == "on" else []))
                name = "mugraph" + (f" ({', '.join(notes)})" if notes else "")
                row["variants"].append({"name": name, "median_us": m["median_us"], "min_us": m["min_us"], "ok": m["ok"],
                                        "max_rel_error_vs_interpreter": rel, "device": m["device"],
                                        "ugraph": str(pathlib.Path(ugraph).relative_to(ROOT))})
                if "graph_median_us" in m:  # the harness's replays of the same runs from CUDA graphs
                    row["variants"].append({"name": name + " + CUDA graph", "median_us": m["graph_median_us"],
                                            "min_us": m["graph_min_us"], "ok": m["ok"],
                                            "max_rel_error_vs_interpreter": rel, "device": m["device"]})
            failed = failed or not all(v["ok"] for v in row["variants"])
            results.append(row)

    lines = [f"### {env['date']}, {env['gpu']}", "",
             f"PyTorch {env['torch']}, CUDA {env['cuda']}, {env['sms']} SMs, L2 {l2 >> 20} MiB; copy bandwidth "
             f"{bandwidth / 1e12:.2f} TB/s (device-to-device, read + written). Command: `{env['command']}`; "
             f"median of {args.repeats} calls after {args.warmup} warm-up calls, CUDA events, inputs rotated.", ""]
    for row in results:
        lines += [f"**{row['title']}**: must move {row['bytes'] / 2**20:.1f} MiB, floor {row['floor_us']:.2f} us "
                  f"(inputs rotated over {row['input_copies']} copies)", "",
                  "| variant | median (us) | min (us) | × floor | mugraph speedup | check |",
                  "|---|---|---|---|---|---|"]
        mug = [v for v in row["variants"] if v["name"].startswith("mugraph")]
        best_mug = min((v["median_us"] for v in mug), default=None)
        for v in row["variants"]:
            speedup = f"{v['median_us'] / best_mug:.2f}×" if best_mug and not v["name"].startswith("mugraph") else ""
            lines.append(f"| {v['name']} | {v['median_us']:.2f} | {v['min_us']:.2f} | "
                         f"{v['median_us'] / row['floor_us']:.2f} | {speedup} | {'OK' if v['ok'] else 'FAILED'} |")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(text + "\n")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"env": env, "results": results}, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
