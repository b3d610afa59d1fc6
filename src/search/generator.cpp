// The generator: kernel tasks and block tasks (see generator.h and search.h).
#include "generator.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>

#include "block_cache.h"
#include "config_list_cache.h"
#include "growth_floor.h"
#include "memory.h"
#include "mugraph/error.h"
#include "mugraph/validate.h"
#include "operand_rules.h"

namespace mugraph::search_detail {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 12) + (h >> 4);
  return h;
}

bool is_commutative(OpKind k) { return k == OpKind::add || k == OpKind::mul; }

/// Tile extents a grid axis may give a block (the paper's x ∈ {8..256}).
constexpr int64_t kTileExtents[] = {8, 16, 32, 64, 128, 256};
/// For-loop ranges (the paper's list).
constexpr int64_t kForloops[] = {1, 4, 16, 64};
/// Most blocks in a grid (the paper's upper end).
constexpr int64_t kMaxBlocks = 4096;

int count_graph_kernels(const Graph& g) {
  int n = 0;
  for (const Op& op : g.ops) n += op.kind == OpKind::graph_kernel;
  return n;
}

int count_kernel_ops(const Graph& g) {
  int n = 0;
  for (const Op& op : g.ops) n += op.kind != OpKind::input;
  return n;
}

/// Right-aligned broadcast compatibility (NumPy rules) of two shapes.
bool broadcastable(const Shape& a, const Shape& b, int skip_tail = 0) {
  for (int i = 1 + skip_tail; i <= a.rank() && i <= b.rank(); ++i) {
    int64_t x = a[a.rank() - i], y = b[b.rank() - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

/// A fast necessary condition of the shape rules, so that most invalid candidate ops are turned
/// away before infer_output_types builds a rejection message.
bool shapes_may_fit(OpKind kind, const Shape& a, const Shape* b, const OpAttrs& attrs) {
  switch (kind) {
    case OpKind::add:
    case OpKind::sub:
    case OpKind::mul:
    case OpKind::div:
      return b == nullptr || broadcastable(a, *b);
    case OpKind::matmul:
      return b != nullptr && a.rank() >= 2 && b->rank() >= 2 && a[a.rank() - 1] == (*b)[b->rank() - 2] &&
             broadcastable(a, *b, 2);
    case OpKind::concat:
      if (b == nullptr || a.rank() != b->rank()) return false;
      for (int d = 0; d < a.rank(); ++d)
        if (d != attrs.dim && a[d] != (*b)[d]) return false;
      return true;
    default:
      return true;
  }
}

/// The non-linear-op rule of ProgramIndices::nonlinear_ok for an op about to be appended.
bool nonlinear_ok(const ProgramIndices& p, OpKind kind, size_t operands, const std::vector<DimLabels>& labels) {
  if (kind == OpKind::div) return operands < 2 || p.nonlinear_ok(kind, labels[1]);
  const OpInfo& info = op_info(kind);
  if (info.category != OpCategory::unary || kind == OpKind::sqr) return true;
  return p.nonlinear_ok(kind, labels[0]);
}

/// Every grid map (an imap or an omap) that takes, for each axis, one of `choices[axis]` (a data
/// dim or φ), with no dim taken by two axes; x turns slowest.
std::vector<std::array<int8_t, 3>> grid_maps(const std::array<std::vector<int8_t>, 3>& choices) {
  std::vector<std::array<int8_t, 3>> out;
  for (int8_t x : choices[0])
    for (int8_t y : choices[1])
      for (int8_t z : choices[2])
        if (!((x != kPhi && (x == y || x == z)) || (y != kPhi && y == z))) out.push_back({x, y, z});
  return out;
}

/// The split bit of grid axes x, y and z and the for-loop, in that order.
constexpr int16_t kAxisBits[4] = {kGridXBit, kGridYBit, kGridZBit, kLoopBit};
/// In a block's split sums (BlockSearch::TensorState::split_sum), beside the axis bits: a value
/// made from a stack of an earlier kernel's partial results of the program's contractions, read
/// whole, before a sum over the stack completes them.
constexpr int16_t kStackBit = 16;

/// Rule (3) of kernel_configs() for one axis (a grid axis or the loop), checked as the inputs
/// are chosen last to first: the program indices of the dims the axis splits, in input order,
/// are some kNone, then one index throughout, or with kApart several indices apart from each
/// other (OperandIndexUse::apart). kernel_configs builds every combination of maps with these;
/// without apart indices the state stays a single int, as fast as before the exception existed
/// (with 8 bytes for every program, gqa_repeat's search took 8.4 s instead of 6.5).
template <bool kApart>
class AxisSplits {
 public:
  bool none() const { return state_ == kEmpty; }
  /// The index the axis splits (in every input it splits; kNone counts as an index here; the
  /// largest of several apart ones), or a value below every index when it splits none or a mix.
  int32_t index() const { return state_; }
  /// Adds the index of a dim of an input before all added ones; false if the rule breaks
  /// (add_apart may still take it).
  bool add_earlier(int16_t index) {
    // An index must equal every later one; a kNone only forbids indices before it.
    if (index != kNone && state_ != kEmpty && state_ != index) return false;
    state_ = state_ == kEmpty || state_ == index ? index : kMixed;
    return true;
  }
  /// Adds an index add_earlier refused if it is apart from every index added (`apart`: the
  /// indices, as bits, that no program tensor ranges over together with it); false if not.
  bool add_apart(int16_t index, uint32_t apart) {
    if constexpr (!kApart) {
      return false;
    } else {
      if (apart == 0 || state_ < 0 || state_ >= 32 || index < 0 || index >= 32) return false;
      const uint32_t set = several_ != 0 ? several_ : uint32_t{1} << state_;
      const uint32_t bit = uint32_t{1} << index;
      if ((set & bit) == 0 && (set & ~apart) != 0) return false;
      several_ = set | bit;
      state_ = std::max<int32_t>(state_, index);
      return true;
    }
  }

 private:
  struct None {};
  static constexpr int32_t kEmpty = INT32_MIN;      // no input split by this axis yet
  static constexpr int32_t kMixed = INT32_MIN + 1;  // kNone and an index among the later ones
  int32_t state_ = kEmpty;                          ///< else the one index all later splits have (kNone included)
  /// The apart indices (bits) split, once there are two.
  [[no_unique_address]] std::conditional_t<kApart, uint32_t, None> several_{};
};

}  // namespace

namespace {
const OpAttrs& default_attrs() {
  static const OpAttrs d;
  return d;
}

/// op_rank without its attr: what try_op compares first.
OpRank op_rank_operands(const Op& op) {
  OpRank r;
  r.kind = static_cast<int32_t>(op.kind);
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    r.max_input = std::max(r.max_input, op.inputs[i].value);
    if (i < 3) r.inputs[i] = op.inputs[i].value;
  }
  return r;
}

/// Whether a and b agree on all but attr.
bool same_operands(const OpRank& a, const OpRank& b) {
  return a.max_input == b.max_input && a.kind == b.kind && a.inputs == b.inputs;
}

/// op_rank's attr: a dependent chain of some fifteen mixes.
uint64_t op_rank_attr(const Graph& g, const Op& op) {
  // The fields used_attrs keeps, read in place (a copy of the OpAttrs per call was a tenth of the
  // block search's time); unused ones hash as their defaults, as in that copy.
  const OpAttrs& a = op.attrs;
  const OpAttrs& d = default_attrs();
  const uint32_t f = attr_fields(op.kind);
  const bool scalar = (f & kAttrScalar) && a.has_scalar, in_maps = f & kAttrInMaps, omap = f & kAttrOMap;
  uint64_t h = 0;
  for (size_t i = 3; i < op.inputs.size(); ++i) h = mix(h, static_cast<uint64_t>(op.inputs[i].value));
  h = mix(h, static_cast<uint64_t>((f & (kAttrDim | kAttrAccum) ? a.dim : d.dim) + 7));
  h = mix(h, static_cast<uint64_t>(f & kAttrTo ? a.to : d.to));
  h = mix(h, static_cast<uint64_t>(f & kAttrTimes ? a.times : d.times));
  if (scalar) {
    h = mix(h, hash_value(a.scalar));
    h = mix(h, static_cast<uint64_t>(a.scalar_pos) + 1);
  }
  h = mix(h, static_cast<uint64_t>(f & (kAttrInput | kAttrOutput) ? a.io_index : d.io_index));
  for (int ax = 0; ax < 3; ++ax) {
    h = mix(h, static_cast<uint64_t>((in_maps ? a.imap : d.imap)[ax] + 2));
    h = mix(h, static_cast<uint64_t>((omap ? a.omap : d.omap)[ax] + 2));
  }
  h = mix(h, static_cast<uint64_t>((in_maps ? a.fmap : d.fmap) + 2));
  if ((f & kAttrBody) && a.body >= 0) h = mix(h, hash_value(g.bodies[static_cast<size_t>(a.body)]));
  return h;
}
}  // namespace

OpRank op_rank(const Graph& g, const Op& op) {
  OpRank r = op_rank_operands(op);
  r.attr = op_rank_attr(g, op);
  return r;
}

// ---------------------------------------------------------------------------------------------
// SearchContext

SearchContext::SearchContext(const Graph& program, const SearchOptions& options)
    : program_(program),
      options_(resolved_options(options, program)),
      oracle_(exprs_, nfs_),
      gpu_(gpu_spec(options.target.name)),
      model_bound_(options.cost_bound == CostBound::model) {
  if (program.level != Level::kernel) throw UserError("search: the program must be a kernel graph");
  if (!(options.cost_ceiling_us >= 0) || !std::isfinite(options.cost_ceiling_us))
    throw UserError("search: the cost ceiling must be a finite number of microseconds >= 0 (0: none)");
  bound_us_.store(ceiling_us());
  if (program.outputs.empty()) throw UserError("search: the program has no outputs");
  // The CLI checks its flags; the Python options object sets the fields directly.
  auto in_range = [](const char* name, int value, LimitRange range) {
    if (value < range.lo || value > range.hi)
      throw UserError("search: " + std::string(name) + " is " + std::to_string(value) + ", expected " +
                      std::to_string(range.lo) + ".." + std::to_string(range.hi));
  };
  in_range("max_kernel_ops", options.max_kernel_ops, kMaxKernelOpsRange);
  in_range("max_block_ops", options.max_block_ops, kMaxBlockOpsRange);
  in_range("max_graph_kernels", options.max_graph_kernels, kMaxGraphKernelsRange);
  in_range("max_kernel_inputs", options_.max_kernel_inputs, kMaxKernelInputsRange);
  in_range("retile_seeds", options.retile_seeds, kRetileSeedsRange);
  // The command line checks these too; library and Python callers get the same refusal.
  if (!(options.model_bound_ratio == 0 || (options.model_bound_ratio >= 1 && std::isfinite(options.model_bound_ratio))))
    throw UserError("search: the bound ratio is " + std::to_string(options.model_bound_ratio) +
                    ", expected 0 (off) or a finite number of 1 or more");
  if (options.top_k < 1) throw UserError("search: top is " + std::to_string(options.top_k) + ", expected 1 or more");
  if (!(options.bytes_phase_share > 0 && options.bytes_phase_share <= 1))
    throw UserError("search: the bytes phase's share of the time limit is " +
                    std::to_string(options.bytes_phase_share) + ", expected a number in (0, 1]");
  if (!(options.bytes_phase_min_seconds >= 0) || !std::isfinite(options.bytes_phase_min_seconds))
    throw UserError("search: the bytes phase's least time must be a finite number of seconds >= 0");
  // Every candidate is verified on random inputs at the program's size. Past the machine's memory
  // (not the memory limit, which stops the search but lets it verify what it found), verifying
  // would fail after the whole search: refused here, before it.
  if (std::string why = verification_memory_refusal(program); !why.empty()) throw UserError("search: " + why);
  if (!(options.time_limit_seconds >= 0) || !std::isfinite(options.time_limit_seconds))
    throw UserError("search: the time limit must be a finite number of seconds >= 0 (0: none)");
  if (options.memory_limit_bytes < 0)
    throw UserError("search: the memory limit is " + std::to_string(options.memory_limit_bytes) +
                    " bytes, expected 0 (three quarters of the usable memory) or more");
  if (options.threads < 0)
    throw UserError("search: threads is " + std::to_string(options.threads) + ", expected 0 (every core) or more");
  if (options.block_cache_bytes < 0)
    throw UserError("search: the block-search cache is " + std::to_string(options.block_cache_bytes) +
                    " bytes, expected 0 (off) or more");
  if (options.block_cache_bytes > 0) block_cache_ = std::make_unique<BlockCache>(options.block_cache_bytes);
  config_lists_ = std::make_unique<ConfigListCache>(config_list_cache_bytes(effective_memory_limit(options)));
  std::set<OpKind> kinds;
  int matmuls = 0;
  for (const Op& op : program.ops) {
    if (op.kind == OpKind::graph_kernel || op.kind == OpKind::thread_graph)
      throw UserError("search: the program must consist of pre-defined ops (it has a " + std::string(op_name(op.kind)) +
                      " op); give the tensor program, not a μGraph");
    if (op.kind == OpKind::input) continue;
    if (op.kind == OpKind::repeat || op.kind == OpKind::reshape || op.kind == OpKind::concat)
      throw UserError("search: programs with " + std::string(op_name(op.kind)) +
                      " are not searched yet (the generator enumerates no layout ops besides the "
                      "concat of the LoRA rewrite)");
    if (op.kind == OpKind::sum && op.attrs.to > 1)
      throw UserError("search: programs with sum(..., to=" + std::to_string(op.attrs.to) +
                      ") are not searched yet (the generator enumerates sums to one value only)");
    kinds.insert(op.kind);
    matmuls += op.kind == OpKind::matmul;
    if (op.attrs.has_scalar) {
      Constant c{op.kind, op.attrs.scalar.normalized(), op.attrs.scalar_pos};
      bool seen = false;
      for (const Constant& k : constants_) seen |= k.kind == c.kind && k.value == c.value && k.pos == c.pos;
      if (!seen) constants_.push_back(c);
    }
  }
  kinds_.assign(kinds.begin(), kinds.end());

  // Two matmuls whose results are added is where the paper's concat rewrite applies (§8.1):
  // (W‖B)·(X‖A·X) sums two contractions, so the program must add two values that each hold
  // one. An add of a scalar (RMSNorm's ε) or of a value with no contraction (a residual) is no
  // such sum, and enumerating concats for it only multiplies the block graphs: with them, an
  // RMS norm before a gated MLP grew concats of concats for 10-24 s per loop-free configuration
  // (5.1 million states in 60 s, unfinished; 0.18 million in all without them).
  std::vector<bool> contracts(program.tensors.size(), false);
  bool adds_contractions = false;
  for (const Op& op : program.ops) {
    bool c = op.kind == OpKind::matmul || op.kind == OpKind::sum;
    for (TensorId in : op.inputs) c = c || contracts[in.index()];
    for (TensorId out : op.outputs) contracts[out.index()] = c;
    if ((op.kind == OpKind::add || op.kind == OpKind::sub) && op.inputs.size() == 2)
      adds_contractions = adds_contractions || (contracts[op.inputs[0].index()] && contracts[op.inputs[1].index()]);
  }
  concat_ = matmuls >= 2 && adds_contractions;
  // A fixed seed: which kernels the probes rule out is part of what a search explores, which
  // must not vary from run to run.
  if (options_.input_probes) input_probes_ = make_input_probes(program_, 0x70726f6265ull);
  targets_ = output_expressions(program_, exprs_);
  indices_ = std::make_unique<ProgramIndices>(program_);
  const std::vector<ExprId> exprs = expressions(program_, exprs_).tensors;
  for (const Op& op : program.ops)
    if (op.inputs.size() == 2 && exprs[op.inputs[0].index()] == exprs[op.inputs[1].index()])
      self_operand_kinds_.push_back(op.kind);
  // Inputs read by a matmul and by a binary element-wise op (root() numbers the inputs in the
  // program's order).
  for (const Op& op : program.ops) {
    if (op.kind != OpKind::input) continue;
    bool by_matmul = false, elementwise = false;
    for (const Op& user : program.ops) {
      if (std::find(user.inputs.begin(), user.inputs.end(), op.outputs[0]) == user.inputs.end()) continue;
      by_matmul = by_matmul || user.kind == OpKind::matmul;
      elementwise = elementwise || (op_info(user.kind).category == OpCategory::binary && user.inputs.size() == 2);
    }
    twin_inputs_.push_back(by_matmul && elementwise);
  }
  if (options_.program_tile_values) {
    auto labels = kernel_graph_labels(*indices_, program_);
    MUGRAPH_CHECK(labels.has_value()) << "the program breaks its own index rules";
    const size_t n = program_.tensors.size();
    for (size_t t = 0; t < n; ++t) {
      ProgramValue v;
      v.expr = exprs[t];
      NfResult nf = normal_form(v.expr, exprs_, nfs_);
      if (nf.stop == NfStop::none) v.nf = nf.id;
      if (const ExprNode& top = exprs_.node(v.expr); top.kind == ExprKind::sum)
        if (NfResult s = normal_form(top.a, exprs_, nfs_); s.stop == NfStop::none) v.summand_nf = s.id;
      v.labels = labels->tensors[t];
      v.cone.assign(n, false);
      v.cone[t] = true;
      const Op& op = program_.op(program_.tensors[t].producer);
      if (op.kind != OpKind::input) {
        v.cone_ops = 1;
        // Operands have smaller ids (ops are in topological order), so their cones are known.
        for (TensorId in : op.inputs)
          for (size_t u = 0; u < n; ++u)
            if (program_values_[in.index()].cone[u]) v.cone[u] = true;
        for (size_t u = 0; u < n; ++u)
          if (u != t && v.cone[u] && program_.op(program_.tensors[u].producer).kind != OpKind::input) ++v.cone_ops;
      }
      program_values_.push_back(std::move(v));
    }
    program_consumers_.resize(n);
    for (const Op& op : program_.ops)
      for (TensorId in : op.inputs)
        for (TensorId o : op.outputs) program_consumers_[in.index()].push_back(o.value);
    // Consumers come later in the program's topological order.
    program_single_use_chains_.assign(n, false);
    for (size_t t = n; t-- > 0;) {
      if (program_.op(program_.tensors[t].producer).kind == OpKind::input) continue;
      const auto& c = program_consumers_[t];
      program_single_use_chains_[t] = is_program_output(static_cast<int32_t>(t))
                                          ? c.empty()
                                          : c.size() == 1 && program_single_use_chains_[static_cast<size_t>(c[0])];
    }
    // The LoRA rewrite's matmul of concats computes two contractions that an add sums.
    if (!adds_contractions) program_steps_ = find_program_steps(program_, program_values_);
  }
  find_first_reader_extras();
}

void SearchContext::find_first_reader_extras() {
  int64_t largest_output = 0;
  for (TensorId o : program_.outputs) largest_output = std::max(largest_output, program_.type(o).shape.numel());
  for (const Op& input : program_.ops) {
    if (input.kind != OpKind::input) continue;
    const TensorType& type = program_.type(input.outputs[0]);
    const DimLabels& labels = indices_->input(input.attrs.name);
    // The pre-defined ops the generator may give it (run_kernel_task): the program's kinds.
    double extra = std::numeric_limits<double>::infinity();
    for (OpKind kind : kinds_) {
      switch (op_info(kind).category) {
        case OpCategory::matmul:
          // Its dram term takes all its bytes at the share: 1/share - 1 of them beyond the peak's.
          extra = std::min(extra, 1.0 / gpu_.cublas_dram_share - 1.0);
          break;
        case OpCategory::unary:
        case OpCategory::binary:
          // It writes at least the input's elements, each at least as wide (promote), and those
          // bytes are no later bytes of lower_bound's unless they are a missing program output.
          extra = std::min(extra, largest_output >= type.shape.numel() ? 0.0 : 1.0);
          break;
        case OpCategory::reduction:
          // A sum costs no more than its bytes, if the index rules let one read the input alone
          // (run_kernel_task asks them): RMSNorm's W is contracted with Y, never summed alone.
          for (int d = 0; d < type.shape.rank(); ++d) {
            if (type.shape[d] <= 1) continue;
            const OpAttrs sum = attrs::sum(d);
            auto out = infer_output_types(program_, kind, {type}, sum);
            if (out.ok() && op_labels(*indices_, kind, sum, {labels}, {type.shape}, (*out)[0].shape)) extra = 0;
          }
          break;
        default:
          break;
      }
    }
    // No op can read it: nothing completes the prefix, which the bound need not tell.
    first_reader_extra_.push_back(std::isfinite(extra) ? extra : 0.0);
  }
}

double SearchContext::unread_inputs_extra_us(const Graph& prefix, const std::vector<TensorId>& reads) const {
  std::vector<bool> read(prefix.tensors.size(), false);
  for (const Op& op : prefix.ops)
    for (TensorId t : op.inputs) read[t.index()] = true;
  for (TensorId t : reads) read[t.index()] = true;
  return unread_inputs_extra_us(prefix, read);
}

double SearchContext::unread_inputs_extra_us(const Graph& prefix, const std::vector<bool>& read) const {
  double extra_bytes = 0;
  size_t input = 0;
  for (const Op& op : prefix.ops) {
    if (op.kind != OpKind::input) continue;
    const TensorId t = op.outputs[0];
    MUGRAPH_CHECK(input < first_reader_extra_.size()) << "a prefix with more inputs than the program";
    const double per_byte = first_reader_extra_[input++];
    if (read[t.index()]) continue;
    const TensorType& type = prefix.type(t);
    extra_bytes = std::max(extra_bytes, per_byte * static_cast<double>(type.shape.numel() * dtype_bytes(type.dtype)));
  }
  return extra_bytes / gpu_.dram_bytes_per_us;
}

SearchContext::~SearchContext() = default;

void SearchContext::use_model_bound() {
  model_bound_.store(true);
  // The bytes phase's block searches recorded no growth floors.
  if (block_cache_) block_cache_->clear();
  config_lists_->clear();
}

Task SearchContext::root() const {
  Task t;
  Graph g;
  g.level = Level::kernel;
  for (const Op& op : program_.ops) {
    if (op.kind != OpKind::input) continue;
    g.add_input(op.attrs.name, op.attrs.shape, op.attrs.dtype);
  }
  t.prefix = std::make_shared<const Graph>(std::move(g));
  return t;
}

std::pair<int64_t, int> SearchContext::lower_bound(const Graph& prefix, const std::vector<ExprId>& exprs,
                                                   const std::vector<TensorId>& extra_reads, bool another_kernel,
                                                   int64_t* later_bytes, double* unread_extra_us) {
  CandidateMetrics m = candidate_metrics(prefix, options_.target);
  int64_t bytes = m.device_bytes;
  int kernels = m.kernels;
  auto size = [&](TensorId t) {
    const TensorType& type = prefix.type(t);
    return type.shape.numel() * dtype_bytes(type.dtype);
  };
  std::vector<bool> read(prefix.tensors.size(), false);
  for (const Op& op : prefix.ops)
    for (TensorId t : op.inputs) read[t.index()] = true;
  // The new kernel reads its operands, whoever read them before.
  for (TensorId t : extra_reads) {
    bytes += size(t);
    read[t.index()] = true;
  }
  if (!extra_reads.empty()) ++kernels;
  int64_t later = 0;
  for (const Op& op : prefix.ops)
    if (op.kind == OpKind::input && !read[op.outputs[0].index()]) later += size(op.outputs[0]);
  // Which tensors already are program outputs (shape and A_eq-equal expression), and which
  // outputs none is yet.
  std::vector<bool> is_output(prefix.tensors.size(), false);
  std::vector<bool> produced(program_.outputs.size(), false);
  for (size_t t = 0; t < prefix.tensors.size(); ++t)
    for (size_t j = 0; j < program_.outputs.size(); ++j)
      if (prefix.tensors[t].type.shape == program_.type(program_.outputs[j]).shape &&
          aeq_equal(exprs[t], targets_[j], exprs_, nfs_).value_or(true))
        is_output[t] = produced[j] = true;
  bool missing = false;
  for (size_t j = 0; j < program_.outputs.size(); ++j)
    if (!produced[j]) {
      missing = true;
      const TensorType& type = program_.type(program_.outputs[j]);
      const int64_t n = type.shape.numel() * dtype_bytes(type.dtype);
      // The new kernel may write it, unless another kernel must follow.
      (another_kernel || extra_reads.empty() ? later : bytes) += n;
    }
  if (missing && (extra_reads.empty() || another_kernel)) ++kernels;
  // Intermediate DTensors nobody reads yet must be read by a later kernel (no op is dead).
  // (`read` now also holds the new kernel's operands.)
  for (size_t t = 0; t < prefix.tensors.size(); ++t) {
    const Tensor& tensor = prefix.tensors[t];
    if (read[t] || is_output[t] || !tensor.producer.valid() || prefix.op(tensor.producer).kind == OpKind::input)
      continue;
    later += size(TensorId(static_cast<int32_t>(t)));
  }
  if (later_bytes) *later_bytes = later;
  if (unread_extra_us) {
    // Only pre-defined kernels follow: the prefix's (no new kernel) or the new kernel's, if it
    // is the last graph-defined one and another kernel must follow it.
    const int graph_kernels = count_graph_kernels(prefix) + (extra_reads.empty() ? 0 : 1);
    const bool pre_defined_rest =
        graph_kernels >= options_.max_graph_kernels && (extra_reads.empty() || another_kernel);
    *unread_extra_us = model_bound() && pre_defined_rest ? unread_inputs_extra_us(prefix, read) : 0.0;
  }
  return {bytes + later, kernels};
}

// ---------------------------------------------------------------------------------------------
// Kernel configurations

std::vector<KernelConfig> kernel_configs(const Graph& g, const std::vector<TensorId>& inputs,
                                         const OperandIndexUse* use) {
  MUGRAPH_CHECK(inputs.size() <= static_cast<size_t>(kMaxKernelInputs))
      << "a graph-defined kernel with " << inputs.size() << " inputs (at most " << kMaxKernelInputs << ")";
  std::vector<Shape> shapes;
  for (TensorId t : inputs) shapes.push_back(g.type(t).shape);
  auto contracted = [&](size_t i, int d) { return use == nullptr || use->contracted[i][static_cast<size_t>(d)]; };
  // Grid candidates: 1-D grids d/x for every input dim d and tile extent x, plus (gx, batch)
  // 2-D grids when the inputs have a common leading batch dim (attention).
  std::set<int64_t> xs{1};
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    for (int d = 0; d < s.rank(); ++d) {
      for (int64_t x : kTileExtents)
        if (s[d] % x == 0 && s[d] / x >= 1 && s[d] / x <= kMaxBlocks) xs.insert(s[d] / x);
      if (use != nullptr && !contracted(i, d) && s[d] <= kFineSplitMaxExtent)
        for (int64_t x : {1, 2, 4})
          if (s[d] % x == 0 && s[d] / x > 1) xs.insert(s[d] / x);
    }
  }
  std::vector<Dim3> grids;
  for (int64_t x : xs) grids.push_back(Dim3{x, 1, 1});
  // An input's batch dim: its first dim before the two matrix dims that is more than 1, so that
  // a program with leading unit dims (batch size 1 in PyTorch's [b, h, s, d]) has the same
  // grids as the one without them.
  auto batch_dim = [](const Shape& s) {
    for (int d = 0; d + 2 < s.rank(); ++d)
      if (s[d] > 1) return d;
    return -1;
  };
  std::set<int64_t> batches;
  for (const Shape& s : shapes)
    if (batch_dim(s) >= 0) batches.insert(s[batch_dim(s)]);
  for (int64_t b : batches)
    for (int64_t x : xs)
      if (x * b <= kMaxBlocks) grids.push_back(Dim3{x, b, 1});
  // (gx, batch, gz): attention split along both the keys and the queries of each head, which the
  // 2-D grids cannot do (QKNorm at batch size 1 has 2 heads: a grid over keys and heads fills 132
  // SMs only with 64 key slices, each writing partial results as large as the output). Axes x and
  // z are interchangeable, so z ≤ x (ties are broken by the indices they split, below).
  for (int64_t b : batches)
    for (int64_t x : xs)
      for (int64_t z : xs)
        if (x > 1 && z > 1 && z <= x && x * b * z <= kMaxBlocks) grids.push_back(Dim3{x, b, z});

  // A stack of partial results is read one slot per iteration: its slot count is a loop range.
  auto slot = [&](size_t i, int d) {
    return use == nullptr || use->stack_slot.empty() ? int64_t{0} : use->stack_slot[i][static_cast<size_t>(d)];
  };
  std::set<int64_t> forloops(std::begin(kForloops), std::end(kForloops));
  for (size_t i = 0; i < shapes.size(); ++i)
    for (int d = 0; d < shapes[i].rank(); ++d)
      if (slot(i, d) > 0) forloops.insert(shapes[i][d] / slot(i, d));

  std::vector<KernelConfig> out;
  const size_t n = inputs.size();
  const bool any_apart =
      use != nullptr && std::any_of(use->apart.begin(), use->apart.end(), [](uint32_t a) { return a != 0; });
  // Rule (3)'s exception: the indices apart from each one (OperandIndexUse::apart).
  auto apart_of = [use](int16_t index) -> uint32_t {
    return use != nullptr && index >= 0 && static_cast<size_t>(index) < use->apart.size()
               ? use->apart[static_cast<size_t>(index)]
               : 0;
  };
  for (const Dim3& grid : grids) {
    for (int64_t f : forloops) {
      // Options per input: (imap, fmap) pairs.
      std::vector<std::vector<std::pair<std::array<int8_t, 3>, int8_t>>> options(n);
      bool possible = true;
      for (size_t i = 0; i < n && possible; ++i) {
        const Shape& s = shapes[i];
        // Per axis: φ, and every dim the axis's block count divides (none where it is 1). In a
        // 3-D grid, y runs over the heads: it splits every input's batch dim, nothing else.
        std::array<std::vector<int8_t>, 3> dims;
        for (int ax = 0; ax < 3; ++ax) {
          dims[static_cast<size_t>(ax)] = {static_cast<int8_t>(kPhi)};
          if (grid[ax] == 1) continue;
          if (ax == 1 && grid.z > 1) {
            if (batch_dim(s) >= 0 && s[batch_dim(s)] == grid.y) dims[1] = {static_cast<int8_t>(batch_dim(s))};
            continue;
          }
          for (int d = 0; d < s.rank(); ++d)
            if (slot(i, d) == 0 && s[d] % grid[ax] == 0)  // a stack is never split across blocks
              dims[static_cast<size_t>(ax)].push_back(static_cast<int8_t>(d));
        }
        for (const std::array<int8_t, 3>& imap : grid_maps(dims)) {
          Shape tile = s;
          for (int ax = 0; ax < 3; ++ax)
            if (imap[static_cast<size_t>(ax)] != kPhi) tile[imap[static_cast<size_t>(ax)]] /= grid[ax];
          options[i].push_back({imap, static_cast<int8_t>(kPhi)});
          if (f > 1)
            for (int d = 0; d < s.rank(); ++d)
              if (tile[d] % f == 0 && contracted(i, d) && (slot(i, d) == 0 || tile[d] / f == slot(i, d)))
                options[i].push_back({imap, static_cast<int8_t>(d)});
        }
        possible = !options[i].empty();
      }
      if (!possible) continue;
      // Every combination of the inputs' options, in the order of an odometer whose first input
      // turns fastest: the last input is chosen outermost. Rule (3) is checked as each input is
      // chosen, so a combination that breaks it is cut with all its completions, and only kept
      // configurations are built (most combinations break it).
      std::vector<size_t> pick(n);
      auto choose = [&](auto&& self, size_t left, auto splits) -> void {
        if (left == 0) {
          // An operand read twice (side by side) takes two different maps, the first one's
          // earlier among its options: the other order is the same kernel.
          for (size_t a = 0; a + 1 < n; ++a)
            if (inputs[a] == inputs[a + 1] && !(pick[a] < pick[a + 1])) return;
          // Blocks that all see the same data, or iterations that all load the same tiles, only
          // repeat work: every grid axis and the loop must split some input.
          if ((grid.x > 1 && splits[0].none()) || (grid.y > 1 && splits[1].none()) ||
              (grid.z > 1 && splits[2].none()) || (f > 1 && splits[3].none()))
            return;
          // With as many blocks along x as along z, swapping the two axes' roles gives the same
          // kernel: keep the configuration whose x splits the larger index.
          if (grid.z > 1 && grid.x == grid.z && splits[0].index() < splits[2].index()) return;
          KernelConfig c;
          c.grid = grid;
          c.forloop = f;
          for (size_t i = 0; i < n; ++i) std::tie(c.imaps[i], c.fmaps[i]) = options[i][pick[i]];
          out.push_back(c);
          return;
        }
        const size_t i = left - 1;
        for (size_t o = 0; o < options[i].size(); ++o) {
          const auto& [imap, fmap] = options[i][o];
          auto next = splits;
          bool ok = true;
          for (size_t axis = 0; axis < 4 && ok; ++axis) {
            const int8_t d = axis < 3 ? imap[axis] : fmap;
            if (d == kPhi) continue;
            const int16_t index = use == nullptr ? int16_t{0} : use->index[i][static_cast<size_t>(d)];
            ok = next[axis].add_earlier(index) || (axis < 3 && next[axis].add_apart(index, apart_of(index)));
          }
          if (!ok) continue;
          pick[i] = o;
          self(self, i, next);
        }
      };
      if (any_apart)
        choose(choose, n, std::array<AxisSplits<true>, 4>{});
      else
        choose(choose, n, std::array<AxisSplits<false>, 4>{});
    }
  }
  return out;
}

double config_floor_us(const Graph& g, const std::vector<TensorId>& inputs, const KernelConfig& c, const GpuSpec& gpu) {
  return config_floor(g, inputs, c, gpu).total_us();
}

ConfigFloor config_floor(const Graph& g, const std::vector<TensorId>& inputs, const KernelConfig& c,
                         const GpuSpec& gpu) {
  double moved = 0, pieces = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& type = g.type(inputs[i]);
    Shape tile = type.shape;
    for (int ax = 0; ax < 3; ++ax)
      if (c.imaps[i][static_cast<size_t>(ax)] != kPhi) tile[c.imaps[i][static_cast<size_t>(ax)]] /= c.grid[ax];
    if (c.fmaps[i] != kPhi) tile[c.fmaps[i]] /= c.forloop;
    const double bytes = static_cast<double>(tile.numel() * dtype_bytes(type.dtype));
    const double times = c.fmaps[i] == kPhi ? 1.0 : static_cast<double>(c.forloop);
    moved += bytes * times;
    pieces += tile_pieces(tile, type.shape, dtype_bytes(type.dtype)) * times;
  }
  const LoadTerms loads = load_terms(c.grid.volume(), moved, gpu);
  const double pieces_us = static_cast<double>(c.grid.volume()) * pieces / gpu.pieces_per_us;
  // A loop waits at a barrier in every iteration (block_barriers), on the busiest SM at least
  // once per round of the most blocks it can hold.
  const int64_t busiest = blocks_on_busiest_sm(c.grid.volume(), gpu);
  const double rounds = static_cast<double>((busiest + gpu.blocks_per_sm - 1) / gpu.blocks_per_sm);
  ConfigFloor f;
  f.launch_us = gpu.launch_us;
  f.loads_us = std::max({loads.l2_us, loads.sm_load_us, pieces_us});
  f.barrier_us = c.forloop > 1 ? rounds * static_cast<double>(c.forloop) * gpu.barrier_us : 0.0;
  return f;
}

// ---------------------------------------------------------------------------------------------
// Generator

bool Generator::useful(ExprId e, SearchStats& stats) {
  if (!ctx_.options().abstract_pruning) return true;
  auto it = useful_cache_.find(e.value);
  if (it != useful_cache_.end()) return it->second;
  bool ok = false;
  for (ExprId t : ctx_.targets()) {
    ++stats.oracle_queries;
    if (ctx_.oracle().is_subexpression(e, t)) {
      ok = true;
      break;
    }
  }
  useful_cache_.emplace(e.value, ok);
  return ok;
}

uint64_t Generator::free_vars_of(ExprId e) {
  auto it = free_vars_cache_.find(e.value);
  if (it != free_vars_cache_.end()) return it->second;
  const ExprNode& n = ctx_.exprs().node(e);
  uint64_t v = 0;
  if (n.kind == ExprKind::var) {
    v = uint64_t{1} << (n.value & 63);
  } else if (n.kind != ExprKind::sum) {
    const int arity = expr_arity(n.kind);
    if (arity >= 1) v |= free_vars_of(n.a);
    if (arity >= 2) v |= free_vars_of(n.b);
  }
  free_vars_cache_.emplace(e.value, v);
  return v;
}

uint64_t Generator::vars_of(ExprId e) {
  auto it = vars_cache_.find(e.value);
  if (it != vars_cache_.end()) return it->second;
  const ExprNode& n = ctx_.exprs().node(e);
  uint64_t v = 0;
  if (n.kind == ExprKind::var)
    v = uint64_t{1} << (n.value & 63);
  else {
    int arity = n.kind == ExprKind::sum ? 1 : expr_arity(n.kind);
    if (arity >= 1) v |= vars_of(n.a);
    if (arity >= 2) v |= vars_of(n.b);
  }
  vars_cache_.emplace(e.value, v);
  return v;
}

bool Generator::run(const Task& task, TaskOutput& out, const std::atomic<bool>& stop) {
  if (stop.load(std::memory_order_relaxed)) return false;
  return task.is_block() ? run_block_task(task, out, stop) : run_kernel_task(task, out, stop);
}

bool computes_program_output(SearchContext& ctx, const Graph& g, const GraphLabels& labels,
                             const std::vector<ExprId>& exprs, size_t t, size_t j) {
  return g.tensors[t].type.shape == ctx.program().type(ctx.program().outputs[j]).shape &&
         labels.tensors[t].same_dims(ctx.indices().output(j)) &&
         aeq_equal(exprs[t], ctx.targets()[j], ctx.exprs(), ctx.normal_forms()).value_or(true);
}

bool has_dead_ops(const Graph& g) {
  // A dead op's results reach no output, so some op among them has a result nothing reads.
  std::vector<bool> used(g.tensors.size(), false);
  for (const Op& op : g.ops)
    for (TensorId t : op.inputs) used[t.index()] = true;
  for (TensorId t : g.outputs) used[t.index()] = true;
  for (const Op& op : g.ops)
    if (op.kind != OpKind::input)
      for (TensorId t : op.outputs)
        if (!used[t.index()]) return true;
  return false;
}

FoundCandidate found_candidate(SearchContext& ctx, Graph&& g, std::vector<int32_t> path) {
  FoundCandidate c;
  c.metrics = candidate_metrics(g, ctx.options().target);
  c.estimated_us = rank_estimate_us(g, ctx.gpu());
  c.graph = std::move(g);
  c.path = std::move(path);
  return c;
}

namespace {

/// Shared by kernel and block tasks: a new kernel-graph prefix becomes a candidate (all outputs
/// produced), a child kernel task (room for more ops), or nothing. `prefix_floor_extra`: the
/// floor_extra_us of `next` without its last kernel (the task's prefix). `no_children`: a
/// first pass's (Task::finish_only); `no_candidates`: a full pass with a first-pass twin, which
/// found every candidate this kernel completes.
void consider_prefix(SearchContext& ctx, Graph&& next, const std::vector<ExprId>& exprs, const Task& task,
                     int32_t& child_index, TaskOutput& out, double prefix_floor_extra, bool no_children = false,
                     bool no_candidates = false) {
  const Graph& program = ctx.program();
  const size_t nout = program.outputs.size();
  std::vector<TensorId> matched(nout);
  bool complete = true;
  auto labels = kernel_graph_labels(ctx.indices(), next);
  MUGRAPH_CHECK(labels.has_value()) << "a generated kernel graph breaks the index rules";
  for (size_t j = 0; j < nout; ++j) {
    // The latest tensor that matches: later tensors are the ones new ops made.
    for (size_t t = next.tensors.size(); t-- > 0;) {
      if (computes_program_output(ctx, next, *labels, exprs, t, j)) {
        matched[j] = TensorId(static_cast<int32_t>(t));
        break;
      }
    }
    complete &= matched[j].valid();
  }
  if (complete) {
    if (no_candidates) return;
    for (size_t j = 0; j < nout; ++j) next.mark_output(matched[j], program.output_names[j]);
    if (has_dead_ops(next)) {
      ++out.stats.pruned["dead_ops"];
      return;
    }
    ++out.stats.candidates;
    out.candidates.push_back(found_candidate(ctx, std::move(next), task.path));
    return;
  }
  if (count_kernel_ops(next) >= ctx.options().max_kernel_ops || no_children) return;
  if (writes_partial_sums_nothing_completes(ctx, next, exprs)) {
    ++out.stats.pruned["partial_sum"];
    return;
  }
  // Past the last graph-defined kernel, the inputs left unread cost more than their bytes.
  double unread_extra = 0;
  auto [bytes, kernels] = ctx.lower_bound(next, exprs, {}, false, nullptr, &unread_extra);
  // The new kernel's estimate (a fusion and a choice of threads) only where the parent's floor
  // does not already cut the prefix.
  if (ctx.beyond_bound(bytes, kernels, prefix_floor_extra + unread_extra)) {
    ++out.stats.pruned["cost_bound"];
    return;
  }
  const double floor_extra = ctx.next_floor_extra_us(prefix_floor_extra, next);
  if (ctx.beyond_bound(bytes, kernels, floor_extra + unread_extra)) {
    ++out.stats.pruned["cost_bound"];
    return;
  }
  Task child;
  if (ctx.model_bound()) child.floor_us = cost_lower_bound_us(bytes, kernels, ctx.gpu()) + floor_extra + unread_extra;
  child.floor_extra_us = floor_extra;
  child.path = task.path;
  child.path.push_back(child_index++);
  child.prefix = std::make_shared<const Graph>(std::move(next));
  child.parent = out.children_parent(task);
  out.children.push_back(std::move(child));
}

/// The rank of the prefix's last kernel op (none: the prefix is the program's inputs); a new
/// kernel must rank above it (the canonical order).
OpRank last_kernel_rank(const Graph& prefix) {
  if (!prefix.ops.empty() && prefix.ops.back().kind != OpKind::input) return op_rank(prefix, prefix.ops.back());
  return OpRank{};
}

/// What a block task does with a closed block graph, grown or replayed from the block-search
/// cache: appends its kernel (reading the task's operands and saving tensors with
/// `saved_exprs`) to the task's prefix and considers the result (consider_prefix).
void close_kernel(SearchContext& ctx, const Task& task, const PrefixFacts& facts, Graph body,
                  const std::vector<ExprId>& saved_exprs, const OpRank& last_rank, int32_t& child_index,
                  TaskOutput& out, double prefix_floor_extra, bool leaves_finishing) {
  Graph next = *task.prefix;
  auto r = next.append_with_body(OpKind::graph_kernel, task.operands, std::move(body));
  if (!r.ok()) {
    ++out.stats.pruned[std::string(reason_name(r.rejection().reason))];
    return;
  }
  if (!(op_rank(next, next.ops.back()) > last_rank)) return;
  std::vector<ExprId> exprs = facts.exprs;
  exprs.insert(exprs.end(), saved_exprs.begin(), saved_exprs.end());
  ++out.stats.states;
  consider_prefix(ctx, std::move(next), exprs, task, child_index, out, prefix_floor_extra, task.finish_only,
                  leaves_finishing);
}

}  // namespace

bool Generator::elementwise_of_program_values_is_none(OpKind kind, const std::vector<TensorId>& operands,
                                                      const std::vector<std::vector<int32_t>>& held, ExprId e,
                                                      const Shape& shape, const DimLabels& labels) {
  const OpCategory category = op_info(kind).category;
  if (category != OpCategory::unary && category != OpCategory::binary) return false;
  for (TensorId t : operands)
    if (held[t.index()].empty()) return false;  // a partial result: the rule is silent
  NfResult nf = normal_form(e, ctx_.exprs(), ctx_.normal_forms());
  if (nf.stop != NfStop::none) return false;
  return program_values_held(ctx_, nf.id, shape, labels).empty();
}

bool Generator::run_kernel_task(const Task& task, TaskOutput& out, const std::atomic<bool>& stop) {
  const Graph& prefix = *task.prefix;
  const SearchOptions& opt = ctx_.options();
  ++out.stats.kernel_states;
  ++out.stats.states;
  std::vector<ExprId> exprs = expressions(prefix, ctx_.exprs()).tensors;
  auto labels = kernel_graph_labels(ctx_.indices(), prefix);
  MUGRAPH_CHECK(labels.has_value()) << "a kernel-graph prefix breaks the index rules";
  const double floor_extra = prefix_floor_extra_us(task);
  // The root (the inputs alone) is a prefix like the others: it is a candidate where it computes
  // the program already (every output is an input), and then no kernel could add to it without
  // a dead op.
  if (count_kernel_ops(prefix) == 0) {
    const size_t found = out.candidates.size();
    int32_t index = 0;
    consider_prefix(ctx_, Graph(prefix), exprs, task, index, out, floor_extra, /*no_children=*/true);
    if (out.candidates.size() > found) return true;
  }
  const std::vector<std::vector<int32_t>> held = held_program_tensors(ctx_, prefix, exprs, *labels);
  const OpRank last = last_kernel_rank(prefix);
  int32_t child_index = 0;
  const int32_t ntensors = static_cast<int32_t>(prefix.tensors.size());
  // Past the last graph-defined kernel, each program step still to compute takes a pre-defined
  // kernel of its own (operand_rules.h, steps_left).
  const int ops_room = opt.max_kernel_ops - count_kernel_ops(prefix);
  const bool last_graph_kernel = count_graph_kernels(prefix) + 1 >= opt.max_graph_kernels;
  const std::optional<std::vector<size_t>> not_held =
      last_graph_kernel ? steps_not_held(ctx_, held, exprs) : std::nullopt;
  if (not_held && count_graph_kernels(prefix) >= opt.max_graph_kernels &&
      steps_left(*this, ctx_, *not_held, 0) > ops_room) {
    ++out.stats.pruned["steps_left"];
    return true;
  }

  // Graph-defined kernels first: one of them may compute the whole program, and the cost bound
  // it sets then cuts the chains of pre-defined kernels below. First-pass tasks take the
  // smallest child indices so that they run before everything else.
  int32_t first_pass_index = 0;
  child_index = 1 << 20;
  if (count_graph_kernels(prefix) < opt.max_graph_kernels) {
    // If this kernel is the last op there is room for, it must compute the outputs from its
    // operands alone: they must hold every program input the outputs depend on.
    const bool last_op = count_kernel_ops(prefix) + 1 >= opt.max_kernel_ops;
    // Operand sets, larger first: kernels that read everything they need can finish the program
    // and set the cost bound early.
    std::vector<std::vector<TensorId>> subsets;
    std::vector<TensorId> current;
    auto collect = [&](auto&& self, int32_t from) -> void {
      if (!current.empty()) subsets.push_back(current);
      if (static_cast<int>(current.size()) >= opt.max_kernel_inputs) return;
      for (int32_t t = from; t < ntensors; ++t) {
        current.push_back(TensorId(t));
        self(self, t + 1);
        current.pop_back();
      }
    };
    collect(collect, 0);
    // An input read both as a matmul's operand and element-wise (a residual) may be read twice,
    // its two copies side by side (SearchContext::may_read_twice).
    const size_t distinct = subsets.size();
    for (size_t i = 0; i < distinct; ++i) {
      if (static_cast<int>(subsets[i].size()) >= opt.max_kernel_inputs) continue;
      for (size_t j = 0; j < subsets[i].size(); ++j)
        if (ctx_.may_read_twice(subsets[i][j])) {
          std::vector<TensorId> twice = subsets[i];
          twice.insert(twice.begin() + static_cast<std::ptrdiff_t>(j), subsets[i][j]);
          subsets.push_back(std::move(twice));
        }
    }
    std::stable_sort(subsets.begin(), subsets.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
    for (const std::vector<TensorId>& subset : subsets) {
      // A kernel task can make hundreds of thousands of block tasks (one per chunk of each
      // operand set's configurations): a stop leaves it to run again, its children dropped.
      if (stop.load(std::memory_order_relaxed)) return false;
      OpRank head;
      head.kind = static_cast<int32_t>(OpKind::graph_kernel);
      head.max_input = subset.back().value;
      for (size_t i = 0; i < subset.size() && i < 3; ++i) head.inputs[i] = subset[i].value;
      // The full rank also has the body's hash; only a strictly smaller head can be ruled out.
      OpRank last_head = last;
      last_head.attr = 0;
      const bool finishes = can_finish(exprs, subset);
      auto operand_vars = [&] {
        uint64_t v = 0;
        for (TensorId t : subset) v |= vars_of(exprs[t.index()]);
        return v;
      };
      if (last_op && !finishes) {
        ++out.stats.pruned["missing_inputs"];
      } else if (!finishes && not_held &&
                 std::max(1, steps_left(*this, ctx_, *not_held, operand_vars())) > ops_room - 1) {
        // Only pre-defined kernels may follow this one, and they cannot compute what it leaves.
        ++out.stats.pruned["steps_left"];
      } else if (head < last_head) {
        // Made in another order (canonical rank).
      } else if (has_redundant_operand(ctx_, held, exprs, subset)) {
        ++out.stats.pruned["redundant_operand"];
      } else {
        int64_t later_bytes = 0;
        double unread_extra = 0;
        auto [bytes, kernels] = ctx_.lower_bound(prefix, exprs, subset, !finishes, &later_bytes, &unread_extra);
        if (ctx_.beyond_bound(bytes, kernels, floor_extra + unread_extra)) {
          ++out.stats.pruned["cost_bound"];
        } else {
          std::shared_ptr<const ConfigList> configs = configs_for(task.prefix, subset);
          const size_t n = configs->configs.size();
          out.stats.block_configs += static_cast<int64_t>(n);
          // With the model bound the configurations are sorted by their floors, and the bound only
          // tightens: the chunks whose configurations are all beyond it now are never made (the
          // block task would skip each configuration with the same test).
          // The full pass after a first pass cuts with the later kernel its closures need
          // counted (see run_block_task): its chunks within the bound may be fewer.
          const bool first_pass = gets_first_pass(opt, prefix, finishes);
          const double rest =
              configs->by_floor ? model_rest_floor_us(prefix, later_bytes, finishes, floor_extra, unread_extra) : 0;
          const double full_rest = rest + (configs->by_floor && first_pass ? ctx_.gpu().launch_us : 0.0);
          auto within = [&](double rest_us) {
            if (!configs->by_floor) return n;
            const double bound = ctx_.bound_us();
            return static_cast<size_t>(std::partition_point(configs->floors.begin(), configs->floors.end(),
                                                            [&](double floor) { return !(rest_us + floor > bound); }) -
                                       configs->floors.begin());
          };
          const size_t tried = within(full_rest);
          const size_t tried_first = first_pass ? within(rest) : 0;
          if (tried < n) out.stats.pruned["cost_bound"] += static_cast<int64_t>(n - tried);
          // Beyond the root, the model bound's order chains the chunks of one operand set (see
          // chains_chunks): only the first is made here, with the indices of all reserved.
          const bool chained = chains_chunks(prefix, *configs);
          const size_t made = chained ? std::min(tried, static_cast<size_t>(kConfigsPerTask)) : tried;
          const size_t made_first = chained ? std::min(tried_first, static_cast<size_t>(kConfigsPerTask)) : tried_first;
          const int32_t reserved = static_cast<int32_t>((n + kConfigsPerTask - 1) / kConfigsPerTask);
          // A chain's tasks do not hold the list: its block tasks make it again (configs_for).
          // Held by the many pending chains of a best-first search, the lists were most of its
          // memory (RMSNorm: 71 M configurations, 5 GB; 3 GB when cut to those within the bound).
          std::shared_ptr<const ConfigList> handed = chained ? nullptr : configs;
          for (size_t c = 0; c < std::max(made, made_first); c += kConfigsPerTask) {
            Task child;
            child.path = task.path;
            child.prefix = task.prefix;
            child.parent = task.parent;
            child.operands = subset;
            child.chunk = static_cast<int32_t>(c / kConfigsPerTask);
            child.configs = handed;
            child.floor_extra_us = floor_extra;
            // The chunk's first configuration has its smallest floor (sorted). A full pass keeps
            // its twin's floor as its order: run a launch later, the full passes of RMSNorm bs 8
            // and QKNorm bs 8 stayed pending, 1.4 and 3.1 times as many tasks at 60 s.
            if (configs->by_floor) child.floor_us = rest + configs->floors[c];
            // Kernels that can finish the program get a first, narrow pass (see Task), with its
            // twin's floor; the root's run first (task_order_us).
            if (c < made_first) {
              Task first = child;
              first.finish_only = true;
              first.path.push_back(first_pass_index + child.chunk);
              out.children.push_back(std::move(first));
            }
            if (c < made) {
              child.path.push_back(child_index + child.chunk);
              out.children.push_back(std::move(child));
            }
          }
          if (first_pass) first_pass_index += reserved;
          child_index += reserved;
        }
      }
    }
  }

  // Pre-defined kernel ops.
  auto try_op = [&](OpKind kind, std::vector<TensorId> ins, const OpAttrs& attrs) {
    Op op;
    op.kind = kind;
    op.inputs = std::move(ins);
    op.attrs = attrs;
    if (!(op_rank(prefix, op) > last)) return;
    if (!shapes_may_fit(kind, prefix.type(op.inputs[0]).shape,
                        op.inputs.size() > 1 ? &prefix.type(op.inputs[1]).shape : nullptr, attrs)) {
      ++out.stats.pruned["shape"];
      return;
    }
    std::vector<TensorType> types;
    for (TensorId t : op.inputs) types.push_back(prefix.type(t));
    auto outs = infer_output_types(prefix, kind, types, attrs);
    if (!outs.ok()) {
      ++out.stats.pruned["shape"];
      return;
    }
    std::vector<DimLabels> in_labels;
    std::vector<Shape> in_shapes;
    for (TensorId t : op.inputs) {
      in_labels.push_back(labels->tensors[t.index()]);
      in_shapes.push_back(prefix.type(t).shape);
    }
    const std::optional<DimLabels> out_labels =
        op_labels(ctx_.indices(), kind, attrs, in_labels, in_shapes, (*outs)[0].shape);
    if (!out_labels || !nonlinear_ok(ctx_.indices(), kind, op.inputs.size(), in_labels)) {
      ++out.stats.pruned["index"];
      return;
    }
    std::vector<ExprId> operand_exprs;
    for (TensorId t : op.inputs) operand_exprs.push_back(exprs[t.index()]);
    std::vector<ExprId> e = op_expressions(prefix, op, operand_exprs, ctx_.exprs());
    if (!useful(e[0], out.stats)) {
      ++out.stats.pruned["abstract_expression"];
      return;
    }
    if (elementwise_of_program_values_is_none(kind, op.inputs, held, e[0], (*outs)[0].shape, *out_labels)) {
      ++out.stats.pruned["program_tile_value"];
      return;
    }
    Graph next = prefix;
    auto r = next.append(kind, op.inputs, attrs);
    if (!r.ok()) {
      ++out.stats.pruned["shape"];
      return;
    }
    std::vector<ExprId> next_exprs = exprs;
    next_exprs.push_back(e[0]);
    ++out.stats.states;
    consider_prefix(ctx_, std::move(next), next_exprs, task, child_index, out, floor_extra);
  };

  for (OpKind kind : ctx_.kinds()) {
    const OpInfo& info = op_info(kind);
    for (int32_t a = 0; a < ntensors; ++a) {
      TensorId ta(a);
      switch (info.category) {
        case OpCategory::unary:
          try_op(kind, {ta}, {});
          break;
        case OpCategory::reduction:
          for (int d = 0; d < prefix.type(ta).shape.rank(); ++d)
            if (prefix.type(ta).shape[d] > 1) try_op(kind, {ta}, attrs::sum(d));
          break;
        case OpCategory::binary:
          for (int32_t b = is_commutative(kind) ? a : 0; b < ntensors; ++b)
            if (b != a || ctx_.has_self_operand_op(kind)) try_op(kind, {ta, TensorId(b)}, {});
          for (const SearchContext::Constant& c : ctx_.constants())
            if (c.kind == kind) try_op(kind, {ta}, attrs::scalar(c.value, c.pos));
          break;
        case OpCategory::matmul:
          for (int32_t b = 0; b < ntensors; ++b) try_op(kind, {ta, TensorId(b)}, {});
          break;
        default:
          break;
      }
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Block tasks

namespace {

/// Where a block tensor's value exists: per iteration of the loop body (kLoop), after the loop
/// (kPost: accumulated values and what is computed from them), or in every iteration alike
/// (kInvariant: a tile loaded with fmap φ in a kernel with a loop, and what is computed from
/// such tiles alone). Loop-invariant values may meet either of the others: in the loop body, or
/// after the loop as epilogue operands (a bias, a residual; block_structure.h).
enum Phase : uint8_t { kLoop = 0, kPost = 1, kInvariant = 2 };

/// The phase of an op's result from its operands' phases, or nullopt where a per-iteration value
/// meets an accumulated one, or an accumulated value is accumulated again (the path rule of
/// Definition 2.1).
inline std::optional<Phase> joined_phase(OpKind kind, Phase a, std::optional<Phase> b) {
  if (kind == OpKind::accum) return a == kPost ? std::nullopt : std::optional(kPost);
  const bool loop = a == kLoop || b == kLoop, post = a == kPost || b == kPost;
  if (loop && post) return std::nullopt;
  return post ? kPost : loop ? kLoop : kInvariant;
}

/// Depth-first growth of one block graph.
class BlockSearch {
 public:
  /// `beyond_bound`: whether the cost bound, which other tasks keep tightening, now cuts the
  /// kernel being grown; asked every 1024 states. `prefix_floor_extra`: the task prefix's
  /// floor_extra_us. `rest_floor_us` (model bound): the floor of everything but this kernel
  /// (Generator::model_rest_floor_us), from which the growth floor (growth_floor.h) cuts states;
  /// none without. `leaves_finishing`: the full pass of a kernel whose first pass found every
  /// closure that finishes the program; this one closes only kernels a later kernel reads, and
  /// `rest_floor_us` counts that kernel.
  BlockSearch(Generator& gen, SearchContext& ctx, const Task& task, const PrefixFacts& facts, const KernelConfig& cfg,
              int32_t& child_index, TaskOutput& out, const std::atomic<bool>& stop, bool must_finish,
              const std::function<bool()>& beyond_bound, double prefix_floor_extra = 0,
              std::optional<double> rest_floor_us = std::nullopt, bool leaves_finishing = false)
      : gen_(gen),
        ctx_(ctx),
        task_(task),
        facts_(facts),
        cfg_(cfg),
        operands_(task.operands),
        out_(out),
        stop_(stop),
        beyond_bound_(beyond_bound),
        prefix_floor_extra_(prefix_floor_extra),
        rest_floor_us_(rest_floor_us),
        must_finish_(must_finish),
        leaves_finishing_(leaves_finishing),
        child_index_(child_index) {}

  bool run() {
    grow();
    // The hot rules count their prunings in an array; the stats map takes them once.
    for (size_t r = 0; r < kPruneCount; ++r)
      if (prunes_[r] != 0) out_.stats.pruned[kPruneNames[r]] += prunes_[r];
    if (cut_) ++out_.stats.pruned["cost_bound"];
    return !stopped_;
  }

  /// Makes run() keep what it closes, for the block-search cache, as long as that stays within
  /// `limit_bytes`.
  void record(int64_t limit_bytes) {
    recording_ = std::make_shared<BlockClosings>();
    record_limit_bytes_ = limit_bytes;
  }

  /// After run() (with record()), what it closed: every closing of a growth whose cut (the bound
  /// less the rest floor) is at most `cut_us`, the cut it grew with at its end. Null if the
  /// growth was cut short (by the bound's dynamic check or a stop) or outgrew the limit.
  std::shared_ptr<const BlockClosings> recorded(double cut_us) {
    if (!recording_ || cut_ || stopped_) return nullptr;
    recording_->complete_to_us = cut_us;
    return std::move(recording_);
  }

  /// Rebuilds `body`'s ops (a block graph closed by this search under another configuration of
  /// the same operands) under this search's configuration and closes the result in every valid
  /// way: the kernel graphs (prefix, then the kernel) it yields. None if an op no longer fits:
  /// its shape, index labels, partial sums or shared memory. The ops are appended as the
  /// program-tile-value replays are (no abstract-expression or tile-value rule: the ops are a
  /// candidate's, and the caller checks what the completed graph computes).
  std::vector<Graph> retile(const Graph& body) {
    std::vector<Graph> closed;
    if (!start()) return closed;
    for (const Op& op : body.ops) {
      if (op.kind == OpKind::input_iterator || op.kind == OpKind::output_saver) continue;
      MUGRAPH_CHECK(op.outputs.size() == 1 && op.outputs[0].index() == state_.size())
          << "retile: a block op of " << op_info(op.kind).name << " out of order";
      std::array<int32_t, 2> ids{};
      MUGRAPH_CHECK(op.inputs.size() <= ids.size()) << "retile: a block op with more than two operands";
      for (size_t k = 0; k < op.inputs.size(); ++k) ids[k] = op.inputs[k].value;
      if (!append_checked(op.kind, std::span<const int32_t>(ids.data(), op.inputs.size()), op.attrs,
                          /*replayed=*/true))
        return closed;
    }
    closed_ = &closed;
    try_close();
    closed_ = nullptr;
    return closed;
  }

 private:
  /// The pruning reasons counted on the hot path, and their names in SearchStats::pruned.
  enum Prune : uint8_t {
    kShape,
    kIndex,
    kSharedMemory,
    kPartialSum,
    kAbstractExpression,
    kDuplicateValue,
    kProgramTileValue,
    kUnclosable,
    kCostBound,
    kRedundantOperand,
    kPruneCount,
    kAllowed = kPruneCount,  ///< tile_value_rejection: no rule applies
  };
  static constexpr std::array<const char*, kPruneCount> kPruneNames{"shape",
                                                                    "index",
                                                                    "shared_memory",
                                                                    "partial_sum",
                                                                    "abstract_expression",
                                                                    "duplicate_value",
                                                                    "program_tile_value",
                                                                    "unclosable",
                                                                    "cost_bound",
                                                                    "redundant_operand"};

  /// Grows the block graph: every canonical sequence of ops within the limits, each closed in
  /// every valid way.
  void grow() {
    if (!start()) return;
    find_program_tiles();
    if (const Prune why = stack_operand_rejection(); why != kAllowed) {
      ++prunes_[why];
      return;
    }
    grow_with_program_tiles(0);
  }

  /// The block graph's input iterators under the configuration; false if they do not fit.
  bool start() {
    const Graph& prefix = *task_.prefix;
    last_kernel_rank_ = last_kernel_rank(prefix);
    std::vector<TensorType> params;
    for (TensorId t : operands_) {
      params.push_back(prefix.type(t));
      param_exprs_.push_back(facts_.exprs[t.index()]);
    }
    bg_ = make_block_graph(params, cfg_.grid, cfg_.forloop);
    if (rest_floor_us_) growth_.emplace(cfg_, config_floor(prefix, operands_, cfg_, ctx_.gpu()), ctx_.gpu());
    for (size_t i = 0; i < operands_.size(); ++i) {
      auto r = bg_.append(OpKind::input_iterator, {},
                          attrs::iterator(static_cast<int32_t>(i), cfg_.imaps[i], cfg_.fmaps[i]));
      if (!r.ok()) {
        ++prunes_[kShape];
        return false;
      }
      const DimLabels& param = facts_.labels.tensors[operands_[i].index()];
      splits_.push_back(iterator_split(param, cfg_.imaps[i], cfg_.fmaps[i]));
      auto tile = tile_labels(ctx_.indices(), param, cfg_.imaps[i], cfg_.fmaps[i], bg_.tensors.back().type.shape);
      if (!tile) {
        ++prunes_[kIndex];
        return false;
      }
      push_tensor(param_exprs_[i], cfg_.forloop > 1 && cfg_.fmaps[i] == kPhi ? kInvariant : kLoop, true, false, *tile,
                  uint64_t{1} << i);
      // A loop over the slots of a stack of partial results (tile_labels: the tile's dim there
      // lost its loop bit) reads one partial sum per iteration, which only an accumulator may
      // complete (the partial-sum rules of append_checked).
      const int8_t f = cfg_.fmaps[i];
      if (f != kPhi && param[f] != kNone && !(split_bits((*tile)[f]) & kLoopBit)) {
        state_.back().split_sum = kLoopBit;
        state_.back().stack_loop = true;
      }
    }
    if (smem_ > ctx_.options().target.shared_memory_bytes) {
      ++prunes_[kSharedMemory];
      return false;
    }
    num_iterators_ = static_cast<int>(operands_.size());
    const int64_t blocks = cfg_.grid.x * cfg_.grid.y * cfg_.grid.z;
    smallest_output_tile_ = INT64_MAX;
    for (const auto& out : ctx_.program().outputs)
      smallest_output_tile_ = std::min(smallest_output_tile_, ctx_.program().type(out).shape.numel() / blocks);
    // How many outputs this kernel may have without some being dead: what the kernel ops after
    // it can read, plus the program outputs.
    const int kernel_ops_after = ctx_.options().max_kernel_ops - count_kernel_ops(prefix) - 1;
    max_sinks_ = static_cast<int>(ctx_.program().outputs.size()) +
                 (must_finish_ ? 0 : kernel_ops_after * std::max(2, ctx_.options().max_kernel_inputs));
    for (size_t i = 0; i < splits_.size(); ++i) {
      for (size_t ax = 0; ax < 3; ++ax)
        if (splits_[i].grid[ax] != kNone) split_iterators_[ax] |= uint64_t{1} << i;
      if (splits_[i].loop != kNone) split_iterators_[3] |= uint64_t{1} << i;
    }
    return true;
  }

  struct TensorState {
    ExprId expr;
    Phase phase;
    bool iterator;
    bool concat;
    int uses = 0;
    DimLabels labels;
    uint64_t deps = 0;  ///< iterators it depends on (bit set)
    /// Some op on the way summed a dim its tile holds only a slice of (a sum or matmul over a
    /// split dim, a summing accumulator), concatenated tiles (LoRA), or read a DTensor that is
    /// no program value: the value may be a reassociation the program does not spell, and the
    /// program-tile-values rule is silent about it.
    bool partial = false;
    /// Partial for a reason other than the loop's own partial sums, which the summing
    /// accumulator completes: a concat, a DTensor that is no program value, a sum over a dim a
    /// grid axis splits, or an accumulated value that is no program value (Figure 3b's
    /// (X ⊙ G)·W). The accumulated sum of a value that is not opaque is checked by the rule.
    bool opaque = false;
    /// A loop's partial sum scaled in the loop body (multiplied, divided, put through a matmul,
    /// or combined with a constant): Σ_k c·p_k = c·Σ_k p_k. Accumulated, it must be a program
    /// value (append_checked).
    bool scaled = false;
    /// Computed from a completed sum that is a program value (append_checked): no replay of
    /// the program's ops on tiles computes it, so computing it op by op repeats none.
    bool completed = false;
    NfId nf;                 ///< normal form of a value the rule checked (invalid: none)
    int program_value = -1;  ///< the program tensor it holds (iterators and replayed ops)
    /// Split bits (labels.h) of the dims summed over a slice on the way: a partial sum, until an
    /// accumulator sums the loop's slices (or a later kernel the blocks').
    int16_t split_sum = 0;
    /// An iterator whose for-loop walks the slots of a stack of partial results: the one
    /// iterator an accumulator may sum directly.
    bool stack_loop = false;
  };

  void push_tensor(ExprId e, Phase p, bool iterator, bool concat, const DimLabels& labels, uint64_t deps) {
    const Tensor& t = bg_.tensors.back();
    smem_ += t.type.shape.numel() * dtype_bytes(t.type.dtype);
    state_.push_back(TensorState{e, p, iterator, concat, 0, labels, deps});
    if (growth_) growth_->push(bg_);
  }

  /// Removes the last op (and its one output tensor).
  void pop_op() {
    const TensorState& st = state_.back();
    if (st.program_value >= 0) tile_of_[static_cast<size_t>(st.program_value)] = -1;
    if (growth_) growth_->pop();
    const Tensor& t = bg_.tensors.back();
    smem_ -= t.type.shape.numel() * dtype_bytes(t.type.dtype);
    state_.pop_back();
    for (TensorId in : bg_.ops.back().inputs) --state_[in.index()].uses;
    bg_.ops.pop_back();
    bg_.tensors.pop_back();
  }

  /// The phase of an op of `kind` on `operands` (joined_phase).
  std::optional<Phase> phase_of(OpKind kind, std::span<const int32_t> operands) const {
    const Phase a = state_[static_cast<size_t>(operands[0])].phase;
    return joined_phase(
        kind, a, operands.size() > 1 ? std::optional(state_[static_cast<size_t>(operands[1])].phase) : std::nullopt);
  }

  /// Steps of the block-op budget used: ops, with each replayed program subgraph as one.
  int steps() const { return static_cast<int>(bg_.ops.size()) - replayed_extra_ops_; }

  // --- Program tile values (SearchOptions::program_tile_values) ------------------------------

  /// Which program values this configuration can compute from its iterators by replaying the
  /// program's ops on tiles, every reduction over a dim the tiles hold whole (tried once, at
  /// the root, and undone).
  void find_program_tiles() {
    const auto& values = ctx_.program_values();
    if (values.empty()) return;
    tile_of_.assign(values.size(), -1);
    for (size_t i = 0; i < operands_.size(); ++i)
      for (size_t t = 0; t < values.size(); ++t)
        if (values[t].expr == param_exprs_[i] && tile_of_[t] < 0) {
          tile_of_[t] = static_cast<int32_t>(i);
          state_[i].program_value = static_cast<int>(t);
        }
    // An earlier kernel may have computed a program value in another form: its sums split over
    // blocks and summed again (nTrans: α ⊙ N with N's sum of squares as Σ_4 (Σ_1024 D²) / 4096),
    // or accumulated by a loop (GatedMLP: X·W1). The DTensor holds that value all the same, as
    // the kernel-graph rules see it (held_program_tensors, by normal form), and what is computed
    // from it is checked like what is computed from an input: left opaque, nTrans's last kernel
    // grew millions of states of α·N + α·N/4096 + α·N + … (the oracle lets them through: the
    // output's Σ (X + α·N)² holds α·N 4096 times over).
    // An iterator over a DTensor the program does not compute holds no program value: the rule
    // is silent about what is computed from it; unless it is a stack of partial sums of the
    // program's own contractions (the blocks' sums of (H − X)² on nTrans): the sum over the
    // stack (or the accumulator, over a loop of its slots) completes them, and what that
    // gives is checked like an accumulated sum (append_checked).
    for (size_t i = 0; i < operands_.size(); ++i) {
      TensorState& st = state_[i];
      if (st.program_value >= 0) continue;
      const NfResult nf = normal_form(param_exprs_[i], ctx_.exprs(), ctx_.normal_forms());
      if (nf.stop == NfStop::none) {
        const int t = program_value_of(nf.id, st.labels);
        if (t >= 0 && tile_of_[static_cast<size_t>(t)] < 0) {
          tile_of_[static_cast<size_t>(t)] = static_cast<int32_t>(i);
          st.program_value = t;
          continue;
        }
      }
      st.partial = st.opaque = true;
      // A whole sum with a program value's normal form (over other indices) is no partial one.
      if (nf.stop != NfStop::none ||
          std::any_of(values.begin(), values.end(), [&](const ProgramValue& v) { return v.nf == nf.id; }) ||
          !sums_program_contractions(ctx_, param_exprs_[i]))
        continue;
      st.opaque = false;
      // Partial sums an earlier kernel scaled (or combined) are scaled ones: completed, they must
      // give a program value (nTrans: Σ D² / 4096², which no program value is).
      st.scaled = ctx_.exprs().node(param_exprs_[i]).kind != ExprKind::sum;
      if (!st.stack_loop) st.split_sum |= kStackBit;
    }
    replayable_.assign(values.size(), false);
    for (size_t t = 0; t < values.size(); ++t) {
      if (values[t].cone_ops < 2 || tile_of_[t] >= 0) continue;
      const size_t before = bg_.ops.size();
      replayable_[t] = replay(static_cast<int>(t));
      while (bg_.ops.size() > before) pop_op();
      if (replayable_[t]) replay_roots_.push_back(static_cast<int>(t));
    }
  }

  /// Whether the configuration reads a stack of partial sums (an earlier kernel's blocks'
  /// shares of a program contraction) that it has no use for: kAllowed, or the reason.
  /// - kRedundantOperand: the stack's completion is a program value this configuration also
  ///   holds or can replay from its other iterators. Whatever the kernel computes from the stack
  ///   is linear in it and, completed here or by a later kernel, a function of that sum and of
  ///   whole values: the kernel without the stack computes it too, and reads less. (nTrans: a
  ///   last kernel reading whole rows of H, X and α beside the 64 blocks' sums of (H − X)² an
  ///   earlier kernel wrote grew millions of states of arithmetic on the stack, in two
  ///   configurations that took 56 s of the minute.) Not where the sum holds a matmul: its
  ///   replay is tensor-core work the stack saves.
  /// - kPartialSum: its completion is no program value. The stack adds up the summands of a
  ///   program contraction P (sums_program_contractions), so the earlier kernel scaled them
  ///   (c·p_k, c whole, in its loop body or after its accumulator), and c·P is no program value.
  ///   This kernel may only scale them again (c'·p_k) before completing them, to a program value
  ///   c'·c·P; the earlier kernel saving p_k scaled by c'·c, or unscaled, is grown too. (nTrans:
  ///   Σ (H − X)² / 4096², saved for a last kernel to multiply by 4096; 1.2 M states.)
  Prune stack_operand_rejection() {
    if (tile_of_.empty()) return kAllowed;
    const auto& values = ctx_.program_values();
    const Graph& program = ctx_.program();
    for (size_t i = 0; i < operands_.size(); ++i) {
      const TensorState& st = state_[i];
      if (st.opaque || ((st.split_sum & kStackBit) == 0 && !st.stack_loop)) continue;
      const std::optional<int32_t> completion =
          completed_stack_value(ctx_, param_exprs_[i], task_.prefix->type(operands_[i]).shape.numel());
      if (!completion) continue;  // a normal form past its limits: nothing is known
      const int t = *completion;
      if (t < 0) return kPartialSum;
      if (tile_of_[static_cast<size_t>(t)] < 0 && !replayable_[static_cast<size_t>(t)]) continue;
      bool matmul = false;
      for (size_t u = 0; u < values.size(); ++u)
        matmul |=
            values[static_cast<size_t>(t)].cone[u] && program.op(program.tensors[u].producer).kind == OpKind::matmul;
      if (!matmul) return kRedundantOperand;
    }
    return kAllowed;
  }

  /// Appends the program's ops that compute program tensor t from what the block graph holds.
  /// False (some ops may be appended; the caller undoes them) if one of them is not tile-local
  /// or does not fit.
  bool replay(int t) {
    if (tile_of_[static_cast<size_t>(t)] >= 0) return true;
    const Graph& program = ctx_.program();
    const Op& op = program.op(program.tensors[static_cast<size_t>(t)].producer);
    if (op.kind == OpKind::input) return false;  // an input this kernel does not read
    std::vector<int32_t> operands;
    for (TensorId in : op.inputs) {
      if (!replay(in.value)) return false;
      operands.push_back(tile_of_[in.index()]);
    }
    // Tile-local: a sum or matmul must contract a dim the tiles hold whole.
    const TensorState& a = state_[static_cast<size_t>(operands[0])];
    if (op.kind == OpKind::sum && is_split(a.labels[op.attrs.dim])) return false;
    if (op.kind == OpKind::matmul && is_split(a.labels[a.labels.rank - 1])) return false;
    for (int32_t o : operands)
      if (state_[static_cast<size_t>(o)].partial || state_[static_cast<size_t>(o)].phase == kPost) return false;
    if (!append_checked(op.kind, operands, op.attrs, /*replayed=*/true)) return false;
    state_.back().program_value = t;
    tile_of_[static_cast<size_t>(t)] = static_cast<int32_t>(state_.size()) - 1;
    return true;
  }

  /// Grows the block graph from the root: with no replayed subgraph, then with each set of them
  /// (no root in another's subgraph; in increasing program tensor order), each counting as one
  /// step of the budget.
  void grow_with_program_tiles(size_t from) {
    dfs(OpRank{});
    const auto& values = ctx_.program_values();
    for (size_t k = from; k < replay_roots_.size() && !stopped_ && !cut_; ++k) {
      const int t = replay_roots_[k];
      bool overlaps = false;
      for (int c : chosen_roots_)
        overlaps |= values[static_cast<size_t>(t)].cone[static_cast<size_t>(c)] ||
                    values[static_cast<size_t>(c)].cone[static_cast<size_t>(t)];
      if (overlaps || steps() + 1 > ctx_.options().max_block_ops) continue;
      const size_t before = bg_.ops.size();
      if (replay(t)) {
        replayed_extra_ops_ += static_cast<int>(bg_.ops.size() - before) - 1;
        chosen_roots_.push_back(t);
        if (ops_needed() <= ctx_.options().max_block_ops - steps())
          grow_with_program_tiles(k + 1);
        else
          ++prunes_[kUnclosable];
        chosen_roots_.pop_back();
        replayed_extra_ops_ -= static_cast<int>(bg_.ops.size() - before) - 1;
      }
      while (bg_.ops.size() > before) pop_op();
    }
  }

  /// Whether two label sets range over the same program indices (splits aside).
  static bool same_indices(const DimLabels& v, const DimLabels& labels) {
    if (v.rank != labels.rank) return false;
    for (int d = 0; d < v.rank; ++d)
      if (label_base(v[d]) != label_base(labels[d])) return false;
    return true;
  }

  /// Whether the block graph already holds the value with normal form `nf` over these indices,
  /// in the same phase and tile shape.
  bool holds_value(NfId nf, const DimLabels& labels, Phase phase, const Shape& shape) const {
    for (size_t i = 0; i < state_.size(); ++i) {
      const TensorState& st = state_[i];
      if (st.nf.valid() && st.nf == nf && st.phase == phase && bg_.tensors[i].type.shape == shape &&
          same_indices(st.labels, labels))
        return true;
    }
    return false;
  }

  /// The program value (an index into SearchContext::program_values) with normal form `nf` over
  /// these indices; -1 if none.
  int program_value_of(NfId nf, const DimLabels& labels) const {
    const auto& values = ctx_.program_values();
    for (size_t t = 0; t < values.size(); ++t)
      if (values[t].nf.valid() && values[t].nf == nf && same_indices(values[t].labels, labels))
        return static_cast<int>(t);
    return -1;
  }

  /// The program-tile-values rule for a new tile-local loop value with normal form `nf` and
  /// labels `labels`: kAllowed, or the pruning reason.
  /// `completed`: computed from a completed sum (TensorState::completed).
  Prune tile_value_rejection(NfId nf, const DimLabels& labels, Phase phase, const Shape& shape, bool completed) const {
    // A value the block graph already holds is not computed twice.
    if (holds_value(nf, labels, phase, shape)) return kDuplicateValue;
    const int t = program_value_of(nf, labels);
    if (t < 0) return kProgramTileValue;
    // Values of more than one op come from a replay (one step), never op by op.
    return replayable_[static_cast<size_t>(t)] && !completed ? kProgramTileValue : kAllowed;
  }

  /// The open ends ops_needed counts.
  struct OpenEnds {
    int unused_iters = 0, loop_sinks = 0, concats = 0, sinks = 0;
  };

  /// Counts (`sign` 1) or uncounts (−1) a tensor that nothing reads yet.
  void add_open_end(OpenEnds& e, bool iterator, bool concat, Phase phase, int sign = 1) const {
    if (iterator) {
      e.unused_iters += sign;
      return;
    }
    e.sinks += sign;
    if (concat)
      e.concats += sign;
    else if (phase != kPost && cfg_.forloop > 1)
      e.loop_sinks += sign;  // a loop-invariant value too: it is accumulated or joins an accumulated one
  }

  /// The open ends of the block graph.
  OpenEnds open_ends() const {
    OpenEnds e;
    for (const TensorState& s : state_)
      if (s.uses == 0) add_open_end(e, s.iterator, s.concat, s.phase);
    return e;
  }

  /// Ops still needed to close the graph: unused iterators and open concats must be consumed,
  /// and with a loop every loop-body sink must reach an accumulator. With a loop one op lowers
  /// these counts by at most one (what consumes two open ends makes a loop sink); without, it
  /// consumes at most two open ends (two iterators, two concats, or one of each).
  /// Also, every sink becomes an output of the kernel, and outputs beyond what later kernels
  /// (or the program's outputs) can read would be dead: each op merges at most two open ends.
  int ops_needed(const OpenEnds& e) const {
    int needed = cfg_.forloop > 1 ? e.unused_iters + e.loop_sinks + e.concats : (e.unused_iters + e.concats + 1) / 2;
    return std::max(needed, e.sinks + e.unused_iters - max_sinks_);
  }

  int ops_needed() const { return ops_needed(open_ends()); }

  /// ops_needed() once an op of `kind` reading `operands`, its result in `phase`, is appended to
  /// the block graph whose open ends are `ends` (it reads them, and its output is a sink): so
  /// that try_op refuses an op that leaves the graph unclosable before append_checked's shape,
  /// label and oracle work, which most ops tried would otherwise pay for (nTrans: half of the
  /// ops tried are refused this way).
  int ops_needed_with(OpenEnds e, OpKind kind, Phase phase, std::span<const int32_t> operands) const {
    for (size_t k = 0; k < operands.size(); ++k) {
      const TensorState& s = state_[static_cast<size_t>(operands[k])];
      if (s.uses > 0 || std::find(operands.begin(), operands.begin() + k, operands[k]) != operands.begin() + k)
        continue;
      add_open_end(e, s.iterator, s.concat, s.phase, -1);
    }
    // The new op's output, as append_checked pushes it.
    add_open_end(e, false, kind == OpKind::concat, phase);
    return ops_needed(e);
  }

  /// Whether every op that reads no open end (no tensor yet unused) leaves the graph, whose
  /// open ends are `ends`, unclosable within `ops_left` ops after it. Such an op consumes
  /// nothing and adds a sink, at best one that is no concat and not in the loop, so its
  /// ops_needed_with is at least what this counts. Then dfs tries only ops that read an open
  /// end: the others would all be refused as unclosable, one try_op each (nTrans's search
  /// refused about 4·10⁸ ops so in 120 s).
  bool must_read_an_open_end(OpenEnds e, int ops_left) const {
    add_open_end(e, false, false, kPost);
    return ops_needed(e) > ops_left;
  }

  /// Whether a kernel that must finish the program, with a loop, can no longer make a tile as
  /// large as its outputs'. Once the canonical order has passed every loop-body tensor (each op
  /// appended from now on reads an operand of id last.max_input or above, and a loop-body op or
  /// an accumulator reads loop-body tensors only), the post-loop tensors are all that the
  /// outputs can be built from. No block op dfs grows makes a dim larger than its operands' at
  /// that place (broadcasts and matmuls take each dim from an operand, right-aligned; sums make
  /// it 1; concats, which do, are left out), so no tile beyond the product of the largest
  /// post-loop dims can be saved. Such a kernel saves program outputs only, each written by all
  /// blocks: a tile of numel(output) / blocks. (nTrans: once the second kernel's loop had
  /// accumulated a sum of squares, it grew millions of states of arithmetic on [1, 1] values.)
  bool post_loop_cannot_reach_outputs(const OpRank& last) const {
    if (!must_finish_ || cfg_.forloop <= 1 || ctx_.uses_concat()) return false;
    std::array<int64_t, kMaxRank> largest{};
    int rank = 0;
    for (size_t t = 0; t < state_.size(); ++t) {
      if (state_[t].phase == kLoop) {
        if (static_cast<int32_t>(t) >= last.max_input) return false;  // the loop body can still grow
        continue;
      }
      // Post-loop values, and loop-invariant ones, which may join them (the loop-invariant ops
      // still to come make no dim larger either).
      const Shape& s = bg_.tensors[t].type.shape;
      rank = std::max(rank, s.rank());
      for (int d = 0; d < s.rank(); ++d) {
        int64_t& l = largest[static_cast<size_t>(s.rank() - 1 - d)];
        l = std::max(l, s[d]);
      }
    }
    int64_t reachable = 1;
    for (int d = 0; d < rank; ++d) reachable *= largest[static_cast<size_t>(d)];
    return reachable < smallest_output_tile_;
  }

  void dfs(const OpRank& last) {
    if (stopped_ || cut_) return;
    if ((++out_.stats.states & 1023) == 0) {
      int64_t pruned = 0;
      for (int64_t n : prunes_) pruned += n;
      ctx_.add_running(out_.stats.states - out_.published_states, pruned - published_prunes_);
      out_.published_states = out_.stats.states;
      out_.published_pruned += pruned - published_prunes_;
      published_prunes_ = pruned;
      // A stop leaves the task to run again; a bound that now cuts the kernel ends its growth
      // (every completion would be cut), keeping the candidates found so far. A configuration
      // can take millions of states, and the bound may have been loose when it began.
      stopped_ = stop_.load(std::memory_order_relaxed);
      cut_ = !stopped_ && beyond_bound_();
      if (stopped_ || cut_) return;
    }
    // With the model bound: no completion of a block graph whose growth floor (growth_floor.h)
    // with the rest of the μGraph's is beyond the bound can be within it.
    if (growth_ && *rest_floor_us_ + growth_->floor_us() > ctx_.bound_us()) {
      ++prunes_[kCostBound];
      return;
    }
    if (post_loop_cannot_reach_outputs(last)) {
      ++prunes_[kUnclosable];
      return;
    }
    try_close();
    if (steps() >= ctx_.options().max_block_ops) return;
    const int32_t n = static_cast<int32_t>(state_.size());
    const bool loop = cfg_.forloop > 1;
    const OpenEnds ends = open_ends();
    // When the budget is tight, an op must read an open end; `open(a) || open(b)` skips the
    // others before try_op (which would refuse each as unclosable).
    const bool tight = must_read_an_open_end(ends, ctx_.options().max_block_ops - (steps() + 1));
    auto open = [&](int32_t t) { return !tight || state_[static_cast<size_t>(t)].uses == 0; };
    // The canonical order's rank begins with the largest operand id, which may not fall below
    // the last op's: the loops below start where an operand set can still reach it (try_op
    // would refuse the others first thing).
    const int32_t m = std::max(last.max_input, 0);
    for (OpKind kind : ctx_.kinds()) {
      const OpInfo& info = op_info(kind);
      if (!info.at(Level::block)) continue;
      for (int32_t a = 0; a < n; ++a) {
        if (stopped_ || cut_) return;
        switch (info.category) {
          case OpCategory::unary:
            if (a >= m && open(a)) try_op(last, ends, kind, {a}, no_attrs_);
            break;
          case OpCategory::reduction:
            if (a < m || !open(a)) break;
            for (int d = 0; d < bg_.tensors[a].type.shape.rank(); ++d)
              if (bg_.tensors[a].type.shape[d] > 1) try_op(last, ends, kind, {a}, attrs::sum(d));
            break;
          case OpCategory::binary:
            for (int32_t b = std::max(is_commutative(kind) ? a : 0, a < m ? m : 0); b < n; ++b)
              if ((b != a || ctx_.has_self_operand_op(kind)) && (open(a) || open(b)))
                try_op(last, ends, kind, {a, b}, no_attrs_);
            if (a < m || !open(a)) break;
            for (const SearchContext::Constant& c : ctx_.constants())
              if (c.kind == kind) try_op(last, ends, kind, {a}, attrs::scalar(c.value, c.pos));
            break;
          case OpCategory::matmul:
            for (int32_t b = a < m ? m : 0; b < n; ++b)
              if (open(a) || open(b)) try_op(last, ends, kind, {a, b}, no_attrs_);
            break;
          default:
            break;
        }
      }
    }
    for (int32_t a = 0; a < n; ++a) {
      if (a >= m && loop && state_[a].phase != kPost && !state_[a].iterator && !state_[a].concat && open(a)) {
        try_op(last, ends, OpKind::accum, {a}, attrs::accum(kPhi));
        for (int d = 0; d < bg_.tensors[a].type.shape.rank(); ++d)
          try_op(last, ends, OpKind::accum, {a}, attrs::accum(d));
      }
      if (a >= m && loop && state_[a].stack_loop && open(a)) try_op(last, ends, OpKind::accum, {a}, attrs::accum(kPhi));
      if (ctx_.uses_concat())
        for (int32_t b = a < m ? m : 0; b < n; ++b) {
          if (b == a || !(open(a) || open(b))) continue;
          int r = bg_.tensors[a].type.shape.rank();
          for (int d = std::max(0, r - 2); d < r; ++d) try_op(last, ends, OpKind::concat, {a, b}, attrs::sum(d));
        }
    }
  }

  /// `ends`: open_ends() of the block graph as it is (dfs counts them once for all the ops it
  /// tries).
  void try_op(const OpRank& last, const OpenEnds& ends, OpKind kind, std::initializer_list<int32_t> operand_ids,
              const OpAttrs& attrs) {
    // Cheap part of the canonical order first: the rank starts with the largest operand id.
    int32_t max_input = -1;
    for (int32_t i : operand_ids) max_input = std::max(max_input, i);
    if (max_input < last.max_input) return;
    // Phases: with a loop, a path from a per-iteration tile must cross exactly one accumulator,
    // so per-iteration and post-processing values never meet, and only loop-body values are
    // accumulated (dfs offers accumulators those alone); loop-invariant values meet either.
    const std::span<const int32_t> operands(operand_ids.begin(), operand_ids.size());
    const std::optional<Phase> phase = phase_of(kind, operands);
    if (!phase) return;
    // The probe op is scratch (its inputs keep their capacity): read before the recursion only.
    probe_.kind = kind;
    probe_.inputs.clear();
    for (int32_t i : operand_ids) probe_.inputs.push_back(TensorId(i));
    probe_.attrs = attrs;
    // The attr part of the rank only decides between ops on the same operands: it is hashed
    // where it decides, and otherwise once the op is in (the child's `last`).
    OpRank rank = op_rank_operands(probe_);
    const bool tie = same_operands(rank, last);
    if (tie) rank.attr = op_rank_attr(bg_, probe_);
    if (!(rank > last)) return;
    // A concat is only there to feed a matmul (the LoRA rewrite): nothing else may read one.
    for (int32_t i : operand_ids)
      if (state_[static_cast<size_t>(i)].concat && kind != OpKind::matmul) return;
    const int needed = ops_needed_with(ends, kind, *phase, operands);
    if (needed > ctx_.options().max_block_ops - (steps() + 1)) {
      ++prunes_[kUnclosable];
      return;
    }
    if (!append_checked(kind, operands, attrs, /*replayed=*/false)) return;
    MUGRAPH_CHECK(ops_needed() == needed) << "ops_needed_with predicted " << needed << " for a " << op_info(kind).name
                                          << ", appending it gives " << ops_needed();
    if (!tie) rank.attr = op_rank_attr(bg_, probe_);  // probe_ is as it was: the recursion has not begun
    dfs(rank);
    pop_op();
  }

  /// Checks a block op (shape, index, shared-memory, abstract-expression and program-tile-value
  /// rules) and appends it. Ops replayed from the program skip the oracle and the tile-value rule
  /// (they compute program values by construction) and count no pruning (a failed replay is no
  /// pruned state).
  bool append_checked(OpKind kind, std::span<const int32_t> operands, const OpAttrs& attrs, bool replayed) {
    auto prune = [&](Prune reason) {
      if (!replayed) ++prunes_[reason];
      return false;
    };
    // Scratch vectors: this runs for every op tried, and allocating them cost a tenth of the
    // search. Nothing below re-enters append_checked.
    std::vector<TensorId>& inputs = scratch_.inputs;
    inputs.clear();
    for (int32_t i : operands) inputs.push_back(TensorId(i));
    if (!shapes_may_fit(kind, bg_.type(inputs[0]).shape, inputs.size() > 1 ? &bg_.type(inputs[1]).shape : nullptr,
                        attrs))
      return prune(kShape);
    std::vector<TensorType>& types = scratch_.types;
    types.clear();
    for (TensorId t : inputs) types.push_back(bg_.type(t));
    auto outs = infer_output_types(bg_, kind, types, attrs);
    if (!outs.ok()) return prune(kShape);
    const TensorType& type = (*outs)[0];
    uint64_t deps = 0;
    bool partial = kind == OpKind::concat;
    std::vector<DimLabels>& in_labels = scratch_.labels;
    std::vector<Shape>& in_shapes = scratch_.shapes;
    in_labels.resize(inputs.size());  // assigned element-wise: the carriers keep their capacity
    in_shapes.clear();
    for (size_t k = 0; k < inputs.size(); ++k) {
      const TensorState& st = state_[inputs[k].index()];
      deps |= st.deps;
      partial |= st.partial;
      in_labels[k] = st.labels;
      in_shapes.push_back(bg_.type(inputs[k]).shape);
    }
    // Split bits of the dim a sum or matmul contracts: a slice of its index makes a partial sum.
    const int16_t contracted_bits = kind == OpKind::sum      ? split_bits(in_labels[0][attrs.dim])
                                    : kind == OpKind::matmul ? split_bits(in_labels[0][in_labels[0].rank - 1])
                                                             : 0;
    partial |= contracted_bits != 0 || (kind == OpKind::accum && attrs.dim == kPhi);
    bool opaque = kind == OpKind::concat || (contracted_bits & ~kLoopBit) != 0;
    bool completed = false;
    for (TensorId t : inputs) {
      opaque |= state_[t.index()].opaque;
      completed |= state_[t.index()].completed;
    }
    // Partial sums (a sum over a slice of an index, completed by an accumulator or by a later
    // kernel) only pass through linear ops: no axiom moves a sum into a non-linear op, so
    // sqrt(Σ_slice x) or (Σ_slice x)·(Σ_slice y) is never part of the program's value.
    const int16_t a = state_[inputs[0].index()].split_sum;
    const int16_t b = inputs.size() > 1 ? state_[inputs[1].index()].split_sum : 0;
    if (a != 0 && op_info(kind).category == OpCategory::unary) return prune(kPartialSum);
    if ((kind == OpKind::mul || kind == OpKind::matmul) && a != 0 && b != 0) return prune(kPartialSum);
    if (kind == OpKind::div && b != 0) return prune(kPartialSum);
    // A slice's partial sum p_k is only meaningful summed over the slices k: scaling it by a value
    // that changes with the iteration (Σ_k p_k·x_k) or adding such a value, or concatenating the
    // p_k instead of summing them, is not a sum the program computes. Nor is adding one that
    // does not change with it: Σ_k (p_k + c) = P + L·c sums c over an index it does not carry
    // (the index rules' assumption; nTrans grew millions of such sums in loop bodies). So a
    // partial sum is added only to another of the same split. The same holds for the blocks'
    // partial sums, summed by a later kernel.
    if (inputs.size() == 2)
      for (int axis = 0; axis < 4; ++axis) {
        const int16_t bit = kAxisBits[axis];
        if (((a | b) & bit) == 0 || ((a & b) & bit) != 0) continue;
        if (kind == OpKind::add || kind == OpKind::sub) return prune(kPartialSum);
        const TensorState& other = state_[inputs[(a & bit) != 0 ? 1 : 0].index()];
        if ((other.deps & split_iterators_[static_cast<size_t>(axis)]) != 0) return prune(kPartialSum);
      }
    // The same for a stack of partial sums read whole, until a sum over the stack completes it.
    if (inputs.size() == 2 && ((a | b) & kStackBit) != 0 && ((a & b) & kStackBit) == 0 &&
        (kind == OpKind::add || kind == OpKind::sub))
      return prune(kPartialSum);
    if (kind == OpKind::accum && attrs.dim != kPhi && (a & kLoopBit) != 0) return prune(kPartialSum);
    int16_t split_sum = static_cast<int16_t>(a | b | contracted_bits);
    if (kind == OpKind::accum && attrs.dim == kPhi) split_sum &= ~kLoopBit;  // the loop's slices summed
    // A sum of such partial sums sums them over their contraction's index, the one index sums
    // may contract there (the index rules): what is left to sum, if anything, is this block's or
    // iteration's share (the axis bits of contracted_bits).
    const bool sums_stack = (a & kStackBit) != 0 && kind == OpKind::sum;
    if (sums_stack) split_sum &= ~kStackBit;
    const bool completes_stack = sums_stack && split_sum == 0;
    // A loop's partial sum scaled in the body: the rules above leave only values that do not
    // change with the iteration, and constants, to scale it.
    bool scaled = sums_stack && state_[inputs[0].index()].scaled;  // carried to the accumulator
    if (kind != OpKind::accum && !sums_stack && ((a | b) & (kLoopBit | kStackBit)) != 0) {
      for (TensorId t : inputs)
        scaled |= (state_[t.index()].split_sum & (kLoopBit | kStackBit)) != 0 && state_[t.index()].scaled;
      scaled |= kind == OpKind::mul || kind == OpKind::div || kind == OpKind::matmul ||
                (inputs.size() == 1 && op_info(kind).category == OpCategory::binary);
    }
    std::optional<DimLabels> labels = kind == OpKind::accum
                                          ? accum_labels(ctx_.indices(), in_labels[0], attrs.dim, deps, splits_)
                                          : op_labels(ctx_.indices(), kind, attrs, in_labels, in_shapes, type.shape);
    if (!labels || !nonlinear_ok(ctx_.indices(), kind, inputs.size(), in_labels)) return prune(kIndex);
    int64_t bytes = type.shape.numel() * dtype_bytes(type.dtype);
    if (smem_ + bytes > ctx_.options().target.shared_memory_bytes) return prune(kSharedMemory);
    Op& op = scratch_.op;
    op.kind = kind;
    op.inputs = inputs;
    op.attrs = attrs;
    std::vector<ExprId>& operand_exprs = scratch_.exprs;
    operand_exprs.clear();
    for (TensorId t : inputs) operand_exprs.push_back(state_[t.index()].expr);
    ExprId e = op_expressions(bg_, op, operand_exprs, ctx_.exprs(), param_exprs_)[0];
    // Concats are opaque to the oracle (absexpr.h); the matmul that reads them is checked.
    if (!replayed && kind != OpKind::concat && !gen_.useful(e, out_.stats)) return prune(kAbstractExpression);
    // try_op offers only ops whose operands' phases meet; a retiled op may not meet under this
    // configuration's loop (retile: it no longer fits).
    const std::optional<Phase> joined = phase_of(kind, operands);
    if (!joined) return false;
    const Phase phase = *joined;
    NfId nf;
    const bool completes = (kind == OpKind::accum && attrs.dim == kPhi) || completes_stack;
    if (!tile_of_.empty() && partial && !replayed && split_sum == 0 && kind != OpKind::concat &&
        (completes || opaque)) {
      // A value with no partial sum pending that the rule could not see as tile-local: the
      // loop's sum completed by the accumulator, or a value computed from a DTensor that is no
      // program value (the blocks' partial sums of an earlier kernel, summed whole here). If it
      // equals a program value over the same indices, it is that value, whole in every block,
      // and what is computed from it is checked like a tile-local value: nTrans's kernels,
      // once they had the sum of squares (accumulated, or summed from the partial sums an
      // earlier kernel wrote), grew millions of states of arithmetic on it (S², H·S, ...) that
      // the oracle lets through. If it is no program value it may be a reassociation the
      // program does not spell (Figure 3b's (X ⊙ G)·W, divided by the norm after the loop),
      // and the rule stays silent about it; unless the loop scaled its partial sums (an
      // accumulation of what the rule sees through): Σ_k c·p_k = c·Σ_k p_k is then a whole
      // value times a completed sum, which the program-tile-values assumption requires to be a
      // program value (nTrans: H·Σ_k Y²_k, accumulated to meet Σ_k Y²_k after the loop).
      NfResult r = normal_form(e, ctx_.exprs(), ctx_.normal_forms());
      if (r.stop == NfStop::none && program_value_of(r.id, *labels) >= 0) {
        if (holds_value(r.id, *labels, phase, type.shape)) return prune(kDuplicateValue);
        nf = r.id;
        partial = opaque = false;
        completed = true;
      } else if (r.stop == NfStop::none && completes && !opaque && state_[inputs[0].index()].scaled) {
        return prune(kProgramTileValue);
      } else if (completes) {
        opaque = true;
      }
    } else if (!tile_of_.empty() && !partial) {
      NfResult r = normal_form(e, ctx_.exprs(), ctx_.normal_forms());
      if (r.stop == NfStop::none) {
        nf = r.id;
        if (!replayed)
          if (Prune why = tile_value_rejection(nf, *labels, phase, type.shape, completed); why != kAllowed)
            return prune(why);
      }
    }
    auto r = bg_.append(kind, inputs, attrs);
    MUGRAPH_CHECK(r.ok()) << "block op passed its shape rule but append rejected it: " << r.rejection().str();
    for (TensorId t : inputs) ++state_[t.index()].uses;
    push_tensor(e, phase, false, kind == OpKind::concat, *labels, deps);
    state_.back().partial = partial;
    state_.back().opaque = opaque;
    state_.back().scaled = scaled;
    state_.back().completed = completed;
    state_.back().split_sum = split_sum;
    state_.back().nf = nf;
    return true;
  }

  /// Whether two of the sinks hold the same value, or one holds the other scaled by a constant
  /// of the program (unless either is a program output's value, which the program writes both
  /// of): equal normal forms (one of them multiplied or divided by the constant) over
  /// the same indices, split the same way, in tiles of one shape (partial sums included: the same
  /// labels and split sums make them the same share of the same sum). Such a kernel writes one
  /// value twice, and the one that writes it once is grown too (RMSNorm: sum(X²)/4096
  /// accumulated, beside the accumulated sum(X²) divided by 4096); a kernel that reads the value
  /// scales it with one op if it needs the other (nTrans: the blocks' sums of (H − X)² beside
  /// the same sums divided by 4096, 31 s of a 60-s search in the kernels reading them).
  bool saves_a_value_twice(const std::vector<int32_t>& sinks) const {
    if (sinks.size() < 2) return false;
    ExprPool& pool = ctx_.exprs();
    auto nf_of = [&](ExprId e) {
      const NfResult r = normal_form(e, pool, ctx_.normal_forms());
      return r.stop == NfStop::none ? r.id : NfId();
    };
    auto is_output_value = [&](NfId nf) {
      const auto& values = ctx_.program_values();
      for (size_t t = 0; t < values.size(); ++t)
        if (values[t].nf == nf && ctx_.is_program_output(static_cast<int32_t>(t))) return true;
      return false;
    };
    std::vector<NfId> nfs;
    for (int32_t s : sinks) nfs.push_back(nf_of(state_[static_cast<size_t>(s)].expr));
    for (size_t a = 0; a < sinks.size(); ++a)
      for (size_t b = a + 1; b < sinks.size(); ++b) {
        const TensorState& x = state_[static_cast<size_t>(sinks[a])];
        const TensorState& y = state_[static_cast<size_t>(sinks[b])];
        if (!nfs[a].valid() || !nfs[b].valid() || x.labels != y.labels || x.split_sum != y.split_sum ||
            bg_.tensors[static_cast<size_t>(sinks[a])].type != bg_.tensors[static_cast<size_t>(sinks[b])].type)
          continue;
        if (nfs[a] == nfs[b]) return true;
        // Program outputs are known by their values' normal forms (none without program tile
        // values: --no-program-tile-values leaves the rule to equal values).
        if (ctx_.program_values().empty() || is_output_value(nfs[a]) || is_output_value(nfs[b])) continue;
        for (const SearchContext::Constant& c : ctx_.constants()) {
          // x · c, or x / c (not c / x: the constant second).
          if (c.kind != OpKind::mul && !(c.kind == OpKind::div && c.pos == 1)) continue;
          const ExprId k = pool.constant(c.value);
          const ExprKind op = c.kind == OpKind::mul ? ExprKind::mul : ExprKind::div;
          if (nf_of(pool.binary(op, x.expr, k)) == nfs[b] || nf_of(pool.binary(op, y.expr, k)) == nfs[a]) return true;
        }
      }
    return false;
  }

  /// Closes the block graph in every valid way: an output saver on every sink, each with every
  /// omap; each closing appends the graph_kernel op to the kernel graph. Without a loop, a
  /// program output that the block graph also reads (Y of Y = X + R and rmsnorm(Y), replayed)
  /// is saved as well in a second closing: one kernel then writes both outputs.
  void try_close() {
    if (static_cast<int>(bg_.ops.size()) == num_iterators_) return;
    if (ops_needed() > 0) return;
    std::vector<int32_t> sinks, read_outputs;
    for (size_t t = 0; t < state_.size(); ++t) {
      const TensorState& st = state_[t];
      if (st.uses == 0)
        sinks.push_back(static_cast<int32_t>(t));
      else if (cfg_.forloop == 1 && !st.iterator && st.program_value >= 0 && ctx_.is_program_output(st.program_value))
        read_outputs.push_back(static_cast<int32_t>(t));
    }
    close_saving(sinks);
    if (read_outputs.empty()) return;
    sinks.insert(sinks.end(), read_outputs.begin(), read_outputs.end());
    close_saving(sinks);
  }

  /// Closes the block graph with an output saver on each of `sinks`, with every omap.
  void close_saving(const std::vector<int32_t>& sinks) {
    if (saves_a_value_twice(sinks)) {
      ++prunes_[kDuplicateValue];
      return;
    }
    // omap options per sink: each grid axis > 1 takes a distinct data dim of the tile.
    std::vector<std::vector<std::array<int8_t, 3>>> omaps(sinks.size());
    for (size_t k = 0; k < sinks.size(); ++k) {
      const Shape& s = bg_.tensors[sinks[k]].type.shape;
      // Per axis: φ where the grid has one block along it, else every dim of the tile.
      std::array<std::vector<int8_t>, 3> dims;
      for (size_t ax = 0; ax < 3; ++ax) {
        if (cfg_.grid[static_cast<int>(ax)] == 1) {
          dims[ax] = {static_cast<int8_t>(kPhi)};
          continue;
        }
        for (int d = 0; d < s.rank(); ++d) dims[ax].push_back(static_cast<int8_t>(d));
      }
      const TensorState& st = state_[static_cast<size_t>(sinks[k])];
      for (const std::array<int8_t, 3>& omap : grid_maps(dims)) {
        if (saver_labels(ctx_.indices(), st.labels, omap, cfg_.grid, st.deps, splits_))
          omaps[k].push_back(omap);
        else
          ++prunes_[kIndex];
      }
      if (omaps[k].empty()) return;
    }
    std::vector<size_t> idx(sinks.size(), 0);
    while (true) {
      close_with(sinks, omaps, idx);
      size_t i = 0;
      while (i < sinks.size() && ++idx[i] == omaps[i].size()) idx[i++] = 0;
      if (i == sinks.size()) break;
    }
  }

  void close_with(const std::vector<int32_t>& sinks, const std::vector<std::vector<std::array<int8_t, 3>>>& omaps,
                  const std::vector<size_t>& idx) {
    Graph body = bg_;
    for (size_t k = 0; k < sinks.size(); ++k) {
      auto r = body.append(OpKind::output_saver, {TensorId(sinks[k])},
                           attrs::saver(static_cast<int32_t>(k), omaps[k][idx[k]]));
      if (!r.ok()) {
        ++prunes_[kShape];
        return;
      }
    }
    if (closed_) {
      Graph next = *task_.prefix;
      auto r = next.append_with_body(OpKind::graph_kernel, operands_, std::move(body));
      if (!r.ok()) {
        ++out_.stats.pruned[std::string(reason_name(r.rejection().reason))];
        return;
      }
      closed_->push_back(std::move(next));
      return;
    }
    std::vector<ExprId> saved;
    for (int32_t s : sinks) saved.push_back(state_[s].expr);
    if (recording_) {
      BlockClosing c{body, saved, growth_ ? growth_->floor_us() : 0.0};
      recording_->bytes += closing_bytes(c);
      recording_->closings.push_back(std::move(c));
      if (recording_->bytes > record_limit_bytes_) recording_.reset();  // too big to keep
    }
    close_kernel(ctx_, task_, facts_, std::move(body), saved, last_kernel_rank_, child_index_, out_,
                 prefix_floor_extra_, leaves_finishing_);
  }

  Generator& gen_;
  SearchContext& ctx_;
  const Task& task_;
  const PrefixFacts& facts_;  ///< of task_.prefix
  const KernelConfig& cfg_;
  const std::vector<TensorId>& operands_;  ///< the kernel's inputs, which cfg_ maps
  TaskOutput& out_;
  const std::atomic<bool>& stop_;
  const std::function<bool()>& beyond_bound_;
  const double prefix_floor_extra_;
  const std::optional<double> rest_floor_us_;
  std::optional<GrowthFloor> growth_;  ///< with rest_floor_us_ (start)
  const bool must_finish_;
  const bool leaves_finishing_;
  std::vector<ExprId> param_exprs_;
  OpRank last_kernel_rank_;
  Graph bg_;
  std::vector<TensorState> state_;
  std::vector<IteratorSplit> splits_;
  int64_t smem_ = 0;
  int num_iterators_ = 0;
  int max_sinks_ = 1;
  /// The fewest elements a tile of a program output saved by this kernel's blocks has.
  int64_t smallest_output_tile_ = 0;
  // Program tile values: by program tensor, the block tensor holding it (-1: none); whether a
  // replay can compute it; the replayable values of more than one op; the replays applied; how
  // many more ops than steps they appended.
  std::vector<int32_t> tile_of_;
  std::vector<bool> replayable_;
  std::vector<int> replay_roots_, chosen_roots_;
  int replayed_extra_ops_ = 0;
  /// Iterators (bit sets) that grid axes x, y and z and the for-loop split.
  std::array<uint64_t, 4> split_iterators_{};
  int32_t& child_index_;
  /// retile(): where closings go (the kernel graphs, not considered as prefixes or candidates).
  std::vector<Graph>* closed_ = nullptr;
  /// record(): what the growth closed so far, and the most it may hold.
  std::shared_ptr<BlockClosings> recording_;
  int64_t record_limit_bytes_ = 0;
  bool stopped_ = false;  ///< by stop_: the task runs again
  bool cut_ = false;      ///< by the cost bound: the task is done
  std::array<int64_t, kPruneCount> prunes_{};
  int64_t published_prunes_ = 0;  ///< of prunes_' sum, what add_running was told
  Op probe_;  ///< try_op's op, for its rank
  /// The attributes of ops that take none, built once: a `{}` argument per try_op call zeroed
  /// OpAttrs anew, about half of dfs's own time (perf, nTrans bs 1).
  const OpAttrs no_attrs_{};
  struct Scratch {
    std::vector<TensorId> inputs;
    std::vector<TensorType> types;
    std::vector<DimLabels> labels;
    std::vector<Shape> shapes;
    std::vector<ExprId> exprs;
    Op op;
  } scratch_;  ///< append_checked's
};

}  // namespace

std::vector<Graph> Generator::retile_kernel(const std::shared_ptr<const Graph>& prefix,
                                            const std::vector<TensorId>& operands, const KernelConfig& config,
                                            const Graph& body) {
  Task task;
  task.prefix = prefix;
  task.operands = operands;
  task.chunk = 0;
  TaskOutput out;
  int32_t child_index = 0;
  const std::atomic<bool> never_stop{false};
  const std::function<bool()> never_beyond = [] { return false; };
  // Retiling tries every configuration of one prefix in a row: its facts are computed once.
  if (retile_prefix_ != prefix) {
    std::optional<GraphLabels> labels = kernel_graph_labels(ctx_.indices(), *prefix);
    MUGRAPH_CHECK(labels.has_value()) << "a kernel-graph prefix breaks the index rules";
    retile_facts_ = PrefixFacts{expressions(*prefix, ctx_.exprs()).tensors, std::move(*labels)};
    retile_prefix_ = prefix;
  }
  BlockSearch s(*this, ctx_, task, retile_facts_, config, child_index, out, never_stop, /*must_finish=*/false,
                never_beyond);
  return s.retile(body);  // rebuilds without dfs: tells the running counts nothing
}

std::shared_ptr<const ConfigList> Generator::configs_for(const std::shared_ptr<const Graph>& prefix,
                                                         const std::vector<TensorId>& operands) {
  // Pointers differ for tasks read from a checkpoint: compare the prefixes themselves then.
  const bool same_prefix = configs_prefix_ && (configs_prefix_ == prefix || *configs_prefix_ == *prefix);
  if (!same_prefix || configs_operands_ != operands || configs_->by_floor != ctx_.model_bound()) {
    auto labels = kernel_graph_labels(ctx_.indices(), *prefix);
    MUGRAPH_CHECK(labels.has_value()) << "a kernel-graph prefix breaks the index rules";
    OperandIndexUse use;
    // The key: everything kernel_configs and config_floor_us read.
    std::string key(1, ctx_.model_bound() ? 'm' : 'b');
    auto add = [&key](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
    for (size_t oi = 0; oi < operands.size(); ++oi) {
      const TensorId t = operands[oi];
      add(oi > 0 && operands[oi - 1] == t ? 1 : 0);  // the second copy of an operand read twice
      const DimLabels& l = labels->tensors[t.index()];
      std::vector<bool> c(static_cast<size_t>(l.rank));
      std::vector<int16_t> idx(static_cast<size_t>(l.rank));
      std::vector<int64_t> slot(static_cast<size_t>(l.rank), 0);
      // An extent-1 dim (no index) is never split, so its answer does not matter.
      for (int d = 0; d < l.rank; ++d) {
        c[static_cast<size_t>(d)] = l[d] != kNone && ctx_.indices().contracted(l[d]);
        idx[static_cast<size_t>(d)] = index_of(l[d]);
        if (is_stack(l[d])) slot[static_cast<size_t>(d)] = ctx_.indices().extent(l[d]);
      }
      const TensorType& type = prefix->type(t);
      add(type.shape.rank());
      for (int d = 0; d < type.shape.rank(); ++d)
        add(type.shape[d]), add(c[static_cast<size_t>(d)]), add(idx[static_cast<size_t>(d)]),
            add(slot[static_cast<size_t>(d)]);
      add(static_cast<int64_t>(type.dtype));
      use.contracted.push_back(std::move(c));
      use.index.push_back(std::move(idx));
      use.stack_slot.push_back(std::move(slot));
    }
    // Which indices no program tensor ranges over together (rule (3)'s exception), as 32 bits.
    static_assert(kMaxProgramIndices <= 32);
    int16_t top = -1;
    for (const std::vector<int16_t>& idx : use.index)
      for (int16_t x : idx) top = std::max(top, x);
    for (int16_t x = 0; x <= top && x < 32; ++x) {
      use.apart.push_back(static_cast<uint32_t>(ctx_.indices().apart_from(x)));
      add(static_cast<int64_t>(use.apart.back()));
    }
    configs_prefix_ = prefix;
    configs_operands_ = operands;
    // Lists by what they depend on: kernel tasks make one per operand set, and the chained
    // chunks of the model bound's search make theirs again; most recur.
    if (std::shared_ptr<const ConfigList> hit = ctx_.config_lists().find(key)) {
      configs_ = std::move(hit);
      return configs_;
    }
    auto list = std::make_shared<ConfigList>();
    list->configs = kernel_configs(*prefix, operands, &use);
    // With the model as the bound, configurations whose loads alone cost least come first: their
    // candidates tighten the bound, which then cuts the configurations that load more.
    if (ctx_.model_bound()) {
      std::vector<std::pair<double, size_t>> order;
      for (size_t i = 0; i < list->configs.size(); ++i)
        order.emplace_back(config_floor_us(*prefix, operands, list->configs[i], ctx_.gpu()), i);
      std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      std::vector<KernelConfig> sorted;
      sorted.reserve(list->configs.size());
      for (const auto& [floor, i] : order) {
        sorted.push_back(list->configs[i]);
        list->floors.push_back(floor);
      }
      list->configs = std::move(sorted);
      list->by_floor = true;
    }
    ctx_.config_lists().insert(key, list);
    configs_ = std::move(list);
  }
  return configs_;
}

bool Generator::can_finish(const std::vector<ExprId>& exprs, const std::vector<TensorId>& operands) {
  uint64_t needed = 0, have = 0, needed_free = 0, have_free = 0;
  for (ExprId t : ctx_.targets()) {
    needed |= vars_of(t);
    needed_free |= free_vars_of(t);
  }
  for (TensorId t : operands) {
    have |= vars_of(exprs[t.index()]);
    have_free |= free_vars_of(exprs[t.index()]);
  }
  return (needed & ~have) == 0 && (needed_free & ~have_free) == 0;
}

bool Generator::probes_rule_out_finish(const std::shared_ptr<const Graph>& prefix,
                                       const std::vector<TensorId>& operands) {
  if (ctx_.input_probes().empty()) return false;
  if (!probe_evaluator_) probe_evaluator_ = std::make_unique<ProbeEvaluator>(ctx_.input_probes());
  return probe_evaluator_->cannot_finish(prefix, operands);
}

double Generator::prefix_floor_extra_us(const Task& task) const {
  return std::isnan(task.floor_extra_us) ? ctx_.floor_extra_us(*task.prefix) : task.floor_extra_us;
}

double Generator::model_rest_floor_us(const Graph& prefix, int64_t later_bytes, bool finishes, double floor_extra,
                                      double unread_extra) const {
  return cost_lower_bound_us(candidate_metrics(prefix, ctx_.options().target).device_bytes + later_bytes,
                             count_kernel_ops(prefix) + (finishes ? 0 : 1), ctx_.gpu()) +
         floor_extra + unread_extra;
}

bool Generator::run_block_task(const Task& task, TaskOutput& out, const std::atomic<bool>& stop) {
  const Graph& prefix = *task.prefix;
  std::vector<ExprId> exprs = expressions(prefix, ctx_.exprs()).tensors;
  bool finishes = can_finish(exprs, task.operands);
  if (finishes && probes_rule_out_finish(task.prefix, task.operands)) {
    ++out.stats.pruned["input_probe"];
    // The first pass closes only kernels that finish the program.
    if (task.finish_only) return true;
    finishes = false;
  }
  // Plain variables, not a structured binding: the bound check below captures them in a
  // lambda (which C++17 compilers, the fuzzers' clang among them, refuse for bindings).
  int64_t later_bytes = 0;
  double unread_extra = 0;
  const std::pair<int64_t, int> lower =
      ctx_.lower_bound(prefix, exprs, task.operands, !finishes, &later_bytes, &unread_extra);
  const int64_t bytes = lower.first;
  const int kernels = lower.second;
  const double floor_extra = prefix_floor_extra_us(task);
  if (ctx_.beyond_bound(bytes, kernels, floor_extra + unread_extra)) {
    ++out.stats.pruned["cost_bound"];
    return true;
  }
  const bool has_first_pass = gets_first_pass(ctx_.options(), prefix, finishes);
  const std::shared_ptr<const ConfigList> list = task.configs ? task.configs : configs_for(task.prefix, task.operands);
  const std::vector<KernelConfig>& configs = list->configs;
  MUGRAPH_CHECK(list->by_floor == ctx_.model_bound()) << "a block task's configurations were made for the other bound";
  const size_t begin = static_cast<size_t>(task.chunk) * kConfigsPerTask;
  const size_t end = std::min(configs.size(), begin + kConfigsPerTask);
  const bool model_bound = ctx_.model_bound();
  // The full pass after a first pass closes only kernels a later kernel reads: it counts that
  // kernel's launch in the floor it cuts with.
  const bool leaves_finishing = has_first_pass && !task.finish_only;
  // The floor a chained chunk is ordered by: its twin's, as the kernel task gives it.
  const double order_rest_us =
      model_bound ? model_rest_floor_us(prefix, later_bytes, finishes, floor_extra, unread_extra) : 0.0;
  const double rest_floor_us = order_rest_us + (model_bound && leaves_finishing ? ctx_.gpu().launch_us : 0.0);
  // The operand rules for a kernel that must finish the program (computed once it is known
  // that one must).
  std::optional<std::vector<uint64_t>> unsplittable;
  std::optional<GraphLabels> labels = kernel_graph_labels(ctx_.indices(), prefix);
  MUGRAPH_CHECK(labels.has_value()) << "a kernel-graph prefix breaks the index rules";
  const PrefixFacts facts{exprs, std::move(*labels)};
  BlockCache* const cache = ctx_.block_cache();
  const int kernel_ops_after = ctx_.options().max_kernel_ops - count_kernel_ops(prefix) - 1;
  const std::string operands_key = cache ? block_operands_key(prefix, facts, task.operands) : std::string();
  // The task's shelves in the cache, by whether the kernel must finish the program (taken when
  // first needed).
  std::array<std::shared_ptr<BlockShelf>, 2> shelves;
  auto shelf_for = [&](bool must_finish) -> const std::shared_ptr<BlockShelf>& {
    std::shared_ptr<BlockShelf>& s = shelves[must_finish ? 1 : 0];
    if (!s) s = cache->shelf(block_shelf_key(operands_key, must_finish, kernel_ops_after, model_bound));
    return s;
  };
  // The cut the growth floor is compared with: the bound less the rest floor (none without the
  // model bound).
  auto growth_cut_us = [&] {
    return model_bound ? ctx_.bound_us() - rest_floor_us : std::numeric_limits<double>::infinity();
  };
  const OpRank last_rank = last_kernel_rank(prefix);
  int32_t child_index = 0;
  for (size_t i = begin; i < end; ++i) {
    if (model_bound && rest_floor_us + list->floors[i] > ctx_.bound_us()) {
      ++out.stats.pruned["cost_bound"];
      continue;
    }
    // If one more kernel after this one is already beyond the bound (read afresh: other tasks
    // keep tightening it), this kernel must finish the program: its outputs can only be program
    // outputs.
    // A kernel that cannot finish the program has a later kernel in `kernels` already, and
    // that one is within the bound (checked above): this one may write intermediates.
    const bool must_finish = task.finish_only || (finishes && ctx_.beyond_bound(bytes, kernels + 1, floor_extra));
    // The first pass already grew this configuration with exactly these limits.
    if (must_finish && !task.finish_only && has_first_pass) continue;
    if (must_finish) {
      if (!unsplittable) {
        unsplittable = unsplittable_indices(ctx_, prefix, held_program_tensors(ctx_, prefix, exprs, facts.labels),
                                            exprs, task.operands);
      }
      if (splits_unsplittable(configs[i], task.operands, facts.labels, *unsplittable)) {
        ++out.stats.pruned["split_contraction"];
        continue;
      }
    }
    const std::function<bool()> beyond = [&] {
      return ctx_.beyond_bound(bytes, kernels, floor_extra + unread_extra) ||
             (model_bound && rest_floor_us + list->floors[i] > ctx_.bound_us());
    };
    if (cache) {
      if (std::shared_ptr<const BlockClosings> hit =
              cache->find(*shelf_for(must_finish), configs[i], growth_cut_us())) {
        ++out.stats.block_replays;
        // What the growth would close, in its order: the closings within the growth cut, which
        // the bound keeps tightening as the growth would read it.
        int64_t n = 0;
        for (const BlockClosing& c : hit->closings) {
          if ((++n & 63) == 0) {
            if (stop.load(std::memory_order_relaxed)) return false;
            if (beyond()) {
              ++out.stats.pruned["cost_bound"];
              break;
            }
          }
          if (model_bound && rest_floor_us + c.floor_us > ctx_.bound_us()) {  // as the growth compares
            ++out.stats.pruned["cost_bound"];
            continue;
          }
          close_kernel(ctx_, task, facts, c.body, c.saved_exprs, last_rank, child_index, out, floor_extra,
                       leaves_finishing);
        }
        continue;
      }
    }
    BlockSearch s(*this, ctx_, task, facts, configs[i], child_index, out, stop, must_finish, beyond, floor_extra,
                  model_bound ? std::optional<double>(rest_floor_us) : std::nullopt, leaves_finishing);
    if (cache) s.record(cache->entry_limit_bytes());
    if (!s.run()) return false;
    if (cache)
      if (std::shared_ptr<const BlockClosings> entry = s.recorded(growth_cut_us()))
        cache->insert(shelf_for(must_finish), configs[i], std::move(entry));
  }
  // The next chunk of a chain, if the bound has not passed its floor.
  if (chains_chunks(prefix, *list) && end < configs.size() && !(rest_floor_us + list->floors[end] > ctx_.bound_us())) {
    Task next = task;
    next.chunk = task.chunk + 1;
    next.path.back() = task.path.back() + 1;
    next.floor_us = order_rest_us + list->floors[end];
    next.configs = nullptr;
    out.children.push_back(std::move(next));
  }
  return true;
}

double task_order_us(const Task& task) {
  return task.finish_only && task.prefix && count_kernel_ops(*task.prefix) == 0 ? 0.0 : task.floor_us;
}

bool gets_first_pass(const SearchOptions& opt, const Graph& prefix, bool can_finish) {
  return can_finish && count_kernel_ops(prefix) + 1 < opt.max_kernel_ops;
}

bool chains_chunks(const Graph& prefix, const ConfigList& configs) {
  return configs.by_floor && count_kernel_ops(prefix) > 0;
}

}  // namespace mugraph::search_detail
