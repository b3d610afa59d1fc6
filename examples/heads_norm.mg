# A projection, then an RMS norm per attention head (as QK-norm does): the reshape splits the
# projection's 512 columns into 8 heads of 64. The search keeps the reshape (a view of the
# projection's result) and searches the projection and the norm around it (docs/search.md,
# "Programs with layout ops").
input X[16, 512]
input W[512, 512]
Y = reshape(matmul(X, W), shape=[16, 8, 64])
O = div(Y, sqrt(div(sum(sqr(Y), dim=2), 64)))
output O
