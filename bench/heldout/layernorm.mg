# LayerNorm without bias: centre, then scale by the root of the variance, then by G.
input X[16, 1024]
input G[1024]
M = div(sum(X, dim=1), 1024)
C = sub(X, M)
V = div(sum(sqr(C), dim=1), 1024)
O = mul(div(C, sqrt(V)), G)
output O
