input X[4]
C = 2
D = add(C, 3)
output C
