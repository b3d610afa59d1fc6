input X[4, 4]
A = sum(dim=0, X)
B = sum(X, dim=0, dim=1)
C = reshape(X, shape=16)
D = repeat(X, dim=[0], times=2)
output A
