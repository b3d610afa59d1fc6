# RMSNorm without the projection: O = (X ⊙ G) / sqrt(sum(X², dim=1) / 4096).
# Its hand-written μGraph, ugraphs/rmsnorm_two_kernels.json, splits the row reduction over two
# graph-defined kernels: partial sums of squares per column chunk, then combine and normalize.
input X[16, 4096]
input G[4096]
S = sum(sqr(X), dim=1)          # -> [16, 1]
O = div(mul(X, G), sqrt(div(S, 4096)))
output O
