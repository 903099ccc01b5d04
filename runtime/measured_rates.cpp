// The rate kernels and the kept measurement file.
#include "runtime/measured_rates.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

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

std::filesystem::path rates_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  return xdg && *xdg    ? std::filesystem::path(xdg) / "kiln"
         : home && *home ? std::filesystem::path(home) / ".cache" / "kiln"
                         : std::filesystem::path();
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

passes::DeviceRates kept_rates(const std::string& file_stem,
                               const std::function<Expected<passes::DeviceRates>()>& measure,
                               const passes::DeviceRates& fallback, std::string_view what) {
  const std::filesystem::path dir = rates_dir();
  const std::filesystem::path path = dir.empty() ? dir : dir / (file_stem + ".txt");
  passes::DeviceRates r;
  if (!path.empty()) {
    std::ifstream in(path);
    if (in >> r.bandwidth >> r.launch_overhead >> r.compute_rate && r.bandwidth > 0 &&
        r.launch_overhead > 0 && r.compute_rate > 0)
      return r;
  }
  auto measured = measure();
  if (!measured) {
    fmt::print(stderr, "kiln: warning: measuring {} rates failed ({}); using reference rates\n",
               what, measured.error().message);
    return fallback;
  }
  if (!path.empty()) {
    // Kept best-effort: an unwritable cache directory only costs a re-measurement next time.
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    std::filesystem::path tmp = path;
    tmp += fmt::format(".tmp{}", static_cast<long>(::getpid()));
    {
      std::ofstream out(tmp);
      out << fmt::format("{:.17g} {:.17g} {:.17g}\n", measured->bandwidth, measured->launch_overhead,
                         measured->compute_rate);
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) std::filesystem::remove(tmp, ec);
  }
  return *measured;
}

}  // namespace kiln::runtime
