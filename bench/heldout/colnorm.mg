# Normalize columns: sums over the rows (dim 0), then a division by them.
input X[512, 64] f32
C = sum(sqr(X), dim=0)
O = div(X, sqrt(C))
output O
