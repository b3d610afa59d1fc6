# A SwiGLU MLP with its down projection.
input X[8, 1024]
input W1[1024, 1024]
input W3[1024, 1024]
input W2[1024, 1024]
H = mul(silu(matmul(X, W1)), matmul(X, W3))
O = matmul(H, W2)
output O
