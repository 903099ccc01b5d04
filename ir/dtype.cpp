// DType names and properties.
#include "kiln/dtype.h"

namespace kiln::ir {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::boolean: return "bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : kAllDTypes)
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

int dtype_size(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64: return 8;
    case DType::f32:
    case DType::i32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::i8:
    case DType::u8:
    case DType::boolean: return 1;
  }
  return 0;
}

double compare_tolerance(DType t, double f32, double f64) {
  switch (t) {
    case DType::f32:
      return f32;
    case DType::f64:
      return f64;
    case DType::f16:
      return 2e-3;
    case DType::bf16:
      return 1.6e-2;
    case DType::i32:  // integers and bools compare exactly
    case DType::i64:
    case DType::i8:
    case DType::u8:
    case DType::boolean:
      break;
  }
  return 0;
}

bool is_float(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}
bool is_int(DType t) {
  return t == DType::i32 || t == DType::i64 || t == DType::i8 || t == DType::u8;
}
bool is_signed(DType t) { return is_float(t) || t == DType::i32 || t == DType::i64 || t == DType::i8; }

DTypeClass dtype_class(DType t) {
  if (is_float(t)) return DTypeClass::floating;
  if (t == DType::boolean) return DTypeClass::boolean;
  return is_signed(t) ? DTypeClass::signed_int : DTypeClass::unsigned_int;
}

}  // namespace kiln::ir
