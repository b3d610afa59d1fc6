# RMSNorm, then three projections of the normalized rows (Q, K and V), each an output.
input X[8, 1024]
input G[1024]
input WQ[1024, 512]
input WK[1024, 128]
input WV[1024, 128]
N = mul(div(X, sqrt(div(sum(sqr(X), dim=1), 1024))), G)
Q = matmul(N, WQ)
K = matmul(N, WK)
V = matmul(N, WV)
output Q, K, V
