// Precision facts about dtypes that the graph fuzzer's value tracking relies on.
#include "fuzz_value.h"

#include "harness.h"

namespace kiln::testing::fuzz {

using ir::DType;

double exact_int_limit(DType dtype) {
  switch (dtype) {
    case DType::f64: return 0x1p53;
    case DType::f32: return 0x1p24;
    case DType::f16: return 2048;
    case DType::bf16: return 256;
    case DType::i64: return 0x1p53;  // tracked through double
    case DType::i32: return 2147483647.0;
    case DType::i8: return 127;
    case DType::u8: return 255;
    case DType::boolean: return 1;
  }
  return 0;
}

bool representable(DType dtype, int grid, double bound) {
  if (grid < 0) return false;
  if (!ir::is_float(dtype)) return grid == 0 && bound <= exact_int_limit(dtype);
  // The smallest normal number bounds how fine a grid stays exact; the grids here are coarse.
  return std::ldexp(bound, grid) <= exact_int_limit(dtype) && grid <= 8;
}

DType looser(DType a, DType b) {
  auto rank = [](DType t) {
    switch (t) {
      case DType::bf16: return 4;
      case DType::f16: return 3;
      case DType::f32: return 2;
      case DType::f64:
      case DType::i32:
      case DType::i64:
      case DType::i8:
      case DType::u8:
      case DType::boolean: return 1;
    }
    return 1;
  };
  return rank(a) >= rank(b) ? a : b;
}

double fuzz_tolerance(DType dtype) {
  return ir::is_float(dtype) ? tolerance(dtype) : tolerance(DType::f64);
}

}  // namespace kiln::testing::fuzz
