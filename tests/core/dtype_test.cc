#include "hymoe/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace hymoe {
namespace {

TEST(DType, NamesRoundTrip) {
  for (DType d : {DType::kF64, DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32, DType::kI16,
                  DType::kI8, DType::kU64, DType::kU32, DType::kU16, DType::kU8, DType::kBool, DType::kF8E4M3}) {
    ASSERT_EQ(dtype_from_name(dtype_name(d)), d);
  }
  EXPECT_EQ(dtype_size(DType::kBF16), 2);
  EXPECT_EQ(dtype_size(DType::kF64), 8);
  EXPECT_EQ(dtype_size(DType::kF8E4M3), 1);
  EXPECT_FALSE(dtype_from_name("F8_E5M2").has_value());  // FP8 e5m2 is not a format hymoe reads
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: ties to even gives 1.0.
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up to even.
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_to_float(float_to_bf16(-2.5f)), -2.5f);
}

TEST(DType, F16ExhaustiveRoundTrip) {
  // Every finite half converts to float and back to the same bits.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = f16_to_float(bits);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_f16(f), bits) << "half 0x" << std::hex << h;
  }
  EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_float(0x0001), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(float_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(0x1p-25f), 0x0000);  // halfway to the smallest subnormal: ties to even (zero)
  EXPECT_EQ(float_to_f16(0x1.8p-25f), 0x0001);
}

}  // namespace
}  // namespace hymoe
