// HostTensor element conversions: f16/bf16 rounding, integer wrap-around, bool, f32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kiln/host_tensor.h"

namespace kiln::ir {
namespace {

uint16_t bits_after_set(DType dtype, double v) {
  HostTensor t = HostTensor::zeros(dtype, {1});
  t.set(0, v);
  uint16_t bits;
  std::memcpy(&bits, t.data(), 2);
  return bits;
}

double get_bits(DType dtype, uint16_t bits) {
  HostTensor t = HostTensor::zeros(dtype, {1});
  std::memcpy(t.data(), &bits, 2);
  return t.get(0);
}

double round_trip(DType dtype, double v) {
  HostTensor t = HostTensor::zeros(dtype, {});
  t.set(0, v);
  return t.get(0);
}

TEST(HostTensor, ZerosHasBytesForEveryElement) {
  HostTensor t = HostTensor::zeros(DType::f64, {2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.bytes.size(), 48u);
  EXPECT_EQ(HostTensor::zeros(DType::bf16, {}).bytes.size(), 2u);
  EXPECT_EQ(HostTensor::zeros(DType::i8, {0, 4}).bytes.size(), 0u);
}

TEST(HostTensor, HalfEncodesNormalsSubnormalsAndSpecials) {
  EXPECT_EQ(bits_after_set(DType::f16, 1.0), 0x3C00);
  EXPECT_EQ(bits_after_set(DType::f16, -2.0), 0xC000);
  EXPECT_EQ(bits_after_set(DType::f16, 0.1), 0x2E66);
  EXPECT_EQ(bits_after_set(DType::f16, 65504.0), 0x7BFF);  // largest finite
  EXPECT_EQ(bits_after_set(DType::f16, 65519.0), 0x7BFF);  // below the halfway point
  EXPECT_EQ(bits_after_set(DType::f16, 65520.0), 0x7C00);  // halfway: even is infinity
  EXPECT_EQ(bits_after_set(DType::f16, -1e10), 0xFC00);
  EXPECT_EQ(bits_after_set(DType::f16, std::ldexp(1.0, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(bits_after_set(DType::f16, std::ldexp(1.0, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(bits_after_set(DType::f16, std::ldexp(1023.0, -24)), 0x03FF);
  EXPECT_EQ(bits_after_set(DType::f16, -0.0), 0x8000);
  EXPECT_EQ(bits_after_set(DType::f16, INFINITY), 0x7C00);
  const uint16_t nan = bits_after_set(DType::f16, NAN);
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
}

TEST(HostTensor, HalfRoundsToNearestEven) {
  EXPECT_EQ(bits_after_set(DType::f16, 1.0 + std::ldexp(1.0, -11)), 0x3C00);      // tie, even down
  EXPECT_EQ(bits_after_set(DType::f16, 1.0 + 3 * std::ldexp(1.0, -11)), 0x3C02);  // tie, even up
  EXPECT_EQ(bits_after_set(DType::f16, std::ldexp(1.0, -25)), 0x0000);  // subnormal tie to 0
  EXPECT_EQ(bits_after_set(DType::f16, 3 * std::ldexp(1.0, -25)), 0x0002);
  EXPECT_EQ(bits_after_set(DType::f16, 2047.5), 0x6800);  // 2047.5 -> 2048: carries the exponent
  // Rounding once from double: through float this would become a tie and round down to 1.0.
  EXPECT_EQ(bits_after_set(DType::f16, 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)), 0x3C01);
}

TEST(HostTensor, HalfDecodes) {
  EXPECT_EQ(get_bits(DType::f16, 0x3555), 0.333251953125);
  EXPECT_EQ(get_bits(DType::f16, 0x7BFF), 65504.0);
  EXPECT_EQ(get_bits(DType::f16, 0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(get_bits(DType::f16, 0x8400), -std::ldexp(1.0, -14));
  EXPECT_EQ(get_bits(DType::f16, 0xFC00), -INFINITY);
  EXPECT_TRUE(std::isnan(get_bits(DType::f16, 0x7E00)));
  EXPECT_TRUE(std::signbit(get_bits(DType::f16, 0x8000)));
}

TEST(HostTensor, BFloat16EncodesAndRounds) {
  EXPECT_EQ(bits_after_set(DType::bf16, 1.0), 0x3F80);
  EXPECT_EQ(bits_after_set(DType::bf16, 3.14159265358979), 0x4049);
  EXPECT_EQ(bits_after_set(DType::bf16, 1.0 + std::ldexp(1.0, -8)), 0x3F80);      // tie, even
  EXPECT_EQ(bits_after_set(DType::bf16, 1.0 + 3 * std::ldexp(1.0, -8)), 0x3F82);  // tie, even
  EXPECT_EQ(bits_after_set(DType::bf16, std::ldexp(255.0, 120)), 0x7F7F);         // largest finite
  EXPECT_EQ(bits_after_set(DType::bf16, std::ldexp(511.0, 119)), 0x7F80);         // halfway -> inf
  EXPECT_EQ(bits_after_set(DType::bf16, std::ldexp(1.0, -133)), 0x0001);  // smallest subnormal
  EXPECT_EQ(bits_after_set(DType::bf16, -std::ldexp(1.0, -126)), 0x8080);
  EXPECT_EQ(get_bits(DType::bf16, 0x4049), 3.140625);
  EXPECT_EQ(get_bits(DType::bf16, 0x7F80), INFINITY);
  EXPECT_TRUE(std::isnan(get_bits(DType::bf16, 0x7FC0)));
}

TEST(HostTensor, FloatsRoundTrip) {
  EXPECT_EQ(round_trip(DType::f64, 0.1), 0.1);
  EXPECT_EQ(round_trip(DType::f32, 0.1), static_cast<double>(0.1f));
  EXPECT_EQ(round_trip(DType::f32, 16777217.0), 16777216.0);
  EXPECT_EQ(round_trip(DType::f16, 2049.0), 2048.0);
}

TEST(HostTensor, IntegersTruncateTowardZeroThenWrap) {
  EXPECT_EQ(round_trip(DType::i32, -1.7), -1);
  EXPECT_EQ(round_trip(DType::i32, 2.9), 2);
  EXPECT_EQ(round_trip(DType::i32, 2147483648.0), -2147483648.0);
  EXPECT_EQ(round_trip(DType::i32, 3e9), 3e9 - 4294967296.0);
  EXPECT_EQ(round_trip(DType::i32, 1e20), 1661992960.0);  // 1e20 mod 2^32
  EXPECT_EQ(round_trip(DType::i8, 200), -56);
  EXPECT_EQ(round_trip(DType::i8, -129.5), 127);
  EXPECT_EQ(round_trip(DType::u8, -1), 255);
  EXPECT_EQ(round_trip(DType::u8, 256.9), 0);
  EXPECT_EQ(round_trip(DType::i64, -9223372036854775808.0), -9223372036854775808.0);
  EXPECT_EQ(round_trip(DType::i64, 9223372036854775808.0), -9223372036854775808.0);
  EXPECT_EQ(round_trip(DType::i64, 4503599627370497.0), 4503599627370497.0);  // 2^52 + 1
  HostTensor t = HostTensor::zeros(DType::i64, {1});
  t.set(0, -3.0);
  int64_t raw;
  std::memcpy(&raw, t.data(), 8);
  EXPECT_EQ(raw, -3);
}

TEST(HostTensor, NonFiniteValuesBecomeZeroIntegers) {
  for (DType t : {DType::i32, DType::i64, DType::i8, DType::u8}) {
    EXPECT_EQ(round_trip(t, NAN), 0) << dtype_name(t);
    EXPECT_EQ(round_trip(t, INFINITY), 0) << dtype_name(t);
    EXPECT_EQ(round_trip(t, -INFINITY), 0) << dtype_name(t);
  }
}

TEST(HostTensor, BoolStoresZeroOrOne) {
  HostTensor t = HostTensor::zeros(DType::boolean, {5});
  const double in[] = {0.0, -0.0, 2.5, NAN, -1};
  for (int i = 0; i < 5; ++i) t.set(i, in[i]);
  const uint8_t want[] = {0, 0, 1, 1, 1};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(static_cast<uint8_t>(t.bytes[i]), want[i]) << i;
  t.bytes[0] = std::byte{7};  // a foreign non-zero byte still reads as true
  EXPECT_EQ(t.get(0), 1.0);
  EXPECT_EQ(t.get(1), 0.0);
}

}  // namespace
}  // namespace kiln::ir
