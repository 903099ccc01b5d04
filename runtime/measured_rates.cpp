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

// y = x*2 + 1 over n elements: each read and written once (the stream probes).
kir::Kernel stream_kernel(int64_t n) {
  return unary_kernel(n, [](kir::ExprArena& a, const kir::Expr* x) {
    return a.alu(kir::Alu::Add, DType::f32,
                 {a.alu(kir::Alu::Mul, DType::f32, {x, a.constant(DType::f32, 2)}), a.constant(DType::f32, 1)});
  });
}

// y = x @ x for an n x n x: the contraction the backends recognize as a matmul.
kir::Kernel matmul_kernel(int64_t n) {
  kir::Kernel k;
  k.name = "rates";
  k.arena = std::make_shared<kir::ExprArena>();
  k.params = {{DType::f32, {n, n}, false, "x"}, {DType::f32, {n, n}, true, "y"}};
  k.domain = {n, n};
  kir::ExprArena& a = *k.arena;
  auto add = [&](const kir::Expr* x, const kir::Expr* y) { return a.alu(kir::Alu::Add, DType::i64, {x, y}); };
  auto mul = [&](const kir::Expr* x, int64_t c) { return a.alu(kir::Alu::Mul, DType::i64, {x, a.index(c)}); };
  const kir::Expr *i = a.var(0), *j = a.var(1), *r = a.var(2);
  const kir::Expr* prod = a.alu(kir::Alu::Mul, DType::f32,
                                {a.load(0, DType::f32, add(mul(i, n), r)), a.load(0, DType::f32, add(mul(r, n), j))});
  k.stores = {{1, add(mul(i, n), j), a.reduce(kir::ReduceOp::Sum, DType::f32, prod, {2}, {n})}};
  return k;
}

struct CostlyOp {
  ir::Op op;
  kir::Alu alu;
  int arity;
};

// The elementwise ops the cost model prices by their own measured time (cost 4 or more, one or
// two operands, all of them taking f32).
std::vector<CostlyOp> costly_ops() {
  std::vector<CostlyOp> out;
#define KILN_ELEMENTWISE(Enum, name, arity, dtypes, cost, api) \
  if ((cost) >= 4 && ((arity) == 1 || (arity) == 2)) out.push_back({ir::Op::Enum, kir::Alu::Enum, arity});
#include "kiln/ops.def"
  return out;
}

// Seconds of `runs` runs of `k` less one launch: the work's own time.
Expected<double> work_seconds(const KernelTimer& time, const kir::Kernel& k, int runs, double launch,
                              bool one_core = false) {
  auto t = time(k, runs, one_core);
  if (!t) return t;
  return std::max(*t - launch, 1e-9);
}

}  // namespace

Expected<passes::DeviceRates> measure_rates(const KernelTimer& time, const RateSizes& sizes) {
  passes::DeviceRates r;
  // Bandwidth: y = x*2 + 1, read and written once.
  auto stream = time(stream_kernel(sizes.stream), 5, false);
  if (!stream) return std::unexpected(stream.error());
  r.bandwidth = 2.0 * static_cast<double>(sizes.stream) * 4 / std::max(*stream, 1e-12);
  // Launch overhead: one element.
  auto tiny = time(unary_kernel(1, [](kir::ExprArena&, const kir::Expr* x) { return x; }), 101, false);
  if (!tiny) return std::unexpected(tiny.error());
  r.launch_overhead = std::max(*tiny, 1e-9);
  // Compute: 64 dependent mul+add pairs per element, on a buffer that stays in the caches.
  constexpr int kPairs = 64;
  auto chain = [](int64_t n) {
    return unary_kernel(n, [](kir::ExprArena& a, const kir::Expr* x) {
      const kir::Expr* v = x;
      for (int p = 0; p < kPairs; ++p)
        v = a.alu(kir::Alu::Add, DType::f32,
                  {a.alu(kir::Alu::Mul, DType::f32, {v, a.constant(DType::f32, 0.999)}),
                   a.constant(DType::f32, 0.001)});
      return v;
    });
  };
  auto compute = time(chain(sizes.compute), 9, false);
  if (!compute) return std::unexpected(compute.error());
  r.compute_rate = 2.0 * kPairs * static_cast<double>(sizes.compute) /
                   std::max(*compute - r.launch_overhead, 1e-9);
  if (sizes.serial_compute > 0) {
    auto t = work_seconds(time, chain(sizes.serial_compute), 21, r.launch_overhead, /*one_core=*/true);
    if (!t) return std::unexpected(t.error());
    r.serial_compute_rate = 2.0 * kPairs * static_cast<double>(sizes.serial_compute) / *t;
  }
  if (sizes.matmul > 0) {
    const auto n = static_cast<double>(sizes.matmul);
    auto t = work_seconds(time, matmul_kernel(sizes.matmul), 7, r.launch_overhead);
    if (!t) return std::unexpected(t.error());
    r.matmul_rate = 2 * n * n * n / *t;
  }
  if (sizes.cache_stream > 0) {
    auto t = work_seconds(time, stream_kernel(sizes.cache_stream), 21, r.launch_overhead);
    if (!t) return std::unexpected(t.error());
    r.cache_bandwidth = std::max(r.bandwidth, 2.0 * static_cast<double>(sizes.cache_stream) * 4 / *t);
    if (sizes.parallel_launch > 0) {
      auto small = time(stream_kernel(sizes.parallel_launch), 101, false);
      if (!small) return std::unexpected(small.error());
      const double moving = 2.0 * static_cast<double>(sizes.parallel_launch) * 4 / r.cache_bandwidth;
      r.launch_overhead = std::max(r.launch_overhead, *small - moving);
    }
  }
  if (sizes.costly > 0) {
    // Each costly op (kiln/ops.def cost >= 4) on f32: y = f(x) + f(x/2) + f(x/4) + f(x/8) (a
    // binary op takes x as its second operand too), x = 1 in the caches: four independent
    // evaluations per element, less the element's other work (3 multiplications, 3 additions,
    // 8 bytes at the cache bandwidth).
    constexpr int kEvals = 4;
    const auto n = static_cast<double>(sizes.costly);
    const double cache_bw = r.cache_bandwidth > 0 ? r.cache_bandwidth : r.bandwidth;
    const double other = n * ((2.0 * (kEvals - 1)) / r.compute_rate + 8.0 / cache_bw);
    for (const auto& [op, alu, arity] : costly_ops()) {
      auto t = work_seconds(time, unary_kernel(sizes.costly, [&](kir::ExprArena& a, const kir::Expr* x) {
        const kir::Expr* sum = nullptr;
        for (int e = 0; e < kEvals; ++e) {
          const kir::Expr* arg = e == 0 ? x : a.alu(kir::Alu::Mul, DType::f32, {x, a.constant(DType::f32, 1.0 / (1 << e))});
          std::vector<const kir::Expr*> args{arg};
          if (arity == 2) args.push_back(x);
          const kir::Expr* v = a.alu(alu, DType::f32, std::move(args));
          sum = sum ? a.alu(kir::Alu::Add, DType::f32, {sum, v}) : v;
        }
        return sum;
      }), 9, r.launch_overhead);
      if (!t) return std::unexpected(t.error());
      r.op_seconds[op] = std::max(*t - other, *t / 4) / (kEvals * n);
    }
  }
  return r;
}

cache::Entry rates_entry(const passes::DeviceRates& rates) {
  nlohmann::json op_seconds = nlohmann::json::object();
  for (const auto& [op, sec] : rates.op_seconds) op_seconds[std::string(ir::op_name(op))] = sec;
  const std::string json = nlohmann::json{{"bandwidth", rates.bandwidth},
                                          {"launch_overhead", rates.launch_overhead},
                                          {"compute_rate", rates.compute_rate},
                                          {"serial_compute_rate", rates.serial_compute_rate},
                                          {"matmul_rate", rates.matmul_rate},
                                          {"cache_bandwidth", rates.cache_bandwidth},
                                          {"op_seconds", op_seconds}}
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
  // The rates by kind: 0 where the device's measurement leaves them out.
  for (auto [name, field] : {std::pair{"matmul_rate", &r.matmul_rate},
                             std::pair{"cache_bandwidth", &r.cache_bandwidth},
                             std::pair{"serial_compute_rate", &r.serial_compute_rate}}) {
    if (!j.contains(name) || !j[name].is_number()) return std::nullopt;
    *field = j[name].get<double>();
    if (!std::isfinite(*field) || *field < 0) return std::nullopt;
  }
  if (!j.contains("op_seconds") || !j["op_seconds"].is_object()) return std::nullopt;
  const std::vector<CostlyOp> ops = costly_ops();
  for (const auto& [name, sec] : j["op_seconds"].items()) {
    auto it = std::ranges::find_if(ops, [&](const CostlyOp& c) { return ir::op_name(c.op) == name; });
    if (it == ops.end() || !sec.is_number() || !std::isfinite(sec.get<double>()) || sec.get<double>() <= 0)
      return std::nullopt;
    r.op_seconds[it->op] = sec.get<double>();
  }
  return r;
}

cache::Entry ratio_entry(double ratio) {
  const std::string json = nlohmann::json{{"ratio", ratio}}.dump();
  cache::Entry e;
  e.value.assign(json.begin(), json.end());
  e.source = fmt::format("run-time sizes at {:.3f}x one size's own code", ratio);
  e.metadata = R"({"kind":"sizes timing"})";
  return e;
}

std::optional<double> ratio_from_entry(const cache::Entry& entry) {
  const auto j = nlohmann::json::parse(entry.value.begin(), entry.value.end(), nullptr, false);
  if (!j.is_object() || !j.contains("ratio") || !j["ratio"].is_number()) return std::nullopt;
  const double ratio = j["ratio"].get<double>();
  if (!std::isfinite(ratio) || ratio <= 0) return std::nullopt;
  return ratio;
}

}  // namespace kiln::runtime
