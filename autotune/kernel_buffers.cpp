// Seeded random parameter buffers and the output comparison of the autotuner's runner.
#include "autotune/kernel_buffers.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace kiln::autotune {

namespace {

using ir::DType;

uint16_t f32_to_bf16(float f) {
  const uint32_t b = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((b >> 16) | 0x40);
  return static_cast<uint16_t>((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}

template <class T>
T load(const std::vector<uint8_t>& bytes, size_t i) {
  T v;
  std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void store(std::vector<uint8_t>& bytes, size_t i, T v) {
  std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
}

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

size_t numel(const kir::Param& p) {
  return static_cast<size_t>(ir::shape_numel(p.shape));
}

std::string param_name(const kir::Param& p) {
  return p.label.empty() ? std::string(ir::dtype_name(p.dtype)) : p.label;
}

std::string value_text(double v) {
  return fmt::format("{:.9g}", v);
}

std::optional<std::string> compare_floats(const kir::Param& p, size_t index,
                                          const std::vector<uint8_t>& want,
                                          const std::vector<uint8_t>& got) {
  const size_t n = numel(p);
  double scale = 0;
  for (size_t i = 0; i < n; ++i)
    if (const double w = element(p.dtype, want, i); std::isfinite(w))
      scale = std::max(scale, std::abs(w));
  const double allowed = output_tolerance(p.dtype) * scale;
  for (size_t i = 0; i < n; ++i) {
    const double w = element(p.dtype, want, i), g = element(p.dtype, got, i);
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

}  // namespace

double element(DType t, const std::vector<uint8_t>& bytes, size_t i) {
  switch (t) {
    case DType::f32:
      return load<float>(bytes, i);
    case DType::f64:
      return load<double>(bytes, i);
    case DType::f16:
      return static_cast<double>(std::bit_cast<_Float16>(load<uint16_t>(bytes, i)));
    case DType::bf16:
      return std::bit_cast<float>(static_cast<uint32_t>(load<uint16_t>(bytes, i)) << 16);
    case DType::i32:
      return load<int32_t>(bytes, i);
    case DType::i64:
      return static_cast<double>(load<int64_t>(bytes, i));
    case DType::i8:
      return load<int8_t>(bytes, i);
    case DType::u8:
    case DType::boolean:
      return load<uint8_t>(bytes, i);
  }
  return 0;
}

void set_element(DType t, std::vector<uint8_t>& bytes, size_t i, double v) {
  switch (t) {
    case DType::f32:
      return store(bytes, i, static_cast<float>(v));
    case DType::f64:
      return store(bytes, i, v);
    case DType::f16:
      return store(bytes, i, std::bit_cast<uint16_t>(static_cast<_Float16>(static_cast<float>(v))));
    case DType::bf16:
      return store(bytes, i, f32_to_bf16(static_cast<float>(v)));
    case DType::i32:
      return store(bytes, i, static_cast<int32_t>(v));
    case DType::i64:
      return store(bytes, i, static_cast<int64_t>(v));
    case DType::i8:
      return store(bytes, i, static_cast<int8_t>(v));
    case DType::u8:
      return store(bytes, i, static_cast<uint8_t>(v));
    case DType::boolean:
      return store(bytes, i, static_cast<uint8_t>(v != 0));
  }
}

KernelBuffers random_buffers(const kir::Kernel& kernel, uint64_t seed) {
  Random r{seed};
  KernelBuffers out;
  for (const kir::Param& p : kernel.params) {
    const size_t n = numel(p);
    std::vector<uint8_t> bytes(std::max<size_t>(n * ir::dtype_size(p.dtype), 1));
    for (size_t i = 0; i < n; ++i) set_element(p.dtype, bytes, i, random_value(p.dtype, r));
    out.push_back(std::move(bytes));
  }
  return out;
}

double output_tolerance(DType t) {
  switch (t) {
    case DType::f32:
    case DType::f64:
      return 1e-4;
    case DType::f16:
      return 2e-3;
    case DType::bf16:
      return 1.6e-2;
    default:
      return 0;
  }
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
    for (size_t i = 0; i < numel(p); ++i)
      if (std::memcmp(want[b].data() + i * size, got[b].data() + i * size, size) != 0)
        return fmt::format("output %{} ({}) element {}: got {}, the default candidate gave {}", b,
                           param_name(p), i, value_text(element(p.dtype, got[b], i)),
                           value_text(element(p.dtype, want[b], i)));
  }
  return std::nullopt;
}

}  // namespace kiln::autotune
