# A sigmoid written with numbers on both sides: 1 / (1 + exp(-x)), then scaled rows.
input X[32, 256]
input S[32, 1]
Y = div(1, add(exp(mul(X, -1)), 1))
O = mul(sub(1, Y), S)
output O
