# LoRA: X W + (X A) B
input X[16, 256]
input W[256, 4096]
input A[256, 16]
input B[16, 4096]
O = add(matmul(X, W), matmul(matmul(X, A), B))
output O
