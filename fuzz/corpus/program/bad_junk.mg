input X[4] f16 f32
Y = exp(X)) # extra paren
Y = exp(X) , Z
output Y,
