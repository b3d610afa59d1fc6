input A[8, 16] f32
input B[16, 32] bf16
input C[8, 16]
M = matmul(A, B)
P = add(A, C)
Q = sub(A, 1)
R = mul(0.5, C)
D = div(A, C)
E = gelu(relu(silu(sqrt(sqr(exp(A))))))
S = sum(A, dim=0, to=1)
G = sum(A, dim=1, to=4)
T = repeat(A, dim=-1, times=3)
U = reshape(A, shape=[4, 2, 16])
V = concat(A, C, A, dim=0)
output M, P, Q
output R, D, E, S, G, T, U, V
