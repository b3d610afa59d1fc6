# A projection with a bias, added to the residual stream (a transformer layer's output
# projection): the bias and the residual join the matmul's sums after its loop, in the same
# kernel (an epilogue; docs/search.md, "Epilogue operands").
input X[16, 4096]
input W[4096, 4096]
input B[4096]
input R[16, 4096]
O = add(R, add(matmul(X, W), B))
output O
