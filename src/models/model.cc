// Model: a downloaded model directory (config.json + safetensors) and the one-call layer loader.
#include <filesystem>

#include "hymoe/error.h"
#include "hymoe/model.h"

namespace hymoe {

Model Model::open(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) fail(dir, ": not a directory (a model directory holds config.json and safetensors)");
  Model m;
  m.config_ = std::make_shared<HfConfig>(HfConfig::load((fs::path(dir) / "config.json").string()));
  m.family_ = make_model_family(*m.config_);
  m.quant_ = parse_quantization(*m.config_);
  m.source_ = open_safetensors_source(dir);
  return m;
}

std::vector<std::string> Model::layer_tensor_names(int64_t layer) const {
  const MoELayerSpec s = family_->moe_layer(layer);
  std::vector<std::string> names{s.router_weight};
  if (s.router.logit_bias) names.push_back(s.router_bias);
  if (s.router.selection_bias) names.push_back(s.selection_bias);
  // Every stored tensor under the experts' and shared expert's prefixes (weights, scales, blocks, biases).
  for (const auto& n : source_->names())
    if (n.rfind(s.experts_prefix, 0) == 0 || (s.shared.hidden > 0 && n.rfind(s.shared.prefix, 0) == 0)) names.push_back(n);
  if (s.shared.hidden > 0 && !s.shared.gate_weight.empty()) names.push_back(s.shared.gate_weight);
  return names;
}

ModelMoELayer Model::load_layer(int64_t layer) const {
  return ModelMoELayer::load(*source_, family_->moe_layer(layer), quant_);
}

ModelMoELayer load_model_layer(const std::string& dir, int64_t layer) { return Model::open(dir).load_layer(layer); }

}  // namespace hymoe
