# Group-query attention written with repeat: 2 key/value heads shared by 8 query heads.
input Q[8, 32, 64]
input K[2, 64, 1024]
input V[2, 1024, 64]
KR = repeat(K, dim=0, times=4)
VR = repeat(V, dim=0, times=4)
S = exp(matmul(Q, KR))
O = div(matmul(S, VR), sum(S, dim=2))
output O
