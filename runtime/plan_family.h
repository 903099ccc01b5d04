// Symbolic plans (docs/dynamic-shapes.md, DESIGN.md §2 "Shapes"): one plan that serves every size
// of a graph's shape family (runtime/structural_key.h), so a new batch size neither lowers nor
// fuses again.
//
// A plan's sizes are those of one instance. The executor builds the plans of two sizes of one
// family as usual; when they are the same plan but for their sizes (the same steps, wiring and
// kernels, each kernel dynamic or of fixed size) and each size of the graph and of the plan is an
// affine function a * t + c (integer a and c) of one size t, the first input dimension that
// changed, the pair is a PlanTemplate. For a third size of the family, the template checks that
// every size of its graph is that function of its t, and writes the plan's sizes for it: the
// same kernels, launched over other extents, and buffers of other sizes. A plan with a kernel of
// run-time sizes (ir/kernel_sizes.h) makes no template. Sizes 0 and 1 are
// specialization facts (a one-row matrix product takes another path): a size that changes is at
// least 2 in both plans and in every instance.
//
// A kernel with run-time sizes (ir/kernel_sizes.h) keeps its slots' values in Kernel::sizes, which
// the template fits like every other size. Two plans fit any size as a line, a slot holding a
// product of sizes that change (a stride n * n) too, and nothing in the plan shows it: such a
// template is used only once a third plan of the family, built as usual, is its instance at that
// plan's sizes (PlanTemplate::confirmed; confirms). A float slot that holds 1 / n for an integer n
// (a mean's scale, ir::Builder::mean) fits as n = a * t + c, its value the double 1.0 / n as the
// builder computes it (Affine::reciprocal); any other float slot that changes fits nothing, and
// its plan makes no template.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/plan.h"

namespace kiln::runtime {

struct Affine {
  int64_t a = 0, c = 0;
  // The size is a float slot holding the bits of the double 1.0 / (a * t + c), not a * t + c.
  bool reciprocal = false;
  // a * t + c, or nullopt where it overflows (a template read back from the cache is untrusted).
  std::optional<int64_t> at(int64_t t) const {
    int64_t at = 0;
    if (__builtin_mul_overflow(a, t, &at) || __builtin_add_overflow(at, c, &at))
      return std::nullopt;
    return at;
  }
};

// An equality between a dynamic kernel's domain and one of its parameters that held in both plans
// of a template: two sizes fitted as affine functions of t each can still be one product of sizes
// that change (an elementwise kernel over [b, b] runs one axis of b * b points, which no a * t + c
// is), so an instance must keep every such equality.
struct SizeRelation {
  uint32_t step = 0, param = 0;
  bool numel = false;  // true: the domain's point count is the parameter's element count; false:
                       // the domain's outer extent is the parameter's leading extent
};

struct PlanTemplate {
  std::shared_ptr<const Plan> base;  // the plan of the second size: its kernels and wiring
  size_t variable = 0;               // the family size (ShapeFamily::dims index) that is t
  std::vector<Affine> graph;         // each family size as a function of t
  std::vector<Affine> sizes;         // each of the plan's sizes (slots, domains, parameters)
  // Per step, kir::written_only of its kernel: what Target::serves_instance asks at a new size.
  std::vector<std::vector<bool>> written_only;
  std::vector<SizeRelation> relations;
  // Per step, which of its kernel's run-time sizes are float slots (kir::size_dtypes of the
  // base's kernels, kept here: a template read back has their shapes only, not their bodies).
  std::vector<std::vector<bool>> float_sizes;
  bool from_cache = false;  // read back from a record (plan_record.h): its instances are checked
  // Whether it serves new sizes: false for a template of kernels with run-time sizes until a
  // third plan confirms it (only confirmed templates are stored).
  bool confirmed = true;
};

// How many sizes a plan holds (a template has a function for each).
size_t plan_size_count(const Plan& plan);

// Whether each function of `t` suits the size of its base plan it stands for: a float slot's is a
// constant or a reciprocal, every other size's no reciprocal, by t.float_sizes (a record read
// back is untrusted).
bool size_functions_fit(const PlanTemplate& t);

// The template of two plans built for two sizes of one family (`dims1`, `dims2`: their
// ShapeFamily::dims), or nullopt where the plans differ in more than sizes, a size is not an
// affine function of t with integer coefficients, a size that changes is below 2, or a plan was
// read back from a record (no kernel facts to check an instance with).
std::optional<PlanTemplate> make_plan_template(const Plan& first, const std::vector<int64_t>& dims1,
                                               std::shared_ptr<const Plan> second,
                                               const std::vector<int64_t>& dims2);

// The template's plan for the family sizes `dims`, or nullopt where `dims` are not the
// template's functions of their t, or a size that changes would be below 2. Its kernels are the
// base plan's; a dynamic step's artifact is still bound to the base's extent (the executor binds
// it to the new one), and nothing in it counts as compiled, loaded or tuned.
std::optional<Plan> instantiate_plan(const PlanTemplate& t, const std::vector<int64_t>& dims);

// Whether `plan`, built for the family sizes `dims`, is the template's instance there: the same
// plan but for its sizes, every size the template's function of t.
bool confirms(const PlanTemplate& t, const Plan& plan, const std::vector<int64_t>& dims);

}  // namespace kiln::runtime
