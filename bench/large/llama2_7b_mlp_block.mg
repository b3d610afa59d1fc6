# The MLP half of a Llama-2-7B block at batch 8 (hidden 4096, MLP 11008): RMS norm with its ε, the
# gated MLP, the down projection and the residual add; bench/heldout/llama_mlp_block.mg at real
# sizes. With two graph-defined kernels its whole search leaves the down projection to cuBLAS; the
# parts searched beside it give that a kernel of its own (docs/search.md, "The parts beside an
# exhausted whole search"). Weights 258 MiB in f16; a search without a time limit takes about 3
# minutes on a 2-core VM.
input X[8, 4096]
input G[4096]
input W_gate[4096, 11008]
input W_up[4096, 11008]
input W_down[11008, 4096]
N = mul(G, div(X, sqrt(add(div(sum(sqr(X), dim=1), 4096), 1e-6))))
M = mul(silu(matmul(N, W_gate)), matmul(N, W_up))
O = add(X, matmul(M, W_down))
output O
