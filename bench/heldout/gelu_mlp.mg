# A two-layer MLP with GELU (not in the Lax fragment).
input X[8, 1024]
input W1[1024, 2048]
input W2[2048, 1024]
O = matmul(gelu(matmul(X, W1)), W2)
output O
