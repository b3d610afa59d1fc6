# A column sum in f32: sum over the first dim.
input X[4096, 64] f32
O = sum(X, dim=0)
output O
