input X[4, 4]
eps = 1e-6
n = 4096
Y = div(X, sqrt(add(div(sum(sqr(X), dim=-1), n), eps)))
Z = sub(-2, mul(Y, 0.125))
W = Z
output W, Y
