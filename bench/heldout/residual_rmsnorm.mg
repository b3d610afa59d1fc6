# A residual add followed by RMS norm, with both the sum and the norm as outputs.
input X[16, 2048]
input R[16, 2048]
input G[2048]
Y = add(X, R)
O = div(mul(Y, G), sqrt(div(sum(sqr(Y), dim=1), 2048)))
output Y, O
