// Checkpoint files of the search (checkpoint.h). Graphs inside are μGraph JSON objects
// (docs/json-format.md); a task's configuration and the counters are plain fields.
#include "checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "json_reader.h"
#include "mugraph/validate.h"

namespace mugraph::search_detail {

namespace {

using json_reading::Json;
constexpr const char* kFormat = "mugraph-search-checkpoint";
/// 5: a prefix may be written as the one it extends plus what it appends. Version 4 (every
/// prefix whole) is read too.
constexpr int kVersion = 5;
constexpr int kOldestVersion = 4;
/// Deepest bracket nesting accepted: a μGraph needs about 15, and the checkpoint adds 3.
constexpr int kMaxNesting = 80;

Json stats_json(const SearchStats& s) {
  Json j;
  j["states"] = s.states;
  j["kernel_states"] = s.kernel_states;
  j["block_configs"] = s.block_configs;
  j["pruned"] = s.pruned;
  j["candidates"] = s.candidates;
  j["tasks"] = s.tasks;
  j["oracle_queries"] = s.oracle_queries;
  j["block_replays"] = s.block_replays;
  return j;
}

/// Reads a checkpoint document; every check throws UserError("FILE: PATH: what was expected").
class CheckpointReader : public json_reading::ValueReader {
 public:
  CheckpointReader(const std::string& filename, const Target& target) : ValueReader(filename), target_(target) {}

  CheckpointState document(const Json& j) const {
    expect_object(j, "", "expected a search checkpoint: an object with \"format\": \"" + std::string(kFormat) + "\"");
    const Json* format = optional(j, "format");
    const Json* version = optional(j, "version");
    if (!format || !format->is_string() || format->get<std::string>() != kFormat)
      fail("/format", "expected \"" + std::string(kFormat) + "\"; this is not a mugraph search checkpoint");
    if (!version || !version->is_number_integer() || version->get<int64_t>() < kOldestVersion ||
        version->get<int64_t>() > kVersion)
      fail("/version", "expected " + std::to_string(kOldestVersion) + " to " + std::to_string(kVersion) +
                           ": a checkpoint of another version of mugraph cannot be resumed; start the search anew");
    allow_keys(j, "",
               {"format", "version", "fingerprint", "elapsed_seconds", "bytes_phase_seconds", "stats", "prefixes",
                "pending", "candidates"});
    CheckpointState st;
    st.fingerprint = string(field(j, "", "fingerprint"), "/fingerprint", "a string");
    st.elapsed_seconds = seconds(field(j, "", "elapsed_seconds"), "/elapsed_seconds");
    if (const Json* b = optional(j, "bytes_phase_seconds"))
      st.bytes_phase_seconds = seconds(*b, "/bytes_phase_seconds");
    st.stats = stats(field(j, "", "stats"), "/stats");

    // Graphs from the file are checked as graphs from any file are, so that an edited or damaged
    // checkpoint is refused here rather than breaking the search that resumes from it.
    Prefixes prefixes;
    const Json& pj = array(field(j, "", "prefixes"), "/prefixes", "an array of μGraphs");
    for (size_t i = 0; i < pj.size(); ++i) {
      const std::string path = "/prefixes/" + std::to_string(i);
      std::shared_ptr<const PrefixParent> parent;
      Graph g;
      if (pj[i].is_object() && pj[i].contains("extends") && version->get<int64_t>() >= 5) {
        // The prefix it extends, which comes before it, and what it appends.
        allow_keys(pj[i], path, {"extends", "appended"});
        const int64_t base = integer(pj[i]["extends"], path + "/extends", 0, static_cast<int64_t>(i) - 1,
                                     "the index of an earlier prefix");
        parent = std::make_shared<const PrefixParent>(
            PrefixParent{prefixes.graphs[static_cast<size_t>(base)], prefixes.parents[static_cast<size_t>(base)]});
        g = json_reading::extended_from_value(*parent->prefix, field(pj[i], path, "appended"), path + "/appended",
                                              filename());
      } else {
        g = json_reading::ugraph_from_value(pj[i], path, filename());
      }
      if (auto r = validate_prefix(g, target_)) fail(path, "not a valid search state: " + r->str());
      prefixes.graphs.push_back(std::make_shared<const Graph>(std::move(g)));
      prefixes.parents.push_back(std::move(parent));
    }
    const Json& tj = array(field(j, "", "pending"), "/pending", "an array of tasks");
    for (size_t i = 0; i < tj.size(); ++i) st.pending.push_back(task(tj[i], "/pending/" + std::to_string(i), prefixes));
    const Json& cj = array(field(j, "", "candidates"), "/candidates", "an array of candidates");
    for (size_t i = 0; i < cj.size(); ++i)
      st.candidates.push_back(candidate(cj[i], "/candidates/" + std::to_string(i)));
    return st;
  }

 private:
  /// The prefixes read so far, and what each extends (null: written whole).
  struct Prefixes {
    std::vector<std::shared_ptr<const Graph>> graphs;
    std::vector<std::shared_ptr<const PrefixParent>> parents;
  };

  double seconds(const Json& v, const std::string& path) const {
    return number(v, path, 0, std::numeric_limits<double>::max(), "a number of seconds (0 or more)");
  }

  double floor_us(const Json& v, const std::string& path) const {
    return number(v, path, 0, std::numeric_limits<double>::max(), "a task's floor in microseconds (0 or more)");
  }

  int64_t count(const Json& v, const std::string& path) const {
    return integer(v, path, 0, std::numeric_limits<int64_t>::max(), "a count (0 or more)");
  }

  SearchStats stats(const Json& j, const std::string& path) const {
    expect_object(j, path, "expected the search's counters: an object");
    allow_keys(j, path,
               {"states", "kernel_states", "block_configs", "pruned", "candidates", "tasks", "oracle_queries",
                "block_replays"});
    SearchStats s;
    s.states = count(field(j, path, "states"), path + "/states");
    s.kernel_states = count(field(j, path, "kernel_states"), path + "/kernel_states");
    s.block_configs = count(field(j, path, "block_configs"), path + "/block_configs");
    s.candidates = count(field(j, path, "candidates"), path + "/candidates");
    s.tasks = count(field(j, path, "tasks"), path + "/tasks");
    s.oracle_queries = count(field(j, path, "oracle_queries"), path + "/oracle_queries");
    // Optional: checkpoints written before the block-search cache have none.
    if (j.contains("block_replays")) s.block_replays = count(j["block_replays"], path + "/block_replays");
    const Json& pruned = field(j, path, "pruned");
    expect_object(pruned, path + "/pruned", "expected an object of counts by reason");
    for (const auto& [reason, n] : pruned.items()) s.pruned[reason] = count(n, path + "/pruned/" + reason);
    return s;
  }

  std::vector<int32_t> task_path(const Json& v, const std::string& path) const {
    array(v, path, "a task path: an array of child indices");
    std::vector<int32_t> out;
    for (size_t i = 0; i < v.size(); ++i)
      out.push_back(static_cast<int32_t>(integer(v[i], path + "/" + std::to_string(i), 0,
                                                 std::numeric_limits<int32_t>::max(), "a child index (0 or more)")));
    return out;
  }

  Task task(const Json& v, const std::string& path, const Prefixes& prefixes) const {
    expect_object(v, path, "expected a task: an object with \"path\" and \"prefix\"");
    allow_keys(v, path, {"path", "prefix", "operands", "chunk", "finish_only", "floor_us"});
    Task t;
    t.path = task_path(field(v, path, "path"), path + "/path");
    if (const Json* f = optional(v, "floor_us")) t.floor_us = floor_us(*f, path + "/floor_us");
    const int64_t index = integer(field(v, path, "prefix"), path + "/prefix", 0, std::numeric_limits<int64_t>::max(),
                                  "a prefix index (0 or more)");
    if (static_cast<uint64_t>(index) >= prefixes.graphs.size())
      fail(path + "/prefix", "prefix " + std::to_string(index) + " does not exist; the checkpoint has " +
                                 std::to_string(prefixes.graphs.size()));
    t.prefix = prefixes.graphs[static_cast<size_t>(index)];
    t.parent = prefixes.parents[static_cast<size_t>(index)];
    if (const Json* chunk = optional(v, "chunk")) {
      // A block task: the operands of the custom kernel it builds, in its prefix.
      t.chunk = static_cast<int32_t>(
          integer(*chunk, path + "/chunk", 0, std::numeric_limits<int32_t>::max(), "a chunk index (0 or more)"));
      t.finish_only = boolean(field(v, path, "finish_only"), path + "/finish_only");
      const Json& ops = array(field(v, path, "operands"), path + "/operands", "an array of tensor ids");
      const int64_t num_tensors = static_cast<int64_t>(t.prefix->tensors.size());
      for (size_t i = 0; i < ops.size(); ++i)
        t.operands.push_back(TensorId(static_cast<int32_t>(integer(ops[i], path + "/operands/" + std::to_string(i), 0,
                                                                   num_tensors - 1, "a tensor of the task's prefix"))));
    } else if (optional(v, "operands") || optional(v, "finish_only")) {
      fail(path, "\"operands\" and \"finish_only\" belong to block tasks, which have a \"chunk\"");
    }
    return t;
  }

  FoundCandidate candidate(const Json& v, const std::string& path) const {
    expect_object(v, path, "expected a candidate: an object with \"path\" and \"graph\"");
    allow_keys(v, path, {"path", "found_seconds", "floor_us", "graph"});
    FoundCandidate c;
    c.path = task_path(field(v, path, "path"), path + "/path");
    if (const Json* f = optional(v, "floor_us")) c.task_order_us = floor_us(*f, path + "/floor_us");
    if (const Json* s = optional(v, "found_seconds")) c.found_seconds = seconds(*s, path + "/found_seconds");
    c.graph = json_reading::ugraph_from_value(field(v, path, "graph"), path + "/graph", filename());
    if (auto r = validate(c.graph, target_))
      fail(path + "/graph", "not a valid μGraph for " + std::string(target_.name) + ": " + r->str());
    c.metrics = candidate_metrics(c.graph, target_);
    c.estimated_us = rank_estimate_us(c.graph, gpu_spec(target_.name));
    return c;
  }

  const Target& target_;
};

}  // namespace

std::string search_fingerprint(const Graph& program, const SearchOptions& o) {
  // Block tasks name their configurations by position in a list (Task::chunk): a binary that
  // builds other lists must not resume another's search, or chunks would name other
  // configurations and an "exhausted" search would have skipped some. The revision counts the
  // changes to the lists; 2: rule (3)'s exception for indices apart (kernel_configs). Before it
  // fingerprints had no revision, and those checkpoints are refused like any foreign one.
  constexpr int kConfigListRevision = 2;
  std::ostringstream s;
  s << std::hex << hash_value(program) << std::dec << " kernel_ops=" << o.max_kernel_ops
    << " block_ops=" << o.max_block_ops << " graph_kernels=" << o.max_graph_kernels
    << " kernel_inputs=" << resolved_options(o, program).max_kernel_inputs << " abstract_pruning=" << o.abstract_pruning
    << " program_tile_values=" << o.program_tile_values << " target=" << o.target.name
    << " cost_bound=" << cost_bound_name(o.cost_bound) << " config_lists=" << kConfigListRevision;
  // A tighter ratio drops pending tasks that a looser one would run: resuming under another
  // would lose them.
  if (o.cost_bound != CostBound::bytes) s << " bound_ratio=" << o.model_bound_ratio;
  // The probes only cut kernels that cannot finish the program: a checkpoint written without
  // them resumes with them. Written when off, so that the fingerprints of searches before the
  // option stay what they were.
  if (!o.input_probes) s << " input_probes=0";
  return s.str();
}

namespace {

/// The checkpoint file being written: text is gathered in a buffer of about a megabyte and
/// appended to the file, so that a frontier of hundreds of megabytes is never one string (its
/// growth, copies and fresh pages were a third of a write's time).
class CheckpointFile {
 public:
  explicit CheckpointFile(std::string path) : path_(std::move(path)), f_(std::fopen(path_.c_str(), "wb")) {
    if (!f_) throw UserError(path_ + ": cannot write the checkpoint");
    buf_.reserve(kFlushBytes + 4096);
  }
  ~CheckpointFile() {
    if (f_) std::fclose(f_);
  }
  CheckpointFile(const CheckpointFile&) = delete;
  CheckpointFile& operator=(const CheckpointFile&) = delete;

  CheckpointFile& operator<<(std::string_view text) {
    buf_.append(text);
    if (buf_.size() >= kFlushBytes) flush();
    return *this;
  }
  CheckpointFile& operator<<(char c) {
    buf_.push_back(c);
    return *this;
  }
  /// An integer as the JSON writer prints it.
  CheckpointFile& integer(int64_t v) {
    char digits[24];
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, v);
    MUGRAPH_CHECK(ec == std::errc()) << "checkpoint: an integer did not format";
    return *this << std::string_view(digits, static_cast<size_t>(end - digits));
  }
  /// A JSON array of integers.
  template <typename Ints>
  CheckpointFile& integers(const Ints& values) {
    *this << '[';
    bool first = true;
    for (auto v : values) {
      if (!first) *this << ',';
      first = false;
      integer(static_cast<int64_t>(v));
    }
    return *this << ']';
  }
  /// Writes what is left and closes the file.
  void close() {
    flush();
    const bool ok = std::fclose(f_) == 0;
    f_ = nullptr;
    if (!ok) throw UserError(path_ + ": cannot write the checkpoint");
  }
  /// Closes and removes the unfinished file (a write given up).
  void discard() {
    std::fclose(f_);
    f_ = nullptr;
    std::remove(path_.c_str());
  }

 private:
  static constexpr size_t kFlushBytes = size_t{1} << 20;
  void flush() {
    if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size())
      throw UserError(path_ + ": cannot write the checkpoint");
    buf_.clear();
  }
  std::string path_;
  std::FILE* f_;
  std::string buf_;
};

}  // namespace

bool CheckpointWriter::write(const std::string& path, const CheckpointState& st, const std::function<bool()>& abandon) {
  ++writes_;
  // The document is written as text around the kept graph texts, byte for byte the dump of the
  // one Json object this function used to build (Checkpoint.TheWriterWritesTheJsonDocumentsDump).
  auto text_of = [&](auto& kept, const auto& key, const Graph& graph) -> const std::string& {
    auto [it, fresh] = kept.try_emplace(key);
    if (fresh) it->second.json = json_reading::ugraph_value(graph).dump();
    it->second.write = writes_;
    return it->second.json;
  };
  Json head;
  head["format"] = kFormat;
  head["version"] = kVersion;
  head["fingerprint"] = st.fingerprint;
  head["elapsed_seconds"] = st.elapsed_seconds;
  if (st.bytes_phase_seconds >= 0) head["bytes_phase_seconds"] = st.bytes_phase_seconds;
  head["stats"] = stats_json(st.stats);
  std::string head_text = head.dump();
  head_text.pop_back();  // the closing brace: the arrays follow

  const std::string tmp = path + ".tmp";
  CheckpointFile out(tmp);
  out << head_text;
  // Sibling tasks share their prefix: each distinct prefix is written once, in the order of the
  // first task that holds it, after the prefix it extends (when known), as that one's index and
  // what it appends.
  out << ",\"prefixes\":[";
  std::unordered_map<const Graph*, size_t> prefix_index;
  auto index_of = [&](auto& self, const std::shared_ptr<const Graph>& prefix, const PrefixParent* parent) -> size_t {
    if (auto it = prefix_index.find(prefix.get()); it != prefix_index.end()) return it->second;
    const Graph* base_graph = parent ? parent->prefix.get() : nullptr;
    const size_t base = parent ? self(self, parent->prefix, parent->parent.get()) : 0;
    const size_t index = prefix_index.size();
    prefix_index.emplace(prefix.get(), index);
    if (index > 0) out << ',';
    auto [it, fresh] = prefixes_.try_emplace(prefix);
    Text& text = it->second;
    if (fresh || text.base != base_graph) {
      text.json = base_graph ? json_reading::extension_value(*prefix, *base_graph).dump()
                             : json_reading::ugraph_value(*prefix).dump();
      text.base = base_graph;
    }
    text.write = writes_;
    if (base_graph) {
      out << "{\"extends\":";
      out.integer(static_cast<int64_t>(base)) << ",\"appended\":" << text.json << '}';
    } else {
      out << text.json;
    }
    return index;
  };
  size_t done = 0;
  for (const Task& t : st.pending) {
    if (abandon && ++done % 4096 == 0 && abandon()) {
      out.discard();
      return false;
    }
    index_of(index_of, t.prefix, t.parent.get());
  }
  out << "],\"pending\":[";
  for (size_t i = 0; i < st.pending.size(); ++i) {
    const Task& t = st.pending[i];
    if (i > 0) out << ',';
    out << "{\"path\":";
    out.integers(t.path) << ",\"prefix\":";
    out.integer(static_cast<int64_t>(prefix_index.at(t.prefix.get())));
    if (t.floor_us > 0) out << ",\"floor_us\":" << Json(t.floor_us).dump();
    if (t.is_block()) {
      out << ",\"operands\":[";
      for (size_t k = 0; k < t.operands.size(); ++k) {
        if (k > 0) out << ',';
        out.integer(t.operands[k].value);
      }
      out << "],\"chunk\":";
      out.integer(t.chunk) << ",\"finish_only\":" << (t.finish_only ? "true" : "false");
    }
    out << '}';
  }
  out << "],\"candidates\":[";
  for (size_t i = 0; i < st.candidates.size(); ++i) {
    const FoundCandidate& c = st.candidates[i];
    if (i > 0) out << ',';
    out << "{\"path\":";
    out.integers(c.path) << ",\"found_seconds\":" << Json(c.found_seconds).dump();
    if (c.task_order_us > 0) out << ",\"floor_us\":" << Json(c.task_order_us).dump();
    out << ",\"graph\":" << text_of(candidates_, c.graph, c.graph) << '}';
  }
  out << "]}\n";
  out.close();
  std::erase_if(prefixes_, [&](const auto& e) { return e.second.write != writes_; });
  std::erase_if(candidates_, [&](const auto& e) { return e.second.write != writes_; });
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw UserError(path + ": cannot replace the checkpoint");
  return true;
}

void write_checkpoint(const std::string& path, const CheckpointState& st) { CheckpointWriter().write(path, st); }

CheckpointState read_checkpoint(const std::string& path, const Target& target) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UserError(path + ": cannot read the checkpoint");
  std::stringstream buf;
  buf << f.rdbuf();
  const Json doc = json_reading::parse_document(buf.str(), path, kMaxNesting);
  try {
    return CheckpointReader(path, target).document(doc);
  } catch (const Json::exception& e) {
    // Every access is checked first; this is a safety net that keeps the promise of UserError.
    throw UserError(std::string("malformed search checkpoint: ") + e.what(), SourceLoc{path});
  }
}

namespace {

/// The input ops of `g`, in op order.
std::vector<const Op*> input_ops(const Graph& g) {
  std::vector<const Op*> r;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::input) r.push_back(&op);
  return r;
}

/// Why `g`'s inputs (and, for a candidate, outputs) are not those of `program`, whose input ops
/// are `want`; empty if they are.
std::string program_mismatch(const Graph& g, const Graph& program, const std::vector<const Op*>& want, bool candidate) {
  if (g.level != Level::kernel) return "expected a kernel graph";
  const std::vector<const Op*> have = input_ops(g);
  for (size_t i = 0; i < std::max(want.size(), have.size()); ++i) {
    if (i >= have.size()) return "the program's input " + want[i]->attrs.name + " is missing";
    if (i >= want.size()) return "input " + have[i]->attrs.name + " is not an input of the program";
    const Op &w = *want[i], &h = *have[i];
    if (h.attrs.name != w.attrs.name)
      return "input " + std::to_string(i) + " is " + h.attrs.name + " but the program's is " + w.attrs.name;
    const TensorType &wt = program.type(w.outputs[0]), &ht = g.type(h.outputs[0]);
    if (!(ht == wt)) return "input " + h.attrs.name + " is " + ht.str() + " but the program's is " + wt.str();
  }
  if (!candidate) return "";
  if (g.outputs.size() != program.outputs.size())
    return "it has " + std::to_string(g.outputs.size()) + " outputs but the program has " +
           std::to_string(program.outputs.size());
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const TensorType &wt = program.type(program.outputs[i]), &ht = g.type(g.outputs[i]);
    if (!(ht == wt)) return "output " + std::to_string(i) + " is " + ht.str() + " but the program's is " + wt.str();
  }
  return "";
}

}  // namespace

void check_checkpoint_program(const CheckpointState& st, const Graph& program, const std::string& path) {
  auto fail = [&](const std::string& where, const std::string& why) {
    throw UserError(where + ": not a graph of the program being searched: " + why, SourceLoc{path});
  };
  const std::vector<const Op*> want = input_ops(program);
  // Sibling tasks share their prefix: each is checked once.
  std::unordered_set<const Graph*> checked;
  for (size_t i = 0; i < st.pending.size(); ++i) {
    const Graph* prefix = st.pending[i].prefix.get();
    if (!checked.insert(prefix).second) continue;
    if (std::string why = program_mismatch(*prefix, program, want, false); !why.empty())
      fail("/pending/" + std::to_string(i) + ": its prefix", why);
  }
  for (size_t i = 0; i < st.candidates.size(); ++i)
    if (std::string why = program_mismatch(st.candidates[i].graph, program, want, true); !why.empty())
      fail("/candidates/" + std::to_string(i) + "/graph", why);
}

}  // namespace mugraph::search_detail
