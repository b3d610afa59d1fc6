// search() for programs the generator cannot grow whole (program_parts.h).
#pragma once

#include <functional>
#include <string>

#include "mugraph/search.h"

namespace mugraph::search_detail {

/// `options`' progress callback with its clock moved on by `seconds` (a search that follows
/// another reports the time since the first began); empty where `options` has none.
std::function<void(const SearchProgress&)> progress_after(const SearchOptions& options, double seconds);

/// Whether `program` has ops the generator does not grow, so that search() takes it in parts.
bool searched_in_parts(const Graph& program);

/// The checkpoint file of part `part` (from 0) of a search whose checkpoint is `path`:
/// "DIR/checkpoint.json" gives "DIR/checkpoint.part1.json" for the first. "" stays "".
std::string part_checkpoint_path(const std::string& path, size_t part);

/// The verdict on `joined`, the parts' verified μGraphs joined around the kept ops (a null entry
/// of `parts`: that part's own ops). Each part's μGraph computes its part's function, so the
/// joined μGraph computes the program's (put each part's program in its place), and the chance
/// that one of them does not is at most the sum of their bounds: the joined bound. The finite-
/// field tests are not run again on the whole program (at attention's shapes they doubled the
/// verification time); its f32 run against the program's (the float filter) checks the joining.
/// `runs` (optional) keeps the program's float run for the next joined μGraph.
VerifyResult joined_verdict(const Graph& program, const Graph& joined, const std::vector<const VerifyResult*>& parts,
                            const VerifyOptions& options, ReferenceRuns* runs = nullptr);

/// search() of such a program: each part searched as a program of its own, in an order that
/// makes what a part reads first, with a share (by its number of ops) of the time the earlier
/// parts left; then the μGraphs that join the parts' verified ones around the kept ops (each part's best, and
/// each part's others beside the other parts' best), ranked by the cost model and verified
/// by joined_verdict against `reference` (the program as the user gave it, of which `program`
/// is a rewrite: lift_repeats.h). `cuts`: tensors the parts are cut at besides the kept ops
/// (split_program). A stop ends it after the part it stops (the later parts are
/// not searched; each part's checkpoint resumes it).
SearchResult search_in_parts(const Graph& program, const SearchOptions& options, SearchControl* control,
                             const Graph& reference, const std::vector<TensorId>& cuts = {});

}  // namespace mugraph::search_detail
