// Measuring and keeping the cpu rates: a streaming kernel (bandwidth), an empty launch (launch
// overhead) and an arithmetic chain on an in-cache buffer (compute rate), each the median of a
// few runs.
#include "runtime/cpu_rates.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <functional>

#include "runtime/buffer.h"

namespace kiln::runtime {

namespace {
using ir::DType;

double median_seconds(int runs, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int r = 0; r < runs; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

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

struct Runner {
  codegen::CpuBackend& backend;
  ThreadPool& threads;
  std::shared_ptr<BufferPool> pool = BufferPool::create();

  Expected<double> time(const kir::Kernel& k, int runs) {
    auto art = backend.compile(k, {});
    if (!art) return std::unexpected(art.error());
    auto x = pool->allocate(DType::f32, k.params[0].shape);
    auto y = pool->allocate(DType::f32, k.params[1].shape);
    std::fill_n(reinterpret_cast<float*>(x->data()), x->numel(), 1.0f);
    void* bufs[] = {x->data(), y->data()};
    codegen::CpuKernelFn fn = (*art)->fn;
    auto launch = [&] {
      threads.parallel_for(k.domain[0], 1 << 14, [&](int64_t b, int64_t e) { fn(bufs, b, e); });
    };
    launch();  // warm: pages, caches
    return median_seconds(runs, launch);
  }
};

std::filesystem::path rates_path(const codegen::CpuBackend& backend, int threads) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::filesystem::path dir = xdg && *xdg ? std::filesystem::path(xdg) / "kiln"
                              : home && *home ? std::filesystem::path(home) / ".cache" / "kiln"
                                              : std::filesystem::path();
  if (dir.empty()) return {};
  size_t h = std::hash<std::string>{}(backend.cpu_name() + backend.cpu_features());
  return dir / fmt::format("cpu-rates-{}-{:016x}-t{}.txt", backend.cpu_name(), h, threads);
}
}  // namespace

Expected<passes::DeviceRates> measure_cpu_rates(codegen::CpuBackend& backend, ThreadPool& threads) {
  Runner run{backend, threads};
  passes::DeviceRates r;
  // Bandwidth: y = x*2 + 1 over 64 MiB in and out (well past the 32 MiB L3).
  constexpr int64_t kStream = int64_t{16} << 20;
  auto stream = run.time(unary_kernel(kStream, [](kir::ExprArena& a, const kir::Expr* x) {
    return a.alu(kir::Alu::Add, DType::f32,
                 {a.alu(kir::Alu::Mul, DType::f32, {x, a.constant(DType::f32, 2)}),
                  a.constant(DType::f32, 1)});
  }), 5);
  if (!stream) return std::unexpected(stream.error());
  r.bandwidth = 2.0 * kStream * 4 / *stream;
  // Launch overhead: one element.
  auto tiny = run.time(unary_kernel(1, [](kir::ExprArena&, const kir::Expr* x) { return x; }), 101);
  if (!tiny) return std::unexpected(tiny.error());
  r.launch_overhead = *tiny;
  // Compute: 64 dependent mul+add pairs per element on 64 KiB per thread (in L2).
  constexpr int kPairs = 64;
  const int64_t n = int64_t{16384} * threads.size();
  auto compute = run.time(unary_kernel(n, [](kir::ExprArena& a, const kir::Expr* x) {
    const kir::Expr* v = x;
    for (int p = 0; p < kPairs; ++p)
      v = a.alu(kir::Alu::Add, DType::f32,
                {a.alu(kir::Alu::Mul, DType::f32, {v, a.constant(DType::f32, 0.999)}),
                 a.constant(DType::f32, 0.001)});
    return v;
  }), 9);
  if (!compute) return std::unexpected(compute.error());
  r.compute_rate = 2.0 * kPairs * n / std::max(*compute - r.launch_overhead, 1e-9);
  return r;
}

passes::DeviceRates cpu_rates(codegen::CpuBackend& backend, ThreadPool& threads) {
  const char* env = std::getenv("KILN_CPU_RATES");
  if (env && std::string(env) == "reference") return passes::DeviceRates::reference_cpu();
  std::filesystem::path path = rates_path(backend, threads.size());
  passes::DeviceRates r;
  if (!path.empty()) {
    std::ifstream in(path);
    if (in >> r.bandwidth >> r.launch_overhead >> r.compute_rate && r.bandwidth > 0 &&
        r.launch_overhead > 0 && r.compute_rate > 0)
      return r;
  }
  auto measured = measure_cpu_rates(backend, threads);
  if (!measured) {
    fmt::print(stderr, "kiln: warning: measuring cpu rates failed ({}); using reference rates\n",
               measured.error().message);
    return passes::DeviceRates::reference_cpu();
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
