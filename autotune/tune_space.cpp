// The cpu tuning space by kernel kind.
#include "autotune/tune_space.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdlib>

#include "codegen/cpu/matmul_recognizer.h"

namespace kiln::autotune {

namespace {

using codegen::TuneParams;

TuneParams params(int vector_width, int unroll) {
  TuneParams p;
  p.vector_width = vector_width;
  p.unroll = unroll;
  return p;
}

int log2_int(int x) {
  return std::bit_width(static_cast<unsigned>(x)) - 1;
}

std::vector<TuneCandidate> matmul_space() {
  return {{params(8, 0), 1, "matmul/lanes"},
          {params(16, 0), 2, "matmul/lanes"},
          {params(4, 0), 3, "matmul/lanes"}};
}

// The longest trip count of a loop with no loop inside: the innermost parallel axis (when a store
// runs outside any reduction) or a reduction's innermost variable.
int64_t innermost_trip(const kir::Kernel& k) {
  int64_t trip = k.domain.empty() ? 1 : k.domain.back();
  for (const kir::Expr* e : kir::kernel_exprs(k))
    if (e->kind == kir::ExprKind::Reduce && !e->rextents.empty())
      trip = std::max(trip, e->rextents.back());
  return trip;
}

std::vector<TuneCandidate> loop_space(const kir::Kernel& k) {
  int widest = 1;
  for (const kir::Param& p : k.params) widest = std::max(widest, ir::dtype_size(p.dtype));
  const int natural = std::clamp(32 / widest, 4, 16);
  const int64_t trip = innermost_trip(k);
  std::vector<TuneCandidate> out;
  for (int vw : {4, 8, 16})
    for (int unroll : {1, 2, 4}) {
      if (vw * unroll > trip && !(vw == 4 && unroll == 1)) continue;
      const int priority =
          1 + 2 * std::abs(log2_int(vw) - log2_int(natural)) + std::abs(log2_int(unroll) - 1);
      out.push_back({params(vw, unroll), priority, fmt::format("loop/vector_width={}", vw)});
    }
  return out;
}

}  // namespace

std::vector<TuneCandidate> cpu_tune_space(const kir::Kernel& kernel) {
  std::vector<TuneCandidate> rest =
      codegen::cpu::recognize_matmul(kernel) ? matmul_space() : loop_space(kernel);
  std::ranges::stable_sort(rest, {}, &TuneCandidate::priority);
  std::vector<TuneCandidate> out{{TuneParams{}, 0, "default"}};
  for (TuneCandidate& c : rest)
    if (std::ranges::none_of(out, [&](const TuneCandidate& o) { return o.params == c.params; }))
      out.push_back(std::move(c));
  return out;
}

std::vector<TuneCandidate> cpu_tune_space(const kir::Kernel& kernel, Level level) {
  std::vector<TuneCandidate> all = cpu_tune_space(kernel);
  const int cap = settings(level).max_candidates;
  if (cap > 0 && static_cast<int>(all.size()) > cap) all.resize(static_cast<size_t>(cap));
  return all;
}

}  // namespace kiln::autotune
