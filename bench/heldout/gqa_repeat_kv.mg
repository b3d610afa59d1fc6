# Group-query attention as Hugging Face's repeat_kv writes it: each of 2 key/value heads
# expanded to the 4 query heads of its group (K[:, :, None].expand(...).reshape(...)).
input Q[1, 8, 32, 64]
input K[1, 2, 64, 1024]
input V[1, 2, 1024, 64]
KR = reshape(repeat(reshape(K, shape=[1, 2, 1, 64, 1024]), dim=2, times=4), shape=[1, 8, 64, 1024])
VR = reshape(repeat(reshape(V, shape=[1, 2, 1, 1024, 64]), dim=2, times=4), shape=[1, 8, 1024, 64])
S = exp(matmul(Q, KR))
O = div(matmul(S, VR), sum(S, dim=3))
output O
