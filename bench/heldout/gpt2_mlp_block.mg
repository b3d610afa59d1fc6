# GPT-2 small's MLP block at 8 tokens: LayerNorm, fc (768 -> 3072) with bias, gelu in its tanh form as
# from_torch writes it (x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3)))), proj with bias, and the residual.
input X[8, 768]
input G[768]
input BETA[768]
input W1[768, 3072]
input B1[3072]
input W2[3072, 768]
input B2[768]
MU = div(sum(X, dim=1), 768)
C = sub(X, MU)
XN = add(mul(div(C, sqrt(add(div(sum(sqr(C), dim=1), 768), 1e-5))), G), BETA)
H = add(matmul(XN, W1), B1)
A = div(H, add(exp(mul(add(H, mul(mul(sqr(H), H), 0.044715)), -1.59576912)), 1))
O = add(add(matmul(A, W2), B2), X)
output O
