# LoRA (the paper's LoRA benchmark): O = X·W + (X·A)·B, at the paper's shapes (rank 16).
# The paper's best μGraph is one kernel computing (W‖B)·(X‖A·X) with concat (its Figure 9b).
input X[16, 256]
input W[256, 4096]
input A[256, 16]
input B[16, 4096]
O = add(matmul(X, W), matmul(matmul(X, A), B))
output O
