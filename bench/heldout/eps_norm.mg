# RMS norm with an epsilon under the square root, in bf16.
input X[32, 1024] bf16
O = div(X, sqrt(add(div(sum(sqr(X), dim=1), 1024), 1e-6)))
output O
