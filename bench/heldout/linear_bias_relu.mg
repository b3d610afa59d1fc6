# A linear layer with a bias and ReLU.
input X[32, 1024]
input W[1024, 1024]
input B[1024]
O = relu(add(matmul(X, W), B))
output O
