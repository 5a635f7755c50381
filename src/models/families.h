// Constructors of the built-in model families, one file each, referenced from the registry's table.
#pragma once

#include <memory>

#include "hymoe/model.h"

namespace hymoe {

std::unique_ptr<ModelFamily> make_mixtral_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_qwen2_moe_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_qwen3_moe_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_olmoe_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_deepseek_v2_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_deepseek_v3_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_gpt_oss_family(const HfConfig& config);

}  // namespace hymoe
