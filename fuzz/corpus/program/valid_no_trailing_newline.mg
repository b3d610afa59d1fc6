input X[4]
Y = exp(X)
output Y