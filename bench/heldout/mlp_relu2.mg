# Squared-ReLU MLP (Primer): relu(X W1)^2 W2.
input X[16, 512]
input W1[512, 2048]
input W2[2048, 512]
H = sqr(relu(matmul(X, W1)))
O = matmul(H, W2)
output O
