"""Inputs on which an example's f16 reference stays finite, for checking generated code against the
interpreter (tests/tools/test_codegen.py, and bench/gpu_session.sh's check step on a GPU).

`mugraph bench` draws inputs from a standard normal. Attention overflows f16 there: exp(Q·K) of
standard normal Q and K reaches e^30 and more. So every input is drawn from 0.25·N(0, 1), as
bench/codegen_vs_torch.py and bench/paper/run.py draw theirs. The QKNorm example normalizes Q and
K to unit RMS, so its scores reach 64 for random directions whatever the scale: there Q's rows and
K's columns are nearly orthogonal patterns instead.

    python3 bench/bench_inputs.py MANIFEST.json FILE OUT_DIR [--seed N]

writes OUT_DIR/NAME.npy for each input of FILE (a μGraph or program; its inputs as the codegen
manifest lists them: mugraph codegen's manifest.json, also in every bench build directory) and
prints the matching `--input NAME=PATH` arguments."""
import argparse
import json
import pathlib
import sys

NP_DTYPE = {"f16": "float16", "bf16": "float32", "f32": "float32"}  # NumPy has no bf16: f32, rounded by mugraph


def program_of(path):
    """The program a μGraph or program file implements, as far as its inputs go: <name> for
    .../<name>/best.json (the saved searches), the file's stem otherwise (<name>.mg, and the
    hand-written μGraphs, whose inputs need no more than the scale)."""
    path = pathlib.Path(path)
    if path.name == "best.json":
        return path.parent.name
    return path.stem


def random_inputs(program, manifest, rng):
    """One array per input of the manifest, in its order."""
    import numpy as np
    out = []
    for t in manifest["inputs"]:
        shape = t["shape"]
        a = 0.25 * rng.standard_normal(shape)
        if program.startswith("qknorm") and t["name"] == "Q":
            a = np.where(np.arange(shape[-1]) % 2 == 0, 1.0, -1.0) + 0.1 * rng.standard_normal(shape)
        if program.startswith("qknorm") and t["name"] == "K":
            a = 1.0 + 0.1 * rng.standard_normal(shape)
        out.append(a.astype(NP_DTYPE[t["dtype"]]))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("manifest")
    parser.add_argument("file", help="the μGraph or program (which program it implements: program_of)")
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    import numpy as np
    manifest = json.loads(pathlib.Path(args.manifest).read_text())
    out = pathlib.Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    words = []
    for t, a in zip(manifest["inputs"], random_inputs(program_of(args.file), manifest, np.random.default_rng(args.seed))):
        path = out / f"{t['name']}.npy"
        np.save(path, a)
        words += ["--input", f"{t['name']}={path}"]
    print(" ".join(words))
    return 0


if __name__ == "__main__":
    sys.exit(main())
