# A projection, then an RMS norm per head of 64 (the reshape splits the columns).
input X[16, 512]
input W[512, 512]
Y = reshape(matmul(X, W), shape=[16, 8, 64])
O = div(Y, sqrt(div(sum(sqr(Y), dim=2), 64)))
output O
