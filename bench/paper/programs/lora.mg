# LoRA (the paper's LoRA benchmark, Figure 9): O = X·W + (X·A)·B, rank 16.
input X[16, 256]
input W[256, 4096]
input A[256, 16]
input B[16, 4096]
O = add(matmul(X, W), matmul(matmul(X, A), B))
output O
