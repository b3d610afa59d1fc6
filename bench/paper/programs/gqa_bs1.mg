# Group-query attention (the paper's GQA benchmark), batch size 1: the 2 key/value heads
# of one GPU's share, each with 256 query rows. K is stored transposed. Softmax as exp, sum
# and div (no running max: the program stays in the Lax fragment); 1/sqrt(64) folded into Q.
input Q[2, 256, 64]
input K[2, 64, 4096]
input V[2, 4096, 64]
E = exp(matmul(Q, K))
O = matmul(div(E, sum(E, dim=2)), V)
output O
