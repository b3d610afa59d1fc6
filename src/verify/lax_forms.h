/// \file lax_forms.h
/// Internal to the verifier: the symbolic bound on Equation 2 (paper §5) that check_lax
/// propagates per tensor, exposed so that verify() can bound the difference of two graphs output
/// by output. The rules are in docs/verifier.md.
#pragma once

#include <vector>

#include "mugraph/graph.h"
#include "mugraph/verify.h"

namespace mugraph::lax {

/// A sum of `terms` terms f · exp(g / h) with deg f ≤ deg. `plain`: one of the terms may have no
/// exponential (exp(0)); two plain terms merge into one.
struct Part {
  double deg = 0;
  double terms = 1;
  bool plain = true;
};

/// Degree bounds of the exponents g / h of every term of a value (0 / 0: no exponentials).
struct Exponent {
  double num = 0;
  double den = 0;
};

/// A value num / den of the form of Equation 2.
struct Form {
  Part num{1, 1, true};
  Part den{0, 1, true};
  Exponent ex;

  /// The largest degree of any polynomial f, g, h involved.
  double degree() const;
  /// The most terms of the numerator or the denominator.
  double terms() const;
  /// The terms of the numerator: Theorem 2's k. Whether A/B is zero depends on A alone (a test
  /// whose B is zero is drawn again), so the theorem's bound counts A's terms, not B's.
  double numerator_terms() const { return num.terms; }
};

/// A / B − C / D = (A·D − C·B) / (B·D).
Form difference(const Form& x, const Form& y);

/// check_lax, also returning the form of every output of the kernel graph, in order.
LaxReport check_lax_forms(const Graph& kernel_graph, std::vector<Form>& outputs);

/// What the walk with exp, silu, relu, gelu and sqrt as unknown functions saw of their applications.
struct FunctionApplications {
  /// Applications: elements of each op's result, times the blocks of the graph-defined kernel it
  /// sits in and, inside its for-loop, the iterations.
  double count = 0;
  /// The most degree of any operand's numerator and of any operand's denominator.
  double arg_num_deg = 0, arg_den_deg = 0;
};

/// The forms of the kernel graph's outputs with every exp, silu, relu, gelu and sqrt application a fresh
/// variable (an unknown function of its operand), and what those applications were.
void check_opaque_forms(const Graph& kernel_graph, std::vector<Form>& outputs, FunctionApplications& apps);

}  // namespace mugraph::lax
