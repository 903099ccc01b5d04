// Seeded random parameter buffers and the output comparison of the autotuner's runner.
#include "autotune/kernel_buffers.h"

#include "autotune/roofline.h"
#include "support/host_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace kiln::autotune {

namespace {

using ir::DType;

// splitmix64: the same numbers on every platform (std distributions are not specified exactly).
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  int64_t in(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(next() % (hi - lo + 1)); }
};

double random_value(DType t, Random& r) {
  if (ir::is_float(t)) return -2 + 4 * r.unit();
  if (t == DType::boolean) return static_cast<double>(r.in(0, 1));
  if (t == DType::u8) return static_cast<double>(r.in(0, 16));
  return static_cast<double>(r.in(-8, 8));
}

int64_t numel(const kir::Param& p) {
  return ir::shape_numel(p.shape);
}

std::string param_name(const kir::Param& p) {
  return p.label.empty() ? std::string(ir::dtype_name(p.dtype)) : p.label;
}

std::string value_text(double v) {
  return fmt::format("{:.9g}", v);
}

// Element i of a tensor of Ts (f32, f64), or HostTensor::get's value for another dtype: a
// candidate's outputs are compared element by element, millions of them per candidate, and get's
// checks and dtype switch took a fifth of a first run's tuning.
template <typename T>
struct Elements {
  const ir::HostTensor& t;
  double operator()(int64_t i) const {
    if constexpr (std::is_void_v<T>) {
      return t.get(i);
    } else {
      T v;
      std::memcpy(&v, t.bytes.data() + static_cast<size_t>(i) * sizeof(T), sizeof(T));
      return static_cast<double>(v);
    }
  }
};

template <typename T>
std::optional<std::string> compare_floats_of(const kir::Param& p, size_t index,
                                             const ir::HostTensor& want_t,
                                             const ir::HostTensor& got_t) {
  const Elements<T> want{want_t}, got{got_t};
  const int64_t n = numel(p);
  double scale = 0;
  for (int64_t i = 0; i < n; ++i)
    if (const double w = want(i); std::isfinite(w)) scale = std::max(scale, std::abs(w));
  const double allowed = output_tolerance(p.dtype) * scale;
  for (int64_t i = 0; i < n; ++i) {
    const double w = want(i), g = got(i);
    const bool same = std::isnan(w) || std::isnan(g)   ? std::isnan(w) && std::isnan(g)
                      : std::isinf(w) || std::isinf(g) ? w == g
                                                       : std::abs(g - w) <= allowed;
    if (!same)
      return fmt::format(
          "output %{} ({}) element {}: got {}, the default candidate gave {} (tolerance {:g} of "
          "the output's scale {:g})",
          index, param_name(p), i, value_text(g), value_text(w), output_tolerance(p.dtype), scale);
  }
  return std::nullopt;
}

std::optional<std::string> compare_floats(const kir::Param& p, size_t index,
                                          const ir::HostTensor& want, const ir::HostTensor& got) {
  // The same bytes (most candidates' outputs) match whatever the tolerance, NaNs included.
  if (want.bytes == got.bytes) return std::nullopt;
  if (want.dtype == DType::f32) return compare_floats_of<float>(p, index, want, got);
  if (want.dtype == DType::f64) return compare_floats_of<double>(p, index, want, got);
  return compare_floats_of<void>(p, index, want, got);
}

}  // namespace

double benchmark_bytes(const kir::Kernel& kernel) {
  double outputs = 0;
  for (const kir::Param& p : kernel.params)
    if (p.output) outputs += static_cast<double>(ir::shape_numel(p.shape)) * ir::dtype_size(p.dtype);
  return kernel_bytes(kernel) + 2 * outputs;
}

bool fits_on_host(const kir::Kernel& kernel) {
  return ir::HostTensor::fits_in_memory(benchmark_bytes(kernel));
}

KernelBuffers random_buffers(const kir::Kernel& kernel, uint64_t seed) {
  Random r{seed};
  KernelBuffers out;
  for (const kir::Param& p : kernel.params) {
    ir::HostTensor t = ir::HostTensor::zeros(p.dtype, p.shape);
    if (t.bytes.empty()) t.bytes.resize(static_cast<size_t>(ir::dtype_size(p.dtype)));
    if (p.dtype == DType::f32) {  // as set() stores them, without its checks per element
      for (int64_t i = 0; i < t.numel(); ++i) {
        const auto v = static_cast<float>(random_value(p.dtype, r));
        std::memcpy(t.bytes.data() + static_cast<size_t>(i) * sizeof v, &v, sizeof v);
      }
    } else {
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, random_value(p.dtype, r));
    }
    out.push_back(std::move(t));
  }
  return out;
}

KernelBuffers copy_outputs(const kir::Kernel& kernel, const KernelBuffers& from) {
  KernelBuffers out;
  for (size_t b = 0; b < from.size(); ++b) {
    const ir::HostTensor& f = from[b];
    if (!kernel.params[b].output) {
      ir::HostTensor none;
      none.dtype = f.dtype;
      none.shape = f.shape;
      out.push_back(std::move(none));
      continue;
    }
    // Copied into fresh memory as it is first touched (not zeroed first, then copied over); an
    // empty parameter's tensor holds one element, as `from`'s does.
    ir::HostTensor t;
    t.dtype = f.dtype;
    t.shape = f.shape;
    t.bytes.reserve(f.bytes.size());
    support::advise_huge_pages(t.bytes.data(), f.bytes.size());
    t.bytes.assign(f.bytes.begin(), f.bytes.end());
    out.push_back(std::move(t));
  }
  return out;
}

double output_tolerance(DType t) {
  return ir::compare_tolerance(t, 1e-4, 1e-4);
}

std::optional<std::string> compare_outputs(const kir::Kernel& kernel, const KernelBuffers& want,
                                           const KernelBuffers& got) {
  for (size_t b = 0; b < kernel.params.size(); ++b) {
    const kir::Param& p = kernel.params[b];
    if (!p.output) continue;
    if (ir::is_float(p.dtype)) {
      if (auto bad = compare_floats(p, b, want[b], got[b])) return bad;
      continue;
    }
    const size_t size = static_cast<size_t>(ir::dtype_size(p.dtype));
    for (int64_t i = 0; i < numel(p); ++i) {
      const size_t at = static_cast<size_t>(i) * size;
      if (std::memcmp(want[b].bytes.data() + at, got[b].bytes.data() + at, size) != 0)
        return fmt::format("output %{} ({}) element {}: got {}, the default candidate gave {}", b,
                           param_name(p), i, value_text(got[b].get(i)),
                           value_text(want[b].get(i)));
    }
  }
  return std::nullopt;
}

}  // namespace kiln::autotune
