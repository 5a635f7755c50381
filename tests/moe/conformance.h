// Shared loading of the PyTorch reference cases in tests/data/conformance/moe/ (copied from the team's shared
// conformance folder; README there documents the layout and tolerances).
#pragma once

#include <string>
#include <vector>

#include "hymoe/moe.h"
#include "hymoe/safetensors.h"

namespace hymoe::test {

struct MoeCase {
  std::string name, dir;
  MoEConfig config;
  bool train = false;
  int64_t step = 0, max_steps = 1;
};

std::vector<std::string> moe_case_names();
MoeCase load_moe_case(const std::string& name);

// The README's comparison rule: |got-exp| <= atol + rtol*|exp|, rtol = 1e-4, atol = 2e-5 * max(1, max|exp|).
::testing::AssertionResult matches_reference(const Tensor& got, const Tensor& exp);
// state.* rule: rtol 1e-6, atol 1e-9.
::testing::AssertionResult matches_state(const Tensor& got, const Tensor& exp);

}  // namespace hymoe::test
