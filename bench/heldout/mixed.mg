# Every op the generator does not grow: a sum to several values, repeat, concat, reshape.
input X[4, 32]
input Z[4, 32]
Y = mul(exp(X), 2)
P = sum(Y, dim=1, to=4)
Q = repeat(sqrt(exp(Z)), dim=0, times=2)
C = concat(P, P, dim=1)
O = add(Q, 1)
V = reshape(O, shape=[4, 64])
output Y, C, V
