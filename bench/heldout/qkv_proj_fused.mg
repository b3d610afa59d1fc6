# qkv_proj.mg with the Q, K and V weights stored as one [1024, 768] matrix (a fused QKV weight,
# as GPT-2's c_attn keeps it): the columns 0-511 are Q's, 512-639 K's, 640-767 V's.
input X[8, 1024]
input G[1024]
input W[1024, 768]
N = mul(div(X, sqrt(div(sum(sqr(X), dim=1), 1024))), G)
QKV = matmul(N, W)
output QKV
