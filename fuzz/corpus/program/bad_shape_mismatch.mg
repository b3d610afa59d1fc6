input X[16, 4096]
input W[1024, 64]
Y = matmul(X, W)
output Y
