// HostTensor element access: conversions between double and every storage dtype.
#include "kiln/host_tensor.h"

#include <sys/sysinfo.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ir/scalar_semantics.h"
#include "kiln/error.h"
#include "support/host_memory.h"

namespace kiln::ir {

namespace {

// A binary floating format narrower than double (f16: 5/10, bf16: 8/7), encoded directly from
// double so that rounding happens once (rounding through float first could round twice).
struct NarrowFloat {
  int exp_bits;
  int mant_bits;
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  uint16_t exp_mask() const { return static_cast<uint16_t>(((1 << exp_bits) - 1) << mant_bits); }
};
constexpr NarrowFloat kHalf{5, 10};
constexpr NarrowFloat kBFloat{8, 7};

uint16_t encode_narrow(double x, NarrowFloat f) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return sign | f.exp_mask() | static_cast<uint16_t>(1 << (f.mant_bits - 1));
  const double a = std::fabs(x);
  if (std::isinf(a)) return sign | f.exp_mask();
  if (a == 0) return sign;
  const int emin = 1 - f.bias();
  int e2 = 0;
  std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1): the unbiased exponent is e2 - 1
  int exp = std::max(e2 - 1, emin);
  // Scaling by a power of two is exact; rint rounds half to even (the default rounding mode).
  double q = std::rint(std::ldexp(a, f.mant_bits - exp));
  const double implicit_one = std::ldexp(1.0, f.mant_bits);
  if (q >= 2 * implicit_one) {  // rounding carried into the next binade
    q /= 2;
    ++exp;
  }
  if (exp > f.bias()) return sign | f.exp_mask();                // overflow rounds to infinity
  if (q < implicit_one) return sign | static_cast<uint16_t>(q);  // subnormal (exp == emin)
  const auto biased = static_cast<uint16_t>(exp + f.bias());
  return sign | static_cast<uint16_t>(biased << f.mant_bits) |
         static_cast<uint16_t>(q - implicit_one);
}

double decode_narrow(uint16_t bits, NarrowFloat f) {
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  const int biased = (bits & f.exp_mask()) >> f.mant_bits;
  const int mant = bits & ((1 << f.mant_bits) - 1);
  if (biased == (1 << f.exp_bits) - 1)
    return mant ? std::copysign(std::nan(""), sign) : sign * INFINITY;
  if (biased == 0) return sign * std::ldexp(mant, 1 - f.bias() - f.mant_bits);
  return sign * std::ldexp(mant + (1 << f.mant_bits), biased - f.bias() - f.mant_bits);
}

template <class T>
T load(const std::vector<std::byte>& bytes, int64_t i) {
  T v;
  std::memcpy(&v, bytes.data() + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

template <class T>
void store(std::vector<std::byte>& bytes, int64_t i, T v) {
  std::memcpy(bytes.data() + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

}  // namespace

bool HostTensor::fits_in_memory(double bytes) {
  struct sysinfo info {};
  if (sysinfo(&info) != 0) return true;  // unknown: let the allocator decide
  const double total = (static_cast<double>(info.totalram) + static_cast<double>(info.totalswap)) *
                       static_cast<double>(info.mem_unit);
  return bytes <= total;
}

HostTensor HostTensor::zeros(DType dtype, Shape shape) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  const auto n = static_cast<size_t>(t.numel() * dtype_size(dtype));
  t.bytes.reserve(n);
  support::advise_huge_pages(t.bytes.data(), n);  // before the zeros touch the pages
  t.bytes.resize(n);
  return t;
}

double HostTensor::get(int64_t i) const {
  KILN_CHECK(i >= 0 && (i + 1) * dtype_size(dtype) <= static_cast<int64_t>(bytes.size()))
      << "HostTensor::get index " << i << " of " << bytes.size() << " bytes";
  switch (dtype) {
    case DType::f32:
      return load<float>(bytes, i);
    case DType::f64:
      return load<double>(bytes, i);
    case DType::f16:
      return decode_narrow(load<uint16_t>(bytes, i), kHalf);
    case DType::bf16:
      return decode_narrow(load<uint16_t>(bytes, i), kBFloat);
    case DType::i32:
      return load<int32_t>(bytes, i);
    case DType::i64:
      return static_cast<double>(load<int64_t>(bytes, i));
    case DType::i8:
      return load<int8_t>(bytes, i);
    case DType::u8:
      return load<uint8_t>(bytes, i);
    case DType::boolean:
      return load<uint8_t>(bytes, i) != 0 ? 1.0 : 0.0;
  }
  KILN_CHECK(false) << "unknown dtype";
  return 0;
}

int64_t HostTensor::get_int(int64_t i) const {
  KILN_CHECK(!is_float(dtype)) << "HostTensor::get_int of a " << dtype_name(dtype) << " tensor";
  if (dtype != DType::i64) return static_cast<int64_t>(get(i));  // exact in a double
  KILN_CHECK(i >= 0 && (i + 1) * 8 <= static_cast<int64_t>(bytes.size()))
      << "HostTensor::get_int index " << i << " of " << bytes.size() << " bytes";
  return load<int64_t>(bytes, i);
}

void HostTensor::set(int64_t i, double v) {
  KILN_CHECK(i >= 0 && (i + 1) * dtype_size(dtype) <= static_cast<int64_t>(bytes.size()))
      << "HostTensor::set index " << i << " of " << bytes.size() << " bytes";
  switch (dtype) {
    case DType::f32:
      return store<float>(bytes, i, static_cast<float>(v));
    case DType::f64:
      return store<double>(bytes, i, v);
    case DType::f16:
      return store<uint16_t>(bytes, i, encode_narrow(v, kHalf));
    case DType::bf16:
      return store<uint16_t>(bytes, i, encode_narrow(v, kBFloat));
    case DType::i32:
      return store<int32_t>(bytes, i, static_cast<int32_t>(wrap_to_int64(v)));
    case DType::i64:
      return store<int64_t>(bytes, i, wrap_to_int64(v));
    case DType::i8:
      return store<int8_t>(bytes, i, static_cast<int8_t>(wrap_to_int64(v)));
    case DType::u8:
      return store<uint8_t>(bytes, i, static_cast<uint8_t>(wrap_to_int64(v)));
    // C's bool conversion: anything but zero (NaN included) is true.
    case DType::boolean:
      return store<uint8_t>(bytes, i, v != 0 ? 1 : 0);
  }
  KILN_CHECK(false) << "unknown dtype";
}

}  // namespace kiln::ir
