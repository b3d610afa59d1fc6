# The MLP half of a Llama-3-8B block at batch 8 (hidden 4096, MLP 14336): RMS norm with its ε, the
# gated MLP, the down projection and the residual add. Real shapes: its weights are 336 MiB in f16,
# and verifying its candidates means running them at this size (docs/benchmarks.md, twenty-eighth
# session). Not in the held-out sweep, which it would outlast.
input X[8, 4096]
input G[4096]
input W_gate[4096, 14336]
input W_up[4096, 14336]
input W_down[14336, 4096]
N = mul(G, div(X, sqrt(add(div(sum(sqr(X), dim=1), 4096), 1e-6))))
M = mul(silu(matmul(N, W_gate)), matmul(N, W_up))
O = add(X, matmul(M, W_down))
output O
