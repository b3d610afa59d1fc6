# QKNorm (the paper's QKNorm benchmark): RMS-normalize Q and K over the head dim (64), then the
# attention of gqa.mg. Shapes as in gqa.mg (bs = 1); K is stored transposed, so its head dim is
# dim 1. The paper's best μGraph fuses both norms into the attention kernel (its Figure 8b).
input Q[2, 256, 64]
input K[2, 64, 4096]
input V[2, 4096, 64]
QN = div(Q, sqrt(div(sum(sqr(Q), dim=2), 64)))     # [2, 256, 1] row norms broadcast over dim 2
KN = div(K, sqrt(div(sum(sqr(K), dim=1), 64)))     # [2, 1, 4096] column norms broadcast over dim 1
E = exp(matmul(QN, KN))         # -> [2, 256, 4096]
O = matmul(div(E, sum(E, dim=2)), V)
output O
