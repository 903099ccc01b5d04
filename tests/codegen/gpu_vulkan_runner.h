// Runs a kernel on vulkan:0 (lavapipe) and on the cpu backend with the same random inputs and
// compares the outputs: the differential harness of the GPU source tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>

#include <fmt/format.h>

#include "codegen/cpu/cpu_backend.h"
#include "codegen/gpu/gpu_source.h"
#include "codegen/gpu/lane_emitter.h"
#include "kiln/host_tensor.h"
#include "runtime/gpu_backend.h"

namespace kiln::codegen::gpu {

using ir::DType;

// Inputs with NaN, infinities, signed zeros and ties for floats; full-range integers. Reduction
// inputs use +-1 and +-2 (exact sums, and products whose overflow does not depend on order) and
// rare NaNs; matmul inputs plain finite values (a NaN would spread over whole rows).
// `rounding`: values at every rounding boundary of f16 and bf16 (codegen/gpu rounding tests).
enum class Inputs { alu, reduce, matmul, rounding, by_name };

// Random f32 bits from f16's subnormals to f32's overflow edge, a quarter of them halfway
// between two f16 values and a quarter halfway between two bf16 values; a few specials.
inline uint32_t rounding_f32_bits(std::mt19937& rng) {
  const uint32_t r = rng(), m = rng() & 0x7fffffu;
  const uint32_t specials[] = {0x7fc00000u, 0x7f800000u, 0x477fe000u, 0x477ff000u, 0x7f7fffffu,
                               0x7f7f8000u, 0x0u,        0x33000000u, 0x33000001u};
  if (r % 16 == 0) return specials[(r >> 4) % std::size(specials)] | (r & 0x80000000u);
  const uint32_t e =
      (r >> 8) % 16 == 0 ? (r >> 12) & 0xffu : 127 - 27 + (r >> 12) % 46;  // 2^-27 .. 2^18
  uint32_t bits = (r & 0x80000000u) | (std::min(e, 254u) << 23) | m;
  if (r % 4 == 1) bits = (bits & ~0x1fffu) | 0x1000u;  // an f16 halfway point (normal range)
  if (r % 4 == 2) bits = (bits & ~0xffffu) | 0x8000u;  // a bf16 halfway point
  return bits;
}

// Integers of every bit length, many of them halfway between two floats of 8 or 11 bits.
inline int64_t rounding_int(std::mt19937& rng, int max_bits) {
  const uint64_t r = (uint64_t{rng()} << 32) | rng();
  const int len = 1 + static_cast<int>(rng() % max_bits);
  uint64_t v = (r & ((uint64_t{1} << len) - 1)) | (uint64_t{1} << (len - 1));
  const int keep = (rng() & 1) ? 8 : 11;
  if (len > keep + 1 && rng() % 2)
    v = (v >> (len - keep)) << (len - keep) | (uint64_t{1} << (len - keep - 1));
  return (rng() & 1) ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
}

inline ir::HostTensor random_input(DType t, const ir::Shape& shape, std::mt19937& rng,
                                   Inputs kind) {
  ir::HostTensor h = ir::HostTensor::zeros(t, shape);
  std::uniform_real_distribution<double> u(-4.0, 4.0);
  std::uniform_int_distribution<int64_t> any(-(int64_t{1} << 40), int64_t{1} << 40);
  const double specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 2.0, -3.0, 0.5, 1e-3};
  for (int64_t i = 0; i < h.numel(); ++i) {
    const uint32_t r = rng();
    double v;
    if (t == DType::boolean)
      v = r & 1;
    else if (t == DType::u8)
      v = r & 0xff;
    else if (t == DType::i8)
      v = static_cast<int8_t>(r & 0xff);
    else if (t == DType::i32)
      v = static_cast<int32_t>(r);
    else if (t == DType::i64)
      v = static_cast<double>(any(rng));
    else if (kind == Inputs::rounding && t == DType::i64) {
      const int64_t x = rounding_int(rng, 62);
      std::memcpy(&h.bytes[i * 8], &x, 8);
      continue;
    } else if (kind == Inputs::rounding && t == DType::i32)
      v = static_cast<double>(rounding_int(rng, 30));
    else if (kind == Inputs::rounding && (t == DType::f32 || t == DType::f64)) {
      float f;
      const uint32_t bits = rounding_f32_bits(rng);
      std::memcpy(&f, &bits, 4);
      v = f;  // f64: the halfway point itself, or one of its neighbours (a double rounding's trap)
      if (t == DType::f64 && std::isfinite(v) && r % 3 != 0)
        v = std::nextafter(v, r % 3 == 1 ? INFINITY : -INFINITY);
    } else if (kind == Inputs::reduce)
      v = (r % 97 == 0) ? NAN : ((r >> 8) & 1 ? 1.0 : 2.0) * ((r >> 9) & 1 ? -1 : 1);
    else if (kind == Inputs::alu && r % 5 == 0)
      v = specials[(r >> 8) % std::size(specials)];
    else
      v = std::round(u(rng) * 64) / 64;  // many exact halves and integers
    h.set(i, v);
  }
  return h;
}

inline double tolerance(DType t) {
  return ir::compare_tolerance(t, 3e-5, 1e-9);
}

// `bits`: floats must match bit for bit (any NaN matches any NaN: payloads may differ).
inline void expect_same(const kir::Kernel& k, int p, const ir::HostTensor& gpu,
                        const ir::HostTensor& cpu, const std::string& what, bool bits = false) {
  const DType t = gpu.dtype;
  int failures = 0;
  for (int64_t i = 0; i < gpu.numel() && failures < 5; ++i) {
    const double a = gpu.get(i), b = cpu.get(i);
    bool ok;
    if (std::isnan(b))
      ok = std::isnan(a);
    else if (std::isinf(b))
      ok = a == b;
    else if (bits)
      ok = a == b && std::signbit(a) == std::signbit(b);
    else if (!ir::is_float(t))
      ok = t == DType::i64 ? std::memcmp(&gpu.bytes[i * 8], &cpu.bytes[i * 8], 8) == 0 : a == b;
    else
      ok = std::fabs(a - b) <= tolerance(t) * std::max(1.0, std::fabs(b));
    if (!ok) {
      ++failures;
      ADD_FAILURE() << what << " " << k.name << " param %" << p << " (" << ir::dtype_name(t)
                    << ") element " << i << ": vulkan " << a << " cpu " << b;
    }
  }
}

struct Runner {
  std::unique_ptr<runtime::GpuBackend> gpu;
  std::unique_ptr<CpuBackend> cpu;
};

inline Runner& runner() {
  static Runner r = [] {
    Runner r;
    if (auto g = runtime::open_vulkan_backend(0)) r.gpu = std::move(*g);
    if (auto c = CpuBackend::create()) r.cpu = std::move(*c);
    return r;
  }();
  return r;
}

// Runs `k` on vulkan:0 over `tensors` (one per parameter: inputs filled, outputs as they start,
// read back after the launch). With validate, `slot` receives the error slot (kCheckSlotWords
// words, zeroed before the launch); `strategy`, when given, the source's strategy name.
inline void run_on_vulkan(const kir::Kernel& k, std::vector<ir::HostTensor>& tensors,
                          CheckMode check, const TuneParams& params = {},
                          std::vector<int64_t>* slot = nullptr, std::string* strategy = nullptr) {
  Runner& r = runner();
  auto src = emit_source(k, params, Dialect::glsl, check);
  ASSERT_TRUE(src.has_value()) << src.error().message;
  if (params.vector_loads == kLanes && check == CheckMode::none) {
    EXPECT_NE(src->text.find("v.d[uint("), std::string::npos) << "no vector access\n" << src->text;
  }
  if (strategy) *strategy = src->strategy;
  auto bin = r.gpu->compile(*src, k.name);
  ASSERT_TRUE(bin.has_value()) << bin.error().message;
  auto prog = r.gpu->load(*src, *bin);
  ASSERT_TRUE(prog.has_value()) << prog.error().message;
  auto stream = r.gpu->create_stream();
  ASSERT_TRUE(stream.has_value()) << stream.error().message;
  std::vector<std::shared_ptr<runtime::DeviceMemory>> mem;
  std::vector<runtime::DeviceMemory*> args;
  for (auto& t : tensors) {
    auto m = r.gpu->allocate(std::max<size_t>(t.bytes.size(), 4));
    ASSERT_TRUE(m.has_value()) << m.error().message;
    if (!t.bytes.empty()) {
      ASSERT_TRUE((*stream)->upload(**m, t.data(), t.bytes.size()).has_value());
    }
    mem.push_back(*m);
    args.push_back(m->get());
  }
  std::vector<int64_t> words(kCheckSlotWords, 0);
  if (check == CheckMode::validate) {
    auto m = r.gpu->allocate(words.size() * 8);
    ASSERT_TRUE(m.has_value());
    ASSERT_TRUE((*stream)->upload(**m, words.data(), words.size() * 8).has_value());
    mem.push_back(*m);
    args.push_back(m->get());
  }
  auto scratch = runtime::make_scratch(*r.gpu, **stream, *src);
  ASSERT_TRUE(scratch.has_value()) << scratch.error().message;
  if (*scratch) args.push_back(scratch->get());
  ASSERT_TRUE((*stream)->launch(**prog, args).has_value());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (k.params[i].output && !tensors[i].bytes.empty()) {
      ASSERT_TRUE(
          (*stream)->download(*mem[i], tensors[i].data(), tensors[i].bytes.size()).has_value());
    }
  }
  if (check == CheckMode::validate) {
    ASSERT_TRUE(
        (*stream)->download(*mem[tensors.size()], words.data(), words.size() * 8).has_value());
  }
  ASSERT_TRUE((*stream)->synchronize().has_value());
  if (slot) *slot = words;
}

// Whether vulkan:0 has a loop budget per invocation (lavapipe: GpuBackend::loop_iteration_limit)
// that `k` under `params` would outrun: it refuses to compile it.
inline bool over_loop_limit(const kir::Kernel& k, const TuneParams& params) {
  const std::optional<int64_t> limit = runner().gpu->loop_iteration_limit();
  auto src = emit_source(k, params, Dialect::glsl);
  return limit && src && src->loop_iterations > *limit;
}

// vulkan:0 refuses `k` under `params` with a message naming the kernel, the bound, the limit
// and the device.
inline void expect_loop_limit_refusal(const kir::Kernel& k, const TuneParams& params) {
  auto src = emit_source(k, params, Dialect::glsl);
  ASSERT_TRUE(src.has_value()) << src.error().message;
  auto bin = runner().gpu->compile(*src, k.name);
  ASSERT_FALSE(bin.has_value()) << k.name << " " << params.str() << " (" << src->loop_iterations
                                << " loop iterations) compiled";
  const std::string& m = bin.error().message;
  for (const std::string& part :
       {"kernel " + k.name + ":",
        fmt::format("runs up to {} loop iterations per invocation", src->loop_iterations),
        fmt::format("over the {} that vulkan:0 (llvmpipe", *runner().gpu->loop_iteration_limit()),
        std::string("ends an invocation's loops early")})
    EXPECT_NE(m.find(part), std::string::npos) << "no '" << part << "' in: " << m;
}

// Runs `k` on both devices with `inputs` (one tensor per input parameter, in order); compares
// every output (`bits`: floats bit for bit). `gpu_out`, when given, receives vulkan:0's tensors
// (one per parameter).
inline void run_both_on(const kir::Kernel& k, const std::vector<ir::HostTensor>& inputs,
                        CheckMode check, const TuneParams& params = {}, bool bits = false,
                        std::vector<ir::HostTensor>* gpu_out = nullptr) {
  Runner& r = runner();
  SCOPED_TRACE(k.name);
  std::vector<ir::HostTensor> gpu_t, cpu_t;
  size_t next = 0;
  for (const kir::Param& p : k.params) {
    ASSERT_TRUE(p.output || next < inputs.size()) << "too few inputs";
    gpu_t.push_back(p.output ? ir::HostTensor::zeros(p.dtype, p.shape) : inputs[next++]);
    cpu_t.push_back(gpu_t.back());
  }
  auto artifact = r.cpu->compile(k, {}, CheckMode::none);
  ASSERT_TRUE(artifact.has_value()) << artifact.error().message;
  std::vector<void*> ptrs;
  for (auto& t : cpu_t) ptrs.push_back(t.data());
  (*artifact)->fn(ptrs.data(), 0, (*artifact)->outer_extent);
  std::vector<int64_t> slot;
  std::string strategy;
  run_on_vulkan(k, gpu_t, check, params, &slot, &strategy);
  if (::testing::Test::HasFatalFailure()) return;
  if (check == CheckMode::validate) {
    EXPECT_EQ(slot[kCheckFlag], 0) << k.name << ": an in-range kernel reported a bad access";
  }
  const std::string what =
      fmt::format("[{} {} {}]", strategy, check_mode_name(check), params.str());
  for (size_t i = 0; i < gpu_t.size(); ++i)
    if (k.params[i].output) expect_same(k, static_cast<int>(i), gpu_t[i], cpu_t[i], what, bits);
  if (gpu_out) *gpu_out = std::move(gpu_t);
}

// Runs `k` on both devices with the same random inputs (by_name: matmul* and reduce* / nested*
// kernels get their kind); compares every output.
inline void run_both(const kir::Kernel& k, CheckMode check, uint32_t seed,
                     const TuneParams& params = {}, Inputs inputs = Inputs::by_name,
                     bool bits = false) {
  std::mt19937 rng(seed);
  const Inputs kind = inputs != Inputs::by_name      ? inputs
                      : k.name.starts_with("matmul") ? Inputs::matmul
                      : k.name.starts_with("reduce") || k.name.starts_with("nested")
                          ? Inputs::reduce
                          : Inputs::alu;
  std::vector<ir::HostTensor> in;
  for (const kir::Param& p : k.params)
    if (!p.output) in.push_back(random_input(p.dtype, p.shape, rng, kind));
  run_both_on(k, in, check, params, bits);
}

}  // namespace kiln::codegen::gpu
