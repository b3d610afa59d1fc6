#!/usr/bin/env python3
"""The paper's six benchmarks (its Table 4 and Figure 7; DESIGN.md §10) as one table: each
benchmark's program in the program format, at the paper's shapes or at small ones (for CI), for
each batch size the paper varies, and its PyTorch implementations.

The program files in bench/paper/programs/ are written from this table:

    python3 bench/paper/benchmarks.py --write      # (re)writes bench/paper/programs/*.mg
    python3 bench/paper/benchmarks.py --check      # exit 1 when a file differs from the table

Shapes follow the open-source Mirage's benchmark scripts: where a script takes a batch size (RMSNorm:
X [2·bs, 4096]; GQA and QKNorm: 2·bs heads' worth of Q [256, 64], K [64, 4096], V [4096, 64];
nTrans: [8·bs, 4096]) there is one program for bs = 1 and one for bs = 8; GatedMLP (X [8, 4096]) and
LoRA (X [16, 256]) have fixed shapes in those scripts and one program each. RMSNorm's W is
[4096, 4096] (DESIGN.md §10).

PyTorch needs importing only for the reference implementations (torch_variants).
"""
import argparse
import dataclasses
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
PROGRAMS_DIR = HERE / "programs"


@dataclasses.dataclass(frozen=True)
class Shapes:
    """The sizes a benchmark program is written with: the paper's, or small ones for CI."""
    hidden: int      # RMSNorm's, GatedMLP's and nTrans's row length
    out: int         # RMSNorm's and GatedMLP's projection width
    lora_in: int     # LoRA's input width
    lora_out: int    # LoRA's output width
    lora_rank: int
    q_rows: int      # attention: query rows per head group
    kv_len: int      # attention: key/value sequence length
    head: int        # attention: head dimension


PAPER = Shapes(hidden=4096, out=4096, lora_in=256, lora_out=4096, lora_rank=16, q_rows=256, kv_len=4096, head=64)
SMALL = Shapes(hidden=256, out=256, lora_in=64, lora_out=256, lora_rank=16, q_rows=64, kv_len=256, head=64)


def _rmsnorm(bs, s):
    rows = 2 * bs
    return (f"""# RMSNorm then a projection (the paper's RMSNorm benchmark, Figure 3), batch size {bs}:
# O = (X ⊙ G) / sqrt(sum(X², dim=1) / {s.hidden}) · W, X [2·bs, {s.hidden}].
input X[{rows}, {s.hidden}]
input G[{s.hidden}]
input W[{s.hidden}, {s.out}]
S = sum(sqr(X), dim=1)
Y = div(mul(X, G), sqrt(div(S, {s.hidden})))
O = matmul(Y, W)
output O
""")


def _gated_mlp(bs, s):
    return (f"""# Gated MLP (the paper's GatedMLP benchmark, Figure 10): O = silu(X·W1) ⊙ (X·W2).
input X[8, {s.hidden}]
input W1[{s.hidden}, {s.out}]
input W2[{s.hidden}, {s.out}]
O = mul(silu(matmul(X, W1)), matmul(X, W2))
output O
""")


def _lora(bs, s):
    return (f"""# LoRA (the paper's LoRA benchmark, Figure 9): O = X·W + (X·A)·B, rank {s.lora_rank}.
input X[16, {s.lora_in}]
input W[{s.lora_in}, {s.lora_out}]
input A[{s.lora_in}, {s.lora_rank}]
input B[{s.lora_rank}, {s.lora_out}]
O = add(matmul(X, W), matmul(matmul(X, A), B))
output O
""")


def _gqa(bs, s):
    b = 2 * bs
    return (f"""# Group-query attention (the paper's GQA benchmark), batch size {bs}: the {b} key/value heads
# of one GPU's share, each with {s.q_rows} query rows. K is stored transposed. Softmax as exp, sum
# and div (no running max: the program stays in the Lax fragment); 1/sqrt({s.head}) folded into Q.
input Q[{b}, {s.q_rows}, {s.head}]
input K[{b}, {s.head}, {s.kv_len}]
input V[{b}, {s.kv_len}, {s.head}]
E = exp(matmul(Q, K))
O = matmul(div(E, sum(E, dim=2)), V)
output O
""")


def _qknorm(bs, s):
    b = 2 * bs
    return (f"""# QK normalization then attention (the paper's QKNorm benchmark, Figure 8), batch size {bs},
# shapes as GQA's. K's rows are RMS-normalized over the head dim (its dim 1: K is stored
# transposed); Q's are divided by their L2 norm, which is the RMS norm times the attention scale
# 1/sqrt({s.head}) (so the scores are bounded by sqrt({s.head}) and exp cannot overflow).
input Q[{b}, {s.q_rows}, {s.head}]
input K[{b}, {s.head}, {s.kv_len}]
input V[{b}, {s.kv_len}, {s.head}]
QN = div(Q, sqrt(sum(sqr(Q), dim=2)))
KN = div(K, sqrt(div(sum(sqr(K), dim=1), {s.head})))
E = exp(matmul(QN, KN))
O = matmul(div(E, sum(E, dim=2)), V)
output O
""")


def _ntrans(bs, s):
    rows = 8 * bs
    return (f"""# The normalized Transformer's update (the paper's nTrans benchmark), batch size {bs}:
# O = norm(X + α ⊙ norm(H − X)) with norm(v) = v / sqrt(sum(v², dim=1) / {s.hidden}).
input H[{rows}, {s.hidden}]
input X[{rows}, {s.hidden}]
input Alpha[{rows}, {s.hidden}]
D = sub(H, X)
N = div(D, sqrt(div(sum(sqr(D), dim=1), {s.hidden})))
Y = add(X, mul(Alpha, N))
O = div(Y, sqrt(div(sum(sqr(Y), dim=1), {s.hidden})))
output O
""")


@dataclasses.dataclass(frozen=True)
class Benchmark:
    key: str
    title: str
    batch_sizes: tuple
    write: object          # (bs, Shapes) -> program text
    paper_h100: str        # the paper's speedup over the best baseline on an H100 (Figure 7, §8.2)
    attention: bool = False

    def program(self, bs, shapes=PAPER):
        return self.write(bs, shapes)

    def config_name(self, bs):
        return self.key if len(self.batch_sizes) == 1 else f"{self.key}_bs{bs}"


BENCHMARKS = [
    Benchmark("rmsnorm", "RMSNorm", (1, 8), _rmsnorm, "1.9×"),
    Benchmark("gated_mlp", "GatedMLP", (1,), _gated_mlp, "2.7–3.3×"),
    Benchmark("lora", "LoRA", (1,), _lora, "1.1–2.4×"),
    Benchmark("gqa", "GQA", (1, 8), _gqa, "up to 2.2×", attention=True),
    Benchmark("qknorm", "QKNorm", (1, 8), _qknorm, "up to 1.4×", attention=True),
    Benchmark("ntrans", "nTrans", (1, 8), _ntrans, "— (1.8–2.0× in §8.2)"),
]


BY_KEY = {b.key: b for b in BENCHMARKS}


def configuration(name):
    """(benchmark, batch size, name) of one configuration name ("gqa_bs8", "lora")."""
    return next(c for c in configurations() if c[2] == name)


def configurations(keys=None):
    """(benchmark, batch size, config name) for every program, in the table's order; keys (a list of
    benchmark keys or config names) selects some."""
    out = []
    for b in BENCHMARKS:
        for bs in b.batch_sizes:
            name = b.config_name(bs)
            if keys is None or b.key in keys or name in keys:
                out.append((b, bs, name))
    if keys is not None:
        known = {b.key for b in BENCHMARKS} | {name for _, _, name in configurations()}
        unknown = [k for k in keys if k not in known]
        if unknown:
            raise ValueError(f"unknown benchmark {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return out


# --------------------------------------------------------------------------------------------------
# PyTorch implementations. Inputs arrive in the program's order as f16 tensors. `reference` is the
# program op for op (in whatever dtype its inputs have: the check runs it in f32); the variants are
# what a PyTorch user writes, timed as baselines.


def reference(key, inputs):
    import torch

    if key == "rmsnorm":
        X, G, W = inputs
        S = (X * X).sum(dim=1, keepdim=True)
        return (X * G / (S / X.shape[1]).sqrt()) @ W
    if key == "gated_mlp":
        X, W1, W2 = inputs
        return torch.nn.functional.silu(X @ W1) * (X @ W2)
    if key == "lora":
        X, W, A, B = inputs
        return X @ W + (X @ A) @ B
    if key == "gqa":
        Q, K, V = inputs
        E = torch.exp(Q @ K)
        return (E / E.sum(dim=2, keepdim=True)) @ V
    if key == "qknorm":
        Q, K, V = inputs
        QN = Q / (Q * Q).sum(dim=2, keepdim=True).sqrt()
        KN = K / ((K * K).sum(dim=1, keepdim=True) / K.shape[1]).sqrt()
        E = torch.exp(QN @ KN)
        return (E / E.sum(dim=2, keepdim=True)) @ V
    if key == "ntrans":
        H, X, Alpha = inputs

        def norm(v):
            return v / ((v * v).sum(dim=1, keepdim=True) / v.shape[1]).sqrt()

        return norm(X + Alpha * norm(H - X))
    raise KeyError(key)


def _eager(key):
    """The benchmark as a PyTorch user writes it: library norms and softmax, f16 throughout."""
    import torch
    import torch.nn.functional as F

    if key == "rmsnorm":
        # eps=0: the program has no epsilon (the library's default would change the result by ~1e-7).
        return lambda X, G, W: F.rms_norm(X, (X.shape[1],), G, eps=0.0) @ W
    if key == "gated_mlp":
        return lambda X, W1, W2: F.silu(X @ W1) * (X @ W2)
    if key == "lora":
        return lambda X, W, A, B: X @ W + (X @ A) @ B
    if key == "gqa":
        return lambda Q, K, V: torch.softmax(Q @ K, dim=-1) @ V
    if key == "qknorm":
        def qknorm(Q, K, V):
            d = Q.shape[2]
            QN = F.rms_norm(Q, (d,), eps=0.0) / d ** 0.5
            KN = F.rms_norm(K.transpose(1, 2), (d,), eps=0.0).transpose(1, 2)
            return torch.softmax(QN @ KN, dim=-1) @ V
        return qknorm
    if key == "ntrans":
        def ntrans(H, X, Alpha):
            d = H.shape[1]
            return F.rms_norm(X + Alpha * F.rms_norm(H - X, (d,), eps=0.0), (d,), eps=0.0)
        return ntrans
    raise KeyError(key)


def _sdpa(key):
    """Attention through scaled_dot_product_attention (FlashAttention-class kernels). It wants K as
    [..., kv_len, head]: the caller passes K already in that layout (prepare_sdpa_inputs), as a
    framework would keep it, so the transposition is not timed."""
    import torch.nn.functional as F

    if key == "gqa":
        def gqa(Q, Kt, V):
            return F.scaled_dot_product_attention(Q.unsqueeze(1), Kt.unsqueeze(1), V.unsqueeze(1), scale=1.0).squeeze(1)
        return gqa
    if key == "qknorm":
        def qknorm(Q, Kt, V):
            d = Q.shape[2]
            QN = F.rms_norm(Q, (d,), eps=0.0)
            KN = F.rms_norm(Kt, (d,), eps=0.0)
            return F.scaled_dot_product_attention(QN.unsqueeze(1), KN.unsqueeze(1), V.unsqueeze(1),
                                                  scale=1.0 / d ** 0.5).squeeze(1)
        return qknorm
    raise KeyError(key)


def prepare_sdpa_inputs(inputs):
    Q, K, V = inputs
    return [Q, K.transpose(1, 2).contiguous(), V]


def torch_variants(benchmark):
    """(name, function, prepare) for each PyTorch implementation of a benchmark; prepare maps the
    program's inputs to the function's (None: the same)."""
    out = [("PyTorch", _eager(benchmark.key), None)]
    if benchmark.attention:
        out.append(("SDPA", _sdpa(benchmark.key), prepare_sdpa_inputs))
    return out


# The standard deviation of the random inputs: small enough that exp(Q·K) stays well within f16 in
# GQA (whose program has no running max); the same for every benchmark.
INPUT_STD = 0.25


# --------------------------------------------------------------------------------------------------


def program_path(name):
    return PROGRAMS_DIR / f"{name}.mg"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true", help="write bench/paper/programs/*.mg from the table")
    g.add_argument("--check", action="store_true", help="exit 1 when a program file differs from the table")
    args = ap.parse_args(argv)
    stale = []
    for b, bs, name in configurations():
        path, text = program_path(name), b.program(bs)
        if args.write:
            PROGRAMS_DIR.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(HERE.parent.parent)}")
        elif not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(str(path))
    if stale:
        print("differ from bench/paper/benchmarks.py (run it with --write): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
