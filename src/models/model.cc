// Model: a downloaded model directory (config.json + safetensors) or a GGUF file, and the one-call layer loader.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "hymoe/error.h"
#include "hymoe/model.h"
#include "models/families.h"

namespace hymoe {

bool is_gguf_model_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return false;
  if (fs::path(path).extension() == ".gguf") return true;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

const HfConfig& Model::config() const {
  HYMOE_CHECK(config_ != nullptr, "a GGUF model has no config.json");
  return *config_;
}

Model Model::open(const std::string& dir) {
  namespace fs = std::filesystem;
  Model m;
  if (is_gguf_model_path(dir)) {
    GgufModelParts parts = open_gguf_model(dir);
    m.family_ = std::move(parts.family);
    m.source_ = std::move(parts.source);
    return m;
  }
  if (!fs::is_directory(dir))
    fail(dir, ": not a directory (a model directory holds config.json and safetensors) nor a GGUF file (*.gguf)");
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
  if (s.storage == ExpertStorage::kFusedOutIn) {  // GGUF: the prefix is the block's, so name each tensor
    for (const std::string* n : {&s.gate_name, &s.up_name, &s.down_name}) names.push_back(s.experts_prefix + *n + ".weight");
    if (s.expert_biases)
      for (const std::string* n : {&s.gate_name, &s.up_name, &s.down_name}) names.push_back(s.experts_prefix + *n + ".bias");
    if (s.shared.hidden > 0)
      for (const std::string* n : {&s.shared.gate_name, &s.shared.up_name, &s.shared.down_name})
        names.push_back(s.shared.prefix + *n + ".weight");
    if (s.shared.hidden > 0 && !s.shared.gate_weight.empty()) names.push_back(s.shared.gate_weight);
    return names;
  }
  // Every stored tensor under the experts' and shared expert's prefixes (weights, scales, blocks, biases).
  for (const auto& n : source_->names())
    if (n.rfind(s.experts_prefix, 0) == 0 || (s.shared.hidden > 0 && n.rfind(s.shared.prefix, 0) == 0)) names.push_back(n);
  if (s.shared.hidden > 0 && !s.shared.gate_weight.empty()) names.push_back(s.shared.gate_weight);
  return names;
}

ModelMoELayer Model::load_layer(int64_t layer) const {
  return ModelMoELayer::load(*source_, family_->moe_layer(layer), quant_);
}

ModelMoELayer load_model_layer(const std::string& path, int64_t layer) { return Model::open(path).load_layer(layer); }

}  // namespace hymoe
