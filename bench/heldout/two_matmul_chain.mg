# Two matmuls in a row.
input X[64, 256]
input A[256, 256]
input B[256, 256]
O = matmul(matmul(X, A), B)
output O
