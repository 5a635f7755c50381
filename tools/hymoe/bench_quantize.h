// The benchmark's random f32 expert weights quantized into the block formats released checkpoints store, for
// `hymoe bench --dtype fp8 mxfp4`: block fp8 as DeepSeek-V3 (e4m3 codes, one f32 scale per 128 x 128 block,
// amax / 448) and MXFP4 as gpt-oss (E2M1 codes, one E8M0 scale per 32 inputs). The views point at the held codes,
// for the kernels to pack into their compact panels.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "kernels/ffn/grouped_ffn.h"

namespace hymoe::tool {

struct QuantizedExperts {
  std::deque<std::vector<uint8_t>> codes, scale_bytes;
  std::deque<std::vector<float>> scales;
  std::vector<kernels::MlpWeightsView> views;
};

// `count` MLPs laid out as bench's weights: per expert gate (H, D), up (H, D), down (D, H), nn.Linear layout.
QuantizedExperts quantize_experts(const float* base, int64_t count, int64_t D, int64_t H, bool fp8);

}  // namespace hymoe::tool
