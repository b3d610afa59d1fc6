# Element-wise exp with a per-column scale: O = exp(X) ⊙ G.
# Its hand-written μGraph, ugraphs/exp_scale_concat.json, walks each block's columns in a
# for-loop and concatenates the per-iteration tiles with an accumulator (accum concat).
input X[16, 4096]
input G[4096]
O = mul(exp(X), G)
output O
