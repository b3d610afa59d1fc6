# Attention at odd shapes: 3 heads, 40 queries, 200 keys, head dim 32.
input Q[3, 40, 32]
input K[3, 32, 200]
input V[3, 200, 32]
S = exp(matmul(Q, K))
O = div(matmul(S, V), sum(S, dim=2))
output O
