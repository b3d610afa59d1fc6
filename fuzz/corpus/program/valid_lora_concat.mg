# LoRA rewritten with concat: (X || X A) (W || B)
input X[16, 256]
input W[256, 4096]
input A[256, 16]
input B[16, 4096]
XA = matmul(X, A)
O = matmul(concat(X, XA, dim=-1), concat(W, B, dim=0))
output O
