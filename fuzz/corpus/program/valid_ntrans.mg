# nTrans: norm(x + alpha * norm(h - x))
input H[8, 4096] bf16
input X[8, 4096] bf16
input ALPHA[8, 4096] bf16
D = sub(H, X)
N1 = div(D, sqrt(sum(sqr(D), dim=1)))
Z = add(X, mul(ALPHA, N1))
O = div(Z, sqrt(sum(sqr(Z), dim=1)))
output O
