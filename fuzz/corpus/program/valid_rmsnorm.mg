# RMSNorm followed by a projection (the paper's Figure 3a)
input X[16, 4096] f16          # dtype is optional: f16 (default), bf16, f32
input G[4096]
input W[4096, 4096]
S = sum(sqr(X), dim=1)          # -> [16, 1]
Y = div(mul(X, G), sqrt(div(S, 4096)))
O = matmul(Y, W)
output O                        # one or more names, comma separated, in output order
