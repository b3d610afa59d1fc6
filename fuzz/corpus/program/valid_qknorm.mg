# QKNorm: RMS norms of Q and K, then attention
input Q[2, 256, 64]
input K[2, 4096, 64]
input KT[2, 64, 4096]
input V[2, 4096, 64]
QN = div(Q, sqrt(div(sum(sqr(Q), dim=-1), 64)))
KN = div(KT, sqrt(div(sum(sqr(KT), dim=-2), 64)))
E = exp(matmul(QN, KN))
O = matmul(div(E, sum(E, dim=2)), V)
output O
