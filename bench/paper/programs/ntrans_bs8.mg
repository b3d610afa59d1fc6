# The normalized Transformer's update (the paper's nTrans benchmark), batch size 8:
# O = norm(X + α ⊙ norm(H − X)) with norm(v) = v / sqrt(sum(v², dim=1) / 4096).
input H[64, 4096]
input X[64, 4096]
input Alpha[64, 4096]
D = sub(H, X)
N = div(D, sqrt(div(sum(sqr(D), dim=1), 4096)))
Y = add(X, mul(Alpha, N))
O = div(Y, sqrt(div(sum(sqr(Y), dim=1), 4096)))
output O
