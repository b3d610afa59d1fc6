// The μGraph generator: runs one task of the search tree (search.h explains tasks). Kernel tasks
// enumerate one-op extensions of a kernel-graph prefix; block tasks grow the block graph of one
// graph-defined kernel configuration depth-first and close it in every valid way.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "input_probes.h"
#include "labels.h"
#include "mugraph/absexpr.h"
#include "mugraph/graph.h"
#include "mugraph/normal_form.h"
#include "mugraph/search.h"
#include "mugraph/subexpr.h"

namespace mugraph::search_detail {

/// Most DTensors one graph-defined kernel may read (SearchOptions::max_kernel_inputs).
inline constexpr int kMaxKernelInputs = kMaxKernelInputsRange.hi;

/// A graph-defined kernel configuration: how blocks and iterations split the DTensors it reads
/// (its operands, which all configurations of one list share: ConfigList, Task::operands).
/// Fixed-size, so that a list of tens of thousands is one allocation.
struct KernelConfig {
  Dim3 grid;
  int64_t forloop = 1;
  /// Per operand, in order; the slots past the last operand stay φ.
  std::array<std::array<int8_t, 3>, kMaxKernelInputs> imaps = filled<std::array<int8_t, 3>>({kPhi, kPhi, kPhi});
  std::array<int8_t, kMaxKernelInputs> fmaps = filled<int8_t>(kPhi);
  friend bool operator==(const KernelConfig&, const KernelConfig&) = default;

 private:
  template <typename T>
  static constexpr std::array<T, kMaxKernelInputs> filled(T v) {
    std::array<T, kMaxKernelInputs> a;
    a.fill(v);
    return a;
  }
};

/// Configurations per block task: kernel_configs() of one operand set is cut into chunks of
/// this many, so tasks stay small for balancing and checkpoints.
inline constexpr int kConfigsPerTask = 16;

/// The configurations the block tasks of one kernel task's operand set try (Generator::
/// configs_for). With the model bound they are sorted by their floors. A list depends on the
/// operands' types and index use only, so operand sets alike in those share one.
struct ConfigList {
  std::vector<KernelConfig> configs;
  /// With the model bound, config_floor_us of each configuration (ascending); else empty.
  std::vector<double> floors;
  bool by_floor = false;  ///< made for the model bound (floors filled, configurations sorted)
};

/// Whether a block task has a first-pass twin (Task::finish_only): its kernel can finish the
/// program and is not the last op there is room for (then the full pass is already narrow).
/// The twin closes every kernel that finishes the program; the full pass then closes only those
/// a later kernel reads.
bool gets_first_pass(const SearchOptions& opt, const Graph& prefix, bool can_finish);

/// With the model bound, whether the block tasks of one operand set after `prefix` are chained:
/// the kernel task makes the first chunk's task, and each chunk's task makes the next one's if
/// the bound has not passed its floor (the chunks keep the paths and floors they would have if
/// all were made at once). Best-first order leaves many tasks pending, and each chunk's task
/// holds the operand set's configuration list; chaining keeps one pending per operand set. The
/// root's (one prefix, whose tasks set the bound) are all made at once.
bool chains_chunks(const Graph& prefix, const ConfigList& configs);

/// The prefix that a task's prefix extends (its first ops, tensors and bodies are this one's),
/// and what that one extends in turn, up to the program's inputs. Checkpoints write each prefix
/// as the one it extends plus its new kernel (the frontier's prefixes share most of their ops).
struct PrefixParent {
  std::shared_ptr<const Graph> prefix;
  std::shared_ptr<const PrefixParent> parent;  ///< null: `prefix` is written whole
};

/// A node of the search tree: a kernel-graph prefix, and for block tasks the operands of the
/// graph-defined kernel to grow next and which chunk of their configurations to try.
struct Task {
  std::vector<int32_t> path;
  /// Shared by the sibling tasks of one kernel task (a prefix is never changed once made).
  std::shared_ptr<const Graph> prefix;
  /// What `prefix` extends; null for the root, and where unknown (nothing is lost: the prefix is
  /// then written whole).
  std::shared_ptr<const PrefixParent> parent;
  std::vector<TensorId> operands;  ///< block task: the kernel's operands (increasing)
  int32_t chunk = -1;              ///< block task: configurations [chunk·kConfigsPerTask, +kConfigsPerTask)
  /// Block task of the first pass: the kernel must finish the program (its outputs are program
  /// outputs), so it yields candidates and no children. These run first to set the cost bound;
  /// the full pass over the same configurations follows and closes only the kernels a later
  /// kernel reads (its floor counts that kernel).
  bool finish_only = false;
  /// Block task: the operands' configurations, computed once by the kernel task that made it
  /// and shared by all its chunks (computing them is most of a short block task's time). Null
  /// for tasks read from a checkpoint: the generator computes the list again (not stored).
  std::shared_ptr<const ConfigList> configs;
  /// With the model bound, a lower bound on the estimate of every candidate this task can lead
  /// to; the driver runs pending tasks by (task_order_us, path). 0 with the bytes bound (path
  /// order).
  double floor_us = 0;
  /// The prefix's SearchContext::floor_extra_us as the task that made this one computed it
  /// (it chooses threads for every kernel of the prefix and estimates them); NaN when unknown
  /// (the root, a task read from a checkpoint).
  double floor_extra_us = std::numeric_limits<double>::quiet_NaN();
  bool is_block() const { return chunk >= 0; }
};

/// Where a pending task goes in a model-bound search's best-first order: its floor, except for
/// the first passes of the first kernel (finish_only at the root), which go first (0): narrow
/// and quick, they set the bound. Deeper first passes keep their floor, their twin's.
double task_order_us(const Task& task);

/// CostBound::both: the first element of every task path of the second (model-bound) phase, so
/// that path order stays the order of a sequential search (all of the bytes phase, then the
/// model phase), also for resumes and the deterministic mode's cut.
inline constexpr int32_t kModelPhasePath = INT32_MAX;

/// Lexicographic order of paths = the order of a sequential depth-first search.
inline bool path_less(const std::vector<int32_t>& a, const std::vector<int32_t>& b) { return a < b; }

/// A complete candidate as a task reports it.
struct FoundCandidate {
  Graph graph;  ///< complete kernel graph, outputs marked, not fused
  CandidateMetrics metrics;
  /// The cost model's estimate of the graph once its thread graphs are fused (rank_estimate_us):
  /// the rank, best first.
  double estimated_us = 0;
  std::vector<int32_t> path;  ///< of the task that found it
  /// Search time (seconds since the search began, resumed time included) when the driver
  /// committed it.
  double found_seconds = 0;
  /// The order of the task that found it (task_order_us): with the path, its task's place in
  /// the search's order (the deterministic mode's cut).
  double task_order_us = 0;
};

/// What running a task produced; committed by the driver only if the task ran to its end.
struct TaskOutput {
  std::vector<Task> children;
  std::vector<FoundCandidate> candidates;
  SearchStats stats;
  /// Of stats.states, how many the task has told SearchContext::add_running so far; the driver
  /// takes them back (take_back_running) when it counts the task's stats.
  int64_t published_states = 0;
  /// Likewise of the block searches' prunings (stats.pruned).
  int64_t published_pruned = 0;
  /// What the prefixes of `task`'s children extend: its prefix (made once, shared by them).
  const std::shared_ptr<const PrefixParent>& children_parent(const Task& task) {
    if (!children_parent_)
      children_parent_ = std::make_shared<const PrefixParent>(PrefixParent{task.prefix, task.parent});
    return children_parent_;
  }

 private:
  std::shared_ptr<const PrefixParent> children_parent_;
};

class SearchContext;
class BlockCache;
class ConfigListCache;

/// Whether tensor t of kernel graph g (with its tensors' index labels and abstract expressions)
/// can be program output j: the output's shape and labels, and an A_eq-equal expression (an
/// undecided comparison counts as equal; verification decides).
bool computes_program_output(SearchContext& ctx, const Graph& g, const GraphLabels& labels,
                             const std::vector<ExprId>& exprs, size_t t, size_t j);

/// Whether a kernel graph has an op other than an input with a result that no op reads and no
/// output is: an op whose results reach no output, or a kernel that saves a tensor nothing reads
/// (the same kernel without that saver moves fewer bytes and computes the same outputs).
bool has_dead_ops(const Graph& g);

/// A complete kernel graph (outputs marked, no dead ops) as a candidate: its metrics and its rank
/// estimate, found by the task at `path`.
FoundCandidate found_candidate(SearchContext& ctx, Graph&& g, std::vector<int32_t> path);

/// The rank of an op for the canonical order: ops are appended in strictly increasing rank, so
/// every set of ops is generated in exactly one order (the greedy smallest-rank-first order).
struct OpRank {
  int32_t max_input = -1;  ///< largest operand tensor id
  int32_t kind = -1;
  std::array<int32_t, 3> inputs{-1, -1, -1};  ///< first operands (more are folded into attr)
  uint64_t attr = 0;                          ///< distinguishes ops of one kind on the same operands
  friend auto operator<=>(const OpRank&, const OpRank&) = default;
};

/// The rank of op `op` of graph `g`.
OpRank op_rank(const Graph& g, const Op& op);

/// A value the program computes (one per program tensor), for the program-tile-values rule
/// (SearchOptions::program_tile_values).
struct ProgramValue {
  ExprId expr;
  NfId nf;  ///< invalid if the normal form was not computed (its limits)
  /// For a contraction (a term whose top node is a sum: sums, matmuls), its summand's normal
  /// form; invalid otherwise or past the limits.
  NfId summand_nf;
  DimLabels labels;  ///< of the program tensor (no split bits)
  int cone_ops = 0;  ///< non-input ops it depends on, its own producer included
  /// cone[t]: program tensor t is this value or one it is computed from.
  std::vector<bool> cone;
};

/// A value of the program that any μGraph computes with an op of its own (operand_rules.h,
/// find_program_steps), with the program tensors that compute it (one normal form).
struct ProgramStep {
  ExprId expr;
  std::vector<int32_t> tensors;
};

/// Shared, read-only context of a search plus the thread-safe expression machinery.
class SearchContext {
 public:
  SearchContext(const Graph& program, const SearchOptions& options);
  ~SearchContext();

  const Graph& program() const { return program_; }
  const SearchOptions& options() const { return options_; }
  ExprPool& exprs() { return exprs_; }
  NormalFormPool& normal_forms() { return nfs_; }
  SubexprOracle& oracle() { return oracle_; }
  const std::vector<ExprId>& targets() const { return targets_; }
  const ProgramIndices& indices() const { return *indices_; }
  /// The program's values by program tensor id (empty when program_tile_values is off).
  const std::vector<ProgramValue>& program_values() const { return program_values_; }

  /// By program tensor, the program tensors its consumers make (empty when program_tile_values
  /// is off).
  const std::vector<std::vector<int32_t>>& program_consumers() const { return program_consumers_; }
  /// By program tensor: whether it is computed (an input is not) and a chain of single uses leads
  /// from it to an output: it is an output that nothing reads, or its one consumer is no output
  /// and has such a chain (empty when program_tile_values is off; operand_rules.h).
  const std::vector<bool>& program_single_use_chains() const { return program_single_use_chains_; }
  /// The program's steps (operand_rules.h, find_program_steps); empty when program_tile_values
  /// is off, and when the program adds two values that each hold a contraction: the LoRA
  /// rewrite's matmul of concats computes both.
  const std::vector<ProgramStep>& program_steps() const { return program_steps_; }
  /// Whether program tensor t is an output of the program.
  bool is_program_output(int32_t t) const {
    return std::find(program_.outputs.begin(), program_.outputs.end(), TensorId(t)) != program_.outputs.end();
  }

  /// Op kinds the search may use at kernel and block level (derived from the program).
  const std::vector<OpKind>& kinds() const { return kinds_; }
  bool uses_concat() const { return concat_; }
  /// The program has an op of this kind whose two operands are one value (add(X, X)). Only then
  /// may the generator give a binary op one tensor as both operands: add(x, x) is 2x and
  /// mul(x, x) is sqr(x), and the abstract expressions, blind to constant factors and treating
  /// sub as add, would otherwise let chains like add(x, x), sub(add(x, x), x) … through.
  bool has_self_operand_op(OpKind kind) const {
    return std::find(self_operand_kinds_.begin(), self_operand_kinds_.end(), kind) != self_operand_kinds_.end();
  }
  /// Whether a graph-defined kernel may read kernel-graph tensor t as two operands, side by side
  /// in its operand list, each with its own map (kernel_configs gives them different ones): t is
  /// a program input that a matmul and a binary element-wise op both read. A residual, X +
  /// f(X·W), needs X's row tiles along the loop for the matmul and its column tile of each
  /// block for the add, and one iterator holds one tiling. Other tensors are read once, so the
  /// operand sets of other programs are what they were.
  bool may_read_twice(TensorId t) const { return t.index() < twin_inputs_.size() && twin_inputs_[t.index()]; }
  /// Scalar constants of the program with the op kind and position they appear with.
  struct Constant {
    OpKind kind;
    Scalar value;
    int8_t pos;
  };
  const std::vector<Constant>& constants() const { return constants_; }
  /// The program's input probes (input_probes.h); none when SearchOptions::input_probes is off.
  const InputProbes& input_probes() const { return input_probes_; }

  /// The root task: the program's input ops.
  Task root() const;

  /// The cost bound (SearchOptions::cost_bound), set by the driver from the candidates found:
  /// with the bytes bound a prefix whose lower bound on (device bytes, kernels) is
  /// lexicographically worse than this is cut.
  void set_bound(int64_t device_bytes, int kernels) {
    bound_bytes_.store(device_bytes);
    bound_kernels_.store(kernels);
  }
  /// With the model bound a prefix none of whose completions can be estimated at this many
  /// microseconds or less is cut.
  /// It is never above the cost ceiling (SearchOptions::cost_ceiling_us), whose candidates are
  /// dropped as found: a subtree whose floor is past it holds none worth growing.
  void set_bound_us(double estimated_us) { bound_us_.store(std::min(estimated_us, ceiling_us())); }
  /// SearchOptions::cost_ceiling_us; infinite when there is none.
  double ceiling_us() const {
    return options_.cost_ceiling_us > 0 ? options_.cost_ceiling_us : std::numeric_limits<double>::infinity();
  }
  /// Whether the model bound cuts (CostBound::model, and CostBound::both's second phase) rather
  /// than the bytes bound.
  bool model_bound() const { return model_bound_.load(std::memory_order_relaxed); }
  /// CostBound::both: the bytes phase is over; the driver calls this between the phases, while
  /// no task runs.
  void use_model_bound();
  /// Whether a prefix with these lower bounds on (device bytes, kernels) is cut by the cost bound.
  /// `extra_us` (model bound only): what the prefix's kernels cost beyond that
  /// (floor_extra_us).
  bool beyond_bound(int64_t device_bytes, int kernels, double extra_us = 0) const {
    if (model_bound())
      return cost_lower_bound_us(device_bytes, kernels, gpu_) + extra_us > bound_us_.load(std::memory_order_relaxed);
    const int64_t b = bound_bytes_.load(std::memory_order_relaxed);
    if (device_bytes > b || (device_bytes == b && kernels > bound_kernels_.load(std::memory_order_relaxed)))
      return true;
    // The bytes phase has the ceiling too (its bound is on bytes, the ceiling on the model's time).
    return options_.cost_ceiling_us > 0 && cost_lower_bound_us(device_bytes, kernels, gpu_) > options_.cost_ceiling_us;
  }
  /// With the model bound, kernels_floor_extra_us of a prefix's kernels: a prefix whose
  /// kernels alone, with the launches and bytes still to come, exceed the bound is cut (a grid
  /// that makes every block load everything loses before its successors are grown). 0 with
  /// the bytes bound.
  double floor_extra_us(const Graph& prefix) const {
    return model_bound() ? kernels_floor_extra_us(prefix, gpu_) : 0.0;
  }
  /// floor_extra_us of `next`, a prefix whose parent (`next` less its last kernel) has
  /// `parent_extra_us`.
  double next_floor_extra_us(double parent_extra_us, const Graph& next) const {
    return model_bound() ? parent_extra_us + last_kernel_floor_extra_us(next, gpu_) : 0.0;
  }
  /// States grown by the tasks now running, told every 1024 states of a block search and taken
  /// back when the driver counts a task's stats: the progress line's count moves during a long
  /// block task (a seven-input kernel's can take a minute), not only when one completes; and
  /// likewise their prunings.
  void add_running(int64_t states, int64_t pruned) {
    running_states_.fetch_add(states, std::memory_order_relaxed);
    running_pruned_.fetch_add(pruned, std::memory_order_relaxed);
  }
  /// Takes back what a task told (TaskOutput::published_states, published_pruned).
  void take_back_running(const TaskOutput& out) { add_running(-out.published_states, -out.published_pruned); }
  int64_t running_states() const { return running_states_.load(std::memory_order_relaxed); }
  int64_t running_pruned() const { return running_pruned_.load(std::memory_order_relaxed); }
  /// The cost bound in microseconds (model bound; infinite until a candidate is found).
  double bound_us() const { return bound_us_.load(std::memory_order_relaxed); }
  /// The block searches' results shared by the workers (block_cache.h); null when
  /// SearchOptions::block_cache_bytes is 0.
  BlockCache* block_cache() const { return block_cache_.get(); }
  /// The configuration lists shared by the workers (config_list_cache.h).
  ConfigListCache& config_lists() const { return *config_lists_; }
  /// The GPU whose cost model ranks the candidates (the search's target).
  const GpuSpec& gpu() const { return gpu_; }
  /// Lower bound on (device bytes, kernels) of any complete μGraph extending `prefix` after it
  /// is given one more kernel reading `extra_reads` (none: nothing more): every kernel's traffic
  /// so far, plus each program input no kernel has read yet, plus each program output not yet
  /// produced, and at least one more kernel while outputs are missing.
  /// `another_kernel`: the new kernel cannot finish the program (its operands lack inputs the
  /// outputs need), so one more kernel follows it.
  /// `later_bytes`, if given, receives the part of those bytes that only kernels after the new
  /// one can move: program inputs and intermediates nobody reads (the new kernel reads only its
  /// operands), and with `another_kernel` the outputs not yet produced.
  /// `unread_extra_us`, if given, receives unread_inputs_extra_us's for the inputs still unread
  /// where only pre-defined kernels may follow (the prefix's last graph-defined kernel is placed,
  /// or the new kernel is the last and `another_kernel`), with the model bound; else 0.
  std::pair<int64_t, int> lower_bound(const Graph& prefix, const std::vector<ExprId>& exprs,
                                      const std::vector<TensorId>& extra_reads, bool another_kernel = false,
                                      int64_t* later_bytes = nullptr, double* unread_extra_us = nullptr);
  /// With the model bound, where no graph-defined kernel may follow: what the pre-defined kernels
  /// still to come cost at least beyond cost_lower_bound_us's share, because each program input
  /// that neither `prefix` nor `reads` reads must be read by one of them. Its first reader is a
  /// cuBLAS matmul, which moves its bytes at cublas_dram_share of the peak, or an element-wise
  /// op, which also writes at least as many bytes (no program output being as large), or a
  /// reduction, which costs nothing more but is only possible where the index rules let one sum
  /// that input alone (first_reader_extra_). The largest input's term, not their sum: one op may
  /// read two of them.
  double unread_inputs_extra_us(const Graph& prefix, const std::vector<TensorId>& reads) const;

 private:
  Graph program_;
  SearchOptions options_;
  ExprPool exprs_;
  NormalFormPool nfs_;
  SubexprOracle oracle_;
  std::vector<ExprId> targets_;
  std::unique_ptr<ProgramIndices> indices_;
  std::vector<ProgramValue> program_values_;
  std::vector<std::vector<int32_t>> program_consumers_;
  std::vector<bool> program_single_use_chains_;
  std::vector<ProgramStep> program_steps_;
  std::vector<OpKind> kinds_;
  std::vector<OpKind> self_operand_kinds_;
  std::vector<bool> twin_inputs_;  ///< by program input, in order: may_read_twice
  bool concat_ = false;
  std::vector<Constant> constants_;
  InputProbes input_probes_;
  const GpuSpec& gpu_;
  /// By program input, in program order: at least what its first pre-defined reader costs
  /// beyond moving its bytes at the peak, per byte of it (unread_inputs_extra_us).
  std::vector<double> first_reader_extra_;
  std::atomic<int64_t> bound_bytes_{INT64_MAX};
  std::atomic<int> bound_kernels_{INT32_MAX};
  std::atomic<double> bound_us_{std::numeric_limits<double>::infinity()};
  std::atomic<bool> model_bound_{false};
  std::atomic<int64_t> running_states_{0};
  std::atomic<int64_t> running_pruned_{0};
  std::unique_ptr<BlockCache> block_cache_;
  std::unique_ptr<ConfigListCache> config_lists_;

  /// Fills first_reader_extra_ (the constructor).
  void find_first_reader_extras();
  /// unread_inputs_extra_us with what is read given per prefix tensor.
  double unread_inputs_extra_us(const Graph& prefix, const std::vector<bool>& read) const;
};

/// What a block graph's growth reads of its kernel-graph prefix, computed once per prefix: the
/// abstract expression and the index labels of every tensor.
struct PrefixFacts {
  std::vector<ExprId> exprs;
  GraphLabels labels;
};

/// Runs tasks. One per worker thread (keeps caches that are not shared).
class Generator {
 public:
  explicit Generator(SearchContext& ctx) : ctx_(ctx) {}

  /// Runs a task to its end (true) or until `stop` is set (false; `out` is then incomplete and
  /// must be discarded).
  bool run(const Task& task, TaskOutput& out, const std::atomic<bool>& stop);

  /// Whether e may lead to a program output (abstract-expression pruning); cached per thread.
  bool useful(ExprId e, SearchStats& stats);

  /// The program inputs a term depends on, as a bit set of var slots (mod 64); cached.
  uint64_t vars_of(ExprId e);
  /// Those of vars_of(e) that occur outside every sum of the term (matmuls are sums); cached.
  uint64_t free_vars_of(ExprId e);

  /// The configurations the block tasks of `operands` after `prefix` try, in chunks of
  /// kConfigsPerTask: kernel_configs() refined by the operands' index labels, sorted by their
  /// floors with the model bound. Kernel tasks hand the list to the block tasks they make
  /// (Task::configs); the last list is cached for tasks that come without one (resumed ones).
  std::shared_ptr<const ConfigList> configs_for(const std::shared_ptr<const Graph>& prefix,
                                                const std::vector<TensorId>& operands);

  /// The kernel graphs `prefix` + one graph-defined kernel reading `operands` whose block graph
  /// has `body`'s ops (a closed block graph of a kernel on these operands, under any
  /// configuration) under `config` instead, closed in every valid way (output savers' omaps).
  /// Empty if the ops do not fit the configuration (shapes, index labels, partial sums, shared
  /// memory). Nothing checks what the result computes: retile.h's caller does.
  std::vector<Graph> retile_kernel(const std::shared_ptr<const Graph>& prefix, const std::vector<TensorId>& operands,
                                   const KernelConfig& config, const Graph& body);

  /// With the model bound: the floor of everything but the next graph-defined kernel — the
  /// prefix's kernels (launches, bytes and `floor_extra`, floor_extra_us), and one more kernel if
  /// that one cannot finish the program, moving `later_bytes` (SearchContext::lower_bound's, for
  /// the new kernel's operands). A configuration whose config_floor_us added to it is beyond the
  /// bound is cut. A full pass with a first-pass twin (gets_first_pass) passes `finishes` false:
  /// its twin closes every kernel that finishes the program, so its own closures need a later
  /// kernel. `unread_extra`: SearchContext::lower_bound's, for the same kernel.
  double model_rest_floor_us(const Graph& prefix, int64_t later_bytes, bool finishes, double floor_extra,
                             double unread_extra) const;

  /// Whether a kernel reading `operands` (tensors with expressions `exprs`) holds every program
  /// input the outputs depend on, so that it could compute them alone; and every input the
  /// outputs use outside every sum (nTrans: H, X and α) outside every sum too. A sum does not
  /// give back its summands: the index rules let a sum run only over a program contraction's
  /// index, and an input held only inside sums was contracted (nTrans: a kernel reading α and
  /// the blocks' partial sums of (H − X)² cannot compute the output, though they hold all three
  /// inputs; its block searches grew 16 million states in under a minute).
  bool can_finish(const std::vector<ExprId>& exprs, const std::vector<TensorId>& operands);
  /// Whether the input probes show that a kernel reading `operands` after `prefix` cannot compute
  /// the program's outputs (ProbeEvaluator::cannot_finish), though can_finish lets it.
  bool probes_rule_out_finish(const std::shared_ptr<const Graph>& prefix, const std::vector<TensorId>& operands);

 private:
  bool run_kernel_task(const Task& task, TaskOutput& out, const std::atomic<bool>& stop);
  /// The task prefix's floor_extra_us: the one the task carries, else computed.
  double prefix_floor_extra_us(const Task& task) const;
  /// The program-tile-values rule for a pre-defined kernel: an element-wise op (unary or binary)
  /// whose operands all hold program values (`held`, held_program_tensors) computes a whole value
  /// from whole values, as a tile-local block op does, and must compute a program value too: one
  /// with its normal form (of expression `e`), `shape` and `labels`. True when it does not.
  /// (nTrans: a kernel writing H ⊙ X, which the oracle lets through, since (H − X)² expands to
  /// terms holding it, and a second kernel from it and α grew millions of block states.)
  bool elementwise_of_program_values_is_none(OpKind kind, const std::vector<TensorId>& operands,
                                             const std::vector<std::vector<int32_t>>& held, ExprId e,
                                             const Shape& shape, const DimLabels& labels);
  bool run_block_task(const Task& task, TaskOutput& out, const std::atomic<bool>& stop);

  SearchContext& ctx_;
  std::shared_ptr<const Graph> configs_prefix_;
  std::vector<TensorId> configs_operands_;
  std::shared_ptr<const ConfigList> configs_;
  /// retile_kernel's prefix (compared by pointer: the caller keeps it alive) and its facts.
  std::shared_ptr<const Graph> retile_prefix_;
  PrefixFacts retile_facts_;
  std::unique_ptr<ProbeEvaluator> probe_evaluator_;  ///< made when first needed
  std::unordered_map<int32_t, bool> useful_cache_;
  std::unordered_map<int32_t, uint64_t> vars_cache_, free_vars_cache_;
};

/// What the program does with each dim of each operand of a graph-defined kernel (from the
/// index labels); refines the configuration lists of kernel_configs().
struct OperandIndexUse {
  /// contracted[i][d]: the program sums over the index that dim d of operand i ranges over.
  std::vector<std::vector<bool>> contracted;
  /// index[i][d]: the program index (label base) dim d of operand i ranges over; kNone for none.
  std::vector<std::vector<int16_t>> index;
  /// stack_slot[i][d]: the extent of one slot if dim d of operand i is a stack of partial
  /// results (labels.h), else 0. A stack is read one slot per iteration and never split by
  /// the grid.
  std::vector<std::vector<int64_t>> stack_slot;
  /// apart[x]: the program indices (bits) that no program tensor ranges over together with
  /// index x (ProgramIndices::apart_from), for every index x that some operand's dim ranges
  /// over; empty: every pair of indices meets somewhere.
  std::vector<uint32_t> apart;
};

/// Every graph-defined kernel configuration for the operands `inputs` of kernel graph `g` (at
/// most kMaxKernelInputs)
/// (grids, for-loop ranges, imaps and fmaps from the candidate lists of DESIGN.md §4).
/// With `use`: (1) the for-loop splits only contracted indices: a loop over an index the program
/// never sums can only concatenate its iterations, which is a grid axis run serially (same
/// traffic, fewer blocks in flight), so such configurations are dominated; (2) a small dim
/// (extent ≤ kFineSplitMaxExtent) over an index the program never sums may also be split into
/// tiles of 1, 2 or 4 (one row per block: a norm over 4096 columns of 8 rows needs that grid,
/// the paper's tile extents 8..256 would give it a single block); (3) each grid axis, and the
/// loop, splits one program index in every operand it splits: blocks that pair the b-th slice of
/// one index with the b-th slice of another only ever see the diagonal of their product; a grid
/// axis (not the loop) may split indices that no program tensor ranges over together
/// (OperandIndexUse::apart), which no product pairs: Q's and K's columns in projections of one
/// input, each block computing its slice of both;
/// (4) a stack of partial results is only read one slot per iteration (its slot count is added
/// to the loop ranges), never split by the grid.
std::vector<KernelConfig> kernel_configs(const Graph& g, const std::vector<TensorId>& inputs,
                                         const OperandIndexUse* use = nullptr);

/// A lower bound on the cost model's estimate of any graph-defined kernel with configuration
/// `c` over tensors of `g`: its launch plus the largest of the L2, busiest-SM and pieces terms of
/// the tiles its input iterators load (every iterator of a closed block graph is used; savers only
/// add to these), plus, with a loop, a barrier per iteration on the busiest SM (block_barriers
/// counts at least that many).
double config_floor_us(const Graph& g, const std::vector<TensorId>& inputs, const KernelConfig& c, const GpuSpec& gpu);

/// config_floor_us's terms: the launch, the largest of the loads' terms, the loop's barriers.
struct ConfigFloor {
  double launch_us = 0, loads_us = 0, barrier_us = 0;
  double total_us() const { return launch_us + loads_us + barrier_us; }
};
ConfigFloor config_floor(const Graph& g, const std::vector<TensorId>& inputs, const KernelConfig& c,
                         const GpuSpec& gpu);

/// Largest dim extent that kernel_configs() splits into tiles of 1, 2 or 4.
inline constexpr int64_t kFineSplitMaxExtent = 64;

}  // namespace mugraph::search_detail
