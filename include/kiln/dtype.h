// Element types of kiln tensors: names, sizes and classification.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "kiln/export.h"

namespace kiln::ir {

enum class DType : uint8_t { f32, f64, f16, bf16, i32, i64, i8, u8, boolean };

// Whether `t` is one of the enumerators above (a DType cast from an integer may not be).
inline constexpr bool is_dtype(DType t) {
  return static_cast<uint8_t>(t) <= static_cast<uint8_t>(DType::boolean);
}

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32,
                                       DType::i64, DType::i8,  DType::u8,  DType::boolean};

// The `.kg` spelling: f32 f64 f16 bf16 i32 i64 i8 u8 bool.
KILN_EXPORT std::string_view dtype_name(DType t);
KILN_EXPORT std::optional<DType> parse_dtype(std::string_view name);
KILN_EXPORT int dtype_size(DType t);
KILN_EXPORT bool is_float(DType t);
KILN_EXPORT bool is_int(DType t);  // signed or unsigned integer, not bool
KILN_EXPORT bool is_signed(DType t);

// The relative error allowed when two computations of one value in dtype `t` are compared (a
// kernel against the reference, two schedules, two devices): integers and bool exactly (0); f16
// 2e-3 and bf16 1.6e-2 (two roundings to the format); f32 and f64 what the caller gives, since
// that depends on the computation (reassociated sums, transcendental functions).
KILN_EXPORT double compare_tolerance(DType t, double f32, double f64);

// The four kinds of arithmetic a code generator distinguishes: IEEE floats, two's-complement
// signed and unsigned integers (which differ in division, shifts, comparisons and casts), and bool.
enum class DTypeClass : uint8_t { floating, signed_int, unsigned_int, boolean };
KILN_EXPORT DTypeClass dtype_class(DType t);

}  // namespace kiln::ir
