// Symbolic plans: two plans of one shape family made into a template, and the template's plan for
// another size of the family (plan_family.h).
#include "runtime/plan_family.h"

#include <algorithm>
#include <bit>

#include "autotune/roofline.h"
#include "ir/builder.h"
#include "ir/kernel_sizes.h"

namespace kiln::runtime {

namespace {

// Every size a plan holds, in one fixed order: the slots' shapes, then per step the kernel's
// domain, its parameters' shapes and its run-time sizes' values. `Sized` is Plan or const Plan.
template <typename Sized, typename F>
void for_each_size(Sized& plan, F&& f) {
  for (auto& slot : plan.slots)
    for (auto& d : slot.shape) f(d);
  for (auto& step : plan.steps) {
    for (auto& d : step.kernel.domain) f(d);
    for (auto& param : step.kernel.params)
      for (auto& d : param.shape) f(d);
    for (auto& v : step.kernel.sizes) f(v);
  }
}

// Per size of `plan`, in for_each_size's order, whether it is a float slot (a double's bits):
// `float_sizes` says, per step, which of its kernel's run-time sizes are.
std::vector<bool> float_positions(const Plan& plan,
                                  const std::vector<std::vector<bool>>& float_sizes) {
  std::vector<bool> out;
  for (const Slot& slot : plan.slots) out.insert(out.end(), slot.shape.size(), false);
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const kir::Kernel& k = plan.steps[s].kernel;
    size_t shapes = k.domain.size();
    for (const kir::Param& p : k.params) shapes += p.shape.size();
    out.insert(out.end(), shapes, false);
    for (size_t v = 0; v < k.sizes.size(); ++v)
      out.push_back(s < float_sizes.size() && v < float_sizes[s].size() && float_sizes[s][v]);
  }
  return out;
}

// A float slot holding a mean's scale for n elements (ir::mean_scale), as the slot holds it.
int64_t reciprocal_bits(int64_t n) {
  return std::bit_cast<int64_t>(ir::mean_scale(n));
}

// Whether two plans are one plan but for their sizes: the same slots (dtypes, bindings, ranks),
// outputs, steps, wiring and kernels. A kernel's identity leaves out its sizes only when it is
// dynamic (its outer extent and leading extents), so a fixed-size kernel must be the same kernel.
bool same_but_sizes(const Plan& a, const Plan& b) {
  if (a.slots.size() != b.slots.size() || a.steps.size() != b.steps.size() ||
      a.output_slots != b.output_slots)
    return false;
  for (size_t s = 0; s < a.slots.size(); ++s)
    if (a.slots[s].dtype != b.slots[s].dtype || a.slots[s].input_index != b.slots[s].input_index ||
        a.slots[s].shape.size() != b.slots[s].shape.size())
      return false;
  for (size_t k = 0; k < a.steps.size(); ++k) {
    const PlanStep& x = a.steps[k];
    const PlanStep& y = b.steps[k];
    // Each step's kernel compiled (its artifact) or stored (its digest: `kiln warm` lowers only).
    if (!x.facts || !y.facts || (!x.artifact && x.kernel_digest.empty()) ||
        (!y.artifact && y.kernel_digest.empty()))
      return false;
    if (x.args != y.args || x.release_after != y.release_after || x.num_ops != y.num_ops ||
        x.kernel_digest != y.kernel_digest || x.in_place.size() != y.in_place.size())
      return false;
    for (size_t i = 0; i < x.in_place.size(); ++i)
      if (x.in_place[i].param != y.in_place[i].param || x.in_place[i].input_slot != y.in_place[i].input_slot)
        return false;
    const kir::Kernel& kx = x.kernel;
    const kir::Kernel& ky = y.kernel;
    if (kx.dynamic_outer != ky.dynamic_outer || kx.dynamic_bound != ky.dynamic_bound ||
        kx.domain.size() != ky.domain.size() || kx.params.size() != ky.params.size())
      return false;
    // A kernel with run-time sizes (ir/kernel_sizes.h): its slots are sizes like the others
    // (the template waits for a third plan to confirm it; a float slot fits as a reciprocal).
    if (kx.sizes.size() != ky.sizes.size()) return false;
    for (size_t p = 0; p < kx.params.size(); ++p)
      if (kx.params[p].shape.size() != ky.params[p].shape.size()) return false;
    if (kir::print_kernel(kx, false) != kir::print_kernel(ky, false)) return false;
  }
  return true;
}

// The element count of `shape`, or nullopt past 64 bits.
std::optional<int64_t> numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  return n;
}

// Whether `r` holds in `plan`.
bool holds(const Plan& plan, const SizeRelation& r) {
  if (r.step >= plan.steps.size()) return false;
  const kir::Kernel& k = plan.steps[r.step].kernel;
  if (r.param >= k.params.size()) return false;
  const ir::Shape& shape = k.params[r.param].shape;
  if (!r.numel) return !k.domain.empty() && !shape.empty() && k.domain[0] == shape[0];
  const std::optional<int64_t> points = numel_of(k.domain), elements = numel_of(shape);
  return points && elements && *points == *elements;
}

// q as a * t + c through (t1, q1) and (t2, q2), with integer a and c; a size that changes is at
// least 2 at both.
std::optional<Affine> fit(int64_t t1, int64_t q1, int64_t t2, int64_t q2) {
  if (q1 == q2) return Affine{0, q1};
  if (q1 < 2 || q2 < 2 || (q2 - q1) % (t2 - t1) != 0) return std::nullopt;
  const int64_t a = (q2 - q1) / (t2 - t1);
  return Affine{a, q1 - a * t1};
}

// A float slot's bits q1, q2 at t1, t2: a constant, or 1.0 / n with n = a * t + c.
std::optional<Affine> fit_float(int64_t t1, int64_t q1, int64_t t2, int64_t q2) {
  if (q1 == q2) return Affine{0, q1};
  const std::optional<int64_t> n1 = ir::mean_count(std::bit_cast<double>(q1)),
                               n2 = ir::mean_count(std::bit_cast<double>(q2));
  if (!n1 || !n2) return std::nullopt;
  std::optional<Affine> f = fit(t1, *n1, t2, *n2);
  if (f) f->reciprocal = true;
  return f;
}

}  // namespace

size_t plan_size_count(const Plan& plan) {
  size_t n = 0;
  for_each_size(plan, [&](int64_t) { ++n; });
  return n;
}

bool size_functions_fit(const PlanTemplate& t) {
  if (!t.base || t.sizes.size() != plan_size_count(*t.base) ||
      t.float_sizes.size() != t.base->steps.size())
    return false;
  for (size_t s = 0; s < t.base->steps.size(); ++s)
    if (t.float_sizes[s].size() != t.base->steps[s].kernel.sizes.size()) return false;
  const std::vector<bool> floats = float_positions(*t.base, t.float_sizes);
  for (size_t i = 0; i < t.sizes.size(); ++i)
    if (floats[i] ? t.sizes[i].a != 0 && !t.sizes[i].reciprocal : t.sizes[i].reciprocal)
      return false;
  return true;
}

std::optional<PlanTemplate> make_plan_template(const Plan& first, const std::vector<int64_t>& dims1,
                                               std::shared_ptr<const Plan> second,
                                               const std::vector<int64_t>& dims2) {
  if (!second || dims1.size() != dims2.size() || !same_but_sizes(first, *second)) return std::nullopt;
  PlanTemplate t;
  while (t.variable < dims1.size() && dims1[t.variable] == dims2[t.variable]) ++t.variable;
  if (t.variable == dims1.size()) return std::nullopt;
  const int64_t t1 = dims1[t.variable], t2 = dims2[t.variable];
  for (size_t i = 0; i < dims1.size(); ++i) {
    std::optional<Affine> f = fit(t1, dims1[i], t2, dims2[i]);
    if (!f) return std::nullopt;
    t.graph.push_back(*f);
  }
  for (const PlanStep& step : second->steps) {
    std::vector<bool>& floats = t.float_sizes.emplace_back();
    if (step.kernel.has_sizes())
      for (const ir::DType dtype : kir::size_dtypes(step.kernel))
        floats.push_back(dtype != ir::DType::i64);
  }
  const std::vector<bool> floats = float_positions(*second, t.float_sizes);
  std::vector<int64_t> sizes1;
  for_each_size(first, [&](int64_t d) { sizes1.push_back(d); });
  size_t i = 0;
  bool affine = true;
  for_each_size(*second, [&](int64_t d) {
    const int64_t d1 = sizes1[i];
    std::optional<Affine> f = floats[i++] ? fit_float(t1, d1, t2, d) : fit(t1, d1, t2, d);
    if (f) t.sizes.push_back(*f);
    affine = affine && f;
  });
  if (!affine) return std::nullopt;
  for (const PlanStep& step : second->steps)
    t.written_only.push_back(kir::written_only(step.kernel));
  for (uint32_t k = 0; k < second->steps.size(); ++k) {
    if (!second->steps[k].kernel.dynamic_outer)
      continue;  // a fixed-size kernel's sizes are constants
    for (uint32_t p = 0; p < second->steps[k].kernel.params.size(); ++p)
      for (const bool numel : {true, false})
        if (SizeRelation r{k, p, numel}; holds(first, r) && holds(*second, r))
          t.relations.push_back(r);
  }
  t.confirmed =
      std::ranges::none_of(second->steps, [](const PlanStep& s) { return s.kernel.has_sizes(); });
  t.base = std::move(second);
  return t;
}

std::optional<Plan> instantiate_plan(const PlanTemplate& t, const std::vector<int64_t>& dims) {
  if (!t.base || dims.size() != t.graph.size() || t.sizes.size() != plan_size_count(*t.base))
    return std::nullopt;
  const int64_t at = dims[t.variable];
  for (size_t i = 0; i < dims.size(); ++i)
    if (t.graph[i].at(at) != std::optional<int64_t>(dims[i]) || (t.graph[i].a != 0 && dims[i] < 2))
      return std::nullopt;
  Plan plan = *t.base;
  size_t i = 0;
  bool fits = true;
  for_each_size(plan, [&](int64_t& d) {
    const Affine& f = t.sizes[i++];
    if (f.a == 0 && !f.reciprocal) return;
    const std::optional<int64_t> size = f.at(at);
    fits = fits && size && *size >= 2;
    d = !fits ? 0 : f.reciprocal ? reciprocal_bits(*size) : *size;
  });
  if (!fits ||
      !std::ranges::all_of(t.relations, [&](const SizeRelation& r) { return holds(plan, r); }))
    return std::nullopt;
  for (PlanStep& step : plan.steps) step.flops = autotune::kernel_work(step.kernel).flops;
  plan.compiled = plan.loaded = plan.tuned = 0;
  plan.compile_ms = plan.plan_ms = 0;
  plan.miss_reasons.clear();
  plan.recompile_reasons.clear();
  return plan;
}

bool confirms(const PlanTemplate& t, const Plan& plan, const std::vector<int64_t>& dims) {
  std::optional<Plan> instance = instantiate_plan(t, dims);
  if (!instance || !same_but_sizes(*instance, plan)) return false;
  std::vector<int64_t> want;
  for_each_size(*instance, [&](int64_t d) { want.push_back(d); });
  size_t i = 0;
  bool equal = true;
  for_each_size(plan, [&](int64_t d) { equal = equal && i < want.size() && want[i++] == d; });
  return equal && i == want.size();
}

}  // namespace kiln::runtime
