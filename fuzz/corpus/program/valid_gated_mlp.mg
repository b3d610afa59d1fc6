# GatedMLP: silu(X W1) * (X W2)
input X[8, 4096]
input W1[4096, 4096]
input W2[4096, 4096]
O = mul(silu(matmul(X, W1)), matmul(X, W2))
output O
