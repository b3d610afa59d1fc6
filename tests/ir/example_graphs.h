/// \file example_graphs.h
/// The hand-designed μGraphs of examples/ugraphs/, built in code. The committed JSON files are
/// what users read and load; examples_test checks that each file equals its builder here, and
/// MUGRAPH_WRITE_EXAMPLES=1 test_ir --gtest_filter='Examples.*' rewrites the files from these.
/// Each builder takes its shapes, grid and for-loop as arguments whose defaults are the committed
/// example's; smaller ones give the same structure at sizes the verifier tests can afford.
/// @pre every split extent is divisible by the grid and loop extents that split it, grid > 1
///      and loop > 1 (so that every map of the example stays meaningful).
#pragma once

#include <string>
#include <vector>

#include "mugraph/graph.h"

namespace mugraph::examples {

inline OpAttrs iterator(int io, std::array<int8_t, 3> imap, int8_t fmap) { return attrs::iterator(io, imap, fmap); }
inline OpAttrs saver(int io, std::array<int8_t, 3> omap = {kPhi, kPhi, kPhi}) { return attrs::saver(io, omap); }
/// accum: kPhi sums over the iterations, a dim concatenates them along it.
inline OpAttrs accum(int32_t dim) { return attrs::accum(dim); }
inline OpAttrs reduce(int32_t dim) { return attrs::sum(dim); }
inline OpAttrs constant(const char* text) { return attrs::scalar(*parse_scalar(text)); }
/// A thread-level input iterator (no maps).
inline OpAttrs load(int io) { return iterator(io, {kPhi, kPhi, kPhi}, kPhi); }

constexpr std::array<int8_t, 3> kNoMap{kPhi, kPhi, kPhi};
constexpr std::array<int8_t, 3> kX0{0, kPhi, kPhi};
constexpr std::array<int8_t, 3> kX1{1, kPhi, kPhi};

/// The output tensor of the op that `append_with_body` returned.
inline TensorId output_of(const Graph& g, const Expected<OpId>& op, size_t k = 0) {
  return g.ops[op->index()].outputs[k];
}

inline void name_output(Graph& k, TensorId t, const std::string& name) {
  k.tensors[t.index()].name = name;
  k.mark_output(t, name);
}

/// Appends to block graph b a thread graph computing product / sqrt(ssq / h) (the RMS norm's
/// row scale, applied after the matmul it commutes with) and a saver of it to output 0, one
/// block's columns (x) apart.
inline void save_rms_scaled(Graph& b, TensorId product, TensorId ssq, int64_t h) {
  Graph t = make_thread_graph({b.type(product), b.type(ssq)});
  TensorId t_p = t.add(OpKind::input_iterator, {}, load(0));
  TensorId t_s = t.add(OpKind::input_iterator, {}, load(1));
  TensorId rms = t.add(OpKind::sqrt, {t.add(OpKind::div, {t_s}, constant(std::to_string(h).c_str()))});
  t.add(OpKind::output_saver, {t.add(OpKind::div, {t_p, rms})}, saver(0));
  auto fused = b.append_with_body(OpKind::thread_graph, {product, ssq}, std::move(t));
  b.add(OpKind::output_saver, {output_of(b, fused)}, saver(0, kX1));
}

/// Appends to block graph b a thread graph computing silu(a1) ⊙ a2 and a saver of it to output
/// 0, one block's columns (x) apart.
inline void save_gated(Graph& b, TensorId a1, TensorId a2) {
  Graph t = make_thread_graph({b.type(a1), b.type(a2)});
  TensorId t1 = t.add(OpKind::input_iterator, {}, load(0));
  TensorId t2 = t.add(OpKind::input_iterator, {}, load(1));
  t.add(OpKind::output_saver, {t.add(OpKind::mul, {t.add(OpKind::silu, {t1}), t2})}, saver(0));
  auto fused = b.append_with_body(OpKind::thread_graph, {a1, a2}, std::move(t));
  b.add(OpKind::output_saver, {output_of(b, fused)}, saver(0, kX1));
}

/// examples/rmsnorm_linear.mg fused as in the paper's Figure 3b. X [rows=16, h=4096], G [h],
/// W [h, n=4096]. 128 blocks each own 32 columns of W; the for-loop walks the hidden dim in 16
/// steps of 256. The loop body computes the partial sum of squares of X and the partial product
/// (X⊙G)·W; both are accumulated; a thread graph divides the product by sqrt(S / h), which
/// is the program's result because scaling rows commutes with the matmul.
inline Graph rmsnorm_fig3b(int64_t rows = 16, int64_t h = 4096, int64_t n = 4096, int64_t grid = 128,
                           int64_t loop = 16) {
  Graph k;
  TensorId x = k.add_input("X", {rows, h});
  TensorId gm = k.add_input("G", {h});
  TensorId w = k.add_input("W", {h, n});
  Graph b = make_block_graph({k.type(x), k.type(gm), k.type(w)}, Dim3{grid, 1, 1}, loop);
  TensorId xt = b.add(OpKind::input_iterator, {}, iterator(0, kNoMap, 1));   // [16, 256]
  TensorId gt = b.add(OpKind::input_iterator, {}, iterator(1, kNoMap, 0));   // [256]
  TensorId wt = b.add(OpKind::input_iterator, {}, iterator(2, kX1, 0));      // [256, 32]
  TensorId ssq = b.add(OpKind::sum, {b.add(OpKind::sqr, {xt})}, reduce(1));  // [16, 1]
  TensorId mm = b.add(OpKind::matmul, {b.add(OpKind::mul, {xt, gt}), wt});   // [16, 32]
  TensorId acc_ssq = b.add(OpKind::accum, {ssq}, accum(kPhi));
  TensorId acc_mm = b.add(OpKind::accum, {mm}, accum(kPhi));
  save_rms_scaled(b, acc_mm, acc_ssq, h);
  auto kop = k.append_with_body(OpKind::graph_kernel, {x, gm, w}, std::move(b));
  name_output(k, output_of(k, kop), "O");
  return k;
}

/// examples/rmsnorm_linear.mg as Figure 3b with the hidden dim split across blocks too, so that
/// each block reads W in rows 4 times as wide (256 bytes instead of 64). X [rows=16, h=4096],
/// G [h], W [h, n=4096]. Kernel 1: grid (n / cols = 32, splits = 4); block (c, s) walks its
/// h / splits = 1024 of the hidden dim in a 4-step loop, as rmsnorm_fig3b does its 4096, and
/// saves its partial product (X⊙G)·W [16, 128] and partial sum of squares [16, 1] into stacks
/// whose rows hold one split each (P [splits·16, n], S [splits·16, n / cols]; every column block
/// saves the same sums of squares). Kernel 2: grid (n / cols), a loop over the splits sums each
/// block's slot of both stacks and divides the product by sqrt(S / h) in a thread graph. The
/// partials pass through device memory in f16 (1 MiB of the 33 MiB the μGraph moves).
inline Graph rmsnorm_fig3b_split_k(int64_t rows = 16, int64_t h = 4096, int64_t n = 4096, int64_t cols = 128,
                                   int64_t splits = 4, int64_t loop = 4) {
  const std::array<int8_t, 3> kY1{kPhi, 1, kPhi}, kY0{kPhi, 0, kPhi}, kX1Y0{1, 0, kPhi};
  Graph k;
  TensorId x = k.add_input("X", {rows, h});
  TensorId gm = k.add_input("G", {h});
  TensorId w = k.add_input("W", {h, n});
  Graph b1 = make_block_graph({k.type(x), k.type(gm), k.type(w)}, Dim3{n / cols, splits, 1}, loop);
  TensorId xt = b1.add(OpKind::input_iterator, {}, iterator(0, kY1, 1));       // [16, 256]
  TensorId gt = b1.add(OpKind::input_iterator, {}, iterator(1, kY0, 0));       // [256]
  TensorId wt = b1.add(OpKind::input_iterator, {}, iterator(2, kX1Y0, 0));     // [256, 128]
  TensorId ssq = b1.add(OpKind::sum, {b1.add(OpKind::sqr, {xt})}, reduce(1));  // [16, 1]
  TensorId mm = b1.add(OpKind::matmul, {b1.add(OpKind::mul, {xt, gt}), wt});   // [16, 128]
  b1.add(OpKind::output_saver, {b1.add(OpKind::accum, {mm}, accum(kPhi))}, saver(0, kX1Y0));
  b1.add(OpKind::output_saver, {b1.add(OpKind::accum, {ssq}, accum(kPhi))}, saver(1, kX1Y0));
  auto k1 = k.append_with_body(OpKind::graph_kernel, {x, gm, w}, std::move(b1));
  TensorId partials = output_of(k, k1, 0);  // [64, 4096]
  TensorId sums = output_of(k, k1, 1);      // [64, 32]

  Graph b2 = make_block_graph({k.type(partials), k.type(sums)}, Dim3{n / cols, 1, 1}, splits);
  TensorId pt = b2.add(OpKind::input_iterator, {}, iterator(0, kX1, 0));  // [16, 128]
  TensorId st = b2.add(OpKind::input_iterator, {}, iterator(1, kX1, 0));  // [16, 1]
  TensorId p_acc = b2.add(OpKind::accum, {pt}, accum(kPhi));
  TensorId s_acc = b2.add(OpKind::accum, {st}, accum(kPhi));
  save_rms_scaled(b2, p_acc, s_acc, h);
  auto k2 = k.append_with_body(OpKind::graph_kernel, {partials, sums}, std::move(b2));
  name_output(k, output_of(k, k2), "O");
  return k;
}

/// examples/gated_mlp.mg as in the paper's Figure 10b. X [rows=8, h=4096], W1, W2 [h, n=4096]. 128
/// blocks each own 32 columns of W1 and W2; the for-loop walks the reduced dim in 16 steps of
/// 256 and accumulates both products; a thread graph computes silu(A1) ⊙ A2 once per block.
inline Graph gated_mlp_fig10b(int64_t rows = 8, int64_t h = 4096, int64_t n = 4096, int64_t grid = 128,
                              int64_t loop = 16) {
  Graph k;
  TensorId x = k.add_input("X", {rows, h});
  TensorId w1 = k.add_input("W1", {h, n});
  TensorId w2 = k.add_input("W2", {h, n});
  Graph b = make_block_graph({k.type(x), k.type(w1), k.type(w2)}, Dim3{grid, 1, 1}, loop);
  TensorId xt = b.add(OpKind::input_iterator, {}, iterator(0, kNoMap, 1));                // [8, 256]
  TensorId w1t = b.add(OpKind::input_iterator, {}, iterator(1, kX1, 0));                  // [256, 32]
  TensorId w2t = b.add(OpKind::input_iterator, {}, iterator(2, kX1, 0));                  // [256, 32]
  TensorId acc1 = b.add(OpKind::accum, {b.add(OpKind::matmul, {xt, w1t})}, accum(kPhi));  // [8, 32]
  TensorId acc2 = b.add(OpKind::accum, {b.add(OpKind::matmul, {xt, w2t})}, accum(kPhi));  // [8, 32]
  save_gated(b, acc1, acc2);
  auto kop = k.append_with_body(OpKind::graph_kernel, {x, w1, w2}, std::move(b));
  name_output(k, output_of(k, kop), "O");
  return k;
}

/// examples/linear_residual.mg with its bias and residual as epilogue operands. X [rows=16,
/// h=4096], W [h, n=4096], B [n], R [rows, n]. 64 blocks each own 64 columns of W; the for-loop
/// walks the reduced dim in 16 steps of 256 and accumulates the product. The block's slices of B
/// and R do not change with the iteration (fmap φ): loaded once, they join the accumulated
/// product after the loop, in a thread graph that adds all three.
inline Graph linear_residual_epilogue(int64_t rows = 16, int64_t h = 4096, int64_t n = 4096, int64_t grid = 64,
                                      int64_t loop = 16) {
  Graph k;
  TensorId x = k.add_input("X", {rows, h});
  TensorId w = k.add_input("W", {h, n});
  TensorId bias = k.add_input("B", {n});
  TensorId r = k.add_input("R", {rows, n});
  Graph b = make_block_graph({k.type(x), k.type(w), k.type(bias), k.type(r)}, Dim3{grid, 1, 1}, loop);
  TensorId xt = b.add(OpKind::input_iterator, {}, iterator(0, kNoMap, 1));              // [16, 256]
  TensorId wt = b.add(OpKind::input_iterator, {}, iterator(1, kX1, 0));                 // [256, 64]
  TensorId bt = b.add(OpKind::input_iterator, {}, iterator(2, kX0, kPhi));              // [64], once
  TensorId rt = b.add(OpKind::input_iterator, {}, iterator(3, kX1, kPhi));              // [16, 64], once
  TensorId acc = b.add(OpKind::accum, {b.add(OpKind::matmul, {xt, wt})}, accum(kPhi));  // [16, 64]
  Graph t = make_thread_graph({b.type(rt), b.type(acc), b.type(bt)});
  TensorId t_r = t.add(OpKind::input_iterator, {}, load(0));
  TensorId t_acc = t.add(OpKind::input_iterator, {}, load(1));
  TensorId t_b = t.add(OpKind::input_iterator, {}, load(2));
  t.add(OpKind::output_saver, {t.add(OpKind::add, {t_r, t.add(OpKind::add, {t_acc, t_b})})}, saver(0));
  auto fused = b.append_with_body(OpKind::thread_graph, {rt, acc, bt}, std::move(t));
  b.add(OpKind::output_saver, {output_of(b, fused)}, saver(0, kX1));
  auto kop = k.append_with_body(OpKind::graph_kernel, {x, w, bias, r}, std::move(b));
  name_output(k, output_of(k, kop), "O");
  return k;
}

/// examples/gated_mlp.mg as Figure 10b with the reduced dim split across blocks too, so that each
/// block reads W1 and W2 in rows twice as wide (128 bytes instead of 64). X [rows=8, h=4096],
/// W1, W2 [h, n=4096]. Kernel 1: grid (n / cols = 64, splits = 2); block (c, s) walks its
/// h / splits = 2048 of the reduced dim in an 8-step loop and saves its partial products X·W1
/// and X·W2 [8, 64] into stacks whose rows hold one split each ([splits·8, n]). Kernel 2: grid
/// (n / cols), a loop over the splits sums each block's slot of both stacks, and a thread graph
/// computes silu(A1) ⊙ A2 (silu needs the whole sum, so it cannot move into kernel 1).
inline Graph gated_mlp_fig10b_split_k(int64_t rows = 8, int64_t h = 4096, int64_t n = 4096, int64_t cols = 64,
                                      int64_t splits = 2, int64_t loop = 8) {
  const std::array<int8_t, 3> kY1{kPhi, 1, kPhi}, kX1Y0{1, 0, kPhi};
  Graph k;
  TensorId x = k.add_input("X", {rows, h});
  TensorId w1 = k.add_input("W1", {h, n});
  TensorId w2 = k.add_input("W2", {h, n});
  Graph b1 = make_block_graph({k.type(x), k.type(w1), k.type(w2)}, Dim3{n / cols, splits, 1}, loop);
  TensorId xt = b1.add(OpKind::input_iterator, {}, iterator(0, kY1, 1));                    // [8, 256]
  TensorId w1t = b1.add(OpKind::input_iterator, {}, iterator(1, kX1Y0, 0));                 // [256, 64]
  TensorId w2t = b1.add(OpKind::input_iterator, {}, iterator(2, kX1Y0, 0));                 // [256, 64]
  TensorId acc1 = b1.add(OpKind::accum, {b1.add(OpKind::matmul, {xt, w1t})}, accum(kPhi));  // [8, 64]
  TensorId acc2 = b1.add(OpKind::accum, {b1.add(OpKind::matmul, {xt, w2t})}, accum(kPhi));  // [8, 64]
  b1.add(OpKind::output_saver, {acc1}, saver(0, kX1Y0));
  b1.add(OpKind::output_saver, {acc2}, saver(1, kX1Y0));
  auto k1 = k.append_with_body(OpKind::graph_kernel, {x, w1, w2}, std::move(b1));
  TensorId p1 = output_of(k, k1, 0), p2 = output_of(k, k1, 1);  // [16, 4096] each

  Graph b2 = make_block_graph({k.type(p1), k.type(p2)}, Dim3{n / cols, 1, 1}, splits);
  TensorId s1 = b2.add(OpKind::accum, {b2.add(OpKind::input_iterator, {}, iterator(0, kX1, 0))}, accum(kPhi));
  TensorId s2 = b2.add(OpKind::accum, {b2.add(OpKind::input_iterator, {}, iterator(1, kX1, 0))}, accum(kPhi));
  save_gated(b2, s1, s2);
  auto k2 = k.append_with_body(OpKind::graph_kernel, {p1, p2}, std::move(b2));
  name_output(k, output_of(k, k2), "O");
  return k;
}

/// examples/exp_scale.mg with a concatenating accumulator. X [rows=16, h=4096], G [h]. 8 blocks each
/// own 512 columns; the for-loop walks them in 4 tiles of 128, computes exp(X) ⊙ G on each, and
/// the accumulator concatenates the 4 tiles along the columns (fmap and accum both use dim 1).
inline Graph exp_scale_concat(int64_t rows = 16, int64_t h = 4096, int64_t grid = 8, int64_t loop = 4) {
  Graph k;
  TensorId x = k.add_input("X", {rows, h});
  TensorId gm = k.add_input("G", {h});
  Graph b = make_block_graph({k.type(x), k.type(gm)}, Dim3{grid, 1, 1}, loop);
  TensorId xt = b.add(OpKind::input_iterator, {}, iterator(0, kX1, 1));  // [16, 128]
  TensorId gt = b.add(OpKind::input_iterator, {}, iterator(1, kX0, 0));  // [128]
  TensorId y = b.add(OpKind::mul, {b.add(OpKind::exp, {xt}), gt});       // [16, 128]
  TensorId acc = b.add(OpKind::accum, {y}, accum(1));                    // [16, 512]
  b.add(OpKind::output_saver, {acc}, saver(0, kX1));
  auto kop = k.append_with_body(OpKind::graph_kernel, {x, gm}, std::move(b));
  name_output(k, output_of(k, kop), "O");
  return k;
}

/// examples/rmsnorm.mg as two graph-defined kernels: a split reduction. X [rows=16, h=4096], G [h].
/// Kernel 1: 32 blocks each own 128 columns of X and write the partial row sums of squares of
/// their columns to P [16, 32] (a 2-step loop with a summing accumulator). Kernel 2: 32 blocks
/// each own 128 columns again, read all of P, sum it to S [16, 1] and normalize their columns
/// in a thread graph.
inline Graph rmsnorm_two_kernels(int64_t rows = 16, int64_t h = 4096, int64_t grid = 32, int64_t loop = 2) {
  Graph k;
  TensorId x = k.add_input("X", {rows, h});
  TensorId gm = k.add_input("G", {h});

  Graph b1 = make_block_graph({k.type(x)}, Dim3{grid, 1, 1}, loop);
  TensorId xt1 = b1.add(OpKind::input_iterator, {}, iterator(0, kX1, 1));        // [16, 64]
  TensorId part = b1.add(OpKind::sum, {b1.add(OpKind::sqr, {xt1})}, reduce(1));  // [16, 1]
  b1.add(OpKind::output_saver, {b1.add(OpKind::accum, {part}, accum(kPhi))}, saver(0, kX1));
  auto k1 = k.append_with_body(OpKind::graph_kernel, {x}, std::move(b1));
  TensorId p = output_of(k, k1);  // [16, 32]

  Graph b2 = make_block_graph({k.type(x), k.type(gm), k.type(p)}, Dim3{grid, 1, 1}, 1);
  TensorId xt = b2.add(OpKind::input_iterator, {}, iterator(0, kX1, kPhi));     // [16, 128]
  TensorId gt = b2.add(OpKind::input_iterator, {}, iterator(1, kX0, kPhi));     // [128]
  TensorId pt = b2.add(OpKind::input_iterator, {}, iterator(2, kNoMap, kPhi));  // [16, 32]
  TensorId s = b2.add(OpKind::sum, {pt}, reduce(1));                            // [16, 1]
  Graph t = make_thread_graph({b2.type(xt), b2.type(gt), b2.type(s)});
  TensorId tx = t.add(OpKind::input_iterator, {}, load(0));
  TensorId tg = t.add(OpKind::input_iterator, {}, load(1));
  TensorId ts = t.add(OpKind::input_iterator, {}, load(2));
  TensorId rms = t.add(OpKind::sqrt, {t.add(OpKind::div, {ts}, constant(std::to_string(h).c_str()))});
  t.add(OpKind::output_saver, {t.add(OpKind::div, {t.add(OpKind::mul, {tx, tg}), rms})}, saver(0));
  auto fused = b2.append_with_body(OpKind::thread_graph, {xt, gt, s}, std::move(t));
  b2.add(OpKind::output_saver, {output_of(b2, fused)}, saver(0, kX1));
  auto k2 = k.append_with_body(OpKind::graph_kernel, {x, gm, p}, std::move(b2));
  name_output(k, output_of(k, k2), "O");
  return k;
}

namespace detail {
/// gqa_split_kv and qknorm_split_kv: attention with the keys split along x and, with query_tiles
/// > 1, the queries along z; with `qk_norms`, Q's rows divided by their L2 norms and K's columns
/// by their RMS norms over d (in thread graphs) before Q·K.
inline Graph split_kv_attention(int64_t heads, int64_t rows, int64_t d, int64_t keys, int64_t splits, int64_t loop,
                                int64_t rows_per_block, int64_t query_tiles, bool qk_norms) {
  const int8_t z_rows = query_tiles > 1 ? 1 : kPhi;
  const std::array<int8_t, 3> kX2Y0{2, 0, kPhi}, kX1Y0{1, 0, kPhi}, kX2Y0Z1{2, 0, z_rows}, kY0Z1{kPhi, 0, z_rows};
  Graph k;
  TensorId q = k.add_input("Q", {heads, rows, d});
  TensorId kk = k.add_input("K", {heads, d, keys});
  TensorId v = k.add_input("V", {heads, keys, d});

  Graph b1 = make_block_graph({k.type(q), k.type(kk), k.type(v)}, Dim3{splits, heads, query_tiles}, loop);
  TensorId qt = b1.add(OpKind::input_iterator, {}, iterator(0, kY0Z1, kPhi));  // [1, 256, 64]
  TensorId kt = b1.add(OpKind::input_iterator, {}, iterator(1, kX2Y0, 2));     // [1, 64, 16]
  TensorId vt = b1.add(OpKind::input_iterator, {}, iterator(2, kX1Y0, 1));     // [1, 16, 64]
  if (qk_norms) {
    // In a thread graph, x / sqrt(ssq / d) (RMS) or x / sqrt(ssq) (L2), ssq the sums of squares
    // of x over d.
    auto normalized = [&](TensorId ssq, TensorId x, bool rms) {
      Graph t = make_thread_graph({b1.type(ssq), b1.type(x)});
      TensorId ts = t.add(OpKind::input_iterator, {}, load(0));
      TensorId tx = t.add(OpKind::input_iterator, {}, load(1));
      if (rms) ts = t.add(OpKind::div, {ts}, constant(std::to_string(d).c_str()));
      t.add(OpKind::output_saver, {t.add(OpKind::div, {tx, t.add(OpKind::sqrt, {ts})})}, saver(0));
      return output_of(b1, b1.append_with_body(OpKind::thread_graph, {ssq, x}, std::move(t)));
    };
    qt = normalized(b1.add(OpKind::sum, {b1.add(OpKind::sqr, {qt})}, reduce(2)), qt, false);
    kt = normalized(b1.add(OpKind::sum, {b1.add(OpKind::sqr, {kt})}, reduce(1)), kt, true);
  }
  TensorId e = b1.add(OpKind::exp, {b1.add(OpKind::matmul, {qt, kt})});  // [1, 256, 16]
  TensorId num = b1.add(OpKind::matmul, {e, vt});                        // [1, 256, 64]
  TensorId den = b1.add(OpKind::sum, {e}, reduce(2));                    // [1, 256, 1]
  TensorId num_acc = b1.add(OpKind::accum, {num}, accum(kPhi));
  TensorId den_acc = b1.add(OpKind::accum, {den}, accum(kPhi));
  b1.add(OpKind::output_saver, {num_acc}, saver(0, kX2Y0Z1));
  b1.add(OpKind::output_saver, {den_acc}, saver(1, kX2Y0Z1));
  auto k1 = k.append_with_body(OpKind::graph_kernel, {q, kk, v}, std::move(b1));
  TensorId nums = output_of(k, k1, 0);  // [2, 256, 64·splits]
  TensorId dens = output_of(k, k1, 1);  // [2, 256, splits]

  Graph b2 = make_block_graph({k.type(nums), k.type(dens)}, Dim3{rows / rows_per_block, heads, 1}, splits);
  TensorId nt = b2.add(OpKind::input_iterator, {}, iterator(0, kX1Y0, 2));  // [1, 8, 64]
  TensorId dt = b2.add(OpKind::input_iterator, {}, iterator(1, kX1Y0, 2));  // [1, 8, 1]
  TensorId num_sum = b2.add(OpKind::accum, {nt}, accum(kPhi));              // [1, 8, 64]
  TensorId den_sum = b2.add(OpKind::accum, {dt}, accum(kPhi));              // [1, 8, 1]
  b2.add(OpKind::output_saver, {b2.add(OpKind::div, {num_sum, den_sum})}, saver(0, kX1Y0));
  auto k2 = k.append_with_body(OpKind::graph_kernel, {nums, dens}, std::move(b2));
  name_output(k, output_of(k, k2), "O");
  return k;
}
}  // namespace detail

/// examples/gqa.mg with the key/value sequence split across blocks, as FlashDecoding does and
/// as the paper's GQA μGraph does. Q [heads=2, rows=256, d=64], K [heads, d, keys=4096],
/// V [heads, keys, d]. Kernel 1: grid (splits=64, heads); block (s, h) walks its 64 keys in a
/// 4-step loop and accumulates its partial numerator exp(Q·K)·V [256, 64] and partial
/// denominator Σ exp(Q·K) [256, 1]; the savers put the blocks' partials side by side, a stack
/// [heads, 256, 64·splits] and a [heads, 256, splits]. Kernel 2: grid (rows/8, heads); its loop
/// reads one slot of each stack per iteration, accumulators sum them, and the block divides.
/// 128 blocks read each key once, where splitting rows makes every block read all of them.
/// With query_tiles > 1, kernel 1's grid also splits the rows along z (grid (splits, heads,
/// query_tiles)): each block pairs a slice of the keys with a slice of the queries.
inline Graph gqa_split_kv(int64_t heads = 2, int64_t rows = 256, int64_t d = 64, int64_t keys = 4096,
                          int64_t splits = 64, int64_t loop = 4, int64_t rows_per_block = 8, int64_t query_tiles = 1) {
  return detail::split_kv_attention(heads, rows, d, keys, splits, loop, rows_per_block, query_tiles, false);
}

/// The paper's QKNorm at batch size 1 (bench/paper/programs/qknorm_bs1.mg: Q divided by its L2
/// norm, which keeps exp finite; examples/qknorm.mg's RMS norm makes scores of about N(0, 64),
/// whose exp overflows f16) split as gqa_split_kv with query_tiles, with both norms computed
/// where their tiles are loaded. Q [heads=2, rows=256, d=64], K [heads, d, keys=4096], V [heads, keys,
/// d]. Kernel 1: grid (splits=16, heads, query_tiles=4), 128 blocks; in each of 4 iterations,
/// block (s, h, q) divides its 64 queries by their L2 norms and the iteration's 64 keys by their
/// RMS norms over d, in thread graphs, then accumulates exp(QN·KN)·V and Σ exp(QN·KN) as
/// gqa_split_kv does. Kernel 2 is gqa_split_kv's. The search's 3-D grids contain this μGraph;
/// its time-limited search does not reach it (docs/search.md).
inline Graph qknorm_split_kv(int64_t heads = 2, int64_t rows = 256, int64_t d = 64, int64_t keys = 4096,
                             int64_t splits = 16, int64_t loop = 4, int64_t rows_per_block = 8,
                             int64_t query_tiles = 4) {
  return detail::split_kv_attention(heads, rows, d, keys, splits, loop, rows_per_block, query_tiles, true);
}

/// One example: its JSON file (in examples/ugraphs/), the program it implements (in examples/)
/// and its builder at the example's shapes.
struct Example {
  const char* json_file;
  const char* program_file;
  Graph (*build)();
};

inline const std::vector<Example>& all_examples() {
  static const std::vector<Example> examples = {
      {"rmsnorm_fig3b.json", "rmsnorm_linear.mg", [] { return rmsnorm_fig3b(); }},
      {"gated_mlp_fig10b.json", "gated_mlp.mg", [] { return gated_mlp_fig10b(); }},
      {"rmsnorm_fig3b_split_k.json", "rmsnorm_linear.mg", [] { return rmsnorm_fig3b_split_k(); }},
      {"gated_mlp_fig10b_split_k.json", "gated_mlp.mg", [] { return gated_mlp_fig10b_split_k(); }},
      {"rmsnorm_fig3b_grid64.json", "rmsnorm_linear.mg", [] { return rmsnorm_fig3b(16, 4096, 4096, 64); }},
      {"gated_mlp_fig10b_grid64.json", "gated_mlp.mg", [] { return gated_mlp_fig10b(8, 4096, 4096, 64); }},
      {"exp_scale_concat.json", "exp_scale.mg", [] { return exp_scale_concat(); }},
      {"linear_residual_epilogue.json", "linear_residual.mg", [] { return linear_residual_epilogue(); }},
      {"rmsnorm_two_kernels.json", "rmsnorm.mg", [] { return rmsnorm_two_kernels(); }},
      {"gqa_split_kv.json", "gqa.mg", [] { return gqa_split_kv(); }},
      {"qknorm_split_kv.json", "../bench/paper/programs/qknorm_bs1.mg", [] { return qknorm_split_kv(); }},
  };
  return examples;
}

}  // namespace mugraph::examples
