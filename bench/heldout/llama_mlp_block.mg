# A transformer block's MLP half as Hugging Face's Llama writes it (LlamaRMSNorm, LlamaMLP, the
# residual add), at a small hidden size: 3 matmuls, the down projection chained after the gated
# MLP. Its best, 2 kernels, comes in about 3 s on a 2-core VM; the search is exhausted in about
# a minute.
input X[8, 256]
input G[256]
input W_gate[256, 512]
input W_up[256, 512]
input W_down[512, 256]
N = mul(G, div(X, sqrt(add(div(sum(sqr(X), dim=1), 256), 1e-6))))
M = mul(silu(matmul(N, W_gate)), matmul(N, W_up))
O = add(X, matmul(M, W_down))
output O
