// The CUDA emitter: a μGraph in, one CUDA source out (codegen.h). Each graph-defined kernel op
// becomes one kernel that calls the device library's tile ops on shared-memory tiles; each
// pre-defined op becomes a small kernel over device memory (the Grid scope of the same ops); a
// host function launches them in order.
//
// The generated code is meant to be read: one line per block op, named after the op, with the
// shape and dtype of what it makes in a comment.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <map>
#include <sstream>

#include "files.h"
#include "mugraph/codegen.h"
#include "mugraph/cost_model.h"
#include "mugraph/error.h"
#include "mugraph/layout_choice.h"
#include "mugraph/op_order.h"
#include "mugraph/shared_memory_plan.h"
#include "mugraph/validate.h"
#include "mugraph_device/wgmma_rules.h"

namespace mugraph {

namespace {

using codegen::row_major_strides;
using codegen::TileOrigin;

constexpr int64_t kSharedAlign = 16;  // bytes: every STensor starts on a 16-byte boundary
constexpr int64_t kWarpgroupThreads = 128;
constexpr int64_t kTmaSharedAlign = 128;  // bytes: a TMA tile's shared-memory address
// A swizzled tile starts where its swizzle pattern does (8 rows of the span: at most 1024 bytes),
// counted from the kernel's shared window, which is realigned for it at run time: the window is
// only declared 128-byte aligned (MGD_DYNAMIC_SHARED), so that costs up to 1024 - 128 bytes.
constexpr int64_t kSwizzleSharedAlign = 1024;
constexpr int64_t kDeclaredSharedAlign = 128;
constexpr int64_t kWorkspaceAlign = 256;  // bytes: every intermediate DTensor in the workspace
constexpr int kGridThreads = 256;         // threads per block of a pre-defined op's kernel
constexpr int64_t kGridMaxBlocks = 4096;  // its blocks stride over the elements beyond this

int64_t align_up(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

/// A shape as a braced list of extents: {4096, 4096}.
std::string braced(const Shape& s) {
  std::string out = "{";
  for (int d = 0; d < s.rank(); ++d) out += (d ? ", " : "") + std::to_string(s[d]);
  return out + "}";
}

std::string ctype(DType t) {
  switch (t) {
    case DType::f16:
      return "mgd::half";
    case DType::bf16:
      return "mgd::bfloat16";
    case DType::f32:
      return "float";
  }
  return "?";
}

std::string dims(const std::vector<int64_t>& v) {
  std::string s = "mgd::Dims<";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ">";
}

/// Shapes as Dims (rank 0 as [1], which has the same single element).
std::vector<int64_t> extents(const Shape& s) {
  if (s.rank() == 0) return {1};
  return s.to_vector();
}
std::string dims(const Shape& s) { return dims(extents(s)); }

std::string functor(OpKind k) {
  switch (k) {
    case OpKind::add:
      return "mgd::op::Add";
    case OpKind::sub:
      return "mgd::op::Sub";
    case OpKind::mul:
      return "mgd::op::Mul";
    case OpKind::div:
      return "mgd::op::Div";
    case OpKind::exp:
      return "mgd::op::Exp";
    case OpKind::sqr:
      return "mgd::op::Sqr";
    case OpKind::sqrt:
      return "mgd::op::Sqrt";
    case OpKind::silu:
      return "mgd::op::Silu";
    case OpKind::relu:
      return "mgd::op::Relu";
    case OpKind::gelu:
      return "mgd::op::Gelu";
    default:
      MUGRAPH_CHECK(false) << "no element-wise functor for " << op_name(k);
  }
  return "";
}

/// A float literal that reads back as the same float.
std::string float_literal(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9ef", v);
  return buf;
}

std::string type_comment(const TensorType& t) { return t.shape.str() + " " + std::string(dtype_name(t.dtype)); }

/// Whether an iteration given as code is a number ("0", "2") rather than an expression ("it").
bool is_number(const std::string& iteration) {
  return !iteration.empty() && std::all_of(iteration.begin(), iteration.end(), ::isdigit);
}

/// "bx * 256 + it * 16", the origin of a tile as code ("0" if it is always the start). The
/// iteration is `iteration`: an expression ("it", "(it + 1)"), a number (folded in), or ""
/// outside the loop.
std::string origin_expr(const TileOrigin& o, const std::string& iteration) {
  static const char* block_vars[3] = {"bx", "by", "bz"};
  std::string s;
  auto term = [&](const std::string& var, int64_t coeff) {
    if (coeff == 0) return;
    if (!s.empty()) s += " + ";
    s += var + " * " + std::to_string(coeff);
  };
  for (int axis = 0; axis < 3; ++axis) term(block_vars[axis], o.block_coeff[static_cast<size_t>(axis)]);
  if (is_number(iteration)) {
    const int64_t at = std::stoll(iteration) * o.loop_coeff;
    if (at != 0) s += (s.empty() ? "" : " + ") + std::to_string(at);
  } else if (!iteration.empty()) {
    term(iteration, o.loop_coeff);
  }
  return s.empty() ? "0" : s;
}

/// The matmul of operands of shapes a, b (strides ast, bst) into result c (batched, NumPy
/// broadcasting of the batch dims) as the template arguments of mgd::matmul after the scope,
/// the result's shape and its strides.
std::string matmul_args(const Shape& a, const std::vector<int64_t>& a_strides, const Shape& b,
                        const std::vector<int64_t>& b_strides, const Shape& c) {
  const MatmulOperandStrides sa = matmul_operand_strides(a, a_strides, c, true);
  const MatmulOperandStrides sb = matmul_operand_strides(b, b_strides, c, false);
  return dims(sa.strides) + ", " + std::to_string(sa.k_stride) + ", " + dims(sb.strides) + ", " +
         std::to_string(sb.k_stride) + ", " + std::to_string(a[a.rank() - 1]);
}

/// A tensor as a tile op sees it: its type, its strides, and the expression that points at it;
/// `layout`, where not empty, is the layout type an element-wise op writes it through instead of
/// its strides (mgd::Swizzled: a tile wgmma reads in place).
struct Operand {
  TensorType type;
  std::vector<int64_t> strides;
  std::string name;
  std::string layout = {};
};

/// The period of a thread-graph value of shape `value` read at the element-wise shape `shape`
/// (broadcast along its dims of extent 1): the value at element e depends on e modulo it (the
/// extents from its outermost dim of more than one element inwards; 1 for a scalar). Element e
/// and e + N hold the same value where N is a multiple of it: a block of N threads, each
/// taking e, e + N, ..., then has one value per thread.
int64_t thread_share_period(const Shape& value, const Shape& shape) {
  int64_t period = 1, inner = 1;
  const int offset = shape.rank() - value.rank();
  for (int d = shape.rank() - 1; d >= 0; --d) {
    inner *= shape[d];
    const int vd = d - offset;
    if (vd >= 0 && value[vd] > 1) period = inner;
  }
  return period;
}

/// A dense row-major operand.
Operand dense(const TensorType& type, std::string name) {
  return {type, row_major_strides(type.shape), std::move(name)};
}

/// The call of a tile op that computes `op` (an element-wise, reduction, matmul or layout op)
/// into `out` from `ins` within `scope` ("mgd::Threads<N>" or "mgd::Grid"), each read and written
/// through its strides. Layout ops other than repeat return several statements. `read_through`:
/// for a sum, an mgd::ReadThrough applied to each element it reads (an op folded into it).
std::string compute_call(const std::string& scope, const Op& op, const std::vector<Operand>& ins, const Operand& out,
                         const std::string& read_through = "") {
  const Shape& s = out.type.shape;
  const std::string os = out.layout.empty() ? dims(out.strides) : out.layout;
  // Operand i read at the result's shape (broadcasting).
  auto read = [&](size_t i) { return dims(broadcast_read_strides(ins[i].type.shape, ins[i].strides, s)); };
  const OpInfo& info = op_info(op.kind);
  std::ostringstream c;
  switch (info.category) {
    case OpCategory::unary:
      c << "mgd::unary<" << scope << ", " << dims(s) << ", " << os << ", " << read(0) << ", " << functor(op.kind)
        << ">(" << out.name << ", " << ins[0].name << ");";
      break;
    case OpCategory::binary:
      if (op.attrs.has_scalar) {
        c << "mgd::binary_scalar<" << scope << ", " << dims(s) << ", " << os << ", " << read(0) << ", "
          << functor(op.kind) << ", " << (op.attrs.scalar_pos == 0 ? "true" : "false") << ">(" << out.name << ", "
          << ins[0].name << ", " << float_literal(op.attrs.scalar.value()) << ");";
      } else {
        c << "mgd::binary<" << scope << ", " << dims(s) << ", " << os << ", " << read(0) << ", " << read(1) << ", "
          << functor(op.kind) << ">(" << out.name << ", " << ins[0].name << ", " << ins[1].name << ");";
      }
      break;
    case OpCategory::reduction: {
      const int64_t group = ins[0].type.shape[op.attrs.dim] / s[op.attrs.dim];
      c << "mgd::sum<" << scope << ", " << dims(s) << ", " << os << ", " << dims(ins[0].strides) << ", " << op.attrs.dim
        << ", " << group << (read_through.empty() ? "" : ", " + read_through) << ">(" << out.name << ", " << ins[0].name
        << ");";
      break;
    }
    case OpCategory::matmul:
      c << "mgd::matmul<" << scope << ", " << dims(s) << ", " << os << ", "
        << matmul_args(ins[0].type.shape, ins[0].strides, ins[1].type.shape, ins[1].strides, s) << ">(" << out.name
        << ", " << ins[0].name << ", " << ins[1].name << ");";
      break;
    case OpCategory::layout:
      if (op.kind == OpKind::repeat) {
        c << "mgd::repeat<" << scope << ", " << dims(s) << ", " << os << ", " << dims(ins[0].strides) << ", "
          << op.attrs.dim << ", " << ins[0].type.shape[op.attrs.dim] << ">(" << out.name << ", " << ins[0].name << ");";
      } else if (op.kind == OpKind::reshape) {
        // A dense row-major reshape keeps the element order: a flat copy.
        MUGRAPH_CHECK(out.strides == row_major_strides(s) && ins[0].strides == row_major_strides(ins[0].type.shape))
            << "a reshape of a tensor that is not dense row-major";
        const std::vector<int64_t> flat{s.numel()};
        c << "mgd::copy<" << scope << ", " << dims(flat) << ", mgd::Dims<1>, mgd::Dims<1>>(" << out.name << ", "
          << ins[0].name << ");";
      } else {  // concat: each operand into its slice of the result
        int64_t at = 0;
        for (size_t i = 0; i < ins.size(); ++i) {
          const Shape& is = ins[i].type.shape;
          if (i) c << "\n";
          c << "mgd::copy<" << scope << ", " << dims(is) << ", " << os << ", " << dims(ins[i].strides) << ">("
            << out.name << " + " << at * out.strides[static_cast<size_t>(op.attrs.dim)] << ", " << ins[i].name << ");";
          at += is[op.attrs.dim];
        }
      }
      break;
    default:
      MUGRAPH_CHECK(false) << "compute_call: " << op_name(op.kind) << " is not a compute op";
  }
  return c.str();
}

std::string indent(const std::string& text, int spaces) {
  std::string pad(static_cast<size_t>(spaces), ' '), out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out += pad + line + "\n";
  return out;
}

/// A tensor map a kernel takes (by value, __grid_constant__): kernel input `param` in boxes of
/// the tile's shape, or for a swizzled tile (swizzle: its span) of one panel of it.
struct TensorMapParam {
  std::string name;
  int param = 0;
  Shape whole, box;
  int64_t swizzle = 0;
};

/// Emits the kernel of one graph_kernel op.
class BlockKernelEmitter {
 public:
  BlockKernelEmitter(const Graph& body, int index, const std::vector<TensorType>& outputs, const CudaTarget& target,
                     const CodegenOptions& options)
      : body_(body),
        index_(index),
        output_types_(outputs),
        limits_(*target.limits),
        wgmma_(target.wgmma),
        tma_(target.tma),
        requested_stages_(options.pipeline_stages),
        choose_layouts_(options.choose_layouts),
        read_operands_in_place_(options.read_operands_in_place),
        max_stage_buffers_(options.wgmma_stage_buffers),
        matmul_chains_(options.matmul_chains_in_registers),
        chain_accumulator_registers_(options.chain_accumulators_in_registers),
        matmul_accumulator_registers_(options.matmul_accumulators_in_registers),
        chain_split_(options.chain_split_n_blocks),
        overlap_(options.overlap_loop_matmuls) {}

  /// The kernel's source; shared_bytes() and stages() are known afterwards.
  std::string emit() {
    plan();
    std::ostringstream k;
    k << "// kernel_" << index_ << ": grid (" << body_.grid.x << ", " << body_.grid.y << ", " << body_.grid.z << "), "
      << body_.threads.volume() << " threads, for-loop " << body_.forloop;
    if (stages_ > 1 && ahead_ == stages_ - 1)
      k << " (" << stages_ << "-stage load pipeline)";
    else if (stages_ > 1)
      k << " (" << stages_ << " stages a streamed tile, loading " << ahead_ << " iteration" << (ahead_ == 1 ? "" : "s")
        << " ahead: a stage stays until the matmul that reads it lands)";
    if (first_deferred() != kNoOp) k << ", wgmma products landing an iteration later";
    k << ", " << shared_bytes_ << " bytes of shared memory";
    if (all_live_bytes_ > tensors_bytes_)
      k << " (STensors " << tensors_bytes_ << " sharing bytes over their lifetimes, " << all_live_bytes_
        << " in separate buffers)";
    k << "\n";
    if (layout_choice_.wavefronts < layout_choice_.row_major_wavefronts)
      k << "// layouts: " << layout_choice_.wavefronts << " shared-memory wavefronts per block modelled, "
        << layout_choice_.row_major_wavefronts << " with every tile row-major (" << layout_choice_.extra_bytes
        << " bytes of padding)\n";
    k << "MGD_GLOBAL void MGD_LAUNCH_BOUNDS(" << body_.threads.volume() << ") kernel_" << index_ << "(";
    for (size_t i = 0; i < body_.params.size(); ++i)
      k << (i ? ", " : "") << "const " << ctype(body_.params[i].dtype) << "* MGD_RESTRICT in_" << i;
    for (size_t i = 0; i < output_types_.size(); ++i)
      k << ", " << ctype(output_types_[i].dtype) << "* MGD_RESTRICT out_" << i;
    tensor_maps_.clear();
    for (size_t i = 0; i < body_.ops.size(); ++i)
      if (tma_load(i)) {
        const Op& op = body_.ops[i];
        TensorMapParam m;
        m.name = "tm_" + std::to_string(i);
        m.param = op.attrs.io_index;
        const codegen::TmaView view = tma_box(i);
        m.whole = view.whole;
        m.box = view.box;
        m.swizzle = swizzle_[op.outputs[0].index()];
        k << ", const MGD_GRID_CONSTANT mgd::TensorMap " << m.name;
        tensor_maps_.push_back(m);
      }
    k << ") {\n";
    if (any_swizzled_)
      k << "  MGD_DYNAMIC_SHARED(smem_window);\n  // Swizzled tiles start where their pattern does, counted from "
           "here.\n"
           "  unsigned char* const smem = smem_window + mgd::shared_padding<"
        << kSwizzleSharedAlign << ">(smem_window);\n";
    else
      k << "  MGD_DYNAMIC_SHARED(smem);\n";
    for (size_t t = 0; t < body_.tensors.size(); ++t) {
      const Storage& st = storage_[t];
      if (st.offset < 0 || st.alias_of >= 0) continue;
      k << "  " << st.ctype << "* const t" << t
        << (st.staged            ? "_stages"
            : st.double_buffered ? "_buffers"
                                 : "")
        << " = reinterpret_cast<" << st.ctype << "*>(smem + " << st.offset << ");  // "
        << (st.staged            ? std::to_string(stages_) + " stages of "
            : st.double_buffered ? "2 buffers of "
                                 : "")
        << type_comment(body_.tensors[t].type)
        << (st.ctype == "float" && body_.tensors[t].type.dtype != DType::f32 ? " (f32 accumulator)" : "")
        << (layouts_[t].is_row_major() ? "" : ", " + layouts_[t].str())
        << (swizzle_[t] ? ", " + std::to_string(swizzle_[t]) + "-byte swizzle for wgmma to read in place" : "") << "\n";
    }
    if (scratch_bytes_ > 0)
      k << "  unsigned char* const scratch = smem + " << scratch_offset_ << ";  // " << scratch_bytes_
        << " bytes: operand stages of the wgmma matmuls\n";
    if (tma_bars_offset_ >= 0)
      k << "  uint64_t* const tma_bars = reinterpret_cast<uint64_t*>(smem + " << tma_bars_offset_ << ");  // "
        << (stage_bars_ > 0 ? "a transaction barrier per pipeline stage" : "")
        << (stage_bars_ > 0 && once_bars_ > 0 ? ", then " : "") << (once_bars_ > 0 ? "one per tile loaded once" : "")
        << "\n";
    k << aliases(false, 2);
    k << "  const int64_t bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;\n";
    k << "  (void)bx; (void)by; (void)bz;\n";
    // Inputs every tile of which the copy engine loads are read through their tensor maps only.
    std::vector<bool> read_directly(body_.params.size(), false), by_tma(body_.params.size(), false);
    for (size_t i = 0; i < body_.ops.size(); ++i)
      if (is_load(i) && schedule_.phase[i] != OpPhase::dead)
        (tma_load(i) ? by_tma : read_directly)[static_cast<size_t>(body_.ops[i].attrs.io_index)] = true;
    std::string unused;
    for (size_t p = 0; p < body_.params.size(); ++p)
      if (by_tma[p] && !read_directly[p])
        unused += (unused.empty() ? "" : " ") + std::string("(void)in_") + std::to_string(p) + ";";
    if (!unused.empty()) k << "  " << unused << "  // read through tensor maps\n";
    const bool loop = body_.forloop > 1;
    if (tma_bars_offset_ >= 0)
      k << indent("if (mgd::thread_rank() == 0)\n  for (int s = 0; s < " + std::to_string(stage_bars_ + once_bars_) +
                      "; ++s) mgd::mbarrier_init(tma_bars + s, 1);\nmgd::mbarrier_init_fence();\nmgd::sync_block();\n",
                  2);
    // Loop-invariant tiles (fmap φ) are loaded once, before the loop.
    std::string hoisted;
    bool hoisted_async = false;
    for (size_t i = 0; i < body_.ops.size(); ++i)
      if (schedule_.phase[i] != OpPhase::dead && hoisted_load(i)) {
        hoisted += statement(i, "");
        hoisted_async = hoisted_async || !tma_load(i);
      }
    // Their barrier comes after the pipeline's first loads are issued, so that those are in
    // flight while it waits.
    const std::string hoisted_barrier = hoisted.empty() ? "" : barrier_after(hoisted_async, once_waits(true, -1));
    k << indent(hoisted, 2);
    // The ops in the order of the schedule (op_order.h): a barrier between its steps, none
    // between the ops of one step (they read nothing the others write), and one at the end of
    // each iteration, so the next one does not overwrite tiles still being read. With a
    // pipeline the loop's loads are not in the body: they were issued iterations ahead, and the
    // body starts by waiting for them.
    // Loop-invariant ops (the pre phase) run once, after the tiles loaded once and before the
    // loop, with a barrier after their last step.
    std::string pre, loop_body, post;
    struct Emitted {
      int32_t step = -1;   // the step of the last statement (-1: none yet)
      bool loads = false;  // that step issued asynchronous copies (cp.async)
    } before, in_loop, after;
    for (int32_t op_index : schedule_.order) {
      const size_t i = static_cast<size_t>(op_index);
      if (hoisted_load(i) || (stages_ > 1 && streamed_load(i))) continue;
      const OpPhase phase = schedule_.phase[i];
      std::string s = statement(i, loop && phase == OpPhase::loop ? "it" : "");
      if (s.empty()) continue;
      std::string& text = phase == OpPhase::post ? post : phase == OpPhase::pre ? pre : loop_body;
      Emitted& e = phase == OpPhase::post ? after : phase == OpPhase::pre ? before : in_loop;
      if (e.step >= 0 && e.step != schedule_.step[i]) {
        text += barrier_after(e.loads, once_waits(false, e.step));
        e.loads = false;
      }
      text += s;
      e.step = schedule_.step[i];
      e.loads = e.loads || (is_load(i) && !tma_load(i));
    }
    // A deferred matmul's operand the loop writes: iteration it writes buffer it % 2 while the
    // product of iteration it - 1 still reads the other.
    std::string buffers;
    for (size_t t = 0; t < body_.tensors.size(); ++t)
      if (storage_[t].double_buffered)
        buffers += storage_[t].ctype + "* const t" + std::to_string(t) + " = t" + std::to_string(t) +
                   "_buffers + it % 2 * " + std::to_string(storage_[t].stage_elements) + ";\n";
    loop_body = buffers + loop_body;
    if (stages_ > 1) {
      const std::string ahead = std::to_string(ahead_);
      std::string prologue = "// The load pipeline: the tiles of iteration" +
                             (ahead_ == 1 ? std::string(" it + 1 are") : "s it + 1 ... it + " + ahead + " are") +
                             " in flight while iteration it computes.\n";
      const std::string commit = streams_cp_async_ ? "mgd::async_commit();\n" : "";
      for (int s = 0; s < ahead_; ++s) prologue += streamed_loads(std::to_string(s)) + commit;
      k << indent(prologue + hoisted_barrier, 2);
      std::string head = "if (it + " + ahead + " < " + std::to_string(body_.forloop) + ") {\n" +
                         indent(streamed_loads("(it + " + ahead + ")"), 2) + "}\n" + commit;
      if (streams_cp_async_) head += "mgd::async_wait<" + ahead + ">();  // this iteration's tiles\n";
      if (stage_bars_ > 0)
        head += "mgd::mbarrier_wait(tma_bars + it % " + std::to_string(stages_) + ", it / " + std::to_string(stages_) +
                " % 2);  // this iteration's TMA tiles\n";
      // cp.async tiles are published by a barrier; a TMA tile is visible to every thread that
      // waited for its barrier.
      if (streams_cp_async_) head += "mgd::sync_block();\n";
      for (size_t t = 0; t < body_.tensors.size(); ++t)
        if (storage_[t].staged)
          head += storage_[t].ctype + "* const t" + std::to_string(t) + " = t" + std::to_string(t) + "_stages + it % " +
                  std::to_string(stages_) + " * " + std::to_string(storage_[t].stage_elements) + ";\n";
      loop_body = head + aliases(true, 0) + loop_body;
    }
    if (stages_ == 1) k << indent(hoisted_barrier, 2);
    if (!pre.empty())
      k << "  // Loop-invariant ops: once, before the loop.\n" << indent(pre + "mgd::sync_block();\n", 2);
    if (loop) {
      std::string declare, store;
      for (size_t i = 0; i < body_.ops.size(); ++i)
        if (deferred(i)) {
          const Shape& c = body_.type(body_.ops[i].outputs[0]).shape;
          declare += "mgd::DeferredProduct<" + std::to_string(c[c.rank() - 2]) + ", " +
                     std::to_string(c[c.rank() - 1]) + ", " + std::to_string(warpgroups()) + "> " + deferred_name(i) +
                     "{};  // the product in flight from one iteration to the next\n";
          store += land(i, "false") + "  // the last iteration's product\n";
        }
      for (const RegisterResult& r : register_results()) {
        declare += "mgd::ResultRegisters<" + std::to_string(r.rows) + ", " + std::to_string(r.cols) + ", " +
                   std::to_string(warpgroups()) + "> " + r.name + ";  // " + tensor(r.accumulator) +
                   "'s sums, in the registers of the threads that compute them\n";
        // The accumulator is dense [rows, cols], or [cols, rows] for a transpose's fragments.
        store += "mgd::store_result_registers<" +
                 (r.transposed ? "1, " + std::to_string(r.rows) : std::to_string(r.cols) + ", 1") + ">(" + r.name +
                 ", " + tensor(r.accumulator) + ");\n";
      }
      if (!store.empty()) store += "mgd::sync_block();\n";
      k << indent(declare, 2) << "  for (int64_t it = 0; it < " << body_.forloop << "; ++it) {\n"
        << indent(loop_body + "mgd::sync_block();\n", 4) << "  }\n"
        << indent(store, 2);
    } else {
      k << indent(loop_body, 2);
    }
    k << indent(post, 2);
    k << "}\n";
    return k.str();
  }

  int64_t shared_bytes() const { return shared_bytes_; }
  int stages() const { return stages_; }
  /// The tensor maps the kernel takes after its outputs, in order.
  const std::vector<TensorMapParam>& tensor_maps() const { return tensor_maps_; }

  /// The barrier after a step; a step that issued loads first waits for them: its cp.async
  /// copies (`async`), and the barriers of its tiles loaded once by the copy engine (`waits`).
  static std::string barrier_after(bool async, const std::string& waits) {
    return waits + (async ? "mgd::async_wait_all();\n" : "") + "mgd::sync_block();\n";
  }
  /// The waits for the tiles loaded once by the copy engine: the hoisted ones, or those of
  /// schedule step `step`.
  std::string once_waits(bool hoisted, int32_t step) const {
    std::string s;
    for (size_t i = 0; i < body_.ops.size(); ++i)
      if (once_bar_[i] >= 0 && hoisted_load(i) == hoisted && (hoisted || schedule_.step[i] == step))
        s += "mgd::mbarrier_wait(tma_bars + " + std::to_string(once_bar_[i]) + ", 0);  // tile " +
             type_comment(body_.type(body_.ops[i].outputs[0])) + "\n";
    return s;
  }

 private:
  struct Storage {
    int64_t offset = -1;
    int32_t alias_of = -1;
    std::string ctype;
    bool staged = false;           // one buffer per pipeline stage
    bool double_buffered = false;  // two buffers: iteration it writes buffer it % 2
    int64_t stage_elements = 0;    // elements from one stage's (or buffer's) buffer to the next
  };

  bool is_load(size_t i) const { return body_.ops[i].kind == OpKind::input_iterator; }
  /// A loop-invariant tile (fmap φ) of a kernel with a loop: loaded once, before it.
  bool hoisted_load(size_t i) const { return body_.forloop > 1 && is_load(i) && body_.ops[i].attrs.fmap == kPhi; }
  /// A tile loaded afresh in every iteration of the loop.
  bool streamed_load(size_t i) const {
    return body_.forloop > 1 && is_load(i) && schedule_.phase[i] == OpPhase::loop && !hoisted_load(i);
  }
  /// Whether load i can go through the tensor memory accelerator: the target has one, the tile
  /// is streamed by the loop (once it is pipelined) or loaded once, and it is one box of a tensor
  /// map's view (16-byte rows; codegen::tma_view). plan() records it in tma_capable_.
  bool tma_capable(size_t i) const {
    if (!tma_ || !(streamed_load(i) || once_load(i)) || !vector_load(i, load_origin(i))) return false;
    const Shape& tile = body_.type(body_.ops[i].outputs[0]).shape;
    // A swizzled tile's box is one panel, never wider than the whole tile: if the whole tile
    // has a view, so does the panel.
    return tma_box(i, tile[tile.rank() - 1]).has_value();
  }
  /// The tensor-map view in which load i's tile (`inner_box` elements wide: the tile's width, or a
  /// panel's) is one box (codegen::tma_view).
  std::optional<codegen::TmaView> tma_box(size_t i, int64_t inner_box) const {
    const Op& op = body_.ops[i];
    const TensorType& whole = body_.params[static_cast<size_t>(op.attrs.io_index)];
    return codegen::tma_view(
        whole.shape, body_.type(op.outputs[0]).shape,
        codegen::iterator_coords(whole.shape, op.attrs.imap, op.attrs.fmap, body_.grid, body_.forloop), whole.dtype,
        inner_box);
  }
  /// load i's view with its box: one panel wide where the copy engine swizzles the tile.
  codegen::TmaView tma_box(size_t i) const {
    const Shape& tile = body_.type(body_.ops[i].outputs[0]).shape;
    const int64_t span = swizzle_[body_.ops[i].outputs[0].index()];
    std::optional<codegen::TmaView> v = tma_box(i, span != 0 ? span / 2 : tile[tile.rank() - 1]);
    MUGRAPH_CHECK(v.has_value()) << "a TMA tile without a tensor-map view";
    return *v;
  }
  /// A load issued once per block: a loop-invariant tile (hoisted before the loop) or any tile
  /// of a kernel without a loop.
  bool once_load(size_t i) const {
    return is_load(i) && schedule_.phase[i] != OpPhase::dead && (hoisted_load(i) || body_.forloop == 1);
  }
  /// Whether load i goes through the tensor memory accelerator with `stages` pipeline stages:
  /// a streamed tile of a pipelined loop, or a tile loaded once (its own transaction barrier,
  /// waited for at the barrier after its step).
  bool tma_tile(size_t i, int stages) const {
    return tma_capable_[i] && (once_load(i) || (stages > 1 && streamed_load(i)));
  }
  bool tma_load(size_t i) const { return tma_tile(i, stages_); }

  /// The block's warpgroups (of whole warpgroups, where wgmma runs).
  int64_t warpgroups() const { return body_.threads.volume() / kWarpgroupThreads; }
  /// The tile ops' scope: the block's threads, a count the launch bounds fix.
  std::string scope() const { return "mgd::Threads<" + std::to_string(body_.threads.volume()) + ">"; }
  /// Whether op i is a matmul for the warpgroup tensor cores: the target has them, the block is
  /// whole warpgroups, and both operands are f16 or both bf16 in shared memory. A summing
  /// accumulator's tile holds f32 sums (rounded when read), which wgmma cannot read: a matmul
  /// after the loop of an accumulated tile and one loaded once (X·(A·B), with A·B accumulated)
  /// runs on the block's threads, as on sm_80.
  bool wgmma_matmul(size_t i) const {
    const Op& op = body_.ops[i];
    if (!wgmma_ || op.kind != OpKind::matmul || body_.threads.volume() % kWarpgroupThreads != 0) return false;
    const DType a = body_.type(op.inputs[0]).dtype, b = body_.type(op.inputs[1]).dtype;
    return a == b && (a == DType::f16 || a == DType::bf16) && !holds_f32_sums(body_, op.inputs[0]) &&
           !holds_f32_sums(body_, op.inputs[1]);
  }
  /// Where input iterator i's tiles start.
  TileOrigin load_origin(size_t i) const {
    const Op& op = body_.ops[i];
    const Shape& whole = body_.params[static_cast<size_t>(op.attrs.io_index)].shape;
    return codegen::iterator_origin(whole, op.attrs.imap, op.attrs.fmap, body_.grid, body_.forloop);
  }
  /// Whether load i, with tile origins o, goes in 16-byte asynchronous vectors.
  bool vector_load(size_t i, const TileOrigin& o) const {
    const Op& op = body_.ops[i];
    const TensorType& whole = body_.params[static_cast<size_t>(op.attrs.io_index)];
    const TensorType& tile = body_.type(op.outputs[0]);
    return whole.dtype == tile.dtype && codegen::vector_load_ok(whole.shape, tile.shape, o, tile.dtype);
  }

  /// The tensor an alias (reshape) finally reads.
  size_t alias_root(size_t t) const {
    while (storage_[t].alias_of >= 0) t = static_cast<size_t>(storage_[t].alias_of);
    return t;
  }

  /// Declarations of the aliases of staged tiles (inside the loop, after the stage pointers) or
  /// of the others (at the top of the kernel).
  std::string aliases(bool of_staged, int spaces) const {
    std::string s;
    for (size_t t = 0; t < body_.tensors.size(); ++t)
      if (storage_[t].alias_of >= 0 && storage_[alias_root(t)].staged == of_staged)
        s += storage_[t].ctype + "* const t" + std::to_string(t) + " = t" + std::to_string(storage_[t].alias_of) +
             ";  // reshape\n";
    return indent(s, spaces);
  }

  /// The loads of every streamed tile for iteration `iteration`, into that iteration's stage.
  std::string streamed_loads(const std::string& iteration) const {
    const std::string stage = is_number(iteration) ? std::to_string(std::stoll(iteration) % stages_)
                                                   : iteration + " % " + std::to_string(stages_);
    std::string s, tma;
    int64_t tma_bytes = 0;
    for (size_t i = 0; i < body_.ops.size(); ++i) {
      if (!streamed_load(i)) continue;
      const size_t t = body_.ops[i].outputs[0].index();
      const std::string dst =
          "t" + std::to_string(t) + "_stages + " + stage + " * " + std::to_string(storage_[t].stage_elements);
      if (!tma_load(i)) {
        s += load(i, dst, iteration);
        continue;
      }
      // One thread asks the copy engine for the tile; the stage's barrier counts its bytes.
      tma += tma_copy(i, dst, iteration, "tma_bars + " + stage);
      tma_bytes += tile_bytes(i);
    }
    if (!tma.empty())
      s += "if (mgd::thread_rank() == 0) {\n  mgd::mbarrier_arrive_expect_tx(tma_bars + " + stage + ", " +
           std::to_string(tma_bytes) + ");\n" + indent(tma, 2) + "}\n";
    return s;
  }

  /// The bytes of load i's tile.
  int64_t tile_bytes(size_t i) const {
    const TensorType& tile = body_.type(body_.ops[i].outputs[0]);
    return tile.shape.numel() * dtype_bytes(tile.dtype);
  }

  /// The copy of load i's tile by the tensor memory accelerator into dst for iteration
  /// `iteration`, its bytes counted against the barrier `bar` (issued by one thread).
  std::string tma_copy(size_t i, const std::string& dst, const std::string& iteration, const std::string& bar) const {
    const TensorType& tile = body_.type(body_.ops[i].outputs[0]);
    // Coordinates in the tensor map's view, where the tile (or a panel) is one box.
    const codegen::TmaView view = tma_box(i);
    const int64_t span = swizzle_[body_.ops[i].outputs[0].index()];
    std::string s;
    if (span == 0) {
      s = "mgd::tma_load<" + std::to_string(view.box.rank()) + ">(";
    } else {
      // Panels of span / 2 columns, each a box of its own (wgmma_rules.h).
      const int64_t width = span / 2, inner = tile.shape[tile.shape.rank() - 1];
      s = "mgd::tma_load_panels<" + std::to_string(view.box.rank()) + ", " + std::to_string(inner / width) + ", " +
          std::to_string(width) + ", " + std::to_string(tile.shape.numel() / inner * width * dtype_bytes(tile.dtype)) +
          ">(";
    }
    s += dst + ", &tm_" + std::to_string(i) + ", {";
    for (size_t d = 0; d < view.coords.size(); ++d)
      s += (d ? ", " : "") + std::string("int32_t(") + origin_expr(view.coords[d], iteration) + ")";
    return s + "}, " + bar + ");  // tile " + type_comment(tile) + "\n";
  }

  void plan() {
    // Which ops run, in the loop or after it (the interpreters' definition, block_structure.h),
    // in which order and steps (op_order.h).
    schedule_ = schedule_block_ops(body_);
    deferred_.assign(body_.ops.size(), false);  // defer_loop_matmuls, once the plan is made
    double_buffered_.assign(body_.tensors.size(), false);
    tma_capable_.assign(body_.ops.size(), false);
    for (size_t i = 0; i < body_.ops.size(); ++i) tma_capable_[i] = tma_capable(i);
    // Stages: a pipeline pays where the loop loads tiles asynchronously (requested explicitly,
    // synchronous loads are pipelined too: they are issued an iteration ahead).
    bool streams = false, streams_async = false;
    for (size_t i = 0; i < body_.ops.size(); ++i)
      if (streamed_load(i)) {
        streams = true;
        streams_async = streams_async || vector_load(i, load_origin(i));
      }
    const bool automatic = requested_stages_ == 0;
    int stages = automatic ? (streams_async ? 2 : 1) : requested_stages_;
    if (!streams) stages = 1;
    stages = static_cast<int>(std::min<int64_t>(stages, body_.forloop));
    // Automatic pipelines fall back to fewer stages where they do not fit.
    for (;; --stages) {
      // Tiles element-wise ops write, and A tiles with fewer rows than a wgmma job, are read in
      // place only where that takes no more shared memory than staging them: the former's
      // 1024-byte alignment, the latter's padding (in every pipeline stage) can cost more than
      // the stages it saves, and the cost model's plan, which stages them
      // (planned_shared_bytes), must stay an upper bound of this one.
      // The padding may pass that plan where the kernel still fits and an SM still holds as many
      // of its blocks (as a second wgmma stage buffer may, below): Figure 10b's X tile pads
      // 7,168 bytes a stage, more than the one stage buffer the plan has, less than the two
      // staging would take.
      place(stages, true);
      if (const bool padded = any_a_padded(); elementwise_swizzled_ || padded) {
        const int64_t extras_bytes = shared_bytes_;
        place(stages, false);
        if (shared_bytes_ >= extras_bytes || (padded && extras_bytes <= limits_.shared_memory_bytes &&
                                              blocks_per_sm(extras_bytes) >= blocks_per_sm(shared_bytes_)))
          place(stages, true);
      }
      if (shared_bytes_ <= limits_.shared_memory_bytes || stages == 1 || !automatic) break;
    }
    stages_ = stages;
    // A second stage buffer for the wgmma matmuls that stage operands over several chunks of k
    // (the next chunk is staged while the tensor cores read this one), where the kernel still
    // fits and an SM still holds as many of its blocks as the grid gives it (a grid of one
    // block per SM loses nothing if two would no longer fit): the cost model plans one
    // (planned_shared_bytes, an upper bound of this plan with one), and the occupancy it
    // assumed must stay.
    bool pays = false;
    for (size_t i = 0; i < body_.ops.size(); ++i)
      pays = pays || (schedule_.phase[i] != OpPhase::dead && wgmma_matmul(i) && stages_chunks(i));
    stage_buffers_ = 1;
    if (pays && max_stage_buffers_ >= 2 && shared_bytes_ <= limits_.shared_memory_bytes) {
      const int64_t one_buffer = shared_bytes_;
      stage_buffers_ = 2;
      lay_out(stages);
      if (shared_bytes_ == one_buffer || shared_bytes_ > limits_.shared_memory_bytes ||
          blocks_per_sm(shared_bytes_) < blocks_per_sm(one_buffer)) {
        stage_buffers_ = 1;
        lay_out(stages);
      }
    }
    ahead_ = stages_ - 1;
    if (overlap_) defer_loop_matmuls();
    // Whether the pipelined loop loads any tile with cp.async (commit groups to wait for).
    streams_cp_async_ = false;
    for (size_t i = 0; i < body_.ops.size(); ++i)
      streams_cp_async_ = streams_cp_async_ || (streamed_load(i) && !tma_load(i));
    if (shared_bytes_ > limits_.shared_memory_bytes)
      throw UserError("codegen: kernel " + std::to_string(index_) + " needs " + std::to_string(shared_bytes_) +
                      " bytes of shared memory (STensors sharing bytes only where their lifetimes allow, f32 "
                      "accumulators" +
                      (stages_ > 1 ? ", " + std::to_string(stages_) + " buffers per loaded tile" : std::string()) +
                      "), more than the " + std::to_string(limits_.shared_memory_bytes) + " the target allows");
  }

  /// What a deferred matmul's operand needs to stay as it is until its product lands.
  enum class DeferredOperand {
    kNever,          // it cannot be deferred on
    kStays,          // loaded once, or computed before the loop
    kStreamed,       // streamed by TMA: one stage more than the pipeline's lookahead
    kDoubleBuffered  // written by an op of the loop: two buffers
  };
  /// Operand t of accumulation matmul i as a deferred matmul reads it: in place, and a tile the
  /// pipelined loop streams by TMA, one loaded once or computed before the loop, or one an op of
  /// the loop writes that no reshape reads.
  DeferredOperand deferred_operand(TensorId t) const {
    const OpId made = body_.tensors[t.index()].producer;
    if (swizzle_[t.index()] == 0 || !made.valid()) return DeferredOperand::kNever;
    const size_t p = made.index();
    if (body_.ops[p].kind == OpKind::reshape || schedule_.folded[p]) return DeferredOperand::kNever;
    if (streamed_load(p) && tma_load(p)) return DeferredOperand::kStreamed;
    if (streamed_load(p)) return DeferredOperand::kNever;
    if (is_load(p) || schedule_.phase[p] == OpPhase::pre) return DeferredOperand::kStays;
    if (schedule_.phase[p] != OpPhase::loop) return DeferredOperand::kNever;
    for (size_t r : readers(t))
      if (body_.ops[r].kind == OpKind::reshape) return DeferredOperand::kNever;
    return DeferredOperand::kDoubleBuffered;
  }

  /// Whether accumulation matmul i can add its product an iteration later
  /// (mgd::matmul_wgmma_issue): its 64-row jobs share out evenly among the warpgroups, and
  /// each operand can stay as it is until then (deferred_operand).
  bool deferrable(size_t i) const {
    // Every warpgroup must have as many jobs: one without would issue a copy of another's
    // (mgd::matmul_wgmma_issue issues under no branch) and double the tensor cores' work.
    const Shape& c = body_.type(body_.ops[i].outputs[0]).shape;
    if ((c[c.rank() - 2] + mgd::kWgmmaM - 1) / mgd::kWgmmaM % warpgroups() != 0) return false;
    if (accumulation_of(i)->transposed) return false;  // mgd::DeferredProduct holds unswapped products
    for (TensorId t : body_.ops[i].inputs)
      if (deferred_operand(t) == DeferredOperand::kNever) return false;
    return true;
  }

  /// Defers the accumulation matmuls that can be (CodegenOptions::overlap_loop_matmuls), where
  /// the kernel still fits and an SM still holds as many of its blocks. A deferred product reads
  /// its operands of iteration it until the call of iteration it + 1: an operand the loop writes
  /// takes a second buffer, and a streamed one a stage more than the pipeline's lookahead (the
  /// loads of iteration it + ahead, issued at the top of iteration it, refill the stage of
  /// iteration it − 1 otherwise).
  void defer_loop_matmuls() {
    bool streamed = false, any = false;
    for (const MatmulAccumulation& a : accumulations_) {
      if (!deferrable(a.matmul)) continue;
      any = deferred_[a.matmul] = true;
      for (TensorId t : body_.ops[a.matmul].inputs) {
        const DeferredOperand o = deferred_operand(t);
        streamed = streamed || o == DeferredOperand::kStreamed;
        if (o == DeferredOperand::kDoubleBuffered) double_buffered_[t.index()] = true;
      }
    }
    if (!any) return;
    const int64_t before = shared_bytes_;
    const int stages = stages_ + (streamed ? 1 : 0);
    lay_out(stages);
    if (shared_bytes_ > limits_.shared_memory_bytes || blocks_per_sm(shared_bytes_) < blocks_per_sm(before)) {
      deferred_.assign(body_.ops.size(), false);
      double_buffered_.assign(body_.tensors.size(), false);
      lay_out(stages_);
      return;
    }
    stages_ = stages;
  }

  /// The product of deferred matmul i in flight (mgd::DeferredProduct), named after its sums.
  std::string deferred_name(size_t i) const {
    return "p" + std::to_string(body_.ops[accumulation_of(i)->accumulate].outputs[0].value);
  }

  /// The call that lands deferred matmul i's product, adding it to its sums (`first`: the
  /// condition under which it sets them).
  std::string land(size_t i, const std::string& first) const {
    return "mgd::matmul_wgmma_land(" + register_accumulate(i, first) + ", " + deferred_name(i) + ");";
  }
  /// The deferred matmul the loop body runs first (its products land before it), or kNoOp.
  size_t first_deferred() const {
    for (int32_t i : schedule_.order)
      if (deferred(static_cast<size_t>(i))) return static_cast<size_t>(i);
    return kNoOp;
  }
  bool deferred(size_t i) const { return deferred_[i]; }

  /// The RegisterAccumulate that accumulation matmul i adds its product to, `first` the
  /// condition under which the product sets the sums instead.
  std::string register_accumulate(size_t i, const std::string& first) const {
    const MatmulAccumulation* acc = accumulation_of(i);
    const TensorType& out = body_.type(body_.ops[i].outputs[0]);
    const TensorId sums = body_.ops[acc->accumulate].outputs[0];
    const Shape& c = out.shape;
    const int64_t m = c[c.rank() - 2], n = c[c.rank() - 1];
    return "mgd::RegisterAccumulate<" + ctype(out.dtype) + ", " + std::to_string(acc->transposed ? n : m) + ", " +
           std::to_string(acc->transposed ? m : n) + ", " + std::to_string(warpgroups()) + ">{r" +
           std::to_string(sums.value) + ", " + first + "}";
  }

  /// The blocks of this kernel an SM holds together with `bytes` of shared memory each, at most
  /// as many as the grid gives it (a grid of one block per SM loses nothing when two would no
  /// longer fit).
  int64_t blocks_per_sm(int64_t bytes) const {
    const GpuSpec& gpu = gpu_spec(limits_.arch);
    const int64_t per_sm = (body_.grid.volume() + gpu.sms - 1) / gpu.sms;
    return std::min(per_sm, resident_blocks_per_sm(gpu, body_.threads.volume(), bytes));
  }

  /// Which tiles are read in place (element-wise ops' results and A tiles short of a job too, or
  /// not: read_in_place's `extras`), their layouts and where they go in shared memory, with
  /// `stages` pipeline stages.
  void place(int stages, bool extras) {
    read_in_place(stages, extras);
    find_matmul_chains(stages);
    choose_tile_layouts(stages);
    lay_out(stages);
    // A chain writes its results from the first matmul's step on, which can raise the peak
    // where they are larger than the scores it no longer stores, and a split chain adds its
    // partial results: chains are kept only where the kernel takes no more shared memory than op
    // by op (the cost model's plan, which has no chains, stays an upper bound), with fewer splits
    // (fewer partials) where that fits and all of them does not.
    if (!chains_.empty()) {
      const std::vector<MatmulChain> chains = chains_;
      chains_.clear();
      lay_out(stages);
      const int64_t op_by_op = shared_bytes_;
      int64_t most = 1;
      for (const MatmulChain& c : chains) most = std::max(most, c.splits);
      for (;; most /= 2) {
        chains_.clear();
        for (MatmulChain c : chains) {
          if (c.splits > 1 && most == 1) continue;  // unsplit, it would idle warpgroups (find_matmul_chains)
          c.splits = std::min(c.splits, most);
          chains_.push_back(c);
        }
        lay_out(stages);
        if (shared_bytes_ <= op_by_op) break;
        if (most == 1) {
          chains_.clear();
          lay_out(stages);
          break;
        }
      }
    }
    // The product a matmul adds to an accumulator in registers is not stored: it takes no shared
    // memory, so the plan above stays an upper bound.
    find_matmul_accumulations();
    if (!accumulations_.empty()) lay_out(stages);
  }

  /// A wgmma matmul in the for-loop whose product only a summing accumulator reads: the matmul
  /// adds it there itself, in the registers of the threads that compute it
  /// (mgd::matmul_wgmma_to with mgd::RegisterAccumulate), and the product tile is not stored.
  struct MatmulAccumulation {
    size_t matmul, accumulate;
    /// The matmul computes its product's transpose (mgd::wgmma_orientation_swaps): the registers
    /// hold the fragments of the transpose, [N, M].
    bool transposed = false;
  };

  /// Finds the MatmulAccumulations: the product one matrix whose instruction results are one
  /// n-block (the product's N, or its M where the matmul computes the transpose: a multiple of
  /// 8, at most 64; the registers follow the instruction's fragments, as
  /// mgd::store_result_registers writes them), with at most 64 accumulator registers a thread.
  void find_matmul_accumulations() {
    accumulations_.clear();
    if (!matmul_accumulator_registers_ || !wgmma_ || body_.forloop <= 1) return;
    for (size_t i = 0; i < body_.ops.size(); ++i) {
      if (schedule_.phase[i] != OpPhase::loop || !wgmma_matmul(i) || in_chain(i)) continue;
      const Op& op = body_.ops[i];
      const std::vector<size_t> r = readers(op.outputs[0]);
      if (r.size() != 1) continue;
      const Op& acc = body_.ops[r[0]];
      if (!is_sum_accumulator(acc) || schedule_.phase[r[0]] != OpPhase::loop) continue;
      const Shape& c = body_.type(op.outputs[0]).shape;
      const int64_t m = c[c.rank() - 2], n = c[c.rank() - 1];
      const Shape& a = body_.type(op.inputs[0]).shape;
      const bool swap = mgd::wgmma_orientation_swaps(m, n, a[a.rank() - 1], swizzle_[op.inputs[0].index()] != 0,
                                                     swizzle_[op.inputs[1].index()] != 0);
      const mgd::WgmmaJobs w = mgd::wgmma_jobs(m, n, swap);  // the instruction's rows and columns
      if (c.numel() != m * n || w.n != w.cols) continue;
      const int64_t jobs = (w.row_jobs + warpgroups() - 1) / warpgroups();
      if (jobs * w.n / 2 > 64) continue;
      accumulations_.push_back({i, r[0], swap});
    }
  }

  /// The accumulation matmul or accumulator op i is part of, or null.
  const MatmulAccumulation* accumulation_of(size_t i) const {
    for (const MatmulAccumulation& a : accumulations_)
      if (a.matmul == i || a.accumulate == i) return &a;
    return nullptr;
  }

  /// Two wgmma matmuls chained through registers (mgd::matmul_chain_wgmma, wgmma_chain.h): the
  /// first's result S is read only by one unary element-wise op, whose result P is read only by
  /// the second as its A and perhaps by a sum along P's rows. S and P are never stored; the
  /// chain runs at the first matmul's place in the schedule. Where the second matmul's result
  /// O (the row sums L) is read only by a summing accumulator, the chain adds it there itself,
  /// and O (L) is not stored either.
  static constexpr size_t kNoOp = SIZE_MAX;
  struct MatmulChain {
    size_t first = kNoOp, elementwise = kNoOp, second = kNoOp, row_sum = kNoOp;
    size_t accumulate_o = kNoOp, accumulate_l = kNoOp;
    int64_t splits = 1;            // warpgroups per 64-row job (mgd::matmul_chain_splits)
    int64_t partials_offset = -1;  // their partial results in shared memory, where splits > 1
    std::array<size_t, 6> ops() const { return {first, elementwise, second, row_sum, accumulate_o, accumulate_l}; }
    /// The ops whose results the chain writes: the accumulators it adds to, or O and L.
    std::array<size_t, 2> writers() const {
      return {accumulate_o != kNoOp ? accumulate_o : second, accumulate_l != kNoOp ? accumulate_l : row_sum};
    }
  };

  /// The live ops reading tensor t, once per operand.
  std::vector<size_t> readers(TensorId t) const {
    std::vector<size_t> r;
    for (size_t i = 0; i < body_.ops.size(); ++i)
      if (schedule_.phase[i] != OpPhase::dead)
        for (TensorId in : body_.ops[i].inputs)
          if (in == t) r.push_back(i);
    return r;
  }

  /// When op i's results are ready, on the kernel's timeline, with `stages` pipeline stages: tiles
  /// the pipelined loop streams and tiles loaded once before the loop are ready before its body
  /// starts (-1).
  int32_t ready_time(size_t i, int stages) const {
    if (hoisted_load(i) || (stages > 1 && streamed_load(i))) return -1;
    return schedule_.time(schedule_.phase[i], schedule_.step[i]);
  }

  /// Finds the chains (see MatmulChain) whose matmuls run on wgmma with every operand but P read
  /// in place (read_in_place, with `stages` pipeline stages), C ready by the first matmul's step,
  /// the extents mgd::matmul_chain_shape_ok, leading dims of 1, and all its ops in one phase.
  void find_matmul_chains(int stages) {
    chains_.clear();
    if (!matmul_chains_ || !wgmma_) return;
    const auto matrix = [&](TensorId t) {
      const Shape& sh = body_.type(t).shape;
      return sh.rank() >= 2 && sh.numel() == sh[sh.rank() - 2] * sh[sh.rank() - 1];
    };
    const auto extent = [&](TensorId t, int from_end) {
      const Shape& sh = body_.type(t).shape;
      return sh[sh.rank() - from_end];
    };
    for (size_t i = 0; i < body_.ops.size(); ++i) {
      if (schedule_.phase[i] == OpPhase::dead || !wgmma_matmul(i)) continue;
      const Op& first = body_.ops[i];
      const TensorId a = first.inputs[0], b = first.inputs[1], s = first.outputs[0];
      const std::vector<size_t> s_readers = readers(s);
      if (s_readers.size() != 1) continue;
      const size_t u = s_readers[0];
      const Op& unary = body_.ops[u];
      if (op_info(unary.kind).category != OpCategory::unary) continue;
      const TensorId p = unary.outputs[0];
      if (body_.type(p).dtype != body_.type(a).dtype) continue;
      MatmulChain chain;
      chain.first = i;
      chain.elementwise = u;
      bool ok = true;
      for (size_t r : readers(p)) {
        const Op& op = body_.ops[r];
        if (chain.second == kNoOp && wgmma_matmul(r) && op.inputs[0] == p && op.inputs[1] != p) {
          chain.second = r;
        } else if (chain.row_sum == kNoOp && op.kind == OpKind::sum && op.attrs.dim == body_.type(p).shape.rank() - 1 &&
                   extent(op.outputs[0], 1) == 1) {
          chain.row_sum = r;
        } else {
          ok = false;
        }
      }
      if (!ok || chain.second == kNoOp) continue;
      const Op& second = body_.ops[chain.second];
      const TensorId c = second.inputs[1], o = second.outputs[0];
      // A result read only by a summing accumulator of the same phase goes straight into it.
      const auto summed_by = [&](size_t op) {
        const std::vector<size_t> r = readers(body_.ops[op].outputs[0]);
        return r.size() == 1 && is_sum_accumulator(body_.ops[r[0]]) && schedule_.phase[r[0]] == schedule_.phase[i]
                   ? r[0]
                   : kNoOp;
      };
      chain.accumulate_o = summed_by(chain.second);
      if (chain.row_sum != kNoOp) chain.accumulate_l = summed_by(chain.row_sum);
      for (size_t op : chain.ops()) ok = ok && (op == kNoOp || schedule_.phase[op] == schedule_.phase[i]);
      for (TensorId t : {a, b, s, p, c, o}) ok = ok && matrix(t);
      if (chain.row_sum != kNoOp) ok = ok && matrix(body_.ops[chain.row_sum].outputs[0]);
      if (!ok) continue;
      const int64_t m = extent(s, 2), k1 = extent(a, 1), n1 = extent(s, 1), n2 = extent(o, 1);
      if (!mgd::matmul_chain_shape_ok(m, k1, n1, n2)) continue;
      // A block with more warpgroups than S has 64-row jobs leaves the others idle through an
      // unsplit chain, which runs S's n-blocks one after another on one warpgroup; op by op,
      // every warpgroup shares each matmul. On an H200 the unsplit chain won with one n-block and
      // lost with four, and so did the chain with the n-blocks split among the warpgroups (its
      // partials added through shared memory; docs/codegen.md, "Hopper: attention's scores in
      // registers"). So by default such a chain is taken only with one n-block; the split is an
      // option (CodegenOptions::chain_split_n_blocks).
      chain.splits = chain_split_ ? mgd::matmul_chain_splits(m, n1, warpgroups()) : 1;
      if (!chain_split_ && (m + 63) / 64 < warpgroups() && n1 > 64) continue;
      if (swizzle_[a.index()] == 0 || swizzle_[b.index()] == 0 || swizzle_[c.index()] == 0 || swizzle_[o.index()] != 0)
        continue;
      // The tiles in place are laid out the same whichever way matmul_wgmma would turn the
      // matmuls (K-major A, MN-major B and C in panels); the chain reads them unturned, each
      // n-block of B and C starting at a panel, and A's rows up to a whole job (its buffer is
      // padded for them, a_overread_bytes).
      const auto blocks_start_at_panels = [](int64_t n, int64_t span) {
        const int64_t nt = std::min<int64_t>(n, 64);
        return n == nt || nt % (span / 2) == 0;
      };
      if (!blocks_start_at_panels(n1, swizzle_[b.index()]) || !blocks_start_at_panels(n2, swizzle_[c.index()]))
        continue;
      const OpId made_a = body_.tensors[a.index()].producer;
      if (!made_a.valid() || body_.ops[made_a.index()].kind == OpKind::reshape) continue;
      // C is ready when the first matmul runs.
      const int32_t now = schedule_.time(schedule_.phase[i], schedule_.step[i]);
      const OpId made_c = body_.tensors[c.index()].producer;
      if (made_c.valid() && ready_time(made_c.index(), stages) >= now) continue;
      chains_.push_back(chain);
    }
  }

  /// Scratch shared memory the wgmma matmul op i needs for its operand stages (the device
  /// library's own rule, which it checks against the figure it is given).
  int64_t wgmma_scratch_bytes(size_t i) const {
    const Op& op = body_.ops[i];
    const Shape& out = body_.type(op.outputs[0]).shape;
    const Shape& a = body_.type(op.inputs[0]).shape;
    return mgd::wgmma_scratch_bytes(out[out.rank() - 2], out[out.rank() - 1], a[a.rank() - 1],
                                    swizzle_[op.inputs[0].index()], swizzle_[op.inputs[1].index()], warpgroups(),
                                    stage_buffers_);
  }

  /// Whether wgmma matmul op i stages an operand over several chunks of k (where a second stage
  /// buffer pays).
  bool stages_chunks(size_t i) const {
    const Op& op = body_.ops[i];
    const Shape& a = body_.type(op.inputs[0]).shape;
    const bool stages = swizzle_[op.inputs[0].index()] == 0 || swizzle_[op.inputs[1].index()] == 0;
    return stages && mgd::wgmma_stage_buffers(a[a.rank() - 1]) == 2;
  }

  /// The stage buffers wgmma matmul op i uses: stage_buffers_ where it stages an operand over
  /// several chunks of k, else 1.
  int64_t wgmma_stage_buffers(size_t i) const { return stages_chunks(i) ? stage_buffers_ : 1; }

  /// Which tiles are written swizzled for the wgmma matmuls to read in place, with `stages`
  /// pipeline stages (swizzle_, per tensor: the span, or 0): tiles the copy engine loads (TMA)
  /// or, if `extras`, element-wise ops write (through mgd::Swizzled, with a proxy fence after
  /// them; elementwise_swizzled_ says whether any is), that only wgmma matmuls read,
  /// 16-bit whole 2-D tiles (leading dims of 1), that every matmul reading them can read in place
  /// in the orientation it takes (mgd::wgmma_orientation_swaps, which depends on which of its
  /// operands are in place: dropping a tile can turn a matmul around, so this repeats until
  /// nothing changes; the device library then takes the same orientation). A tile a matmul
  /// reads as the instruction's A with fewer rows than a job (its buffer padded past its end,
  /// a_overread_bytes) is one only if `extras` too (a_padded_ marks them).
  void read_in_place(int stages, bool extras) {
    swizzle_.assign(body_.tensors.size(), 0);
    std::vector<bool> candidate(body_.tensors.size(), false);
    std::vector<bool> written(body_.tensors.size(), false);  // by an element-wise op
    for (size_t i = 0; i < body_.ops.size(); ++i) {
      if (!read_operands_in_place_ || schedule_.phase[i] == OpPhase::dead) continue;
      if (!(is_load(i) ? tma_tile(i, stages) : extras && elementwise_writer(i))) continue;
      for (const TensorId t : body_.ops[i].outputs) {
        const TensorType& type = body_.type(t);
        const Shape& shape = type.shape;
        bool ok = shape.rank() >= 2 && shape.numel() == shape[shape.rank() - 2] * shape[shape.rank() - 1] &&
                  (type.dtype == DType::f16 || type.dtype == DType::bf16);
        for (size_t c = 0; c < body_.ops.size() && ok; ++c) {
          if (schedule_.phase[c] == OpPhase::dead) continue;
          const Op& op = body_.ops[c];
          const long reads = std::count(op.inputs.begin(), op.inputs.end(), t);
          ok = reads == 0 || (reads == 1 && wgmma_matmul(c));
        }
        candidate[t.index()] = ok;
        written[t.index()] = !is_load(i);
      }
    }
    // (A pass that changes nothing leaves a_padded_ as the final candidates have it.)
    for (bool changed = true; changed;) {
      changed = false;
      a_padded_.assign(body_.tensors.size(), false);
      for (size_t c = 0; c < body_.ops.size(); ++c) {
        if (schedule_.phase[c] == OpPhase::dead || !wgmma_matmul(c)) continue;
        const Op& op = body_.ops[c];
        const TensorId a = op.inputs[0], b = op.inputs[1];
        const Shape& out = body_.type(op.outputs[0]).shape;
        const int64_t m = out[out.rank() - 2], n = out[out.rank() - 1];
        const int64_t k = body_.type(a).shape[body_.type(a).shape.rank() - 1];
        const bool swap = mgd::wgmma_orientation_swaps(m, n, k, candidate[a.index()], candidate[b.index()]);
        const bool padded = !swap && m % mgd::kWgmmaM != 0;  // A the instruction's, short of a job
        if (candidate[a.index()] && (mgd::wgmma_in_place_a(m, n, k, swap) == 0 || (padded && !extras))) {
          candidate[a.index()] = false;
          changed = true;
        }
        if (candidate[b.index()] && mgd::wgmma_in_place_b(m, n, k, swap) == 0) {
          candidate[b.index()] = false;
          changed = true;
        }
        if (candidate[a.index()] && padded) a_padded_[a.index()] = true;
      }
    }
    any_swizzled_ = elementwise_swizzled_ = false;
    for (size_t t = 0; t < body_.tensors.size(); ++t)
      if (candidate[t]) {
        const Shape& shape = body_.tensors[t].type.shape;
        swizzle_[t] = mgd::wgmma_tile_swizzle(shape[shape.rank() - 1]);
        any_swizzled_ = true;
        elementwise_swizzled_ = elementwise_swizzled_ || written[t];
      }
  }

  /// Chooses each STensor's layout (layout_choice.h) for a kernel with `stages` pipeline stages,
  /// among those that fit in shared memory; row-major where none does or the options say so.
  void choose_tile_layouts(int stages) {
    layouts_.assign(body_.tensors.size(), TileLayout{});
    layout_choice_ = LayoutChoice{};
    if (!choose_layouts_) return;
    LayoutProblem p;
    p.body = &body_;
    p.schedule = &schedule_;
    p.loads.assign(body_.ops.size(), TileLoad::none);
    p.wgmma.assign(body_.ops.size(), false);
    for (size_t i = 0; i < body_.ops.size(); ++i) {
      if (is_load(i))
        p.loads[i] = tma_tile(i, stages)              ? TileLoad::tma
                     : vector_load(i, load_origin(i)) ? TileLoad::cp_async
                                                      : TileLoad::copy;
      p.wgmma[i] = wgmma_matmul(i);
    }
    p.swizzle = swizzle_;
    p.fits = [&](const std::vector<TileLayout>& layouts) {
      layouts_ = layouts;
      lay_out(stages);
      return shared_bytes_ <= limits_.shared_memory_bytes;
    };
    layout_choice_ = choose_layouts(p);
    layouts_ = layout_choice_.layouts;
  }

  /// The strides of STensor t in its layout.
  std::vector<int64_t> strides_of(TensorId t) const { return layout_strides(body_.type(t).shape, layouts_[t.index()]); }
  /// STensor t as a tile op's operand or result.
  Operand operand(TensorId t) const { return {body_.type(t), strides_of(t), tensor(t), written_layout(t)}; }
  /// The layout type through which an element-wise op writes STensor t: mgd::Swizzled where
  /// wgmma reads t in place, "" (its strides) otherwise.
  std::string written_layout(TensorId t) const {
    const int64_t span = swizzle_[t.index()];
    if (span == 0) return "";
    const Shape& shape = body_.type(t).shape;
    const int64_t cols = shape[shape.rank() - 1];
    return "mgd::Swizzled<" + std::to_string(shape.numel() / cols) + ", " + std::to_string(cols) + ", " +
           std::to_string(span) + ">";
  }
  /// Whether op i writes its results element by element (unary and binary ops, thread graphs):
  /// such a result can be written swizzled for wgmma to read in place.
  bool elementwise_writer(size_t i) const {
    const OpCategory c = op_info(body_.ops[i].kind).category;
    return c == OpCategory::unary || c == OpCategory::binary || c == OpCategory::thread_body;
  }

  /// Places the STensors in shared memory, `stages` buffers for each streamed tile: tensors that
  /// are never live at the same time share bytes (shared_memory_plan.h, lifetimes from the
  /// schedule, op_order.h).
  void lay_out(int stages) {
    storage_.assign(body_.tensors.size(), Storage{});
    std::vector<TensorLifetime> life = tensor_lifetimes(body_, schedule_, stages > 1);
    // A deferred matmul's operand written in the loop holds its two buffers through the loop.
    for (size_t t = 0; t < double_buffered_.size(); ++t)
      if (double_buffered_[t]) {
        life[t].first = std::min(life[t].first, schedule_.time(OpPhase::loop, 0));
        life[t].last = std::max(life[t].last, schedule_.time(OpPhase::loop, std::max(0, schedule_.loop_steps - 1)));
      }
    // A matmul chain stores neither S nor P, nor the results it adds to accumulators itself, and
    // writes its results at the first matmul's step.
    std::vector<bool> unstored(body_.ops.size(), false);
    for (const MatmulAccumulation& a : accumulations_) unstored[a.matmul] = true;
    for (const MatmulChain& c : chains_) {
      unstored[c.first] = unstored[c.elementwise] = true;
      if (c.accumulate_o != kNoOp) unstored[c.second] = true;
      if (c.accumulate_l != kNoOp) unstored[c.row_sum] = true;
      const int32_t now = schedule_.time(schedule_.phase[c.first], schedule_.step[c.first]);
      for (size_t op : c.writers())
        if (op != kNoOp) {
          TensorLifetime& l = life[body_.ops[op].outputs[0].index()];
          l.first = std::min(l.first, now);
        }
    }
    std::vector<SharedBuffer> buffers;
    std::vector<size_t> buffer_tensor;
    for (size_t i = 0; i < body_.ops.size(); ++i) {
      const Op& op = body_.ops[i];
      if (schedule_.phase[i] == OpPhase::dead || op.kind == OpKind::output_saver || op.kind == OpKind::reshape ||
          schedule_.folded[i] || unstored[i])
        continue;
      const bool f32_acc = is_sum_accumulator(op);
      const bool staged = stages > 1 && streamed_load(i);
      for (TensorId t : op.outputs) {
        // Swizzled tiles start where their pattern does; the copy engine writes tiles to
        // 128-byte aligned shared memory.
        const int64_t align = swizzle_[t.index()] != 0 ? kSwizzleSharedAlign
                              : tma_tile(i, stages)    ? kTmaSharedAlign
                                                       : kSharedAlign;
        const TensorType& type = body_.type(t);
        const int64_t elem = f32_acc ? 4 : dtype_bytes(type.dtype);
        const int64_t bytes =
            align_up(layout_elements(type.shape, layouts_[t.index()]) * elem + a_overread_bytes(t), align);
        Storage& st = storage_[t.index()];
        st.ctype = f32_acc ? "float" : ctype(type.dtype);
        st.staged = staged;
        st.double_buffered = !staged && double_buffered_[t.index()];
        st.stage_elements = bytes / elem;
        const TensorLifetime& l = life[t.index()];
        buffers.push_back({bytes * (staged ? stages : st.double_buffered ? 2 : 1), align, l.first, l.last});
        buffer_tensor.push_back(t.index());
      }
    }
    // A split chain's partial results, live through its step alone.
    std::vector<size_t> partials_chain;
    for (size_t ci = 0; ci < chains_.size(); ++ci) {
      MatmulChain& c = chains_[ci];
      const Shape& s = body_.type(body_.ops[c.first].outputs[0]).shape;
      const Shape& o = body_.type(body_.ops[c.second].outputs[0]).shape;
      const int64_t bytes = mgd::matmul_chain_partials_bytes(s[s.rank() - 2], o[o.rank() - 1], c.splits);
      c.partials_offset = -1;
      if (bytes == 0) continue;
      const int32_t now = schedule_.time(schedule_.phase[c.first], schedule_.step[c.first]);
      buffers.push_back({bytes, kSharedAlign, now, now});
      partials_chain.push_back(ci);
    }
    memory_plan_ = plan_shared_memory(buffers);
    MUGRAPH_CHECK(plan_is_valid(buffers, memory_plan_)) << "kernel " << index_ << ": the shared-memory plan overlaps";
    for (size_t b = 0; b < buffer_tensor.size(); ++b) storage_[buffer_tensor[b]].offset = memory_plan_.offsets[b];
    for (size_t b = 0; b < partials_chain.size(); ++b)
      chains_[partials_chain[b]].partials_offset = memory_plan_.offsets[buffer_tensor.size() + b];
    tensors_bytes_ = memory_plan_.peak;
    all_live_bytes_ = 0;
    for (const SharedBuffer& b : buffers) all_live_bytes_ = align_up(all_live_bytes_, b.align) + b.bytes;
    // Reshapes read their operand's bytes.
    for (size_t i = 0; i < body_.ops.size(); ++i) {
      const Op& op = body_.ops[i];
      if (schedule_.phase[i] == OpPhase::dead || op.kind != OpKind::reshape) continue;
      Storage& st = storage_[op.outputs[0].index()];
      const Storage& src = storage_[op.inputs[0].index()];
      st.alias_of = op.inputs[0].value;
      st.ctype = src.ctype;
      st.offset = src.offset;
    }
    shared_bytes_ = tensors_bytes_;
    // Transaction barriers: one per pipeline stage where the loop streams tiles by TMA, then one
    // per tile loaded once by TMA.
    stage_bars_ = 0;
    once_bars_ = 0;
    once_bar_.assign(body_.ops.size(), -1);
    for (size_t i = 0; i < body_.ops.size(); ++i)
      if (tma_tile(i, stages) && !once_load(i)) stage_bars_ = stages;
    for (size_t i = 0; i < body_.ops.size(); ++i)
      if (tma_tile(i, stages) && once_load(i)) once_bar_[i] = stage_bars_ + once_bars_++;
    tma_bars_offset_ = stage_bars_ + once_bars_ > 0 ? align_up(shared_bytes_, 8) : -1;
    if (tma_bars_offset_ >= 0) shared_bytes_ = tma_bars_offset_ + 8 * (stage_bars_ + once_bars_);
    // One scratch area for the wgmma matmuls' operand stages (they run one after another).
    scratch_bytes_ = 0;
    for (size_t i = 0; i < body_.ops.size(); ++i)
      if (schedule_.phase[i] != OpPhase::dead && wgmma_matmul(i) && !in_chain(i))
        scratch_bytes_ = std::max(scratch_bytes_, wgmma_scratch_bytes(i));
    if (scratch_bytes_ > 0) shared_bytes_ = align_up(shared_bytes_, kSharedAlign);
    scratch_offset_ = scratch_bytes_ > 0 ? shared_bytes_ : -1;
    shared_bytes_ += scratch_bytes_;
    if (any_swizzled_) shared_bytes_ += kSwizzleSharedAlign - kDeclaredSharedAlign;  // realigning the window
  }

  std::string tensor(TensorId t) const { return "t" + std::to_string(t.value); }

  /// The load of input iterator i's tile for iteration `iteration` (see origin_expr) into dst.
  std::string load(size_t i, const std::string& dst, const std::string& iteration) const {
    const Op& op = body_.ops[i];
    const TensorType& whole = body_.params[static_cast<size_t>(op.attrs.io_index)];
    const TensorType& tile = body_.type(op.outputs[0]);
    const TileOrigin o = load_origin(i);
    std::ostringstream s;
    s << (vector_load(i, o) ? "mgd::load_async<" : "mgd::copy<" + scope() + ", ") << dims(tile.shape) << ", "
      << dims(strides_of(op.outputs[0])) << ", " << dims(row_major_strides(whole.shape)) << ">(" << dst << ", in_"
      << op.attrs.io_index << " + " << origin_expr(o, iteration) << ");  // tile " << type_comment(tile) << "\n";
    return s.str();
  }

  /// The statement(s) of op i in iteration `iteration` ("it", or "" after or without the loop),
  /// each line ending in a newline ("" for ops that emit nothing).
  std::string statement(size_t i, const std::string& iteration) {
    const Op& op = body_.ops[i];
    // A matmul chain is one call, at its first matmul's place.
    for (const MatmulChain& c : chains_)
      if (c.first == i) return matmul_chain(c, !iteration.empty());
    if (in_chain(i)) return "";
    const bool in_loop = !iteration.empty();
    std::ostringstream s;
    switch (op_info(op.kind).category) {
      case OpCategory::iterator:
        if (tma_load(i)) {
          // Loaded once: one thread asks the copy engine for it, counted against the tile's
          // own barrier, which the barrier after this step waits for (phase 0).
          const std::string bar = "tma_bars + " + std::to_string(once_bar_[i]);
          s << "if (mgd::thread_rank() == 0) {\n  mgd::mbarrier_arrive_expect_tx(" << bar << ", " << tile_bytes(i)
            << ");\n"
            << indent(tma_copy(i, tensor(op.outputs[0]), iteration, bar), 2) << "}\n";
        } else {
          s << load(i, tensor(op.outputs[0]), iteration);
        }
        break;
      case OpCategory::saver: {
        const TensorType& whole = output_types_[static_cast<size_t>(op.attrs.io_index)];
        const TensorType& tile = body_.type(op.inputs[0]);
        TileOrigin o = codegen::saver_origin(whole.shape, tile.shape, op.attrs.omap);
        s << "mgd::copy<" << scope() << ", " << dims(tile.shape) << ", " << dims(row_major_strides(whole.shape)) << ", "
          << dims(strides_of(op.inputs[0])) << ">(out_" << op.attrs.io_index << " + " << origin_expr(o, "") << ", "
          << tensor(op.inputs[0]) << ");  // save " << type_comment(tile) << "\n";
        break;
      }
      case OpCategory::accumulator: {
        const TensorType& in = body_.type(op.inputs[0]);
        if (accumulation_of(i) != nullptr) return "";  // its matmul adds to it in registers
        if (op.attrs.dim == kPhi) {
          s << "mgd::accumulate<" << scope() << ", " << dims(in.shape) << ", " << dims(strides_of(op.inputs[0])) << ">("
            << tensor(op.outputs[0]) << ", " << tensor(op.inputs[0]) << ", " << (in_loop ? "it == 0" : "true")
            << ");\n";
        } else {
          const std::vector<int64_t> ws = strides_of(op.outputs[0]);
          const int64_t step = in.shape[op.attrs.dim] * ws[static_cast<size_t>(op.attrs.dim)];
          s << "mgd::copy<" << scope() << ", " << dims(in.shape) << ", " << dims(ws) << ", "
            << dims(strides_of(op.inputs[0])) << ">(" << tensor(op.outputs[0]) << " + "
            << (in_loop ? "it * " + std::to_string(step) : std::string("0")) << ", " << tensor(op.inputs[0])
            << ");  // accumulate by concatenation\n";
        }
        break;
      }
      case OpCategory::thread_body:
        s << thread_graph(op);
        break;
      default: {
        if (op.kind == OpKind::reshape) return "";  // an alias
        if (schedule_.folded[i]) return "";         // computed by the sum that reads it
        std::vector<Operand> ins;
        for (TensorId t : op.inputs) ins.push_back(operand(t));
        const Operand out = operand(op.outputs[0]);
        // A sum of a folded op's result reads the folded op's operand through it.
        std::string read_through, folded_note;
        if (op_info(op.kind).category == OpCategory::reduction) {
          const OpId made = body_.tensors[op.inputs[0].index()].producer;
          if (made.valid() && schedule_.folded[made.index()]) {
            const Op& folded = body_.ops[made.index()];
            folded_note = std::string(op_name(folded.kind)) + " folded into ";
            ins[0] = operand(folded.inputs[0]);
            read_through =
                "mgd::ReadThrough<" + functor(folded.kind) + ", " + ctype(body_.type(folded.outputs[0]).dtype) + ">";
          }
        }
        if (wgmma_matmul(i)) {
          const int64_t in_place_a = swizzle_[op.inputs[0].index()], in_place_b = swizzle_[op.inputs[1].index()];
          const MatmulAccumulation* acc = accumulation_of(i);
          std::string result = out.name;
          if (deferred(i)) {
            // Before the loop's first deferred matmul, the products of the iteration before land.
            if (i == first_deferred())
              for (size_t d = 0; d < body_.ops.size(); ++d)
                if (deferred(d))
                  s << land(d, "it <= 1") << "  // the last iteration's product, added to "
                    << tensor(body_.ops[accumulation_of(d)->accumulate].outputs[0]) << "'s sums in registers\n";
            s << "mgd::matmul_wgmma_issue<" << dims(out.type.shape) << ", "
              << matmul_args(ins[0].type.shape, ins[0].strides, ins[1].type.shape, ins[1].strides, out.type.shape)
              << ", " << in_place_a << ", " << in_place_b << ", " << warpgroups() << ">(" << deferred_name(i) << ", "
              << ins[0].name << ", " << ins[1].name << ");  // matmul -> " << type_comment(out.type)
              << " on wgmma, both operands in place; lands in the next iteration\n";
            break;
          }
          if (acc != nullptr) {
            result = register_accumulate(i, "it == 0");
            s << "mgd::matmul_wgmma_to<" << dims(out.type.shape) << ", ";
          } else {
            s << "mgd::matmul_wgmma<" << dims(out.type.shape) << ", " << dims(out.strides) << ", ";
          }
          s << matmul_args(ins[0].type.shape, ins[0].strides, ins[1].type.shape, ins[1].strides, out.type.shape) << ", "
            << scratch_bytes_;
          const int64_t buffers = wgmma_stage_buffers(i);
          if (in_place_a != 0 || in_place_b != 0 || buffers != 1) s << ", " << in_place_a << ", " << in_place_b;
          if (buffers != 1) s << ", " << buffers;
          s << ">(" << result << ", " << ins[0].name << ", " << ins[1].name << ", "
            << (scratch_bytes_ > 0 ? "scratch" : "nullptr") << ");  // matmul -> " << type_comment(out.type)
            << " on wgmma"
            << (in_place_a != 0 && in_place_b != 0 ? ", both operands in place"
                : in_place_a != 0                  ? ", A in place"
                : in_place_b != 0                  ? ", B in place"
                                                   : "");
          if (acc != nullptr)
            s << ", added to " << tensor(body_.ops[acc->accumulate].outputs[0]) << "'s sums in registers";
          s << "\n";
          break;
        }
        s << compute_call(scope(), op, ins, out, read_through) << "  // " << folded_note << op_name(op.kind) << " -> "
          << type_comment(out.type) << "\n";
        break;
      }
    }
    // A thread that wrote a tile wgmma reads in place makes its stores (generic proxy) visible to
    // the tensor cores (async proxy) before the barrier that precedes the matmul.
    if (elementwise_writer(i) &&
        std::any_of(op.outputs.begin(), op.outputs.end(), [&](TensorId t) { return swizzle_[t.index()] != 0; }))
      s << "mgd::fence_proxy_async();  // for the tensor cores, which read it in place\n";
    return s.str();
  }

  /// The bytes the wgmma jobs read past the end of tile t where they read it in place as the
  /// instruction's A and it has fewer rows than a whole job (mgd::wgmma_a_overread_bytes): a
  /// matmul chain's first A, or a tile read_in_place marked (a_padded_); 0 for other tiles. Its
  /// buffer holds them.
  int64_t a_overread_bytes(TensorId t) const {
    bool instr_a = a_padded_[t.index()];
    for (const MatmulChain& c : chains_) instr_a = instr_a || body_.ops[c.first].inputs[0] == t;
    const Shape& sh = body_.type(t).shape;
    return instr_a ? mgd::wgmma_a_overread_bytes(sh[sh.rank() - 2], swizzle_[t.index()]) : 0;
  }

  /// Whether some tile is read in place as an A with fewer rows than a job.
  bool any_a_padded() const { return std::find(a_padded_.begin(), a_padded_.end(), true) != a_padded_.end(); }

  /// Whether op i is part of a matmul chain.
  bool in_chain(size_t i) const {
    for (const MatmulChain& c : chains_)
      for (size_t op : c.ops())
        if (op == i) return true;
    return false;
  }

  /// A summing accumulator kept in registers through the for-loop (mgd::ResultRegisters `name`,
  /// of the accumulator's [rows, cols]): a MatmulAccumulation's, and, where the option allows, a
  /// chain's that runs in the loop and adds to the accumulator itself.
  /// Where the registers hold the transpose's fragments (a MatmulAccumulation's `transposed`),
  /// rows and cols are the transpose's: the accumulator's cols and rows.
  struct RegisterResult {
    TensorId accumulator;
    int64_t rows = 0, cols = 0;
    std::string name;
    bool transposed = false;
  };
  std::vector<RegisterResult> register_results() const {
    std::vector<RegisterResult> r;
    if (body_.forloop <= 1) return r;
    const auto add = [&](size_t acc, bool transposed = false) {
      const TensorId t = body_.ops[acc].outputs[0];
      const Shape& sh = body_.type(t).shape;
      const int64_t rows = sh[sh.rank() - 2], cols = sh[sh.rank() - 1];
      r.push_back({t, transposed ? cols : rows, transposed ? rows : cols, "r" + std::to_string(t.value), transposed});
    };
    for (const MatmulAccumulation& a : accumulations_) add(a.accumulate, a.transposed);
    if (!chain_accumulator_registers_) return r;
    for (const MatmulChain& c : chains_)
      if (schedule_.phase[c.first] == OpPhase::loop)
        for (size_t acc : {c.accumulate_o, c.accumulate_l})
          if (acc != kNoOp) add(acc);
    return r;
  }

  /// Where a chain puts the result of op `result` (its second matmul or its row sum; kNoOp:
  /// none): into the summing accumulator `accumulator` (kNoOp: none; `in_loop`: the loop's
  /// first iteration sets it), in registers through the loop where register_results() has it,
  /// else the result's own tile.
  std::string chain_result(size_t result, size_t accumulator, bool in_loop) const {
    if (result == kNoOp) return "mgd::NoResult{}";
    const TensorId t = body_.ops[result].outputs[0];
    const Shape& sh = body_.type(t).shape;
    if (accumulator != kNoOp && in_loop)
      for (const RegisterResult& r : register_results())
        if (r.accumulator == body_.ops[accumulator].outputs[0])
          return "mgd::RegisterAccumulate<" + ctype(body_.type(t).dtype) + ", " + std::to_string(r.rows) + ", " +
                 std::to_string(r.cols) + ", " + std::to_string(warpgroups()) + ">{" + r.name + ", it == 0}";
    if (accumulator != kNoOp)  // dense f32, as mgd::accumulate adds (the result's type rounds first)
      return "mgd::TileAccumulate<" + ctype(body_.type(t).dtype) + ", " + std::to_string(sh[sh.rank() - 1]) + ", 1>{" +
             tensor(body_.ops[accumulator].outputs[0]) + ", " + (in_loop ? "it == 0" : "true") + "}";
    const std::vector<int64_t> st = strides_of(t);
    return "mgd::TileStore<" + ctype(body_.type(t).dtype) + ", " + std::to_string(st[st.size() - 2]) + ", " +
           std::to_string(st[st.size() - 1]) + ">{" + tensor(t) + "}";
  }

  /// The call of mgd::matmul_chain_wgmma that runs chain c.
  std::string matmul_chain(const MatmulChain& c, bool in_loop) const {
    const Op& first = body_.ops[c.first];
    const Op& unary = body_.ops[c.elementwise];
    const Op& second = body_.ops[c.second];
    const TensorId a = first.inputs[0], b = first.inputs[1], s = first.outputs[0], cm = second.inputs[1],
                   o = second.outputs[0];
    const auto last = [&](TensorId t, int from_end) {
      const Shape& sh = body_.type(t).shape;
      return sh[sh.rank() - from_end];
    };
    std::ostringstream k;
    k << "mgd::matmul_chain_wgmma<" << last(s, 2) << ", " << last(a, 1) << ", " << last(s, 1) << ", " << last(o, 1)
      << ", " << swizzle_[a.index()] << ", " << swizzle_[b.index()] << ", " << swizzle_[cm.index()] << ", "
      << ctype(body_.type(s).dtype) << (c.splits > 1 ? ", " + std::to_string(c.splits) : std::string()) << ">(\n    "
      << chain_result(c.second, c.accumulate_o, in_loop) << ",\n    "
      << chain_result(c.row_sum, c.accumulate_l, in_loop) << ",\n    " << tensor(a) << ", " << tensor(b) << ", "
      << tensor(cm) << ", " << functor(unary.kind) << "{}"
      << (c.splits > 1 ? ", reinterpret_cast<float*>(smem + " + std::to_string(c.partials_offset) + ")" : std::string())
      << ");  // matmul, " << op_name(unary.kind) << ", matmul" << (c.row_sum != kNoOp ? " and row sums" : "")
      << (c.accumulate_o != kNoOp || c.accumulate_l != kNoOp ? ", accumulated" : "") << " -> "
      << type_comment(body_.type(o)) << ", the scores in registers"
      << (c.splits > 1 ? ", S's n-blocks split " + std::to_string(c.splits) + " ways among the warpgroups"
                       : std::string())
      << "\n";
    return k.str();
  }

  /// A thread graph: one pass over the elements per saved shape, the element-wise chain on f32
  /// values in registers.
  std::string thread_graph(const Op& tg_op) {
    const Graph& tg = body_.bodies[static_cast<size_t>(tg_op.attrs.body)];
    // The savers, grouped by the shape they save.
    std::map<std::vector<int64_t>, std::vector<size_t>> groups;
    for (size_t i = 0; i < tg.ops.size(); ++i)
      if (tg.ops[i].kind == OpKind::output_saver) groups[extents(tg.type(tg.ops[i].inputs[0]).shape)].push_back(i);
    std::ostringstream code;
    code << "// thread graph: " << tg.ops.size() << " ops in registers\n";
    for (const auto& [shape_v, savers] : groups) {
      const Shape shape(shape_v);
      // The ops these savers need.
      std::vector<bool> need(tg.tensors.size(), false);
      for (size_t i : savers) need[tg.ops[i].inputs[0].index()] = true;
      for (size_t i = tg.ops.size(); i-- > 0;) {
        const Op& op = tg.ops[i];
        bool needed = false;
        for (TensorId t : op.outputs) needed = needed || need[t.index()];
        if (needed)
          for (TensorId t : op.inputs) need[t.index()] = true;
      }
      // Values every element a thread takes shares (a row scale where the thread's elements lie
      // in one row), computed once per thread before the loop over its elements
      // (shared_per_thread): at element e0, which has the thread's coordinates in their dims.
      const int64_t threads = body_.threads.volume();
      int64_t period = 1;
      bool any_once = false;
      std::vector<bool> once(tg.tensors.size(), false);
      for (const Op& op : tg.ops)
        if (!op.outputs.empty() && need[op.outputs[0].index()]) {
          const int64_t p = thread_share_period(tg.type(op.outputs[0]).shape, shape);
          if (threads % p != 0) continue;
          once[op.outputs[0].index()] = any_once = true;
          period = std::max(period, p);
        }
      std::ostringstream before, body;
      for (size_t i = 0; i < tg.ops.size(); ++i) {
        const Op& op = tg.ops[i];
        const std::string v = op.outputs.empty() ? "" : "v" + std::to_string(op.outputs[0].value);
        std::ostringstream& s = !op.outputs.empty() && once[op.outputs[0].index()] ? before : body;
        const std::string e = &s == &before ? "e0" : "e";
        if (op.kind == OpKind::output_saver) {
          if (std::find(savers.begin(), savers.end(), i) == savers.end()) continue;
          const TensorId dst = tg_op.outputs[static_cast<size_t>(op.attrs.io_index)];
          const std::vector<int64_t> ds = strides_of(dst);
          const std::string layout = written_layout(dst);
          const std::string at =
              layout.empty() && ds == row_major_strides(shape)
                  ? std::string("e")
                  : "mgd::offset<" + dims(shape) + ", " + (layout.empty() ? dims(ds) : layout) + ">(e)";
          s << "  " << tensor(dst) << "[" << at << "] = mgd::from_float<" << storage_[dst.index()].ctype << ">(v"
            << op.inputs[0].value << ");\n";
          continue;
        }
        if (!need[op.outputs[0].index()]) continue;
        const Shape& vs = tg.type(op.outputs[0]).shape;
        if (op.kind == OpKind::input_iterator) {
          const TensorId src = tg_op.inputs[static_cast<size_t>(op.attrs.io_index)];
          s << "  const float " << v << " = mgd::to_float(" << tensor(src) << "[mgd::offset<" << dims(shape) << ", "
            << dims(broadcast_read_strides(vs, strides_of(src), shape)) << ">(" << e << ")]);\n";
        } else if (op_info(op.kind).category == OpCategory::unary) {
          s << "  const float " << v << " = " << functor(op.kind) << "{}(v" << op.inputs[0].value << ");\n";
        } else if (op_info(op.kind).category == OpCategory::binary) {
          const std::string a = "v" + std::to_string(op.inputs[0].value);
          std::string b =
              op.attrs.has_scalar ? float_literal(op.attrs.scalar.value()) : "v" + std::to_string(op.inputs[1].value);
          const bool left = op.attrs.has_scalar && op.attrs.scalar_pos == 0;
          s << "  const float " << v << " = " << functor(op.kind) << "{}(" << (left ? b : a) << ", " << (left ? a : b)
            << ");\n";
        } else {
          throw UserError("codegen: a thread graph holds " + std::string(op_name(op.kind)) +
                          ", which is not element-wise");
        }
      }
      const std::string loop =
          "mgd::for_each<" + scope() + ", " + dims(shape) + ">([&](int64_t e) {\n" + body.str() + "});\n";
      if (any_once)
        code << "{\n  // shared by every element a thread takes\n  const int64_t e0 = mgd::thread_rank() % " << period
             << ";\n"
             << before.str() << indent(loop, 2) << "}\n";
      else
        code << loop;
    }
    return code.str();
  }

  const Graph& body_;
  int index_;
  const std::vector<TensorType>& output_types_;
  const Target& limits_;
  bool wgmma_;                                     // CudaTarget::wgmma
  bool tma_;                                       // CudaTarget::tma
  int requested_stages_;                           // CodegenOptions::pipeline_stages
  bool choose_layouts_;                            // CodegenOptions::choose_layouts
  bool read_operands_in_place_;                    // CodegenOptions::read_operands_in_place
  int64_t max_stage_buffers_;                      // CodegenOptions::wgmma_stage_buffers
  bool matmul_chains_;                             // CodegenOptions::matmul_chains_in_registers
  bool chain_accumulator_registers_;               // CodegenOptions::chain_accumulators_in_registers
  bool matmul_accumulator_registers_;              // CodegenOptions::matmul_accumulators_in_registers
  bool chain_split_;                               // CodegenOptions::chain_split_n_blocks
  bool overlap_;                                   // CodegenOptions::overlap_loop_matmuls
  std::vector<MatmulChain> chains_;                // find_matmul_chains
  std::vector<MatmulAccumulation> accumulations_;  // find_matmul_accumulations
  std::vector<TileLayout> layouts_;                // per STensor (layout_choice.h)
  LayoutChoice layout_choice_;
  int stages_ = 1;  // buffers per streamed tile
  int ahead_ = 0;   // iterations the pipeline loads ahead: stages_ - 1, or stages_ - 2 with deferred matmuls
  std::vector<bool> deferred_;         // per op: a matmul whose product lands an iteration later
  std::vector<bool> double_buffered_;  // per STensor: an operand of such a matmul written in the loop
  BlockSchedule schedule_;             // op order and steps (op_order.h)
  SharedMemoryPlan memory_plan_;
  int64_t tensors_bytes_ = 0;          // the STensors' bytes under the plan (its peak)
  int64_t all_live_bytes_ = 0;         // what they would take, each in its own buffer
  std::vector<bool> tma_capable_;      // per op (tma_capable)
  std::vector<int64_t> swizzle_;       // per STensor: the swizzle span of a tile wgmma reads in place, or 0
  bool any_swizzled_ = false;          // some tile is swizzled: the shared window is realigned
  bool elementwise_swizzled_ = false;  // some tile an element-wise op writes is swizzled
  std::vector<bool> a_padded_;         // per STensor: read in place as an A with fewer rows than a job
  bool streams_cp_async_ = false;      // the pipelined loop loads some tile with cp.async
  std::vector<Storage> storage_;
  int64_t shared_bytes_ = 0;
  int64_t scratch_offset_ = -1;  // the wgmma operand stages, shared by the kernel's wgmma matmuls
  int64_t scratch_bytes_ = 0;
  int64_t stage_buffers_ = 1;     ///< most stage buffers a wgmma matmul takes (mgd::wgmma_stage_buffers)
  int64_t tma_bars_offset_ = -1;  // the transaction barriers, if any load is TMA
  int stage_bars_ = 0;            // barriers of the pipeline's stages (0, or stages_)
  int once_bars_ = 0;             // barriers of tiles loaded once, after those
  std::vector<int> once_bar_;     // per op: the barrier of a tile loaded once by TMA, or -1
  std::vector<TensorMapParam> tensor_maps_;
};

/// A pre-defined matmul as one strided-batched cuBLAS call (mgd::gemm), if it is one: operands
/// and result of one dtype, and each operand's batch either the result's (dense) or broadcast
/// whole (stride 0). Returns the call's text without its pointers, "mgd::gemm<T>(stream, " ...
/// to be completed by the caller, or "" if it needs the generated kernel.
std::string blas_gemm_args(const Shape& a, const Shape& b, const Shape& c, DType a_dt, DType b_dt, DType c_dt) {
  if (a_dt != b_dt || a_dt != c_dt) return "";
  const int rank = c.rank();
  const int64_t m = c[rank - 2], n = c[rank - 1], k = a[a.rank() - 1];
  int64_t batch = 1;
  for (int d = 0; d + 2 < rank; ++d) batch *= c[d];
  // The stride from one matrix of operand x to the next, or -1 if no single stride serves.
  auto batch_stride = [&](const Shape& x) -> int64_t {
    // Only the batch dims' strides matter here, which do not depend on which operand x is.
    const std::vector<int64_t> st = matmul_operand_strides(x, row_major_strides(x), c, true).strides;
    const int64_t matrix = x[x.rank() - 2] * x[x.rank() - 1];
    bool broadcast = true, dense = true;
    int64_t expect = matrix;
    for (int d = rank - 3; d >= 0; --d) {
      const int64_t got = st[static_cast<size_t>(d)];
      if (c[d] == 1) continue;  // a dim of extent 1 has no step to take
      broadcast = broadcast && got == 0;
      dense = dense && got == expect;
      expect *= c[d];
    }
    return broadcast ? 0 : dense ? matrix : -1;
  };
  const int64_t sa = batch_stride(a), sb = batch_stride(b);
  if (sa < 0 || sb < 0) return "";
  for (int64_t v : {m, n, k, batch})
    if (v > INT32_MAX) return "";
  return std::to_string(batch) + ", " + std::to_string(m) + ", " + std::to_string(n) + ", " + std::to_string(k) + ", " +
         std::to_string(sa) + ", " + std::to_string(sb) + ", " + std::to_string(m * n);
}

/// One launch of the host function: a kernel, or a call made on the host (cuBLAS).
struct Launch {
  std::string host_call;  ///< if not empty, this call (returning 0 or an error code) instead
  std::string setup;      ///< statements before the launch (tensor maps)
  std::string comment;
  std::string kernel;
  std::array<int64_t, 3> grid{1, 1, 1};
  int64_t threads = 1;
  int64_t shared_bytes = 0;
  std::vector<std::string> args;
};

/// g with every block graph's threads replaced by (threads, 1, 1) (CodegenOptions::block_threads).
Graph with_block_threads(const Graph& g, int threads) {
  Graph out = g;
  for (const Op& op : out.ops)
    if (op.kind == OpKind::graph_kernel) out.bodies[static_cast<size_t>(op.attrs.body)].threads = Dim3{threads, 1, 1};
  return out;
}

}  // namespace

GeneratedCode generate_cuda(const Graph& ugraph, const CudaTarget& target, const CodegenOptions& options) {
  if (options.pipeline_stages < 0 || options.pipeline_stages > kMaxPipelineStages)
    throw UserError("codegen: pipeline stages must be 1 to " + std::to_string(kMaxPipelineStages) +
                    " (or 0 to choose), not " + std::to_string(options.pipeline_stages));
  if (options.block_threads != 0 &&
      (options.block_threads < 32 || options.block_threads > 1024 || options.block_threads % 32 != 0))
    throw UserError(
        "codegen: threads per block must be a multiple of 32 from 32 to 1024 (or 0 for the μGraph's), "
        "not " +
        std::to_string(options.block_threads));
  const Graph g = options.block_threads != 0 ? with_block_threads(ugraph, options.block_threads) : ugraph;
  if (g.level != Level::kernel) throw UserError("codegen: the μGraph's top graph must be a kernel graph");
  if (auto r = validate(g, *target.limits))
    throw UserError("codegen: the μGraph is not valid for " + std::string(target.arch) + ": " + r->str());
  for (const Tensor& t : g.tensors)
    for (size_t d = 0; d < t.layout.size(); ++d)
      if (t.layout[d] != static_cast<int8_t>(d))
        throw UserError("codegen: tensor layouts other than row-major are not supported yet");

  GeneratedCode code;
  std::ostringstream kernels, host;
  const std::vector<bool> live = live_ops(g);

  // DTensor buffers: inputs and outputs are the caller's, intermediates live in the workspace.
  std::vector<std::string> buf(g.tensors.size());
  std::vector<bool> is_input(g.tensors.size(), false);
  int n_inputs = 0;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::input) {
      const TensorId t = op.outputs[0];
      is_input[t.index()] = true;
      host << "  const " << ctype(g.type(t).dtype) << "* const d" << t.value << " = static_cast<const "
           << ctype(g.type(t).dtype) << "*>(inputs[" << n_inputs << "]);  // input " << n_inputs << ": "
           << codegen::escape_name(op.attrs.name) << " " << type_comment(g.type(t)) << "\n";
      code.inputs.push_back({op.attrs.name, g.type(t)});
      buf[t.index()] = "d" + std::to_string(t.value);
      ++n_inputs;
      // An input nothing reads (the program ignores it) is still taken, in its place.
      bool read = std::find(g.outputs.begin(), g.outputs.end(), t) != g.outputs.end();
      for (size_t i = 0; i < g.ops.size() && !read; ++i)
        read = live[i] && std::find(g.ops[i].inputs.begin(), g.ops[i].inputs.end(), t) != g.ops[i].inputs.end();
      if (!read) host << "  (void)d" << t.value << ";  // read by nothing\n";
    }
  // Program outputs written in place by the kernel that makes them; an output that is an input,
  // or a tensor output twice, is copied at the end.
  std::vector<int> output_of(g.tensors.size(), -1);
  std::vector<size_t> copied_outputs;
  for (size_t j = 0; j < g.outputs.size(); ++j) {
    const TensorId t = g.outputs[j];
    const std::string name = j < g.output_names.size() ? g.output_names[j] : "";
    code.outputs.push_back({name, g.type(t)});
    host << "  " << ctype(g.type(t).dtype) << "* const o" << j << " = static_cast<" << ctype(g.type(t).dtype)
         << "*>(outputs[" << j << "]);  // output " << j << ": " << codegen::escape_name(name) << " "
         << type_comment(g.type(t)) << "\n";
    if (is_input[t.index()] || output_of[t.index()] >= 0) {
      copied_outputs.push_back(j);
    } else {
      output_of[t.index()] = static_cast<int>(j);
      buf[t.index()] = "o" + std::to_string(j);
    }
  }
  // A reshape that is an output and a view: the kernel that makes its operand writes the output.
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (live[i] && kernel_op_is_view(g, g.ops[i]) && output_of[g.ops[i].outputs[0].index()] >= 0)
      buf[g.ops[i].inputs[0].index()] = buf[g.ops[i].outputs[0].index()];
  host << "  unsigned char* const ws = static_cast<unsigned char*>(workspace);\n  (void)ws;\n";
  int64_t ws_bytes = 0;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (!live[i]) continue;
    // A reshape that is a view reads and writes its operand's buffer: no memory, no kernel (the
    // buffers of one that is an output are already the output's).
    if (kernel_op_is_view(g, g.ops[i])) {
      if (output_of[g.ops[i].outputs[0].index()] < 0)
        buf[g.ops[i].outputs[0].index()] = buf[g.ops[i].inputs[0].index()];
      continue;
    }
    for (TensorId t : g.ops[i].outputs) {
      if (!buf[t.index()].empty()) continue;
      const TensorType& type = g.type(t);
      host << "  " << ctype(type.dtype) << "* const d" << t.value << " = reinterpret_cast<" << ctype(type.dtype)
           << "*>(ws + " << ws_bytes << ");  // " << type_comment(type) << "\n";
      buf[t.index()] = "d" + std::to_string(t.value);
      ws_bytes = align_up(ws_bytes + type.shape.numel() * dtype_bytes(type.dtype), kWorkspaceAlign);
    }
  }

  std::vector<Launch> launches;
  auto grid_launch = [&](const std::string& name, int64_t elements) {
    Launch l;
    l.kernel = name;
    l.threads = kGridThreads;
    l.grid[0] = std::max<int64_t>(1, std::min(kGridMaxBlocks, (elements + kGridThreads - 1) / kGridThreads));
    return l;
  };
  int index = 0;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (!live[i] || op.kind == OpKind::input || kernel_op_is_view(g, op)) continue;
    const std::string name = "kernel_" + std::to_string(index);
    if (op.kind == OpKind::graph_kernel) {
      const Graph& body = g.bodies[static_cast<size_t>(op.attrs.body)];
      std::vector<TensorType> out_types;
      for (TensorId t : op.outputs) out_types.push_back(g.type(t));
      BlockKernelEmitter e(body, index, out_types, target, options);
      kernels << e.emit() << "\n";
      Launch l;
      l.kernel = name;
      l.grid = {body.grid.x, body.grid.y, body.grid.z};
      l.threads = body.threads.volume();
      l.shared_bytes = e.shared_bytes();
      for (TensorId t : op.inputs) l.args.push_back(buf[t.index()]);
      for (TensorId t : op.outputs) l.args.push_back(buf[t.index()]);
      for (const TensorMapParam& m : e.tensor_maps()) {
        const std::string var = "k" + std::to_string(index) + "_" + m.name;
        l.setup += "  mgd::TensorMap " + var + ";  // " + buf[op.inputs[static_cast<size_t>(m.param)].index()] +
                   " in " + m.box.str() + " boxes\n  if (const int e = mgd::make_tensor_map(&" + var + ", " +
                   buf[op.inputs[static_cast<size_t>(m.param)].index()] + ", " + braced(m.whole) + ", " +
                   braced(m.box) + (m.swizzle != 0 ? ", " + std::to_string(m.swizzle) : std::string()) +
                   "); e != 0) return e;\n";
        l.args.push_back(var);
      }
      launches.push_back(l);
    } else if (const std::string gemm = op.kind == OpKind::matmul
                                            ? blas_gemm_args(g.type(op.inputs[0]).shape, g.type(op.inputs[1]).shape,
                                                             g.type(op.outputs[0]).shape, g.type(op.inputs[0]).dtype,
                                                             g.type(op.inputs[1]).dtype, g.type(op.outputs[0]).dtype)
                                            : "";
               !gemm.empty()) {
      // A pre-defined matmul cuBLAS can do: one call, no kernel of ours.
      const TensorType& out = g.type(op.outputs[0]);
      Launch l;
      l.host_call = "mgd::gemm<" + ctype(out.dtype) + ">(stream, " + buf[op.inputs[0].index()] + ", " +
                    buf[op.inputs[1].index()] + ", " + buf[op.outputs[0].index()] + ", " + gemm + ")";
      l.comment = "pre-defined matmul -> " + type_comment(out) + " on cuBLAS (batch, m, n, k, strides)";
      launches.push_back(l);
      continue;  // no kernel index taken
    } else {
      const TensorType& out = g.type(op.outputs[0]);
      std::vector<Operand> ins;
      std::vector<std::string> params;
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        ins.push_back(dense(g.type(op.inputs[k]), "a" + std::to_string(k)));
        params.push_back("const " + ctype(ins.back().type.dtype) + "* MGD_RESTRICT a" + std::to_string(k));
      }
      kernels << "// " << name << ": pre-defined " << op_name(op.kind) << " -> " << type_comment(out) << "\n";
      kernels << "MGD_GLOBAL void MGD_LAUNCH_BOUNDS(" << kGridThreads << ") " << name << "(";
      for (const std::string& p : params) kernels << p << ", ";
      kernels << ctype(out.dtype) << "* MGD_RESTRICT out) {\n";
      kernels << indent(compute_call("mgd::Grid", op, ins, dense(out, "out")), 2) << "}\n\n";
      Launch l = grid_launch(name, out.shape.numel());
      for (TensorId t : op.inputs) l.args.push_back(buf[t.index()]);
      l.args.push_back(buf[op.outputs[0].index()]);
      launches.push_back(l);
    }
    ++index;
  }
  // Outputs that need a copy share one copy kernel per dtype and size.
  for (size_t j : copied_outputs) {
    const TensorId t = g.outputs[j];
    const TensorType& type = g.type(t);
    const std::string name = "kernel_" + std::to_string(index++);
    const std::vector<int64_t> flat{type.shape.numel()};
    kernels << "// " << name << ": copy of output " << j << "\n";
    kernels << "MGD_GLOBAL void MGD_LAUNCH_BOUNDS(" << kGridThreads << ") " << name << "(const " << ctype(type.dtype)
            << "* MGD_RESTRICT src, " << ctype(type.dtype) << "* MGD_RESTRICT dst) {\n"
            << "  mgd::copy<mgd::Grid, " << dims(flat) << ", mgd::Dims<1>, mgd::Dims<1>>(dst, src);\n}\n\n";
    Launch l = grid_launch(name, type.shape.numel());
    l.args = {buf[t.index()], "o" + std::to_string(j)};
    launches.push_back(l);
  }

  const size_t n_kernels = static_cast<size_t>(
      std::count_if(launches.begin(), launches.end(), [](const Launch& l) { return l.host_call.empty(); }));
  std::ostringstream src;
  src << "// Generated by mugraph codegen for " << target.arch << ". Do not edit: regenerate instead.\n"
      << "// " << n_kernels << " kernel launches, " << launches.size() - n_kernels << " cuBLAS calls, " << ws_bytes
      << " bytes of workspace.\n"
      << "#include \"mugraph_device/device.h\"\n#include \"ugraph.h\"\n\nnamespace {\n\n"
      << kernels.str() << "}  // namespace\n\n"
      << "extern \"C\" int64_t mugraph_workspace_bytes(void) { return " << ws_bytes << "; }\n\n"
      << "extern \"C\" int mugraph_run(const void* const* inputs, void* const* outputs, void* workspace,\n"
      << "                             cudaStream_t stream) {\n"
      << host.str() << (n_kernels > 0 ? "  cudaError_t err = cudaSuccess;\n" : "");
  for (const Launch& l : launches) {
    if (!l.host_call.empty()) {
      src << "  // " << l.comment << "\n  if (const int e = " << l.host_call << "; e != 0) return e;\n";
      continue;
    }
    src << l.setup;
    if (l.shared_bytes > 0)
      src << "  if ((err = mgd::allow_dynamic_shared(" << l.kernel << ", " << l.shared_bytes
          << ")) != cudaSuccess) return static_cast<int>(err);\n";
    src << "  MGD_LAUNCH(" << l.kernel << ", dim3(" << l.grid[0] << ", " << l.grid[1] << ", " << l.grid[2] << "), dim3("
        << l.threads << "), " << l.shared_bytes << ", stream";
    for (const std::string& a : l.args) src << ", " << a;
    src << ");\n  if ((err = cudaGetLastError()) != cudaSuccess) return static_cast<int>(err);\n";
  }
  src << "  return 0;\n}\n";

  std::ostringstream hdr;
  hdr << "// Generated by mugraph codegen for " << target.arch << ": the host interface.\n#pragma once\n\n"
      << "#include <stdint.h>\n\n#include \"mugraph_device/platform.h\"\n\n"
      << "// Bytes of device memory mugraph_run needs as its workspace (may be 0).\n"
      << "extern \"C\" int64_t mugraph_workspace_bytes(void);\n\n"
      << "// Runs the μGraph on stream: inputs and outputs are device pointers to dense row-major\n"
      << "// tensors, in this order:\n";
  for (size_t i = 0; i < code.inputs.size(); ++i)
    hdr << "//   inputs[" << i << "]: " << codegen::escape_name(code.inputs[i].name) << " "
        << type_comment(code.inputs[i].type) << "\n";
  for (size_t j = 0; j < code.outputs.size(); ++j)
    hdr << "//   outputs[" << j << "]: " << codegen::escape_name(code.outputs[j].name) << " "
        << type_comment(code.outputs[j].type) << "\n";
  hdr << "// Returns 0, the cudaError_t of the first launch that failed, mgd::kBlasErrorBase (10000)\n"
      << "// plus the cublasStatus_t of the first cuBLAS call that failed, or mgd::kTmaErrorBase (20000)\n"
      << "// plus the CUresult of the first tensor map the driver refused.\n"
      << "extern \"C\" int mugraph_run(const void* const* inputs, void* const* outputs, void* workspace,\n"
      << "                             cudaStream_t stream);\n";

  code.source = src.str();
  code.header = hdr.str();
  code.workspace_bytes = ws_bytes;
  code.kernels = static_cast<int>(n_kernels);
  code.blas_calls = static_cast<int>(launches.size() - n_kernels);
  code.manifest = codegen::manifest_json(code, target);
  code.cmake = codegen::cmake_file(target);
  return code;
}

}  // namespace mugraph
