// The rate kernels, timed by the target that measures.
#include "runtime/measured_rates.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace kiln::runtime {

namespace {

using ir::DType;

// y[i] = f(x[i]) over a 1-D domain of n f32 elements; `chain` builds f.
kir::Kernel unary_kernel(int64_t n, const std::function<const kir::Expr*(kir::ExprArena&,
                                                                         const kir::Expr*)>& chain) {
  kir::Kernel k;
  k.name = "rates";
  k.arena = std::make_shared<kir::ExprArena>();
  k.params = {{DType::f32, {n}, false, "x"}, {DType::f32, {n}, true, "y"}};
  k.domain = {n};
  const kir::Expr* i = k.arena->var(0);
  k.stores = {{1, i, chain(*k.arena, k.arena->load(0, DType::f32, i))}};
  return k;
}

}  // namespace

Expected<passes::DeviceRates> measure_rates(const KernelTimer& time, const RateSizes& sizes) {
  passes::DeviceRates r;
  // Bandwidth: y = x*2 + 1, read and written once.
  auto stream = time(unary_kernel(sizes.stream, [](kir::ExprArena& a, const kir::Expr* x) {
    return a.alu(kir::Alu::Add, DType::f32,
                 {a.alu(kir::Alu::Mul, DType::f32, {x, a.constant(DType::f32, 2)}),
                  a.constant(DType::f32, 1)});
  }), 5);
  if (!stream) return std::unexpected(stream.error());
  r.bandwidth = 2.0 * static_cast<double>(sizes.stream) * 4 / std::max(*stream, 1e-12);
  // Launch overhead: one element.
  auto tiny = time(unary_kernel(1, [](kir::ExprArena&, const kir::Expr* x) { return x; }), 101);
  if (!tiny) return std::unexpected(tiny.error());
  r.launch_overhead = std::max(*tiny, 1e-9);
  // Compute: 64 dependent mul+add pairs per element, on a buffer that stays in the caches.
  constexpr int kPairs = 64;
  auto compute = time(unary_kernel(sizes.compute, [](kir::ExprArena& a, const kir::Expr* x) {
    const kir::Expr* v = x;
    for (int p = 0; p < kPairs; ++p)
      v = a.alu(kir::Alu::Add, DType::f32,
                {a.alu(kir::Alu::Mul, DType::f32, {v, a.constant(DType::f32, 0.999)}),
                 a.constant(DType::f32, 0.001)});
    return v;
  }), 9);
  if (!compute) return std::unexpected(compute.error());
  r.compute_rate = 2.0 * kPairs * static_cast<double>(sizes.compute) /
                   std::max(*compute - r.launch_overhead, 1e-9);
  return r;
}

cache::Entry rates_entry(const passes::DeviceRates& rates) {
  const std::string json = nlohmann::json{{"bandwidth", rates.bandwidth},
                                          {"launch_overhead", rates.launch_overhead},
                                          {"compute_rate", rates.compute_rate}}
                               .dump();
  cache::Entry e;
  e.value.assign(json.begin(), json.end());
  e.source = rates.str();
  e.metadata = R"({"kind":"measured rates"})";
  return e;
}

std::optional<passes::DeviceRates> rates_from_entry(const cache::Entry& entry) {
  const auto j = nlohmann::json::parse(entry.value.begin(), entry.value.end(), nullptr, false);
  if (!j.is_object()) return std::nullopt;
  passes::DeviceRates r;
  for (auto [name, field] : {std::pair{"bandwidth", &r.bandwidth},
                             std::pair{"launch_overhead", &r.launch_overhead},
                             std::pair{"compute_rate", &r.compute_rate}}) {
    if (!j.contains(name) || !j[name].is_number()) return std::nullopt;
    *field = j[name].get<double>();
    if (!std::isfinite(*field) || *field <= 0) return std::nullopt;
  }
  return r;
}

}  // namespace kiln::runtime
