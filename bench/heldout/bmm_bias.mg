# Batched matmul with a bias broadcast over batch and rows.
input X[4, 64, 128]
input W[4, 128, 64]
input B[64]
O = add(matmul(X, W), B)
output O
