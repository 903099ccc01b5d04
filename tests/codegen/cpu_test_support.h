// Shared helpers of the cpu backend tests: one backend per test binary, typed host buffers,
// and running a compiled kernel both in one call and split into chunks (results must agree).
#pragma once

#include <cstdlib>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "codegen/cpu/cpu_backend.h"
#include "ir/kernel_ir.h"
#include "tests/support/kernel_builder.h"

namespace kiln::codegen::testing {

using ir::DType;

// The backend the codegen suites test: the host CPU, or the CPU kiln.toml's override
// KILN_COMPILATION_CPU_TARGET names (ctest runs the suites a second time for x86-64-v3, so that a
// baseline-ISA build is checked on a machine with AVX-512 too). These suites link no config
// reader, so they take the override's text as it is.
inline std::string test_cpu_target() {
  const char* t = std::getenv("KILN_COMPILATION_CPU_TARGET");
  return t && *t ? t : "native";
}

// Its last-level cache is pinned as unknown (0), so that which outputs stream (by size alone,
// codegen/cpu/streaming_stores.h) is the same on every machine.
inline CpuBackend& backend() {
  static std::unique_ptr<CpuBackend> b = [] {
    auto created = CpuBackend::create(test_cpu_target(), int64_t{0});
    KILN_CHECK(created.has_value()) << created.error().message;
    return std::move(*created);
  }();
  return *b;
}

// f16 and bf16 by hand (round to nearest even), so expectations do not depend on the compiler.
inline uint16_t f32_to_bf16(float f) {
  uint32_t b = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((b >> 16) | 0x40);
  return static_cast<uint16_t>((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}
inline float bf16_to_f32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}
inline uint16_t f32_to_f16(float f) {
  return std::bit_cast<uint16_t>(static_cast<_Float16>(f));
}
inline float f16_to_f32(uint16_t h) {
  return static_cast<float>(std::bit_cast<_Float16>(h));
}

// A double rounded/wrapped to what a `t` element holds.
inline double to_dtype(DType t, double v) {
  switch (t) {
    case DType::f32:
      return static_cast<float>(v);
    case DType::f64:
      return v;
    case DType::f16:
      return f16_to_f32(f32_to_f16(static_cast<float>(v)));
    case DType::bf16:
      return bf16_to_f32(f32_to_bf16(static_cast<float>(v)));
    case DType::i32:
      return static_cast<int32_t>(static_cast<int64_t>(v));
    case DType::i64:
      return static_cast<double>(static_cast<int64_t>(v));
    case DType::i8:
      return static_cast<int8_t>(static_cast<int64_t>(v));
    case DType::u8:
      return static_cast<uint8_t>(static_cast<int64_t>(v));
    case DType::boolean:
      return v != 0 ? 1 : 0;
  }
  return v;
}

// An integer wrapped to what a `t` element holds (two's complement), exactly.
inline int64_t wrap_int(DType t, int64_t v) {
  switch (t) {
    case DType::i32:
      return static_cast<int32_t>(v);
    case DType::i8:
      return static_cast<int8_t>(v);
    case DType::u8:
      return static_cast<uint8_t>(v);
    case DType::boolean:
      return v != 0;
    case DType::i64:  // holds every value; the floats are not integer dtypes (unchanged)
    case DType::f32:
    case DType::f64:
    case DType::f16:
    case DType::bf16:
      break;
  }
  return v;
}

// A host buffer of one dtype, read and written as doubles.
struct Buffer {
  DType dtype = DType::f32;
  std::vector<uint8_t> bytes;

  Buffer() = default;
  Buffer(DType t, size_t n) : dtype(t), bytes(n * ir::dtype_size(t)) {}
  Buffer(DType t, const std::vector<double>& values) : Buffer(t, values.size()) {
    for (size_t i = 0; i < values.size(); ++i) set(i, values[i]);
  }
  size_t size() const { return bytes.size() / ir::dtype_size(dtype); }
  template <class T>
  T raw(size_t i) const {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return v;
  }
  template <class T>
  void put(size_t i, T v) {
    std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
  }
  double get(size_t i) const {
    switch (dtype) {
      case DType::f32:
        return raw<float>(i);
      case DType::f64:
        return raw<double>(i);
      case DType::f16:
        return f16_to_f32(raw<uint16_t>(i));
      case DType::bf16:
        return bf16_to_f32(raw<uint16_t>(i));
      case DType::i32:
        return raw<int32_t>(i);
      case DType::i64:
        return static_cast<double>(raw<int64_t>(i));
      case DType::i8:
        return raw<int8_t>(i);
      case DType::u8:
        return raw<uint8_t>(i);
      case DType::boolean:
        return raw<uint8_t>(i);
    }
    return 0;
  }
  int64_t get_int(size_t i) const {
    return dtype == DType::i64 ? raw<int64_t>(i) : static_cast<int64_t>(get(i));
  }
  void set(size_t i, double v) {
    switch (dtype) {
      case DType::f32:
        put(i, static_cast<float>(v));
        break;
      case DType::f64:
        put(i, v);
        break;
      case DType::f16:
        put(i, f32_to_f16(static_cast<float>(v)));
        break;
      case DType::bf16:
        put(i, f32_to_bf16(static_cast<float>(v)));
        break;
      case DType::i32:
        put(i, static_cast<int32_t>(static_cast<int64_t>(v)));
        break;
      case DType::i64:
        put(i, static_cast<int64_t>(v));
        break;
      case DType::i8:
        put(i, static_cast<int8_t>(static_cast<int64_t>(v)));
        break;
      case DType::u8:
        put(i, static_cast<uint8_t>(static_cast<int64_t>(v)));
        break;
      case DType::boolean:
        put(i, static_cast<uint8_t>(v != 0));
        break;
    }
  }
};

// Compiles `k` and runs it over its whole outer extent twice: in one call, and split into chunks
// of growing size. `inputs[i]` fills parameter i (outputs may be left empty: zero-filled). Fails
// the test when the two runs disagree; returns the buffers after the one-call run.
inline std::vector<Buffer> run_kernel(const kir::Kernel& k, std::vector<Buffer> inputs,
                                      const TuneParams& params = {},
                                      std::shared_ptr<const CpuArtifact>* artifact_out = nullptr) {
  auto art = backend().compile(k, params);
  EXPECT_TRUE(art.has_value()) << (art ? "" : art.error().message) << "\n" << kir::print_kernel(k);
  if (!art) return {};
  if (artifact_out) *artifact_out = *art;
  inputs.resize(k.params.size());
  for (size_t i = 0; i < k.params.size(); ++i)
    if (inputs[i].bytes.empty())
      inputs[i] =
          Buffer(k.params[i].dtype, static_cast<size_t>(ir::shape_numel(k.params[i].shape)));
  std::vector<Buffer> whole = inputs, chunked = inputs;
  auto call = [&](std::vector<Buffer>& bufs, int64_t begin, int64_t end) {
    std::vector<void*> ptrs;
    for (Buffer& b : bufs) ptrs.push_back(b.bytes.data());
    (*art)->fn(ptrs.data(), begin, end);
  };
  const int64_t outer = (*art)->outer_extent;
  call(whole, 0, outer);
  for (int64_t begin = 0, step = 1; begin < outer; begin += step, ++step)
    call(chunked, begin, std::min(outer, begin + step));
  for (size_t i = 0; i < k.params.size(); ++i)
    EXPECT_EQ(whole[i].bytes, chunked[i].bytes)
        << "parameter %" << i << " differs between one call and chunked calls\n"
        << kir::print_kernel(k);
  return whole;
}

inline kir::Param in_param(DType t, ir::Shape s) {
  return {t, std::move(s), false, ""};
}
inline kir::Param out_param(DType t, ir::Shape s) {
  return {t, std::move(s), true, ""};
}

using kiln::testing::make_kernel;

// Error of `got` against `want`: |got - want| / max(|want|, floor); NaN must match NaN and
// infinities must match exactly (returns +inf otherwise).
inline double rel_error(double got, double want, double floor = 0) {
  if (std::isnan(want) || std::isnan(got))
    return std::isnan(want) && std::isnan(got) ? 0 : INFINITY;
  if (std::isinf(want) || std::isinf(got)) return got == want ? 0 : INFINITY;
  double d = std::abs(got - want);
  if (d == 0) return 0;
  return d / std::max(std::abs(want), floor);
}

}  // namespace kiln::codegen::testing
