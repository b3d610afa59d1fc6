input X[4
Y = sum(X, dim=[0, 1
output Y