input X[4]
A = add(X, 1e400)
B = add(X, 1.2.3)
C = add(X, -X)
D = add(X, 0x10)
E = add(X, 1234567890123456789012)
output A
