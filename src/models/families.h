// Constructors of the built-in model families, one file each, referenced from the registry's table; and the GGUF
// family (gguf_model.cc), chosen by the file rather than by a model_type.
#pragma once

#include <memory>
#include <string>

#include "hymoe/model.h"

namespace hymoe {

std::unique_ptr<ModelFamily> make_mixtral_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_qwen2_moe_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_qwen3_moe_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_olmoe_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_deepseek_v2_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_deepseek_v3_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_glm4_moe_family(const HfConfig& config);  // deepseek_v3.cc: the same block
std::unique_ptr<ModelFamily> make_dots1_family(const HfConfig& config);     // deepseek_v3.cc: the same block
std::unique_ptr<ModelFamily> make_deepseek_v32_family(const HfConfig& config);   // deepseek_v3.cc: the same block
std::unique_ptr<ModelFamily> make_glm4_moe_lite_family(const HfConfig& config);  // deepseek_v3.cc: the same block
std::unique_ptr<ModelFamily> make_gpt_oss_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_qwen3_next_family(const HfConfig& config);   // qwen2_moe.cc: the same block
std::unique_ptr<ModelFamily> make_flex_olmo_family(const HfConfig& config);    // olmoe.cc: the same block
std::unique_ptr<ModelFamily> make_solar_open_family(const HfConfig& config);   // deepseek_v3.cc: the same block
std::unique_ptr<ModelFamily> make_exaone_moe_family(const HfConfig& config);   // deepseek_v3.cc: the same block
std::unique_ptr<ModelFamily> make_minimax_m2_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_ernie4_5_moe_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_hunyuan_v1_moe_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_qwen3_vl_moe_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_granitemoe_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_granitemoeshared_family(const HfConfig& config);   // granitemoe.cc
std::unique_ptr<ModelFamily> make_granitemoehybrid_family(const HfConfig& config);   // granitemoe.cc
std::unique_ptr<ModelFamily> make_llama4_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_llama4_text_family(const HfConfig& config);   // llama4.cc
std::unique_ptr<ModelFamily> make_phimoe_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_qwen3_5_moe_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_glm4v_moe_family(const HfConfig& config);      // deepseek_v3.cc: the same block
std::unique_ptr<ModelFamily> make_mimo_v2_flash_family(const HfConfig& config);  // deepseek_v3.cc: the same block
std::unique_ptr<ModelFamily> make_kimi_linear_family(const HfConfig& config);    // deepseek_v3.cc: the same block
std::unique_ptr<ModelFamily> make_mistral4_family(const HfConfig& config);       // deepseek_v3.cc: the same block
std::unique_ptr<ModelFamily> make_qwen3_omni_moe_family(const HfConfig& config);  // qwen3_moe.cc: the same block
std::unique_ptr<ModelFamily> make_jamba_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_cohere2_moe_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_granitemoe_swa_family(const HfConfig& config);  // granitemoe.cc
std::unique_ptr<ModelFamily> make_dbrx_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_bailing_hybrid_family(const HfConfig& config);  // deepseek_v3.cc: the same block
// deepseek_v3.cc: the same block under their own names and defaults
std::unique_ptr<ModelFamily> make_glm_moe_dsa_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_sarvam_moe_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_hy_v3_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_afmoe_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_lfm2_moe_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_laguna_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_glm5_next_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_hy_v4_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_hy_v4_vl_family(const HfConfig& config);
std::unique_ptr<ModelFamily> make_minimax_family(const HfConfig& config);         // mixtral.cc: the same block
std::unique_ptr<ModelFamily> make_qwen4_exp_family(const HfConfig& config);       // qwen3_5_moe.cc: the same block
std::unique_ptr<ModelFamily> make_qwen4_exp_text_family(const HfConfig& config);  // qwen3_5_moe.cc
std::unique_ptr<ModelFamily> make_qwen3_5_moe_text_family(const HfConfig& config);  // qwen3_5_moe.cc

// A GGUF file's family (llama.cpp's semantics for its general.architecture) and its tensors, sharing one mapping.
struct GgufModelParts {
  std::unique_ptr<ModelFamily> family;
  std::unique_ptr<TensorSource> source;
};
GgufModelParts open_gguf_model(const std::string& path);

}  // namespace hymoe
