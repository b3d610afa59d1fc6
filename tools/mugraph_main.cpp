// The mugraph command-line tool. It only parses arguments and calls the libraries; every
// subcommand is a function below. Exit codes: 0 success, 1 user error (message on stderr),
// 2 usage error, 3 internal error (a bug in mugraph; please report it). `verify` differs: 0
// equivalent, 1 not equivalent, 2 cannot compare (including files that do not load), 3 internal.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <new>
#include <sys/stat.h>

#include "mugraph/error.h"
#include "mugraph/interp.h"
#include "mugraph/json.h"
#include "mugraph/loader.h"
#include "mugraph/printer.h"
#include "mugraph/validate.h"
#include "mugraph/verify.h"

namespace mugraph {
namespace {

constexpr int kExitUser = 1;
constexpr int kExitInternal = 3;

Target target_or_throw(const std::string& name) {
  if (auto t = find_target(name)) return *t;
  std::string known;
  for (const Target& t : all_targets()) known += (known.empty() ? "" : ", ") + std::string(t.name);
  throw UserError("unknown target '" + name + "'; known targets are " + known);
}

/// Loads a program or μGraph file and checks it is a valid μGraph for the target.
Graph load_valid(const std::string& path, const Target& target) {
  Graph g = load_graph_file(path);
  if (auto r = validate(g, target)) throw UserError("not a valid μGraph for " + std::string(target.name) + ": " + r->str(), SourceLoc{path});
  return g;
}

int cmd_check(const std::string& path, const std::string& target_name) {
  Target target = target_or_throw(target_name);
  Graph g = load_valid(path, target);
  std::cout << describe(g);
  std::cout << "valid for " << target.name << " (" << target.arch << "): " << count_ops(g) << " ops, "
            << g.bodies.size() << (g.bodies.size() == 1 ? " graph-defined kernel\n" : " graph-defined kernels\n");
  return 0;
}

/// Splits "NAME=PATH".
std::pair<std::string, std::string> split_assignment(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UserError("--input expects NAME=PATH.npy, got '" + text + "'");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

int cmd_run(const std::string& path, const std::vector<std::string>& input_args, uint64_t seed,
            const std::string& out_dir, int threads) {
  Graph g = load_valid(path, default_target());
  std::vector<HostTensor> inputs = random_inputs(g, seed);
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
    if (it == position.end()) throw UserError("--input " + name + ": the program has no input named '" + name + "'; its inputs are " + names);
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
  InterpOptions options;
  options.threads = threads;
  std::vector<HostTensor> outputs = run_float(g, inputs, options);

  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw UserError("cannot create output directory '" + out_dir + "': " + ec.message());
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string file = (std::filesystem::path(out_dir) / (g.output_names[i] + ".npy")).string();
    write_npy(file, outputs[i]);
    std::cout << g.output_names[i] << " " << outputs[i].type.str() << " -> " << file << "\n";
  }
  return 0;
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
  s += ", degree <= " + sci(r.degree) + ", terms <= " + sci(r.exp_terms) + ", exps on a path <= " +
       std::to_string(r.max_exps_on_path);
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
    if (!r.guarantee_note.empty()) std::cout << "  note:            " << r.guarantee_note << "\n";
  }
  std::cout << "  reference:       " << lax_summary(r.reference_lax) << "\n";
  std::cout << "  candidate:       " << lax_summary(r.candidate_lax) << "\n";
  std::cout << "  seed:            " << r.seed << " (replay with --seed " << r.seed << ")\n";
  std::cout << "  float error:     "
            << (tests_agreed && options.float_check
                    ? sci(r.float_max_rel_error) + " (tolerance " + sci(options.float_tolerance) + ", f32)"
                    : std::string(options.float_check ? "not run (a finite-field test disagreed)" : "not run (--no-float-check)"))
            << "\n";
  return r.verdict == Verdict::equivalent ? 0 : kExitNotEquivalent;
}

int run_main(int argc, char** argv) {
  CLI::App app{"mugraph: a multi-level superoptimizer for tensor programs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "mugraph 0.1.0");

  std::string file, target = "h100", out_dir, out_json;
  std::vector<std::string> input_args;
  uint64_t seed = 0;
  int threads = 0;

  auto* check = app.add_subcommand("check", "Validate a program or μGraph JSON file and print every tensor's shape");
  check->add_option("FILE", file, "program (.mg) or μGraph (.json)")->required();
  check->add_option("--target", target, "target GPU: a100, h100, h200 (or sm_80, sm_90a)");

  auto* run = app.add_subcommand("run", "Run a program or μGraph on the CPU interpreter and write its outputs as NPY");
  run->add_option("FILE", file, "program (.mg) or μGraph (.json)")->required();
  run->add_option("--input", input_args, "NAME=PATH.npy; inputs not given are drawn from a seeded standard normal");
  run->add_option("--seed", seed, "seed for the inputs that are not given (default 0)");
  run->add_option("--threads", threads, "worker threads (default: all cores)")->check(CLI::NonNegativeNumber);
  run->add_option("--out", out_dir, "directory for the outputs, written as NAME.npy")->required();

  auto* exp = app.add_subcommand("export", "Write a program as a kernel-level μGraph JSON file");
  exp->add_option("FILE", file, "program (.mg) or μGraph (.json)")->required();
  exp->add_option("-o,--output", out_json, "output JSON file")->required();

  std::string file_b;
  VerifyOptions vopts;
  bool no_float_check = false;
  auto* ver = app.add_subcommand("verify", "Check that two programs or μGraphs compute the same function (exit 0 equivalent, 1 not equivalent, 2 cannot compare)");
  ver->add_option("A", file, "reference: program (.mg) or μGraph (.json)")->required();
  ver->add_option("B", file_b, "candidate: program (.mg) or μGraph (.json)")->required();
  ver->add_option("--delta", vopts.delta, "wanted bound on accepting non-equivalent graphs (default 1e-9)")->check([](const std::string& text) {
    double v = 0;
    try {
      v = std::stod(text);
    } catch (const std::exception&) {
      return std::string("--delta expects a number in (0, 1]");
    }
    return v > 0 && v <= 1 ? std::string() : std::string("--delta must be in (0, 1]");
  });
  ver->add_option("--seed", vopts.seed, "seed of the random tests; a verdict replays from it (default 0)");
  ver->add_option("--max-tests", vopts.max_tests, "most finite-field tests to run (default 64)")->check(CLI::Range(1, 1000000));
  ver->add_flag("--no-float-check", no_float_check, "skip the floating-point filter");
  ver->add_option("--float-tolerance", vopts.float_tolerance, "max relative error of the f32 filter (default 1e-3)")->check(CLI::NonNegativeNumber);
  ver->add_option("--threads", vopts.threads, "worker threads (default: all cores)")->check(CLI::NonNegativeNumber);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;  // --help and --version exit 0; every usage error exits 2
  }

  if (*check) return cmd_check(file, target);
  if (*run) return cmd_run(file, input_args, seed, out_dir, threads);
  if (*exp) return cmd_export(file, out_json);
  if (*ver) {
    vopts.float_check = !no_float_check;
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
    std::cerr << "mugraph: " << e.what() << "\n(this is a bug in mugraph; please report it with the input that caused it)\n";
    return mugraph::kExitInternal;
  }
}
