# Gated MLP (the paper's GatedMLP benchmark): O = silu(X·W1) ⊙ (X·W2), at the paper's shapes.
# A hand-written μGraph in the style of the paper's Figure 10b: ugraphs/gated_mlp_fig10b.json.
input X[8, 4096]
input W1[4096, 4096]
input W2[4096, 4096]
O = mul(silu(matmul(X, W1)), matmul(X, W2))
output O
