# RMSNorm then a projection at shapes that are not powers of two, in bf16.
input X[24, 768] bf16
input G[768] bf16
input W[768, 3072] bf16
N = mul(div(X, sqrt(div(sum(sqr(X), dim=1), 768))), G)
O = matmul(N, W)
output O
