/// \file retype.h
/// A pass that stores every tensor of a μGraph in one dtype.
#pragma once

#include "mugraph/graph.h"

namespace mugraph {

/// Returns `g` with every tensor, input and body parameter stored as `dtype` (bodies included).
/// Used to compare μGraphs in f32 whatever precision they were written for.
/// @post validate(retype(g, t)) == validate(g) for graphs whose memory fits either way.
Graph retype(const Graph& g, DType dtype);

}  // namespace mugraph
