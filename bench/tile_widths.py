#!/usr/bin/env python3
"""Is a weight tile's load time set by its rows or by its bytes? (the cost model's pieces term)

The cost model charges every contiguous run a block loads as at least one 128-byte piece
(docs/cost_model.md, "pieces"): a W tile 16 elements wide costs as much per row as one 64 wide.
Fitted on candidates of the 2026-11-26/27 device library, it overestimates Figure 10b (39.4 µs
against 24.9 measured), and costing pieces by their bytes instead orders the timed sets worse.
Telling the two apart needs the same code with only the tile width changed. This script writes
and times two families of one-kernel μGraphs computing O = X·W, X [8, K] (K = --hidden, 4096),
each block a 16-step loop over K that multiplies an [8, K/16] tile of X by a [K/16, w] tile of W
on the tensor cores and sums the products:

    rows    W [K, 128·w], 128 blocks of w columns: every block loads K rows of w elements, so
            the pieces are the same for every w (128 · K) while W's bytes grow with w. If a
            row costs what the model says whatever its bytes, the times stay level; if bytes
            are what costs, they double with w.
    blocks  W [K, 4096], 4096/w blocks of w columns: W's bytes are fixed and the pieces halve as
            w doubles (the calibration candidates' kind, where the SM count changes too).

w is 8, 16, 32 and 64 elements (rows of 16, 32, 64 and 128 bytes; --widths). On sm_90a the tiles
of 32 to 128-byte rows are read by wgmma in place and their sums kept in registers; 16-byte rows
have no swizzle for it, so w = 8 stages its tile (a different code path, reported as such).

    python3 bench/tile_widths.py [--widths 8,16,32,64] [--families rows,blocks] [--hidden 4096]
        [--work DIR] [--write-only] [--emulate] [--json OUT.jsonl] [--markdown OUT.md]
        [--warmup 20] [--repeats 200] [--cost-target h200]

For each μGraph it prints the model's estimate on --cost-target and its pieces and DRAM terms
(`mugraph check`), and, unless --write-only, the median of `mugraph bench` on the GPU (or, with
--emulate, on the host emulation, whose times mean nothing: the CI test) with its check against
the interpreter. $MUGRAPH_BIN names the binary (default build/bin/mugraph).
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from fit_cost_model_terms import kernel_breakdowns  # noqa: E402

ROWS = 8  # X's rows: GatedMLP's batch (Figure 10b)
LOOP = 16  # iterations over K, as Figures 3b and 10b
ROWS_BLOCKS = 128  # the rows family's grid: one wave on 132 SMs
BLOCKS_COLUMNS = 4096  # the blocks family's W columns


def tensor(shape, name=None):
    t = {"shape": list(shape), "dtype": "f16"}
    if name is not None:
        t["name"] = name
    return t


def ugraph(hidden, columns, width):
    """O = X·W with X [ROWS, hidden], W [hidden, columns]: columns / width blocks of width columns,
    a LOOP-step loop over hidden, the tiles' products summed in an accumulator."""
    if columns % width or hidden % LOOP or (hidden // LOOP) % 16:
        raise SystemExit(f"--hidden {hidden} and width {width} do not make whole tiles")
    k = hidden // LOOP
    body = {
        "level": "block",
        "params": [tensor([ROWS, hidden]), tensor([hidden, columns])],
        "grid": [columns // width, 1, 1], "threads": [128, 1, 1], "forloop": LOOP,
        "tensors": [tensor([ROWS, k]), tensor([k, width]), tensor([ROWS, width]), tensor([ROWS, width])],
        "ops": [
            {"op": "input_iterator", "inputs": [], "outputs": [0], "input": 0, "imap": {"x": None}, "fmap": 1},
            {"op": "input_iterator", "inputs": [], "outputs": [1], "input": 1, "imap": {"x": 1}, "fmap": 0},
            {"op": "matmul", "inputs": [0, 1], "outputs": [2]},
            {"op": "accum", "inputs": [2], "outputs": [3], "accum": "sum"},
            {"op": "output_saver", "inputs": [3], "outputs": [], "output": 0, "omap": {"x": 1}},
        ],
    }
    graph = {
        "level": "kernel",
        "tensors": [tensor([ROWS, hidden], "X"), tensor([hidden, columns], "W"), tensor([ROWS, columns], "O")],
        "ops": [
            {"op": "input", "inputs": [], "outputs": [0], "name": "X", "shape": [ROWS, hidden], "dtype": "f16"},
            {"op": "input", "inputs": [], "outputs": [1], "name": "W", "shape": [hidden, columns], "dtype": "f16"},
            {"op": "graph_kernel", "inputs": [0, 1], "outputs": [2], "body": 0},
        ],
        "outputs": [{"tensor": 2, "name": "O"}],
        "bodies": [body],
    }
    return {"format": "mugraph-ugraph", "version": 1, "graph": graph}


def cases(families, widths):
    """(family, width, columns) of each μGraph, in the order they are timed."""
    out = []
    for family in families:
        for w in widths:
            out.append((family, w, ROWS_BLOCKS * w if family == "rows" else BLOCKS_COLUMNS))
    return out


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--widths", default="8,16,32,64", help="W tile widths in elements (default 8,16,32,64)")
    ap.add_argument("--families", default="rows,blocks", help="rows, blocks or both (default)")
    ap.add_argument("--hidden", type=int, default=4096, help="K, X's columns and W's rows (default 4096)")
    ap.add_argument("--work", help="where the μGraphs are written (default: a temporary directory, removed)")
    ap.add_argument("--write-only", action="store_true", help="write the μGraphs and the model's view; time nothing")
    ap.add_argument("--emulate", action="store_true", help="run on the host emulation (times mean nothing)")
    ap.add_argument("--target", default="sm_90a", help="code generation target (default sm_90a)")
    ap.add_argument("--cost-target", default="h200", help="the cost model's GPU (default h200)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--json", help="append one JSON line per μGraph to this file")
    ap.add_argument("--markdown", help="write the table to this file")
    a = ap.parse_args(argv)
    try:
        a.widths = [int(w) for w in a.widths.split(",") if w.strip()]
    except ValueError:
        ap.error("--widths takes comma-separated integers")
    a.families = [f.strip() for f in a.families.split(",") if f.strip()]
    if not a.widths or any(w < 8 or w % 8 for w in a.widths):
        ap.error("--widths must be multiples of 8")
    if not a.families or any(f not in ("rows", "blocks") for f in a.families):
        ap.error("--families takes rows, blocks or both")
    return a


def bench(binary, path, args):
    cmd = [binary, "bench", str(path), "--target", args.target, "--json", "--input-scale", "0.25"]
    if args.emulate:
        cmd.append("--emulate")
    else:
        cmd += ["--warmup", str(args.warmup), "--repeats", str(args.repeats)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode not in (0, 1) or not lines:
        return {"error": f"mugraph bench failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-1000:]}"}
    return json.loads(lines[-1])


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    binary = os.environ.get("MUGRAPH_BIN", str(ROOT / "build" / "bin" / "mugraph"))
    tmp = None
    if args.work:
        work = pathlib.Path(args.work)
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="tile_widths-")
        work = pathlib.Path(tmp.name)
    rows = []
    for family, w, columns in cases(args.families, args.widths):
        path = work / f"matmul_{family}_w{w}.json"
        path.write_text(json.dumps(ugraph(args.hidden, columns, w), indent=1) + "\n")
        [(kind, total, terms)] = kernel_breakdowns(path, args.cost_target)
        row = {"family": family, "width": w, "row_bytes": 2 * w, "blocks": columns // w,
               "w_mib": args.hidden * columns * 2 / 2**20, "pieces": (columns // w) * args.hidden,
               "model_us": total, "model_pieces_us": terms["pieces"], "model_dram_us": terms["dram"],
               "file": str(path), "hidden": args.hidden}
        if not args.write_only:
            m = bench(binary, path, args)
            if "error" in m:
                row["error"] = m["error"]
            else:
                row.update({"median_us": m["median_us"], "min_us": m["min_us"], "ok": m["ok"],
                            "device": m["device"], "emulated": m["emulated"]})
                if "graph_median_us" in m:
                    row["graph_median_us"] = m["graph_median_us"]
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
    table = markdown(rows, args)
    print(table)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(table, encoding="utf-8")
    if tmp is not None:
        tmp.cleanup()
    failed = [r for r in rows if "error" in r or r.get("ok") is False]
    return 1 if failed else 0


def markdown(rows, args):
    timed = not args.write_only
    head = ["family", "w (row bytes)", "blocks", "W MiB", "pieces (M)", "model µs", "pieces µs", "DRAM µs"]
    if timed:
        head += ["measured µs", "µs per M pieces", "GB/s of W", "check"]
    lines = [f"`python3 bench/tile_widths.py --widths {','.join(map(str, args.widths))} --families "
             f"{','.join(args.families)} --hidden {args.hidden}`; model: {args.cost_target}"
             + ("" if not timed else f"; median of {args.repeats} runs" + (" on the host emulation (times mean "
                                                                             "nothing)" if args.emulate else "")),
             "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["family"], f"{r['width']} ({r['row_bytes']})", str(r["blocks"]), f"{r['w_mib']:.0f}",
                 f"{r['pieces'] / 1e6:.3f}", f"{r['model_us']:.2f}", f"{r['model_pieces_us']:.2f}",
                 f"{r['model_dram_us']:.2f}"]
        if timed:
            if "error" in r:
                cells += ["error", "", "", r["error"][:80]]
            else:
                us = r["median_us"]
                cells += [f"{us:.2f}", f"{us / (r['pieces'] / 1e6):.1f}",
                          f"{r['w_mib'] * 2**20 / (us * 1e-6) / 1e9:.0f}", "OK" if r["ok"] else "FAILED"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
