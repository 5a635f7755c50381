// A GGUF file as one more model behind ModelMoELayer: a TensorSource over its tensors and one ModelFamily for every
// architecture gguf_moe.h knows, whose MoELayerSpec carries llama.cpp's routing (build_moe_ffn) instead of
// transformers'. The hyperparameters, block tensors, shapes and types are read and checked by gguf_moe.cc; this file
// only translates them. tests/data/conformance/gguf/README.md records the semantics.
#include <cmath>
#include <limits>

#include "hymoe/error.h"
#include "hymoe/gguf.h"
#include "hymoe/gguf_moe.h"
#include "hymoe/model.h"
#include "models/gguf_model.h"

namespace hymoe {
namespace {

// The element type a GGUF tensor's bytes are read as when it is not a block type.
DType element_dtype(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: return DType::kF32;
    case GgmlType::kF16: return DType::kF16;
    case GgmlType::kBF16: return DType::kBF16;
    default: return DType::kU8;
  }
}

class GgufSource final : public TensorSource {
 public:
  explicit GgufSource(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {}
  const std::string& label() const override { return file_->label(); }
  bool contains(const std::string& name) const override { return file_->contains(name); }
  TensorRef tensor(const std::string& name) const override {
    const GgufTensorInfo& t = file_->tensor(name);  // an absent name is an error naming the file and the tensor
    TensorRef ref{t.name, element_dtype(t.type), t.shape(), file_->bytes(t), file_->label(), std::nullopt};
    ref.ggml_type = t.type;
    return ref;
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& t : file_->tensors()) out.push_back(t.name);
    return out;
  }

 private:
  std::shared_ptr<const GgufFile> file_;
};

// llama.cpp's routing for `c` as RouterOptions: every architecture's gating, selection bias, expert groups,
// normalization and scale in one place (the per-architecture choices were made by read_gguf_moe_config).
RouterOptions llama_cpp_router(const GgufMoeConfig& c, bool has_exp_probs_b) {
  RouterOptions r;
  switch (c.gating) {
    case GgufGating::kSoftmax: r.scoring = RouterScoring::kSoftmax; break;
    case GgufGating::kSigmoid: r.scoring = RouterScoring::kSigmoid; break;
    // SOFTMAX_WEIGHT: the logits are the scores (selection, groups, exp_probs_b), the K chosen ones softmaxed.
    case GgufGating::kSoftmaxWeight: r.scoring = RouterScoring::kSoftmaxOverTopKLogits; break;
    case GgufGating::kSqrtSoftplus: r.scoring = RouterScoring::kSqrtSoftplus; break;
  }
  r.logit_bias = c.biases;  // gpt-oss: ffn_gate_inp.bias added to the logits
  r.selection_bias = has_exp_probs_b;  // exp_probs_b: added for the selection only, for any gating
  if (c.group_count > 1) {             // build_moe_ffn groups whenever expert_group_count > 1, for every arch
    r.group_limited = true;
    r.n_group = c.group_count;
    r.top_group = c.group_used_count;
    r.group_score = GroupScore::kTop2Sum;
    r.excluded_score = -std::numeric_limits<float>::infinity();
  }
  r.normalize = c.norm_weights;
  r.scale_input = c.weight_before_ffn;
  r.normalize_min_sum = 6.103515625e-5;  // ggml_clamp(sum, 6.103515625e-5, INFINITY)
  r.scaling_factor = c.weights_scale != 0.0f && c.weights_scale != 1.0f ? c.weights_scale : 1.0;
  return r;
}

class GgufFamily final : public ModelFamily {
 public:
  explicit GgufFamily(std::shared_ptr<const GgufFile> file)
      : file_(std::move(file)), config_(read_gguf_moe_config(*file_)) {}

  std::string_view name() const override { return config_.architecture; }
  int64_t num_layers() const override { return config_.block_count; }
  bool is_moe_layer(int64_t layer) const override {
    check_block(layer);
    return config_.expert_count > 0 && layer >= config_.leading_dense_blocks &&
           (layer + 1) % config_.moe_layer_step == 0 && gguf_block_is_moe(*file_, static_cast<uint32_t>(layer));
  }

  MoELayerSpec moe_layer(int64_t layer) const override {
    check_block(layer);
    const auto block = static_cast<uint32_t>(layer);
    const std::string p = "blk." + std::to_string(block) + ".";
    if (config_.expert_count > 0 && block >= config_.leading_dense_blocks && !gguf_block_is_moe(*file_, block))
      fail(file_->label(), ": block ", block, " is not a MoE block (no tensor '", p, "ffn_gate_inp.weight')");
    const GgufMoeBlock b = find_gguf_moe_block(*file_, config_, block);  // names, shapes and types checked
    MoELayerSpec s;
    s.family = config_.architecture;
    s.layer = layer;
    s.dim = config_.embedding_length;
    s.hidden = config_.expert_hidden;
    s.num_experts = config_.expert_count;
    s.top_k = config_.expert_used_count;
    s.router = llama_cpp_router(config_, b.exp_probs_b != nullptr);
    s.router_weight = b.router->name;
    if (b.router_bias) s.router_bias = b.router_bias->name;
    if (b.exp_probs_b) s.selection_bias = b.exp_probs_b->name;
    // LLM_FFN_SWIGLU_OAI_MOE, alpha and limit fixed in llama.cpp's build_moe_ffn and build_ffn: gpt-oss with biases,
    // minimax-m3 without, in its shared expert too.
    if (config_.ungated_relu2) s.activation = ExpertActivation::kSquaredReLU;
    if (config_.biases || config_.swiglu_oai) {
      s.activation = ExpertActivation::kClampedSwiGLU;
      s.swiglu_alpha = 1.702;
      s.swiglu_limit = 7.0;
      s.expert_biases = config_.biases;
    }
    s.experts_prefix = p;
    if (b.split_experts()) {  // blk.N.ffn_gate.E.weight, ...: early Mixtral files
      s.storage = ExpertStorage::kSplitOutIn;
      s.gate_name = "ffn_gate";
      s.up_name = "ffn_up";
      s.down_name = "ffn_down";
    } else if (b.gate_up_exps) {  // ffn_gate_up_exps: gate and up merged, as converters may write them
      s.storage = ExpertStorage::kFusedGateUpOutIn;
      s.gate_name = "ffn_gate_up_exps";
      s.down_name = "ffn_down_exps";
    } else {
      s.storage = ExpertStorage::kFusedOutIn;
      s.gate_name = b.gate_exps ? "ffn_gate_exps" : "";  // nemotron_h_moe's experts have no gate
      s.up_name = "ffn_up_exps";
      s.down_name = "ffn_down_exps";
    }
    if (b.gate_shexp || b.up_shexp) {
      s.shared.hidden = config_.shared_hidden;
      s.shared.prefix = p;
      // fused (granite_swa): gate rows, then up rows, in ffn_up_shexp; none (nemotron_h_moe): no gate
      s.shared.gate_name = b.gate_shexp ? "ffn_gate_shexp" : config_.shared_fused_up ? "ffn_up_shexp" : "";
      s.shared.merged_gate_up = config_.shared_fused_up;
      s.shared.up_name = "ffn_up_shexp";
      s.shared.down_name = "ffn_down_shexp";
      // sigmoid(ffn_gate_inp_shexp . x) (qwen2moe, qwen3next); llama.cpp computes qwen2moe's as silu(z)/z, the same
      // function except at z = 0, where llama.cpp gets NaN and hymoe 0.5.
      if (b.gate_inp_shexp) s.shared.gate_weight = b.gate_inp_shexp->name;
      s.shared.average = config_.shared_average;
    }
    // The SwiGLU limits: ggml_swiglu_clamp's silu(min(g, L)) * clamp(u, +-L) (hymoe's limited SwiGLU) or the clamp
    // after the silu, for the routed experts and, with its own limit or none, the shared expert.
    const ExpertActivation limited =
        config_.swiglu_clamp_after_silu ? ExpertActivation::kSiluClampedSwiGLU : ExpertActivation::kLimitedSwiGLU;
    if (b.swiglu_limit > 0.0f) {
      s.activation = limited;
      s.swiglu_limit = b.swiglu_limit;
    }
    if (s.shared.hidden > 0 && b.shared_swiglu_limit > 0.0f) {
      s.shared.activation = limited;
      s.shared.swiglu_limit = b.shared_swiglu_limit;
    } else if (s.shared.hidden > 0 && b.swiglu_limit > 0.0f) {
      s.shared.activation = ExpertActivation::kSwiGLU;
    }
    return s;
  }

 private:
  void check_block(int64_t layer) const {
    if (layer < 0 || layer >= config_.block_count)
      fail(file_->label(), ": block ", layer, " does not exist (", config_.architecture, ".block_count = ",
           config_.block_count, ")");
  }

  std::shared_ptr<const GgufFile> file_;
  GgufMoeConfig config_;
};

}  // namespace

GgufModelParts open_gguf_model(const std::string& path) {
  auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
  GgufModelParts parts;
  parts.family = std::make_unique<GgufFamily>(file);  // the metadata first: a file that is no MoE model fails here
  parts.source = std::make_unique<GgufSource>(file);
  return parts;
}

}  // namespace hymoe
