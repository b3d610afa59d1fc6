# RMSNorm then a projection (the paper's RMSNorm benchmark, Figure 3), batch size 8:
# O = (X ⊙ G) / sqrt(sum(X², dim=1) / 4096) · W, X [2·bs, 4096].
input X[16, 4096]
input G[4096]
input W[4096, 4096]
S = sum(sqr(X), dim=1)
Y = div(mul(X, G), sqrt(div(S, 4096)))
O = matmul(Y, W)
output O
