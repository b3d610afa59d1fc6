# Gated MLP with a residual: X + silu(X W1) * (X W2), W1 and W2 square.
input X[8, 1024]
input W1[1024, 1024]
input W2[1024, 1024]
O = add(X, mul(silu(matmul(X, W1)), matmul(X, W2)))
output O
