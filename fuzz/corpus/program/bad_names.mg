input input[4]
input X[4]
sum = exp(X)
X = exp(X)
output Y, X, X
