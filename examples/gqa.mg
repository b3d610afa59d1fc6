# Attention as in the paper's GQA benchmark, for batch size bs = 1: Q [2·bs, 256, 64],
# K [2·bs, 64, 4096] (already transposed), V [2·bs, 4096, 64]. Softmax without the running max
# (exp, sum, div), which keeps it in the Lax fragment; the 1/√64 scale is taken as folded into Q.
input Q[2, 256, 64]
input K[2, 64, 4096]
input V[2, 4096, 64]
E = exp(matmul(Q, K))           # -> [2, 256, 4096]
D = sum(E, dim=2)               # -> [2, 256, 1]
O = matmul(div(E, D), V)        # -> [2, 256, 64]
output O
