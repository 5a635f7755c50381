// Model: a downloaded model directory (config.json + safetensors) or a GGUF file, and the one-call layer loader.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "hymoe/error.h"
#include "hymoe/model.h"
#include "models/gguf_model.h"

namespace hymoe {

bool is_gguf_model_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return false;
  // A stream's first bytes would be consumed by the peek: only a regular file is looked into (a pipe is a GGUF
  // model for --model only by its .gguf name; `inspect` opens its inputs once and looks at the bytes it read).
  std::byte magic[4] = {};
  if (fs::is_regular_file(path, ec)) {
    std::ifstream in(path, std::ios::binary);
    if (!in.read(reinterpret_cast<char*>(magic), 4)) return is_gguf_image(path, {});
  }
  return is_gguf_image(path, magic);
}

bool is_gguf_image(const std::string& path, std::span<const std::byte> head) {
  return std::filesystem::path(path).extension() == ".gguf" ||
         (head.size() >= 4 && std::memcmp(head.data(), "GGUF", 4) == 0);
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

namespace {

// The three matrices of `count` experts (numbered under `prefix` as `storage` numbers them, or one unnumbered),
// each with its fp8 scale when the stored weight is F8_E4M3: the names load_linear_experts reads (expert_loader.cc).
void add_linear_expert_names(const TensorSource& source, ExpertStorage storage, const std::string& prefix,
                             int64_t count, bool numbered, std::initializer_list<const std::string*> matrices,
                             std::vector<std::string>& names) {
  for (int64_t e = 0; e < count; ++e) {
    for (const std::string* m : matrices) {
      if (m->empty()) continue;  // an ungated expert's gate
      const std::string weight = expert_weight_name(storage, prefix, *m, numbered ? e : -1);
      names.push_back(weight);
      if (source.contains(weight) && source.tensor(weight).dtype == DType::kF8E4M3) names.push_back(weight + "_scale_inv");
    }
  }
}

}  // namespace

std::string expert_weight_name(ExpertStorage storage, const std::string& prefix, const std::string& matrix,
                               int64_t expert) {
  if (expert < 0) return prefix + matrix + ".weight";
  if (storage == ExpertStorage::kSplitOutIn) return prefix + matrix + "." + std::to_string(expert) + ".weight";
  return prefix + std::to_string(expert) + "." + matrix + ".weight";
}

std::vector<std::string> Model::layer_tensor_names(int64_t layer) const {
  const MoELayerSpec s = family_->moe_layer(layer);
  std::vector<std::string> names{s.router_weight};
  if (s.router.logit_bias) names.push_back(s.router_bias);
  if (s.router.selection_bias && (!s.selection_bias_optional || source_->contains(s.selection_bias)))
    names.push_back(s.selection_bias);
  for (const std::string* n : {&s.output_bias, &s.output_norm})
    if (!n->empty()) names.push_back(*n);
  switch (s.storage) {
    case ExpertStorage::kFusedOutIn:  // GGUF: the prefix is the block's, so name each tensor
      for (const std::string* n : {&s.gate_name, &s.up_name, &s.down_name})
        if (!n->empty()) names.push_back(s.experts_prefix + *n + s.fused_suffix);  // "": an ungated expert's gate
      if (s.expert_biases)
        for (const std::string* n : {&s.gate_name, &s.up_name, &s.down_name}) names.push_back(s.experts_prefix + *n + ".bias");
      break;
    case ExpertStorage::kFusedGateUpOutIn:
      for (const std::string* n : {&s.gate_name, &s.down_name}) names.push_back(s.experts_prefix + *n + s.fused_suffix);
      break;
    case ExpertStorage::kStackedRowsDownInOut:
      for (const std::string* n : {&s.gate_name, &s.up_name, &s.down_name}) names.push_back(s.experts_prefix + *n + s.fused_suffix);
      break;
    case ExpertStorage::kFusedConcatInOut:
      for (const std::string* n : {&s.in_out_gate_up, &s.in_out_down}) names.push_back(s.experts_prefix + *n);
      if (s.expert_biases)
        for (const char* n : {"gate_up_proj_bias", "down_proj_bias"}) names.push_back(s.experts_prefix + n);
      break;
    case ExpertStorage::kFusedInterleavedInOut:
      for (const char* n : {"gate_up_proj_bias", "down_proj_bias"}) names.push_back(s.experts_prefix + n);
      if (quant_.method == Quantization::Method::kMxfp4)
        for (const char* n : {"gate_up_proj_blocks", "gate_up_proj_scales", "down_proj_blocks", "down_proj_scales"})
          names.push_back(s.experts_prefix + n);
      else
        for (const std::string* n : {&s.in_out_gate_up, &s.in_out_down}) names.push_back(s.experts_prefix + *n);
      break;
    case ExpertStorage::kPerExpertLinear:
    case ExpertStorage::kSplitOutIn:
      add_linear_expert_names(*source_, s.storage, s.experts_prefix, s.num_experts, true,
                              {&s.gate_name, &s.up_name, &s.down_name}, names);
      break;
  }
  if (s.shared.hidden > 0 && s.shared.merged_gate_up) {
    for (const std::string* n : {&s.shared.gate_name, &s.shared.down_name}) names.push_back(s.shared.prefix + *n + ".weight");
  } else if (s.shared.hidden > 0) {
    add_linear_expert_names(*source_, s.storage, s.shared.prefix, 1, false,
                            {&s.shared.gate_name, &s.shared.up_name, &s.shared.down_name}, names);
  }
  if (s.shared.hidden > 0 && !s.shared.gate_weight.empty()) names.push_back(s.shared.gate_weight);
  return names;
}

ModelMoELayer Model::load_layer(int64_t layer) const {
  return ModelMoELayer::load(*source_, family_->moe_layer(layer), quant_);
}

ModelMoELayer load_model_layer(const std::string& path, int64_t layer) { return Model::open(path).load_layer(layer); }

}  // namespace hymoe
