# RMSNorm followed by a projection (examples/rmsnorm_linear.mg at small shapes, for the benchmark
# scripts' smoke tests)
input X[4, 64] f16
input G[64]
input W[64, 64]
S = sum(sqr(X), dim=1)          # -> [4, 1]
Y = div(mul(X, G), sqrt(div(S, 64)))
O = matmul(Y, W)
output O
