# LoRA at other shapes than the paper's: X·W + (X·A)·B.
input X[16, 512]
input W[512, 512]
input A[512, 16]
input B[16, 512]
O = add(matmul(X, W), matmul(matmul(X, A), B))
output O
