# Llama-3-8B decoding one token: RMS norm (epsilon 1e-5), then the Q, K and V projections with
# separate weights (grouped-query attention: K and V have 8 heads of 128 against Q's 32).
input X[1, 4096]
input G[4096]
input WQ[4096, 4096]
input WK[4096, 1024]
input WV[4096, 1024]
N = mul(div(X, sqrt(add(div(sum(sqr(X), dim=1), 4096), 1e-5))), G)
Q = matmul(N, WQ)
K = matmul(N, WK)
V = matmul(N, WV)
output Q, K, V
