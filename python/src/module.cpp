// mugraph._core: the Python bindings. Only conversions live here (graphs as opaque values,
// arrays in and out, exceptions, the GIL around long calls); every decision is made by the C++
// libraries or by the Python package above this module.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <thread>

#include "mugraph/build.h"
#include "mugraph/codegen.h"
#include "mugraph/cost_model.h"
#include "mugraph/dot.h"
#include "mugraph/error.h"
#include "mugraph/frontend.h"
#include "mugraph/interp.h"
#include "mugraph/json.h"
#include "mugraph/loader.h"
#include "mugraph/printer.h"
#include "mugraph/search.h"
#include "mugraph/validate.h"
#include "mugraph/verify.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace mugraph {
namespace {

using Float32Array = nb::ndarray<nb::numpy, float, nb::c_contig, nb::device::cpu>;
using ShapeTuple = std::vector<int64_t>;
/// (name, shape, dtype name) of a program input or output.
using TensorSignature = std::tuple<std::string, ShapeTuple, std::string>;

/// A float32 NumPy array that takes over a host tensor's values (no copy).
Float32Array to_numpy(HostTensor&& t) {
  auto* data = new std::vector<float>(std::move(t.data));
  nb::capsule owner(data, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  std::vector<size_t> shape(t.type.shape.begin(), t.type.shape.end());
  return Float32Array(data->data(), shape.size(), shape.data(), owner);
}

std::vector<TensorSignature> input_signature(const Graph& g) {
  std::vector<TensorSignature> out;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::input)
      out.emplace_back(op.attrs.name, op.attrs.shape.to_vector(), std::string(dtype_name(op.attrs.dtype)));
  return out;
}

std::vector<TensorSignature> output_signature(const Graph& g) {
  std::vector<TensorSignature> out;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const TensorType& t = g.type(g.outputs[i]);
    out.emplace_back(i < g.output_names.size() ? g.output_names[i] : "", t.shape.to_vector(),
                     std::string(dtype_name(t.dtype)));
  }
  return out;
}

/// The type of the kernel-level tensor a program statement named, for the Program builder.
std::optional<std::pair<ShapeTuple, std::string>> named_type(const Graph& g, const std::string& name) {
  for (const Tensor& t : g.tensors)
    if (t.name == name) return std::make_pair(t.type.shape.to_vector(), std::string(dtype_name(t.type.dtype)));
  return std::nullopt;
}

/// Runs the interpreter on float32 arrays (one per input, in order), returning float32 arrays.
std::vector<Float32Array> run(const Graph& g, const std::vector<Float32Array>& arrays, int threads) {
  std::vector<HostTensor> inputs;
  std::vector<TensorType> types;
  std::vector<std::string> names;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::input) {
      types.push_back(TensorType{op.attrs.shape, op.attrs.dtype});
      names.push_back(g.tensors[op.outputs[0].index()].name);
    }
  if (arrays.size() != types.size())
    throw UserError("the μGraph takes " + std::to_string(types.size()) + " inputs, " + std::to_string(arrays.size()) +
                    " given");
  for (size_t i = 0; i < arrays.size(); ++i) {
    const Float32Array& a = arrays[i];
    ShapeTuple given(a.shape_ptr(), a.shape_ptr() + a.ndim());
    if (given != types[i].shape.to_vector())
      throw UserError("input " + (names[i].empty() ? std::to_string(i) : names[i]) + " has shape " +
                      types[i].shape.str() + ", given " + Shape(given).str());
    HostTensor t(types[i]);
    std::copy(a.data(), a.data() + t.numel(), t.data.begin());
    round_tensor(t);  // values become the input's dtype, as a cast would make them
    inputs.push_back(std::move(t));
  }
  std::vector<HostTensor> outputs;
  {
    nb::gil_scoped_release release;
    InterpOptions options;
    options.threads = threads;
    outputs = run_float(g, inputs, options);
  }
  std::vector<Float32Array> result;
  for (HostTensor& t : outputs) result.push_back(to_numpy(std::move(t)));
  return result;
}

/// What a search returns to Python: the result, its report, and whether Ctrl-C stopped it.
struct SearchOutcome {
  SearchResult result;
  std::string report_json;
  bool interrupted = false;
};

/// Runs the search on a worker thread while this thread, holding the GIL every 50 ms, lets
/// Python run its signal handlers: a KeyboardInterrupt stops the search (which checkpoints and
/// returns what it found) instead of being lost until the search ends.
SearchOutcome run_search(const Graph& program, const SearchOptions& options) {
  SearchOutcome out;
  SearchControl control;
  std::atomic<bool> done{false};
  std::exception_ptr error;
  {
    nb::gil_scoped_release release;
    std::thread worker([&] {
      try {
        out.result = search(program, options, &control);
      } catch (...) {
        error = std::current_exception();
      }
      done.store(true);
    });
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      nb::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() != 0) {
        PyErr_Clear();
        out.interrupted = true;
        control.stop.store(true);
      }
    }
    worker.join();
  }
  if (error) std::rethrow_exception(error);
  out.report_json = search_report_json(out.result, resolved_options(options, program));
  return out;
}

VerifyResult run_verify(const Graph& reference, const Graph& candidate, const VerifyOptions& options) {
  nb::gil_scoped_release release;
  return verify(reference, candidate, options);
}

}  // namespace
}  // namespace mugraph

NB_MODULE(_core, m) {
  using namespace mugraph;
  m.doc() = "mugraph's C++ core (use the mugraph package, not this module)";

  // Errors: UserError becomes mugraph.MugraphError (a ValueError) with the same message and its
  // location as attributes; InternalError becomes mugraph.InternalError (a RuntimeError).
  static nb::object user_error =
      nb::steal(PyErr_NewExceptionWithDoc("mugraph._core.MugraphError",
                                          "An error in what was given to mugraph: the message says what "
                                          "was expected; file, line and column say where, when known.",
                                          PyExc_ValueError, nullptr));
  static nb::object internal_error = nb::steal(PyErr_NewExceptionWithDoc(
      "mugraph._core.InternalError", "A broken invariant inside mugraph (a bug; please report it).", PyExc_RuntimeError,
      nullptr));
  m.attr("MugraphError") = user_error;
  m.attr("InternalError") = internal_error;
  // The front ends' search defaults (search.h): superoptimize takes them from here.
  m.attr("DEFAULT_COST_BOUND") = std::string(cost_bound_name(kDefaultCostBound));
  m.def(
      "default_time_limit",
      [](const std::string& cost_bound) { return default_time_limit_seconds(require_cost_bound(cost_bound)); },
      "the search's time limit in seconds under this cost bound when none is given (0: none)");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const UserError& e) {
      nb::object exc = user_error(nb::str(e.what()));
      exc.attr("message") = nb::str(e.message().c_str());
      exc.attr("file") = nb::str(e.loc().file.c_str());
      exc.attr("line") = e.loc().line;
      exc.attr("column") = e.loc().column;
      PyErr_SetObject(user_error.ptr(), exc.ptr());
    } catch (const InternalError& e) {
      PyErr_SetString(internal_error.ptr(), e.what());
    }
  });

  nb::class_<Graph>(m, "Graph", "A μGraph (kernel level, with its block and thread graphs): an immutable value")
      .def("__eq__", [](const Graph& a, const Graph& b) { return a == b; })
      .def("__hash__", [](const Graph& g) { return static_cast<Py_ssize_t>(hash_value(g)); })
      .def("to_json", [](const Graph& g) { return to_json(g); })
      .def("describe", [](const Graph& g) { return describe(g); })
      .def("to_dot", [](const Graph& g) { return to_dot(g); })
      .def("inputs", &input_signature)
      .def("outputs", &output_signature)
      .def("named_type", &named_type, "name"_a)
      .def("op_count", [](const Graph& g) { return count_ops(g); })
      .def("graph_defined_kernels", [](const Graph& g) { return g.bodies.size(); })
      .def(
          "validate",
          [](const Graph& g, const std::string& target) -> std::optional<std::string> {
            if (auto r = validate(g, require_target(target))) return r->str();
            return std::nullopt;
          },
          "target"_a)
      .def(
          "cost",
          [](const Graph& g, const std::string& target) {
            const CostEstimate c = estimate_cost(g, gpu_spec(require_target(target).name));
            return std::make_pair(c.total_us, c.str());
          },
          "target"_a);

  m.def("parse", &parse_program, "text"_a, "filename"_a = "<program>");
  m.def("is_reserved_name", &is_reserved_name, "name"_a);
  m.def("load", &load_graph_file, "path"_a);
  m.def("from_json", &from_json, "text"_a, "filename"_a = "<json>");
  m.def("run", &run, "graph"_a, "inputs"_a, "threads"_a = 0);
  m.def(
      "random_inputs",
      [](const Graph& g, uint64_t seed) {
        std::vector<Float32Array> arrays;
        for (HostTensor& t : random_inputs(g, seed)) arrays.push_back(to_numpy(std::move(t)));
        return arrays;
      },
      "graph"_a, "seed"_a);

  nb::class_<SearchOptions>(m, "SearchOptions")
      .def(nb::init<>())
      .def_rw("max_kernel_ops", &SearchOptions::max_kernel_ops)
      .def_rw("max_block_ops", &SearchOptions::max_block_ops)
      .def_rw("max_graph_kernels", &SearchOptions::max_graph_kernels)
      .def_rw("max_kernel_inputs", &SearchOptions::max_kernel_inputs)
      .def_rw("time_limit_seconds", &SearchOptions::time_limit_seconds)
      .def_rw("memory_limit_bytes", &SearchOptions::memory_limit_bytes)
      .def_rw("block_cache_bytes", &SearchOptions::block_cache_bytes)
      .def_rw("threads", &SearchOptions::threads)
      .def_rw("deterministic", &SearchOptions::deterministic)
      .def_rw("top_k", &SearchOptions::top_k)
      .def_rw("retile_seeds", &SearchOptions::retile_seeds)
      .def_rw("model_bound_ratio", &SearchOptions::model_bound_ratio)
      .def_rw("checkpoint_path", &SearchOptions::checkpoint_path)
      .def_rw("resume", &SearchOptions::resume)
      .def_prop_rw(
          "target", [](const SearchOptions& o) { return std::string(o.target.name); },
          [](SearchOptions& o, const std::string& name) { o.target = require_target(name); })
      .def_prop_rw(
          "cost_bound", [](const SearchOptions& o) { return std::string(cost_bound_name(o.cost_bound)); },
          [](SearchOptions& o, const std::string& name) { o.cost_bound = require_cost_bound(name); });

  nb::class_<SearchCandidate>(m, "SearchCandidate")
      .def_ro("graph", &SearchCandidate::graph)
      .def_prop_ro("cost_us", [](const SearchCandidate& c) { return c.cost.total_us; })
      .def_ro("found_seconds", &SearchCandidate::found_seconds);

  nb::class_<SearchOutcome>(m, "SearchOutcome")
      .def_prop_ro("top", [](const SearchOutcome& o) { return o.result.top; })
      .def_prop_ro("stop_reason",
                   [](const SearchOutcome& o) { return std::string(stop_reason_name(o.result.stop_reason)); })
      .def_prop_ro("stop_detail", [](const SearchOutcome& o) { return o.result.stop_detail; })
      .def_prop_ro("search_seconds", [](const SearchOutcome& o) { return o.result.search_seconds; })
      .def_ro("report_json", &SearchOutcome::report_json)
      .def_ro("interrupted", &SearchOutcome::interrupted);
  m.def("search", &run_search, "program"_a, "options"_a);

  nb::class_<VerifyOptions>(m, "VerifyOptions")
      .def(nb::init<>())
      .def_rw("delta", &VerifyOptions::delta)
      .def_rw("seed", &VerifyOptions::seed)
      .def_rw("max_tests", &VerifyOptions::max_tests)
      .def_rw("threads", &VerifyOptions::threads)
      .def_rw("float_check", &VerifyOptions::float_check)
      .def_rw("unknown_functions", &VerifyOptions::unknown_functions)
      .def_rw("float_tolerance", &VerifyOptions::float_tolerance);
  nb::class_<VerifyResult>(m, "VerifyResult")
      .def_prop_ro("verdict",
                   [](const VerifyResult& r) {
                     switch (r.verdict) {
                       case Verdict::equivalent:
                         return "equivalent";
                       case Verdict::not_equivalent:
                         return "not_equivalent";
                       default:
                         return "incomparable";
                     }
                   })
      .def_ro("reason", &VerifyResult::reason)
      .def_ro("tests_run", &VerifyResult::tests_run)
      .def_ro("redraws", &VerifyResult::redraws)
      .def_ro("per_test_bound", &VerifyResult::per_test_bound)
      .def_ro("bound", &VerifyResult::bound)
      .def_ro("guarantee", &VerifyResult::guarantee)
      .def_ro("guarantee_note", &VerifyResult::guarantee_note)
      .def_ro("opaque_functions", &VerifyResult::opaque_functions)
      .def_ro("seed", &VerifyResult::seed)
      .def_ro("float_max_rel_error", &VerifyResult::float_max_rel_error);
  m.def("verify", &run_verify, "reference"_a, "candidate"_a, "options"_a);

  m.def(
      "codegen",
      [](const Graph& g, const std::string& arch, const std::string& out_dir, bool choose_layouts) {
        CodegenOptions options;
        options.choose_layouts = choose_layouts;
        const GeneratedCode code = generate_cuda(g, find_cuda_target(arch), options);
        write_generated_code(code, out_dir);
        return std::make_tuple(code.kernels, code.blas_calls, code.workspace_bytes);
      },
      "graph"_a, "arch"_a, "out_dir"_a, "choose_layouts"_a = true);
  m.def(
      "build_library",
      [](const Graph& g, const std::string& arch, bool emulate, const std::string& cache_dir) {
        BuildOptions options;
        options.target = arch;
        options.emulate = emulate;
        options.cache_dir = cache_dir;
        BuiltLibrary lib;
        {
          nb::gil_scoped_release release;
          lib = build_ugraph_library(g, options);
        }
        return std::make_tuple(lib.library, lib.dir, lib.cached, lib.code.workspace_bytes);
      },
      "graph"_a, "arch"_a, "emulate"_a = false, "cache_dir"_a = "");
}
