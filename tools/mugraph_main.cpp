// The mugraph command-line tool. It only parses arguments and calls the libraries; every
// subcommand is a function below. Exit codes: 0 success, 1 user error (message on stderr),
// 2 usage error, 3 internal error (a bug in mugraph; please report it). `verify` differs: 0
// equivalent, 1 not equivalent, 2 cannot compare (including files that do not load), 3 internal.
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <new>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "mugraph/bench.h"
#include "mugraph/codegen.h"
#include "mugraph/cost_model.h"
#include "mugraph/error.h"
#include "mugraph/interp.h"
#include "mugraph/json.h"
#include "mugraph/loader.h"
#include "mugraph/measured_selection.h"
#include "mugraph/printer.h"
#include "mugraph/search.h"
#include "mugraph/validate.h"
#include "mugraph/verify.h"

namespace mugraph {
namespace {

constexpr int kExitUser = 1;
constexpr int kExitInternal = 3;

/// Loads a program or μGraph file and checks it is a valid μGraph for the target.
Graph load_valid(const std::string& path, const Target& target) {
  Graph g = load_graph_file(path);
  if (auto r = validate(g, target))
    throw UserError("not a valid μGraph for " + std::string(target.name) + ": " + r->str(), SourceLoc{path});
  return g;
}

int cmd_codegen(const std::string& path, const std::string& arch, const std::string& out_dir,
                const CodegenOptions& options) {
  const CudaTarget& target = find_cuda_target(arch);
  Graph g = load_valid(path, *target.limits);
  GeneratedCode code = generate_cuda(g, target, options);
  write_generated_code(code, out_dir);
  std::cout << "codegen " << path << " for " << target.arch << ": " << code.kernels << " kernel launch"
            << (code.kernels == 1 ? "" : "es");
  if (code.blas_calls > 0) std::cout << ", " << code.blas_calls << " cuBLAS call" << (code.blas_calls == 1 ? "" : "s");
  std::cout << ", " << code.workspace_bytes << " bytes of workspace\n"
            << "  wrote " << out_dir << "/ugraph.cu, ugraph.h, CMakeLists.txt, manifest.json, mugraph_device/\n";
  return 0;
}

int cmd_check(const std::string& path, const std::string& target_name) {
  Target target = require_target(target_name);
  Graph g = load_valid(path, target);
  std::cout << describe(g);
  std::cout << "valid for " << target.name << " (" << target.arch << "): " << count_ops(g) << " ops, "
            << g.bodies.size() << (g.bodies.size() == 1 ? " graph-defined kernel\n" : " graph-defined kernels\n");
  const CostEstimate cost = estimate_cost(g, gpu_spec(target.name));
  char total[96];
  std::snprintf(total, sizeof total, "cost model on %s: %.2f us\n", std::string(target.name).c_str(), cost.total_us);
  std::cout << total << cost.str();
  return 0;
}

/// Splits "NAME=PATH".
std::pair<std::string, std::string> split_assignment(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UserError("expects NAME=PATH.npy, got '" + text + "'");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

/// The inputs of g: NAME=PATH.npy arguments, the others drawn from a normal distribution of
/// standard deviation `scale` by seed.
std::vector<HostTensor> load_inputs(const Graph& g, const std::vector<std::string>& input_args, uint64_t seed,
                                    double scale = 1.0) {
  std::vector<HostTensor> inputs = random_inputs_scaled(g, seed, scale, kDefaultMaxHostBytes, /*threads=*/0);
  // Map input names to their positions among the input ops.
  std::map<std::string, size_t> position;
  std::string names;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::input) continue;
    position[op.attrs.name] = position.size();
    names += (names.empty() ? "" : ", ") + op.attrs.name;
  }
  std::map<std::string, bool> given;
  for (const std::string& arg : input_args) {
    auto [name, file] = split_assignment(arg);
    auto it = position.find(name);
    if (it == position.end())
      throw UserError("--input " + name + ": the program has no input named '" + name + "'; its inputs are " + names);
    if (given[name]) throw UserError("--input " + name + " is given twice");
    given[name] = true;
    HostTensor t = read_npy(file);
    HostTensor& slot = inputs[it->second];
    if (t.type.shape != slot.type.shape)
      throw UserError("--input " + name + ": '" + file + "' holds an array of shape " + t.type.shape.str() +
                      " but input " + name + " has shape " + slot.type.shape.str());
    // Values are converted to the input's dtype (rounded to nearest even), as a cast would.
    slot.data = std::move(t.data);
    round_tensor(slot);
  }
  return inputs;
}

/// Writes each output as DIR/NAME.npy; returns one "NAME TYPE -> FILE" line per output.
std::vector<std::string> write_outputs(const Graph& g, const std::vector<HostTensor>& outputs,
                                       const std::string& out_dir) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw UserError("cannot create output directory '" + out_dir + "': " + ec.message());
  std::vector<std::string> lines;
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string file = (std::filesystem::path(out_dir) / (g.output_names[i] + ".npy")).string();
    write_npy(file, outputs[i]);
    lines.push_back(g.output_names[i] + " " + outputs[i].type.str() + " -> " + file);
  }
  return lines;
}

int cmd_run(const std::string& path, const std::vector<std::string>& input_args, uint64_t seed, double input_scale,
            const std::string& out_dir, int threads) {
  Graph g = load_valid(path, default_target());
  std::vector<HostTensor> inputs = load_inputs(g, input_args, seed, input_scale);
  InterpOptions options;
  options.threads = threads;
  std::vector<HostTensor> outputs = run_float(g, inputs, options);
  for (const std::string& line : write_outputs(g, outputs, out_dir)) std::cout << line << "\n";
  return 0;
}

/// mugraph bench's text report of one μGraph: the checks, the times, the build and what was written.
void print_bench_result(const std::string& path, const BenchResult& r, const BenchOptions& options,
                        const std::vector<std::string>& written) {
  const CudaTarget& target = find_cuda_target(options.target);
  std::printf("bench %s on %s (%s%s)\n", path.c_str(), r.device.c_str(), std::string(target.arch).c_str(),
              r.cached ? ", cached build" : "");
  for (const BenchOutputCheck& c : r.outputs) {
    const double rel = c.max_abs_reference > 0 ? c.max_abs_error / c.max_abs_reference : c.max_abs_error;
    std::printf("  check %s: max |error| %.3g of max |reference| %.3g (%.3g relative, tolerance %.3g)", c.name.c_str(),
                c.max_abs_error, c.max_abs_reference, rel, options.tolerance);
    if (c.not_finite) std::printf(", %lld elements not finite", static_cast<long long>(c.not_finite));
    if (c.reference_not_finite)
      std::printf(", %lld elements of the reference not finite", static_cast<long long>(c.reference_not_finite));
    std::printf(": %s\n", c.ok ? "OK" : "FAILED");
  }
  for (const BenchOutputCheck& c : r.outputs)
    if (c.reference_not_finite) {
      std::printf(
          "  the interpreter's own %s is not finite: these inputs overflow the program in its dtypes, so nothing "
          "could be checked there; draw smaller ones (--input-scale) or give inputs that suit it (--input)\n",
          c.name.c_str());
      break;
    }
  std::printf("  time: median %.2f us, min %.2f us over %d runs (inputs rotated over %d copies)%s\n", r.median_us,
              r.min_us, r.runs, r.input_copies, options.emulate ? " -- host emulation, not a GPU time" : "");
  if (r.graph_median_us)
    std::printf("  replayed from CUDA graphs: median %.2f us, min %.2f us\n", *r.graph_median_us, *r.graph_min_us);
  std::printf("  build: %s\n", r.build_dir.c_str());
  for (const std::string& line : written) std::printf("  output %s\n", line.c_str());
}

/// The μGraphs of a batch (mugraph bench with several files), loaded and checked to take the same
/// inputs by name and type, in order: one set of inputs must suit them all.
std::vector<Graph> load_batch(const std::vector<std::string>& paths, const CudaTarget& target) {
  std::vector<Graph> graphs;
  for (const std::string& path : paths) graphs.push_back(load_valid(path, *target.limits));
  const auto signature = [](const Graph& g) {
    std::vector<std::pair<std::string, TensorType>> sig;
    for (const Op& op : g.ops)
      if (op.kind == OpKind::input) sig.emplace_back(op.attrs.name, g.type(op.outputs.at(0)));
    return sig;
  };
  for (size_t i = 1; i < graphs.size(); ++i) {
    if (signature(graphs[i]) != signature(graphs.front()))
      throw UserError(paths[i] + ": its inputs are not those of " + paths.front() +
                      " (mugraph bench with several files times μGraphs of one program, on the same inputs)");
  }
  return graphs;
}

/// mugraph bench A.json B.json ... --build-only: what the batch would build, without a GPU.
int cmd_bench_build_many(const std::vector<std::string>& paths, const BenchOptions& options, bool json) {
  const CudaTarget& target = find_cuda_target(options.target);
  const BuiltBatch built = build_bench_batch(load_batch(paths, target), options);
  if (!json)
    std::printf("built the batch harness for %s%s: %s\n", std::string(target.arch).c_str(),
                built.harness.cached ? " (cached)" : "", built.harness.executable.c_str());
  bool all_built = true;
  for (size_t i = 0; i < paths.size(); ++i) {
    const BuiltBatch::Library& lib = built.libraries[i];
    all_built = all_built && lib.error.empty();
    if (json) {
      nlohmann::ordered_json j;
      j["file"] = paths[i];
      j["target"] = options.target;
      j["emulated"] = options.emulate;
      j["harness"] = built.harness.executable;
      if (lib.error.empty()) {
        j["library"] = lib.path;
        j["cached"] = lib.cached;
      } else {
        j["error"] = lib.error;
      }
      std::printf("%s\n", j.dump().c_str());
    } else if (lib.error.empty()) {
      std::printf("built %s%s: %s\n", paths[i].c_str(), lib.cached ? " (cached)" : "", lib.path.c_str());
    } else {
      std::printf("bench %s: error: %s\n", paths[i].c_str(), lib.error.c_str());
    }
  }
  return all_built ? 0 : kExitUser;
}

/// mugraph bench with several μGraphs of one program: one batch (bench_ugraphs), on the inputs
/// the first one's program takes; --out DIR writes each one's outputs to DIR/N/ (N its position).
int cmd_bench_many(const std::vector<std::string>& paths, const std::vector<std::string>& input_args, uint64_t seed,
                   double input_scale, const BenchOptions& options, const std::string& out_dir, bool json) {
  const CudaTarget& target = find_cuda_target(options.target);
  const std::vector<Graph> graphs = load_batch(paths, target);
  const std::vector<HostTensor> inputs = load_inputs(graphs.front(), input_args, seed, input_scale);
  const std::vector<BatchBenchResult> results = bench_ugraphs(graphs, inputs, options);
  bool all_ok = true;
  for (size_t i = 0; i < results.size(); ++i) {
    const BatchBenchResult& b = results[i];
    all_ok = all_ok && b.result && b.result->ok;
    if (!b.result) {
      if (json) {
        nlohmann::ordered_json j;
        j["file"] = paths[i];
        j["error"] = b.error;
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::printf("bench %s: error: %s\n", paths[i].c_str(), b.error.c_str());
      }
      continue;
    }
    std::vector<std::string> written;
    if (!out_dir.empty())
      written =
          write_outputs(graphs[i], b.result->values, (std::filesystem::path(out_dir) / std::to_string(i)).string());
    if (json) {
      nlohmann::ordered_json j = nlohmann::ordered_json::parse(bench_result_json(*b.result, options));
      j["file"] = paths[i];
      if (!b.batch_error.empty()) j["batch_error"] = b.batch_error;
      std::printf("%s\n", j.dump().c_str());
    } else {
      print_bench_result(paths[i], *b.result, options, written);
      if (!b.batch_error.empty()) std::printf("  run alone: the batch could not run it: %s\n", b.batch_error.c_str());
    }
  }
  return all_ok ? 0 : kExitUser;
}

int cmd_bench(const std::string& path, const std::vector<std::string>& input_args, uint64_t seed, double input_scale,
              const BenchOptions& options, const std::string& out_dir, bool json, bool build_only) {
  const CudaTarget& target = find_cuda_target(options.target);
  Graph g = load_valid(path, *target.limits);
  if (build_only) {
    const BuiltHarness h = build_bench_harness(g, options);
    if (json) {
      nlohmann::ordered_json j;
      j["target"] = options.target;
      j["emulated"] = options.emulate;
      j["cached"] = h.cached;
      j["build_dir"] = h.build_dir;
      j["harness"] = h.executable;
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("built %s for %s%s: %s\n", path.c_str(), std::string(target.arch).c_str(),
                  h.cached ? " (cached)" : "", h.executable.c_str());
    }
    return 0;
  }
  std::vector<HostTensor> inputs = load_inputs(g, input_args, seed, input_scale);
  BenchResult r = bench_ugraph(g, inputs, options);
  // Written before the verdict, so that a failed check leaves the outputs to look at.
  std::vector<std::string> written;
  if (!out_dir.empty()) written = write_outputs(g, r.values, out_dir);
  if (json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(bench_result_json(r, options));
    j["file"] = path;
    std::printf("%s\n", j.dump().c_str());
    return r.ok ? 0 : kExitUser;
  }
  print_bench_result(path, r, options, written);
  return r.ok ? 0 : kExitUser;
}

int cmd_export(const std::string& path, const std::string& out_path) {
  Graph g = load_valid(path, default_target());
  std::string text = to_json(g);
  FILE* f = std::fopen(out_path.c_str(), "wb");
  if (!f) throw UserError("cannot write '" + out_path + "': " + std::strerror(errno));
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) throw UserError("cannot write '" + out_path + "': " + std::strerror(errno));
  std::cout << "wrote " << out_path << "\n";
  return 0;
}

constexpr int kExitNotEquivalent = 1;
constexpr int kExitIncomparable = 2;

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string lax_summary(const LaxReport& r) {
  std::string s = r.lax ? "Lax" : "not Lax (" + r.violation + ")";
  s += ", degree <= " + sci(r.degree) + ", terms <= " + sci(r.exp_terms) +
       ", exps on a path <= " + std::to_string(r.max_exps_on_path);
  if (r.uses_sqrt) s += ", uses sqrt";
  return s;
}

/// `mugraph verify`: exit 0 equivalent, 1 not equivalent, 2 cannot compare.
int cmd_verify(const std::string& path_a, const std::string& path_b, const VerifyOptions& options) {
  Graph a, b;
  try {
    a = load_valid(path_a, default_target());
    b = load_valid(path_b, default_target());
  } catch (const UserError& e) {
    std::cerr << "mugraph: " << e.what() << "\nCANNOT COMPARE: a file did not load\n";
    return kExitIncomparable;
  }
  VerifyResult r;
  try {
    r = verify(a, b, options);
  } catch (const UserError& e) {  // e.g. a graph too large for the host memory limit
    std::cerr << "mugraph: " << e.what() << "\nCANNOT COMPARE\n";
    return kExitIncomparable;
  } catch (const std::bad_alloc&) {
    std::cerr << "mugraph: error: out of memory\nCANNOT COMPARE\n";
    return kExitIncomparable;
  }
  if (r.verdict == Verdict::incomparable) {
    std::cout << "CANNOT COMPARE\n  reason:          " << r.reason << "\n";
    return kExitIncomparable;
  }
  // A finite-field disagreement is certain; the bound lines only matter when every test agreed.
  const bool float_failed = options.float_check && r.verdict == Verdict::not_equivalent &&
                            !(r.float_max_rel_error <= options.float_tolerance);
  const bool tests_agreed = r.verdict == Verdict::equivalent || float_failed;
  std::cout << (r.verdict == Verdict::equivalent ? "EQUIVALENT\n" : "NOT EQUIVALENT\n");
  if (r.verdict == Verdict::not_equivalent) std::cout << "  reason:          " << r.reason << "\n";
  std::cout << "  tests run:       " << r.tests_run << " finite-field tests agreed (" << r.redraws
            << " redrawn after a zero divisor)\n";
  if (tests_agreed) {
    std::cout << "  per-test bound:  " << sci(r.per_test_bound) << (r.per_test_bound >= 1 ? " (vacuous)" : "") << "\n";
    std::cout << "  bound reached:   " << sci(r.bound) << " (delta " << sci(options.delta) << ")\n";
    std::cout << "  guarantee:       " << (r.guarantee ? "yes" : "no") << "\n";
    if (r.opaque_functions)
      std::cout << "  functions:       exp, silu, relu, gelu and sqrt tested as unknown functions (the same formula in "
                   "them)\n";
    if (!r.guarantee_note.empty()) std::cout << "  note:            " << r.guarantee_note << "\n";
  }
  std::cout << "  reference:       " << lax_summary(r.reference_lax) << "\n";
  std::cout << "  candidate:       " << lax_summary(r.candidate_lax) << "\n";
  std::cout << "  seed:            " << r.seed << " (replay with --seed " << r.seed << ")\n";
  std::cout << "  float error:     "
            << (tests_agreed && options.float_check
                    ? sci(r.float_max_rel_error) + " (tolerance " + sci(options.float_tolerance) + ", f32)"
                    : std::string(options.float_check ? "not run (a finite-field test disagreed)"
                                                      : "not run (--no-float-check)"))
            << "\n";
  return r.verdict == Verdict::equivalent ? 0 : kExitNotEquivalent;
}

// --- search ----------------------------------------------------------------------------------

SearchControl* g_search_control = nullptr;

extern "C" void on_stop_signal(int) {
  if (g_search_control) g_search_control->stop.store(true);
}

std::string human_bytes(int64_t b) {
  char buf[32];
  if (b >= (int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw UserError(path.string() + ": cannot write: " + std::strerror(errno));
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok &= std::fclose(f) == 0;
  if (!ok) throw UserError(path.string() + ": cannot write");
}

/// How `search --measure` times the best candidates.
struct MeasureRequest {
  int count = 0;         ///< candidates to time (0: none)
  bool emulate = false;  ///< check them under the host emulation instead (times mean nothing)
};

/// Measured selection after a search (measured_selection.h): the report's "measured" entry, and
/// the rank that wins (-1 where nothing could be measured, with the reason in the entry).
std::pair<nlohmann::ordered_json, int> measure_top(const SearchResult& r, const SearchOptions& options,
                                                   const MeasureRequest& request, std::ostream& summary) {
  std::vector<std::pair<Graph, double>> candidates;
  for (size_t i = 0; i < r.top.size() && static_cast<int>(i) < request.count; ++i)
    candidates.emplace_back(r.top[i].graph, r.top[i].cost.total_us);
  BenchOptions bench;
  bench.target = options.target.name == "a100" ? "sm_80" : "sm_90a";
  bench.emulate = request.emulate;
  if (request.emulate) {
    bench.warmup = 0;
    bench.repeats = 1;
  }
  try {
    const MeasuredSelection m = measure_candidates(candidates, bench);
    summary << "  measured on " << m.device << (m.emulated ? " (code checked; host times say nothing)" : "") << ":\n";
    for (const MeasuredCandidate& c : m.candidates) {
      char line[160];
      std::snprintf(line, sizeof line, "  %4d  model %9.2f us  measured %9.2f us  %s\n", c.rank, c.predicted_us,
                    c.measured_us, c.ok ? "OK" : c.error.c_str());
      summary << line;
    }
    if (!std::isnan(m.spearman))
      summary << "  Spearman rank correlation, model against measured: " << m.spearman << "\n";
    return {nlohmann::ordered_json::parse(measured_selection_json(m)), m.chosen_rank};
  } catch (const UserError& e) {
    std::cerr << "mugraph: warning: measured selection skipped: " << e.what() << "\n";
    nlohmann::ordered_json j;
    j["error"] = e.what();
    return {j, -1};
  }
}

int cmd_search(const std::string& path, const std::string& out_dir, SearchOptions options, bool quiet,
               const MeasureRequest& measure) {
  Graph program = load_graph_file(path);
  if (auto r = validate(program, options.target)) throw UserError("not a valid program: " + r->str(), SourceLoc{path});
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec || !std::filesystem::is_directory(out_dir))
    throw UserError(out_dir + ": cannot use as the output directory" +
                    (ec ? ": " + ec.message() : std::string(" (a file is in the way)")));
  options.checkpoint_path = (std::filesystem::path(out_dir) / "checkpoint.json").string();
  const bool tty = isatty(STDERR_FILENO) != 0;
  if (!quiet)
    options.on_progress = [tty](const SearchProgress& p) {
      char best[96] = "-";
      if (p.best_device_bytes >= 0)
        std::snprintf(best, sizeof best, "%.2f us (model), %s, %d kernel(s)", p.best_estimated_us,
                      human_bytes(p.best_device_bytes).c_str(), p.best_kernels);
      // The model bound's floor under what is not searched yet: the best is at most best / floor
      // times the fastest the limits allow.
      char floor[64] = "";
      if (p.unsearched_floor_us > 0)
        std::snprintf(floor, sizeof floor, "  not searched >= %.2f us", p.unsearched_floor_us);
      char line[384];
      std::snprintf(line, sizeof line,
                    "[%6.1fs] states %lld  pruned %lld  candidates %lld (%lld verified)  tasks %lld done, %lld pending "
                    " best %s%s",
                    p.elapsed_seconds, static_cast<long long>(p.states), static_cast<long long>(p.pruned),
                    static_cast<long long>(p.candidates), static_cast<long long>(p.verified),
                    static_cast<long long>(p.tasks_done), static_cast<long long>(p.tasks_pending), best, floor);
      std::cerr << (tty ? "\r\033[K" : "") << line << (tty ? "" : "\n") << std::flush;
    };
  SearchControl control;
  g_search_control = &control;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  SearchResult r = search(program, options, &control);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  g_search_control = nullptr;
  if (!quiet && tty) std::cerr << "\n";

  std::filesystem::path dir(out_dir);
  nlohmann::ordered_json measured;
  std::ostringstream measured_summary;
  int chosen = 0;
  if (measure.count > 0 && !r.top.empty()) {
    std::tie(measured, chosen) = measure_top(r, options, measure, measured_summary);
    chosen = std::max(chosen, 0);
  }
  std::filesystem::remove_all(dir / "top");
  if (!r.top.empty()) {
    std::filesystem::create_directories(dir / "top");
    // best.json: the model's choice, or the fastest measured one.
    write_text(dir / "best.json", to_json(r.top[static_cast<size_t>(chosen)].graph));
    for (size_t i = 0; i < r.top.size(); ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "%02zu.json", i);
      write_text(dir / "top" / name, to_json(r.top[i].graph));
    }
  } else {
    std::filesystem::remove(dir / "best.json");
  }
  if (measured.is_null()) {
    write_text(dir / "report.json", search_report_json(r, resolved_options(options, program)));
  } else {
    nlohmann::ordered_json report =
        nlohmann::ordered_json::parse(search_report_json(r, resolved_options(options, program)));
    report["measured"] = measured;
    write_text(dir / "report.json", report.dump(2));
  }

  std::cout << "search " << path << ": " << stop_reason_name(r.stop_reason)
            << (r.stop_detail.empty() ? "" : " (" + r.stop_detail + ")") << " after " << sci(r.search_seconds)
            << " s; verification " << sci(r.verify_seconds) << " s\n";
  if (r.unsearched_floor_us > 0 && !r.top.empty()) {
    // What the stop leaves open: the model bound's floors of the tasks still pending.
    const double best = r.top.front().cost.total_us;
    std::cout << "  not searched: μGraphs the model estimates at " << sci(r.unsearched_floor_us)
              << " us or more: the best, " << sci(best) << " us, is "
              << (best <= r.unsearched_floor_us ? "the fastest"
                                                : "at most " + sci(best / r.unsearched_floor_us) + "x the fastest")
              << " these limits allow\n";
  }
  if (r.background_verified > 0)
    std::cout << "  verified in the background during the search: " << r.background_verified << " candidates in "
              << sci(r.background_verify_seconds) << " s\n";
  if (r.worse_key > 0)
    std::cout << "  " << r.worse_key
              << " candidates found before the bytes bound tightened move more bytes or take more kernels than the "
                 "best verified one: not reported\n";
  if (!r.lifted_repeats.empty()) {
    std::cout << "  read as broadcasts, never copied:";
    for (size_t i = 0; i < r.lifted_repeats.size(); ++i) std::cout << (i ? ", " : " ") << r.lifted_repeats[i];
    std::cout << "\n";
  }
  for (const std::string& k : r.kept_repeats) std::cout << "  kept as a copy: " << k << "\n";
  if (!r.cut_at.empty()) {
    if (r.whole_best_estimated_us > 0)
      std::cout << (r.whole_stop_reason == StopReason::time_limit
                        ? "  the whole program's search stopped at its share of the time limit after "
                        : "  the whole program's search was exhausted in ")
                << sci(r.whole_search_seconds) << " s, best " << sci(r.whole_best_estimated_us)
                << " us; searched in parts as well, cut before matmuls at";
    else
      std::cout << "  no candidate for the whole program in " << sci(r.whole_search_seconds)
                << " s: cut before matmuls at";
    for (size_t i = 0; i < r.cut_at.size(); ++i) std::cout << (i ? ", " : " ") << r.cut_at[i];
    if (r.whole_best_estimated_us > 0 && !r.top.empty())
      std::cout << (r.top.front().cost.total_us < r.whole_best_estimated_us ? ": the parts' join is faster"
                                                                            : ": the whole program's best stays");
    std::cout << "\n";
  }
  if (!r.kept_ops.empty() || !r.parts.empty()) {
    std::cout << "  searched in " << r.parts.size() << (r.parts.size() == 1 ? " part" : " parts");
    if (!r.kept_ops.empty()) {
      std::cout << " around " << r.kept_ops.size() << (r.kept_ops.size() == 1 ? " op" : " ops")
                << " the generator does not grow, each kept as a pre-defined kernel:";
      for (size_t i = 0; i < r.kept_ops.size(); ++i) std::cout << (i ? ", " : " ") << r.kept_ops[i];
    }
    std::cout << "\n";
    for (size_t i = 0; i < r.parts.size(); ++i) {
      const SearchPartResult& p = r.parts[i];
      std::string outs;
      for (const std::string& o : p.outputs) outs += (outs.empty() ? "" : ", ") + o;
      std::cout << "    part " << i + 1 << " (" << p.ops << (p.ops == 1 ? " op" : " ops") << " -> " << outs << "): ";
      if (!p.searched) {
        std::cout << "not searched, its ops run as they are\n";
        continue;
      }
      std::cout << stop_reason_name(p.stop_reason) << " after " << sci(p.search_seconds) << " s, " << p.states
                << " states; ";
      if (!p.cut_at.empty()) {
        std::cout << "nothing whole, so cut before matmuls at";
        for (size_t k = 0; k < p.cut_at.size(); ++k) std::cout << (k ? ", " : " ") << p.cut_at[k];
        std::cout << "; ";
      }
      if (p.best_estimated_us > 0)
        std::cout << "best " << sci(p.best_estimated_us) << " us in " << p.kernels
                  << (p.kernels == 1 ? " kernel" : " kernels") << "\n";
      else
        std::cout << "nothing verified, its ops run as they are\n";
    }
  }
  if (r.retile.seeds > 0 && r.parts.empty())
    std::cout << "  retiled " << r.retile.seeds << " structures in " << sci(r.retile.seconds)
              << " s: " << r.retile.configs << " configurations, " << r.retile.complete << " complete, "
              << r.retile.kept << " kept; best estimate " << sci(r.retile.best_before_us) << " -> "
              << sci(r.retile.best_after_us) << " us\n";
  if (options.cost_bound == CostBound::both && r.bytes_phase_seconds >= 0) {
    if (r.bytes_phase_dropped_tasks > 0)
      std::cout << "  cost bound both: the bytes phase stopped at " << sci(r.bytes_phase_seconds)
                << " s, its share of the time limit, with " << r.bytes_phase_dropped_tasks
                << " tasks pending; the model phase ran after it\n";
    else
      std::cout << "  cost bound both: the bytes phase ended at " << sci(r.bytes_phase_seconds)
                << " s, the model phase ran after it\n";
  }
  std::cout << "  states " << r.stats.states << ", pruned " << r.stats.total_pruned() << " (";
  bool first = true;
  for (const auto& [reason, n] : r.stats.pruned) {
    std::cout << (first ? "" : ", ") << reason << " " << n;
    first = false;
  }
  std::cout << "), candidates " << r.stats.candidates << ", verified " << r.stats.verified << ", rejected "
            << r.stats.rejected << "\n";
  if (r.cut_short.tasks > 0)
    std::cout << "  and " << r.cut_short.tasks << " task(s) cut short by the stop grew " << r.cut_short.states
              << " states and pruned " << r.cut_short.pruned
              << " more (not counted above: a resume runs them again from their start)\n";
  if (r.top.empty()) {
    if (r.stop_reason == StopReason::interrupted && r.stats.candidates > 0)
      // Found but not verified yet: nothing is lost, the checkpoint holds them.
      std::cout << "  interrupted before any of the " << r.stats.candidates
                << " candidates found was verified; --resume continues from " << (dir / "checkpoint.json").string()
                << "\n";
    else
      std::cout << "  no equivalent μGraph found within the limits\n";
    return r.stop_reason == StopReason::interrupted ? 130 : kExitUser;
  }
  std::cout << "  rank  kernels  graph-defined  device bytes   block ops  shared mem  model (" << options.target.name
            << ")  found at\n";
  for (size_t i = 0; i < r.top.size(); ++i) {
    const CandidateMetrics& m = r.top[i].metrics;
    char line[224];
    std::snprintf(line, sizeof line, "  %4zu  %7d  %13d  %12s  %10lld  %10s  %9.2f us  %7.2f s\n", i, m.kernels,
                  m.graph_defined_kernels, human_bytes(m.device_bytes).c_str(), static_cast<long long>(m.block_ops),
                  human_bytes(m.shared_memory_bytes).c_str(), r.top[i].cost.total_us, r.top[i].found_seconds);
    std::cout << line;
  }
  std::cout << measured_summary.str();
  std::cout << "  best μGraph: " << (dir / "best.json").string()
            << (chosen > 0 ? " (rank " + std::to_string(chosen) + ", the fastest measured)" : std::string())
            << "; report: " << (dir / "report.json").string() << "\n";
  if (r.stop_reason == StopReason::interrupted)
    std::cout << "  interrupted: the candidates above are those verified before the stop; --resume continues from "
              << (dir / "checkpoint.json").string() << "\n";
  return r.stop_reason == StopReason::interrupted ? 130 : 0;
}

/// The version and how this binary was built: a bug report needs both, and the tests use the
/// build kind to size their searches (a sanitized debug build searches ten times slower).
std::string version_line() {
  std::string line = "mugraph 0.1.0 (";
#ifdef NDEBUG
  line += "optimized";
#else
  line += "debug";
#endif
#if defined(__SANITIZE_ADDRESS__)
  line += ", AddressSanitizer";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  line += ", AddressSanitizer";
#endif
#endif
#ifdef MUGRAPH_WITH_JEMALLOC
  line += ", jemalloc";
#endif
  return line + ")";
}

/// A check of a real-valued option: "expects NUMBER" when the text is no number, "must be RANGE"
/// when `ok` rejects it (the command line parser puts the option's name before it).
std::function<std::string(const std::string&)> real_check(const std::string& number, const std::string& range,
                                                          bool (*ok)(double)) {
  return [=](const std::string& text) {
    double v = 0;
    try {
      v = std::stod(text);
    } catch (const std::exception&) {
      return "expects " + number;
    }
    return ok(v) ? std::string() : "must be " + range;
  };
}

int run_main(int argc, char** argv) {
  CLI::App app{"mugraph: a multi-level superoptimizer for tensor programs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_line());

  std::string file, target = "h100", out_dir, out_json;
  std::vector<std::string> input_args;
  uint64_t seed = 0;
  double input_scale = 1.0;
  const char* const kInputScaleHelp =
      "standard deviation of the inputs that are not given (default 1; 0.25 keeps attention's exp within f16)";
  const auto positive_scale =
      real_check("a positive number", "a positive number", [](double v) { return v > 0 && std::isfinite(v); });
  int threads = 0;
  // Option values that are usage errors (exit 2) when wrong, checked as the command line is read.
  const auto gpu_target = [](const std::string& text) {
    return find_target(text) ? std::string()
                             : "unknown target '" + text + "'; the targets are a100, h100, h200 (or sm_80, sm_90a)";
  };
  const auto code_target = [](const std::string& text) {
    try {
      find_cuda_target(text);
      return std::string();
    } catch (const UserError&) {
      return "unknown code-generation target '" + text + "'; the targets are sm_80 and sm_90a";
    }
  };
  const auto named_file = [](const std::string& text) {
    const size_t eq = text.find('=');
    return eq != std::string::npos && eq > 0 && eq + 1 < text.size() ? std::string()
                                                                     : "expects NAME=PATH.npy, got '" + text + "'";
  };

  auto* check = app.add_subcommand("check", "Validate a program or μGraph JSON file and print every tensor's shape");
  check->add_option("FILE", file, "program (.mg) or μGraph (.json)")->required();
  check->add_option("--target", target, "target GPU: a100, h100, h200 (or sm_80, sm_90a)")->check(gpu_target);

  auto* run = app.add_subcommand("run", "Run a program or μGraph on the CPU interpreter and write its outputs as NPY");
  run->add_option("FILE", file, "program (.mg) or μGraph (.json)")->required();
  run->add_option("--input", input_args, "NAME=PATH.npy; inputs not given are drawn from a seeded standard normal")
      ->check(named_file);
  run->add_option("--seed", seed, "seed for the inputs that are not given (default 0)");
  run->add_option("--input-scale", input_scale, kInputScaleHelp)->check(positive_scale);
  run->add_option("--threads", threads, "worker threads (default: all cores)")->check(CLI::NonNegativeNumber);
  run->add_option("--out", out_dir, "directory for the outputs, written as NAME.npy")->required();

  auto* exp = app.add_subcommand("export", "Write a program as a kernel-level μGraph JSON file");
  exp->add_option("FILE", file, "program (.mg) or μGraph (.json)")->required();
  exp->add_option("-o,--output", out_json, "output JSON file")->required();

  std::string file_b;
  VerifyOptions vopts;
  bool no_float_check = false, no_unknown_functions = false;
  auto* ver = app.add_subcommand("verify",
                                 "Check that two programs or μGraphs compute the same function (exit 0 equivalent, 1 "
                                 "not equivalent, 2 cannot compare)");
  ver->add_option("A", file, "reference: program (.mg) or μGraph (.json)")->required();
  ver->add_option("B", file_b, "candidate: program (.mg) or μGraph (.json)")->required();
  ver->add_option("--delta", vopts.delta, "wanted bound on accepting non-equivalent graphs (default 1e-9)")
      ->check(real_check("a number in (0, 1]", "in (0, 1]", [](double v) { return v > 0 && v <= 1; }));
  ver->add_option("--seed", vopts.seed, "seed of the random tests; a verdict replays from it (default 0)");
  ver->add_option("--max-tests", vopts.max_tests, "most finite-field tests to run (default 64)")
      ->check(CLI::Range(1, 1000000));
  ver->add_flag("--no-float-check", no_float_check, "skip the floating-point filter");
  ver->add_flag("--no-unknown-functions", no_unknown_functions,
                "Theorem 2's tests only: do not first test with exp, silu, relu, gelu and sqrt as unknown functions");
  ver->add_option("--float-tolerance", vopts.float_tolerance, "max relative error of the f32 filter (default 1e-3)")
      ->check(CLI::NonNegativeNumber);
  ver->add_option("--threads", vopts.threads, "worker threads (default: all cores)")->check(CLI::NonNegativeNumber);

  SearchOptions sopts;
  std::string search_target = "h100", cost_bound(cost_bound_name(kDefaultCostBound));
  bool no_abstract_pruning = false, no_program_tile_values = false, no_input_probes = false, quiet = false,
       whole_only = false;
  auto* srch = app.add_subcommand(
      "search",
      "Search for the best μGraph equivalent to a program; writes DIR/best.json, DIR/top/NN.json, DIR/report.json");
  srch->add_option("FILE", file, "program (.mg)")->required();
  srch->add_option("-o,--output", out_dir, "output directory")->required();
  srch->add_option("--max-kernel-ops", sopts.max_kernel_ops, "most non-input ops in the kernel graph (default 5)")
      ->check(CLI::Range(kMaxKernelOpsRange.lo, kMaxKernelOpsRange.hi));
  srch->add_option("--max-block-ops", sopts.max_block_ops,
                   "most ops per block graph, input iterators counted (default 12)")
      ->check(CLI::Range(kMaxBlockOpsRange.lo, kMaxBlockOpsRange.hi));
  srch->add_option("--max-graph-kernels", sopts.max_graph_kernels, "most graph-defined kernels (default 2)")
      ->check(CLI::Range(kMaxGraphKernelsRange.lo, kMaxGraphKernelsRange.hi));
  srch->add_option("--max-kernel-inputs", sopts.max_kernel_inputs,
                   "most DTensors one graph-defined kernel reads (default: 4, or 5 for a program of five inputs "
                   "or more)")
      ->check(CLI::Range(0, kMaxKernelInputsRange.hi));
  srch->add_option("--threads", sopts.threads, "worker threads (default: all cores)")->check(CLI::NonNegativeNumber);
  CLI::Option* time_limit_option =
      srch->add_option("--time-limit", sopts.time_limit_seconds,
                       "stop after this many seconds; 0: none (default: " +
                           std::to_string(static_cast<int>(kDefaultModelBoundTimeLimitSeconds)) +
                           " with --cost-bound both or model, whose model phase can run for hours; none with bytes)")
          ->check(real_check("a number of seconds", "a finite number of seconds, 0 or more",
                             [](double v) { return v >= 0 && std::isfinite(v); }));
  srch->add_option_function<double>(
          "--memory-limit",
          [&sopts](double gib) {
            sopts.memory_limit_bytes = std::max<int64_t>(1, static_cast<int64_t>(gib * static_cast<double>(1 << 30)));
          },
          "stop, keeping what was found, once the process's resident memory reaches this many GiB "
          "(default: three quarters of the physical memory, or of the cgroup's limit where lower)")
      ->check(real_check("a number of GiB", "a finite number of GiB, more than 0",
                         [](double v) { return v > 0 && std::isfinite(v); }));
  srch->add_option_function<double>(
          "--block-cache",
          [&sopts](double mib) { sopts.block_cache_bytes = static_cast<int64_t>(mib * static_cast<double>(1 << 20)); },
          "MiB for the block searches' results shared between prefixes (default 256; 0: off, every block graph "
          "is grown anew)")
      ->check(real_check("a number of MiB", "a finite number of MiB, 0 or more",
                         [](double v) { return v >= 0 && std::isfinite(v) && v <= 1e9; }));
  // Up to the candidate pool less the cost bound's margin of 4 (and a little more): an exhausted
  // search with a --top above its candidates verifies and writes every one (the calibration sets).
  srch->add_option("--top", sopts.top_k, "how many verified candidates to write (default 8, at most 500)")
      ->check(CLI::Range(1, 500));
  MUGRAPH_CHECK(500 + 4 <= SearchOptions{}.candidate_pool) << "--top's range must leave the candidate pool its margin";
  srch->add_option("--target", search_target,
                   "target GPU: its shared memory bounds block graphs, its cost model ranks candidates (default h100)")
      ->check(gpu_target);
  srch->add_option("--cost-bound", cost_bound,
                   "what prunes prefixes once enough candidates are known: bytes (device bytes, then kernels; fast; "
                   "reports the candidates of the best verified bytes and kernels only), "
                   "model (the cost model's lower bound; never prunes a prefix that could rank ahead within "
                   "--bound-ratio of the best, but slow: hence the default "
                   "--time-limit) or both (bytes to its end or a quarter of the time limit, at least 10 s, then model "
                   "until the time limit) (default both)")
      ->check(CLI::IsMember({"bytes", "model", "both"}));
  srch->add_option("--bound-ratio", sopts.model_bound_ratio,
                   "with --cost-bound model or both, also cut what cannot come within this many times the best "
                   "verified candidate's estimate, before --top candidates are verified (default 2; 0: off)")
      ->check(real_check("a number", "0 or a finite number of 1 or more",
                         [](double v) { return v == 0 || (v >= 1 && std::isfinite(v)); }));
  srch->add_option("--retile-seeds", sopts.retile_seeds,
                   "after the search, rebuild the block graphs of the best candidates of this many structures under "
                   "every grid, for-loop and tiling of their kernels, and rank what computes the program with the "
                   "rest (default 4; 0: none)")
      ->check(CLI::Range(kRetileSeedsRange.lo, kRetileSeedsRange.hi));
  srch->add_flag("--deterministic", sopts.deterministic, "same result for any thread count, also when stopped early");
  srch->add_flag("--resume", sopts.resume, "continue from DIR/checkpoint.json");
  srch->add_flag("--no-abstract-pruning", no_abstract_pruning, "disable abstract-expression pruning (ablation)");
  srch->add_flag("--no-program-tile-values", no_program_tile_values,
                 "grow tile-local values op by op instead of replaying the program's (ablation)");
  srch->add_flag("--no-input-probes", no_input_probes,
                 "decide which kernels can finish the program by the inputs their operands' expressions hold "
                 "alone, without running the prefixes on changed inputs (ablation)");
  srch->add_flag("--whole-only", whole_only,
                 "search the program whole only, never in parts cut before its matmuls (by default a program "
                 "whose whole search finds nothing in half the time is cut, and one exhausted early is searched "
                 "in parts as well)");
  srch->add_flag("-q,--quiet", quiet, "no progress line");
  MeasureRequest measure;
  srch->add_option("--measure", measure.count,
                   "build, check and time the best K candidates on the GPU and keep the fastest (default 0: rank "
                   "by the model only)")
      ->check(CLI::Range(0, 100));
  srch->add_flag("--measure-emulate", measure.emulate,
                 "with --measure: check the candidates' generated code under the host emulation instead (no GPU "
                 "needed; the model's choice is kept)");

  std::string codegen_target = "sm_90a";
  auto* cgen = app.add_subcommand("codegen",
                                  "Generate CUDA for a μGraph: writes DIR/ugraph.cu, ugraph.h, CMakeLists.txt, "
                                  "manifest.json and the device library");
  cgen->add_option("FILE", file, "μGraph (.json) or program (.mg, one pre-defined kernel per op)")->required();
  cgen->add_option("--target", codegen_target, "sm_80 or sm_90a (default sm_90a)")->check(code_target);
  cgen->add_option("-o,--output", out_dir, "output directory")->required();
  CodegenOptions cgopts;
  // The code generator's choices, which codegen and bench both take.
  const auto add_codegen_options = [](CLI::App* sub, CodegenOptions& o) {
    sub->add_option("--stages", o.pipeline_stages,
                    "stages of each kernel's for-loop load pipeline, 1 to " + std::to_string(kMaxPipelineStages) +
                        " (default: 2 where it loads asynchronously and fits)")
        ->check(CLI::Range(1, kMaxPipelineStages));
    sub->add_option("--layouts", o.choose_layouts,
                    "shared-memory tile layouts: chosen (padded or transposed where the layout pass's model of the "
                    "device library's accesses says they take fewer wavefronts; the default) or row-major")
        ->transform(CLI::CheckedTransformer(std::map<std::string, bool>{{"chosen", true}, {"row-major", false}},
                                            CLI::ignore_case));
    sub->add_option("--wgmma-operands", o.read_operands_in_place,
                    "sm_90a: wgmma operand tiles the copy engine loads for matmuls alone are read in place, written "
                    "swizzled (in-place, the default), or staged like the others (staged)")
        ->transform(CLI::CheckedTransformer(std::map<std::string, bool>{{"in-place", true}, {"staged", false}},
                                            CLI::ignore_case));
    sub->add_option("--wgmma-stage-buffers", o.wgmma_stage_buffers,
                    "sm_90a: stage buffers per warpgroup for wgmma operands staged over several chunks of k: 2 (the "
                    "default, where the kernel fits and keeps its blocks per SM: the next chunk is staged while the "
                    "tensor cores read this one) or 1 (each chunk waits for the one before)")
        ->check(CLI::Range(1, 2));
    sub->add_option("--matmul-chains", o.matmul_chains_in_registers,
                    "sm_90a: a wgmma matmul whose result goes through one element-wise op into a second (and "
                    "perhaps a sum along rows), operands read in place, runs as one chain in registers (registers, "
                    "the default: attention's scores are never stored) or op by op through shared memory (op-by-op)")
        ->transform(CLI::CheckedTransformer(std::map<std::string, bool>{{"registers", true}, {"op-by-op", false}},
                                            CLI::ignore_case));
    sub->add_option("--chain-accumulators", o.chain_accumulators_in_registers,
                    "sm_90a: a chain in the for-loop sums into the loop's accumulators in registers, written to "
                    "shared memory once after the loop (registers, the default), or in shared memory in every "
                    "iteration (shared)")
        ->transform(CLI::CheckedTransformer(std::map<std::string, bool>{{"registers", true}, {"shared", false}},
                                            CLI::ignore_case));
    sub->add_option("--matmul-accumulators", o.matmul_accumulators_in_registers,
                    "sm_90a: a wgmma matmul in the for-loop that only a summing accumulator reads adds its product "
                    "to it in registers, written to shared memory once after the loop (registers, the default), or "
                    "stores the product for the accumulator op to add in every iteration (shared)")
        ->transform(CLI::CheckedTransformer(std::map<std::string, bool>{{"registers", true}, {"shared", false}},
                                            CLI::ignore_case));
    sub->add_option("--chain-split", o.chain_split_n_blocks,
                    "sm_90a: a chain with fewer 64-row jobs than the block has warpgroups splits S's n-blocks "
                    "among them and adds their partial results (on), or is taken only where S has one n-block and "
                    "the others run op by op (off, the default: faster on an H200)")
        ->transform(
            CLI::CheckedTransformer(std::map<std::string, bool>{{"on", true}, {"off", false}}, CLI::ignore_case));
    sub->add_option("--matmul-overlap", o.overlap_loop_matmuls,
                    "sm_90a: a wgmma matmul in the for-loop summed in registers, both operands read in place, "
                    "adds each iteration's product in the next iteration, so that the tensor cores compute it while "
                    "the next iteration's other ops run (on), or waits for it in its own iteration (off, the "
                    "default until timed on a GPU)")
        ->transform(
            CLI::CheckedTransformer(std::map<std::string, bool>{{"on", true}, {"off", false}}, CLI::ignore_case));
    sub->add_option("--block-threads", o.block_threads,
                    "threads per block of every graph-defined kernel, a multiple of 32 up to 1024 (default: each "
                    "block graph's own; wgmma needs a multiple of 128)")
        ->check([](const std::string& v) -> std::string {
          try {
            const int n = std::stoi(v);
            if (n >= 32 && n <= 1024 && n % 32 == 0) return "";
          } catch (const std::exception&) {
          }
          return "a multiple of 32 from 32 to 1024, not " + v;
        });
  };
  add_codegen_options(cgen, cgopts);

  BenchOptions bopts;
  auto* bnch =
      app.add_subcommand("bench",
                         "Build a μGraph's generated code, run it on the GPU (or --emulate on the CPU), check it "
                         "against the interpreter and print the median time");
  std::vector<std::string> bench_files;
  bnch->add_option("FILE", bench_files,
                   "μGraph (.json) or program (.mg); several μGraphs of one program are timed in one batch, on the "
                   "same inputs (--out DIR: each one's outputs in DIR/N/)")
      ->required();
  bnch->add_option("--target", bopts.target, "sm_80 or sm_90a (default sm_90a)")->check(code_target);
  bnch->add_flag("--emulate", bopts.emulate,
                 "build against the host emulation (checks without a GPU; times mean nothing)");
  bnch->add_option("--input", input_args, "NAME=PATH.npy; inputs not given are drawn from a seeded standard normal")
      ->check(named_file);
  bnch->add_option("--seed", seed, "seed for the inputs that are not given (default 0)");
  bnch->add_option("--input-scale", input_scale, kInputScaleHelp)->check(positive_scale);
  add_codegen_options(bnch, bopts.codegen);
  auto* warmup_opt = bnch->add_option("--warmup", bopts.warmup, "untimed runs first (default 10; 0 with --emulate)")
                         ->check(CLI::Range(0, 100000));
  auto* repeats_opt = bnch->add_option("--repeats", bopts.repeats, "timed runs (default 100; 1 with --emulate)")
                          ->check(CLI::Range(1, 100000));
  bnch->add_option("--tolerance", bopts.tolerance, "largest error relative to the largest output (default 1e-2)")
      ->check(CLI::NonNegativeNumber);
  bnch->add_option("--out", out_dir,
                   "directory for what the generated code computed (the checked outputs), written as NAME.npy");
  bool bench_json = false;
  bnch->add_flag("--json", bench_json, "print the result as one JSON object");
  bnch->add_option("--cache-dir", bopts.cache_dir, "where builds are cached (default ~/.cache/mugraph)");
  bool build_only = false;
  bnch->add_flag("--build-only", build_only,
                 "build the harness (or find it in the cache) and print where it is; needs no GPU (with several "
                 "files: each one's library and the batch harness)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;  // --help and --version exit 0; every usage error exits 2
  }

  if (*check) return cmd_check(file, target);
  if (*run) return cmd_run(file, input_args, seed, input_scale, out_dir, threads);
  if (*exp) return cmd_export(file, out_json);
  if (*cgen) return cmd_codegen(file, codegen_target, out_dir, cgopts);
  if (*bnch) {
    // The emulation runs a kernel in seconds, not microseconds: one run checks it.
    if (bopts.emulate && warmup_opt->count() == 0) bopts.warmup = 0;
    if (bopts.emulate && repeats_opt->count() == 0) bopts.repeats = 1;
    if (bench_files.size() > 1)
      return build_only ? cmd_bench_build_many(bench_files, bopts, bench_json)
                        : cmd_bench_many(bench_files, input_args, seed, input_scale, bopts, out_dir, bench_json);
    for (const std::string& f : bench_files)
      if (int status = cmd_bench(f, input_args, seed, input_scale, bopts, out_dir, bench_json, build_only))
        return status;
    return 0;
  }
  if (*srch) {
    sopts.target = require_target(search_target);
    sopts.abstract_pruning = !no_abstract_pruning;
    sopts.cut_into_parts = !whole_only;
    sopts.cost_bound = require_cost_bound(cost_bound);
    sopts.program_tile_values = !no_program_tile_values;
    sopts.input_probes = !no_input_probes;
    // The model bound exhausts only small spaces (docs/search.md, "The cost bound"): without a
    // limit an attention program's search runs for hours. So it gets one unless the user gave
    // one; `--time-limit 0` asks for none, which is said once, up front (Ctrl-C still stops it
    // with what it found and a checkpoint).
    if (time_limit_option->count() == 0) sopts.time_limit_seconds = default_time_limit_seconds(sopts.cost_bound);
    if (sopts.cost_bound != CostBound::bytes && sopts.time_limit_seconds <= 0)
      std::cerr << "mugraph: note: --cost-bound " << cost_bound
                << " with --time-limit 0 runs until the model-bound search is exhausted, which can take hours; "
                   "Ctrl-C stops it, keeps what it found and writes a checkpoint for --resume\n";
    return cmd_search(file, out_dir, sopts, quiet, measure);
  }
  if (*ver) {
    vopts.float_check = !no_float_check;
    vopts.unknown_functions = !no_unknown_functions;
    return cmd_verify(file, file_b, vopts);
  }
  return 2;
}

}  // namespace
}  // namespace mugraph

int main(int argc, char** argv) {
  try {
    return mugraph::run_main(argc, argv);
  } catch (const mugraph::UserError& e) {
    std::cerr << "mugraph: " << e.what() << "\n";
    return mugraph::kExitUser;
  } catch (const std::bad_alloc&) {
    std::cerr << "mugraph: error: out of memory\n";
    return mugraph::kExitUser;
  } catch (const std::exception& e) {
    std::cerr << "mugraph: " << e.what()
              << "\n(this is a bug in mugraph; please report it with the input that caused it)\n";
    return mugraph::kExitInternal;
  }
}
