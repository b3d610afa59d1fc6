/// \file test_graphs.h
/// μGraphs built in code for tests and benchmarks: the paper's Figure 3b (RMSNorm + matmul) and
/// Figure 10b (GatedMLP) μGraphs, the kernel-level programs they implement, and small variants.
#pragma once

#include <string>

#include "mugraph/graph.h"

namespace mugraph::test {

inline OpAttrs iter(int io, std::array<int8_t, 3> imap, int8_t fmap) { return attrs::iterator(io, imap, fmap); }
inline OpAttrs accum_sum() { return attrs::accum(kPhi); }
inline OpAttrs saver(int io, std::array<int8_t, 3> omap) { return attrs::saver(io, omap); }
inline OpAttrs scalar(const char* text, int pos = 1) { return attrs::scalar(*parse_scalar(text), static_cast<int8_t>(pos)); }

/// A one-block, one-iteration block graph whose first two ops load two [4, 8] f32 tiles, whole
/// (tensors 0 and 1), for tests that build on them.
inline Graph two_tile_body() {
  const TensorType tile{Shape{4, 8}, DType::f32};
  Graph body = make_block_graph({tile, tile}, Dim3{1, 1, 1}, 1);
  body.add(OpKind::input_iterator, {}, iter(0, {kPhi, kPhi, kPhi}, kPhi));
  body.add(OpKind::input_iterator, {}, iter(1, {kPhi, kPhi, kPhi}, kPhi));
  return body;
}

/// The attributes of a concat along dim.
inline OpAttrs concat_dim(int32_t dim) {
  OpAttrs a;
  a.dim = dim;
  return a;
}

/// RMSNorm + matmul fused as in the paper's Figure 3b: X [b, h], G [h], W [h, n]; grid over W's
/// columns, for-loop over h; accumulators for sum(X²) and (X⊙G)·W; a thread graph computes
/// acc / sqrt(ssq / h) after the loop.
inline Graph rmsnorm_fig3b(int64_t b, int64_t h, int64_t n, int64_t grid, int64_t loop, DType dt = DType::f32) {
  Graph k;
  TensorId x = k.add_input("X", {b, h}, dt);
  TensorId gm = k.add_input("G", {h}, dt);
  TensorId w = k.add_input("W", {h, n}, dt);
  Graph body = make_block_graph({k.type(x), k.type(gm), k.type(w)}, Dim3{grid, 1, 1}, loop);
  // Maps name only grid axes with more than one block and loops with more than one iteration.
  int8_t col = grid > 1 ? 1 : kPhi;
  int8_t f1 = loop > 1 ? 1 : kPhi, f0 = loop > 1 ? 0 : kPhi;
  TensorId xt = body.add(OpKind::input_iterator, {}, iter(0, {kPhi, kPhi, kPhi}, f1));
  TensorId gt = body.add(OpKind::input_iterator, {}, iter(1, {kPhi, kPhi, kPhi}, f0));
  TensorId wt = body.add(OpKind::input_iterator, {}, iter(2, {col, kPhi, kPhi}, f0));
  OpAttrs s;
  s.dim = 1;
  TensorId ssq = body.add(OpKind::sum, {body.add(OpKind::sqr, {xt})}, s);
  TensorId mm = body.add(OpKind::matmul, {body.add(OpKind::mul, {xt, gt}), wt});
  TensorId acc_ssq = body.add(OpKind::accum, {ssq}, accum_sum());
  TensorId acc_mm = body.add(OpKind::accum, {mm}, accum_sum());
  Graph tg = make_thread_graph({body.type(acc_mm), body.type(acc_ssq)});
  TensorId ta = tg.add(OpKind::input_iterator, {}, iter(0, {kPhi, kPhi, kPhi}, kPhi));
  TensorId ts = tg.add(OpKind::input_iterator, {}, iter(1, {kPhi, kPhi, kPhi}, kPhi));
  TensorId rms = tg.add(OpKind::sqrt, {tg.add(OpKind::div, {ts}, scalar(std::to_string(h).c_str()))});
  tg.add(OpKind::output_saver, {tg.add(OpKind::div, {ta, rms})}, saver(0, {kPhi, kPhi, kPhi}));
  auto fused = body.append_with_body(OpKind::thread_graph, {acc_mm, acc_ssq}, std::move(tg));
  TensorId out = body.ops[fused->index()].outputs[0];
  body.add(OpKind::output_saver, {out}, saver(0, {col, kPhi, kPhi}));
  auto kop = k.append_with_body(OpKind::graph_kernel, {x, gm, w}, std::move(body));
  k.mark_output(k.ops[kop->index()].outputs[0], "O");
  return k;
}

/// RMSNorm + matmul as the program states it (Figure 3a), with pre-defined kernel ops only:
/// O = matmul(X ⊙ G / sqrt(sum(X², dim=1) / h), W).
inline Graph rmsnorm_reference(int64_t b, int64_t h, int64_t n, DType dt = DType::f32) {
  Graph k;
  TensorId x = k.add_input("X", {b, h}, dt);
  TensorId gm = k.add_input("G", {h}, dt);
  TensorId w = k.add_input("W", {h, n}, dt);
  OpAttrs s;
  s.dim = 1;
  TensorId ssq = k.add(OpKind::sum, {k.add(OpKind::sqr, {x})}, s);
  TensorId rms = k.add(OpKind::sqrt, {k.add(OpKind::div, {ssq}, scalar(std::to_string(h).c_str()))});
  TensorId y = k.add(OpKind::div, {k.add(OpKind::mul, {x, gm}), rms});
  k.mark_output(k.add(OpKind::matmul, {y, w}), "O");
  return k;
}

/// GatedMLP fused into one graph-defined kernel as in the paper's Figure 10b: X [b, h],
/// W1, W2 [h, n]; grid over the output columns, for-loop over h; both matmuls accumulated in the
/// loop; silu(acc1) ⊙ acc2 as post-processing.
inline Graph gated_mlp_fused(int64_t b, int64_t h, int64_t n, int64_t grid, int64_t loop, DType dt = DType::f32) {
  Graph k;
  TensorId x = k.add_input("X", {b, h}, dt);
  TensorId w1 = k.add_input("W1", {h, n}, dt);
  TensorId w2 = k.add_input("W2", {h, n}, dt);
  Graph body = make_block_graph({k.type(x), k.type(w1), k.type(w2)}, Dim3{grid, 1, 1}, loop);
  int8_t col = grid > 1 ? 1 : kPhi;
  int8_t f1 = loop > 1 ? 1 : kPhi, f0 = loop > 1 ? 0 : kPhi;
  TensorId xt = body.add(OpKind::input_iterator, {}, iter(0, {kPhi, kPhi, kPhi}, f1));
  TensorId w1t = body.add(OpKind::input_iterator, {}, iter(1, {col, kPhi, kPhi}, f0));
  TensorId w2t = body.add(OpKind::input_iterator, {}, iter(2, {col, kPhi, kPhi}, f0));
  TensorId acc1 = body.add(OpKind::accum, {body.add(OpKind::matmul, {xt, w1t})}, accum_sum());
  TensorId acc2 = body.add(OpKind::accum, {body.add(OpKind::matmul, {xt, w2t})}, accum_sum());
  TensorId out = body.add(OpKind::mul, {body.add(OpKind::silu, {acc1}), acc2});
  body.add(OpKind::output_saver, {out}, saver(0, {col, kPhi, kPhi}));
  auto kop = k.append_with_body(OpKind::graph_kernel, {x, w1, w2}, std::move(body));
  k.mark_output(k.ops[kop->index()].outputs[0], "O");
  return k;
}

/// GatedMLP as the program states it, with pre-defined kernel ops only: silu(X·W1) ⊙ (X·W2).
inline Graph gated_mlp_reference(int64_t b, int64_t h, int64_t n, DType dt = DType::f32) {
  Graph k;
  TensorId x = k.add_input("X", {b, h}, dt);
  TensorId w1 = k.add_input("W1", {h, n}, dt);
  TensorId w2 = k.add_input("W2", {h, n}, dt);
  TensorId a = k.add(OpKind::silu, {k.add(OpKind::matmul, {x, w1})});
  k.mark_output(k.add(OpKind::mul, {a, k.add(OpKind::matmul, {x, w2})}), "O");
  return k;
}

/// LoRA's fused form (paper §8.1, Figure 9b): (X ‖ X·A) · (W ‖ B) at the paper's shapes.
inline Graph lora_concat() {
  Graph k;
  TensorId x = k.add_input("X", {16, 256});
  TensorId w = k.add_input("W", {256, 4096});
  TensorId a = k.add_input("A", {256, 16});
  TensorId b = k.add_input("B", {16, 4096});
  TensorId left = k.add(OpKind::concat, {x, k.add(OpKind::matmul, {x, a})}, attrs::sum(1));  // [16, 272]
  TensorId right = k.add(OpKind::concat, {w, b}, attrs::sum(0));                             // [272, 4096]
  k.mark_output(k.add(OpKind::matmul, {left, right}), "O");
  return k;
}

}  // namespace mugraph::test
