# Attention with a head dim: Q, K, V as [batch, heads, ...], scores scaled by 1/8.
input Q[2, 4, 64, 64]
input K[2, 4, 64, 512]
input V[2, 4, 512, 64]
S = exp(div(matmul(Q, K), 8))
O = div(matmul(S, V), sum(S, dim=3))
output O
