#!/usr/bin/env python3
"""Issue 8 on a GPU: a PyTorch module whose RMSNorm + Linear is replaced by the mugraph-optimized
callable gives the same outputs (f16 tolerance) and is faster.

    PYTHONPATH=build/python python3 bench/torch_module_vs_mugraph.py [--time-limit 60]
        [--target h200] [--cost-bound both] [--rows 16] [--hidden 4096] [--markdown OUT.md]

The module is RMSNorm(hidden) then Linear(hidden, hidden, bias=False) in float16 (the paper's
Figure 3a at batch `rows`). mugraph.from_torch captures it, mugraph.superoptimize searches, and
the module's forward is replaced by the optimized callable (weights bound to the module). Both
are timed with CUDA events over --repeats runs after --warmup; the medians are compared. So that
the callable's Python overhead shows apart from its kernels, two more rows time the compiled
μGraph's run_torch on the arranged inputs (output and workspace allocation, checks, the launch)
and the bare ctypes call of the generated code with everything allocated beforehand. Without a
CUDA GPU it says so and exits 2."""

import argparse
import datetime
import statistics
import time
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--target", default="h200")
    ap.add_argument("--time-limit", type=float, default=60)
    ap.add_argument("--cost-bound", default="both", choices=["bytes", "model", "both"],
                    help="superoptimize's cost_bound (both: also the μGraphs the model ranks first, "
                         "such as a norm kernel followed by cuBLAS)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--markdown", help="also write the result table here")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("needs PyTorch", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("needs a CUDA GPU (PyTorch sees none)", file=sys.stderr)
        return 2
    import mugraph

    class Block(torch.nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.norm = torch.nn.RMSNorm(hidden, eps=1e-6)
            self.proj = torch.nn.Linear(hidden, hidden, bias=False)

        def forward(self, x):
            return self.proj(self.norm(x))

    torch.manual_seed(0)
    block = Block(args.hidden).half().cuda()
    with torch.no_grad():
        block.norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(args.rows, args.hidden, dtype=torch.float16, device="cuda")
    # Progress on stderr, so that a crash says which stage it ended (a segfault with nothing
    # else, on the first lease: docs/python.md).
    def stage(what):
        print(f"[{datetime.datetime.now():%H:%M:%S}] {what}", file=sys.stderr, flush=True)

    stage("capturing the module")
    program = mugraph.from_torch(block, (x,))
    stage("superoptimizing")
    best = mugraph.superoptimize(program, time_limit=args.time_limit, target=args.target,
                                 cost_bound=args.cost_bound)
    stage(f"searched: {best.report.get('stop_reason')}; compiling and running the μGraph on CUDA tensors")

    with torch.no_grad():
        want = block(x)
        got = best(x)
    torch.cuda.synchronize()
    stage("ran; timing")
    err = (got.float() - want.float()).abs().max().item()
    scale = want.float().abs().max().item()
    ok = err <= 1e-2 * scale

    def time_it(fn):
        for _ in range(args.warmup):
            fn(x)
        times = []
        for _ in range(args.repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000.0)
        return statistics.median(times)

    def back_to_back(fn):
        # Calls issued one after another, synchronized once: where the host is slower than the
        # GPU this is the host's time per call (Python, allocation, launch), which one call
        # between two events above includes but does not separate.
        for _ in range(args.warmup):
            fn(x)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.repeats):
            fn(x)
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / args.repeats * 1e6

    from mugraph._runtime import cuda_arch_of

    compiled = best.compile(cuda_arch_of(x.device))
    values = best._arrange((x,), {})
    outs = [torch.empty_like(got)]
    workspace = torch.empty(max(1, compiled.workspace_bytes), dtype=torch.uint8, device=x.device)
    in_ptrs = [v.data_ptr() for v in values]
    out_ptrs = [o.data_ptr() for o in outs]

    def bare(_):
        compiled._call(in_ptrs, out_ptrs, workspace.data_ptr(), torch.cuda.current_stream().cuda_stream)

    variants = [block, best, lambda _: compiled.run_torch(values), bare]
    with torch.no_grad():
        torch_us, mugraph_us, run_torch_us, bare_us = (time_it(fn) for fn in variants)
        torch_b2b, mugraph_b2b, run_torch_b2b, bare_b2b = (back_to_back(fn) for fn in variants)
    gpu = torch.cuda.get_device_name()
    lines = [
        f"RMSNorm + Linear, [{args.rows}, {args.hidden}] f16, on {gpu}, {datetime.date.today()}",
        f"command: {' '.join(sys.argv)}",
        f"search: cost bound {args.cost_bound}, {best.report.get('stop_reason')} after "
        f"{best.report.get('search_seconds', 0):.1f} s, {best.graph.graph_defined_kernels()} graph-defined kernel(s) "
        f"of {len(best.report.get('best', {}).get('estimate', []))}",
        "",
        "| | median us (one call between events) | | us per call, back to back |",
        "|---|---|---|---|",
        f"| PyTorch module (eager) | {torch_us:.2f} | | {torch_b2b:.2f} |",
        f"| mugraph callable | {mugraph_us:.2f} | {torch_us / mugraph_us:.2f}x | {mugraph_b2b:.2f} |",
        f"| its compiled μGraph's run_torch (inputs arranged) | {run_torch_us:.2f} | | {run_torch_b2b:.2f} |",
        f"| the generated code's bare call (all allocated) | {bare_us:.2f} | | {bare_b2b:.2f} |",
        "",
        f"max |error| {err:.3g} of max |reference| {scale:.3g}: {'OK' if ok else 'FAILED'} (f16 tolerance 1e-2)",
    ]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
