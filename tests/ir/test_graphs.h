/// \file test_graphs.h
/// μGraphs built in code for tests: the paper's Figure 3b and small variants.
#pragma once

#include "mugraph/graph.h"

namespace mugraph::test {

inline OpAttrs iter(int io, std::array<int8_t, 3> imap, int8_t fmap) {
  OpAttrs a;
  a.io_index = io;
  a.imap = imap;
  a.fmap = fmap;
  return a;
}
inline OpAttrs accum_sum() {
  OpAttrs a;
  a.dim = kPhi;
  return a;
}
inline OpAttrs saver(int io, std::array<int8_t, 3> omap) {
  OpAttrs a;
  a.io_index = io;
  a.omap = omap;
  return a;
}
inline OpAttrs scalar(const char* text, int pos = 1) {
  OpAttrs a;
  a.has_scalar = true;
  a.scalar = *parse_scalar(text);
  a.scalar_pos = static_cast<int8_t>(pos);
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

}  // namespace mugraph::test
