# One row through a Llama-7B up projection (11008 = 2^8 * 43 columns).
input X[1, 4096]
input W[4096, 11008]
O = silu(matmul(X, W))
output O
