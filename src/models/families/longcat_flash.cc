// LongCat-Flash (longcat_flash): a router over n_routed_experts + zero_expert_num (256) rows
// (mlp.router.classifier, fp32 logits, any classifier bias unused as transformers' forward leaves it out); softmax
// over all of them, the top moe_topk chosen on the scores plus mlp.router.e_score_correction_bias (E + Z); weights
// the unbiased scores times routed_scaling_factor (6.0), never renormalized. A chosen row >= n_routed_experts is a
// zero-computation expert: it adds w x. The others are SwiGLU-style experts (hidden_act) of expert_ffn_hidden_size,
// saved one per expert (save_pretrained also writes gate and up tensors for the zero experts, which are unused). No
// shared expert; every layer MoE. Its config counts num_layers (each with two attention sublayers): num_hidden_layers
// is 2 x num_layers and absent from a saved config.json.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

CommonFields longcat_fields(const HfConfig& c) {
  CommonFields f;
  f.dim = c.integer({"hidden_size"});
  f.top_k = c.integer_or({"moe_topk", "num_experts_per_tok"}, 12);
  f.num_layers = c.has("num_layers") ? c.integer({"num_layers"}) : c.integer({"num_hidden_layers"}) / 2;
  if (f.num_layers <= 0) fail(c.label(), ": num_layers=", f.num_layers, " must be positive");
  return f;
}

class LongcatFlash final : public FamilyBase {
 public:
  explicit LongcatFlash(const HfConfig& c) : FamilyBase(c, "longcat_flash", longcat_fields(c)) {}

 private:
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer_or({"expert_ffn_hidden_size", "moe_intermediate_size"}, 2048);
    s.num_experts = c_.integer_or({"n_routed_experts", "num_local_experts"}, 512);
    s.zero_experts = c_.integer_or({"zero_expert_num"}, 256);
    if (s.zero_experts < 0) fail(c_.label(), ": zero_expert_num=", s.zero_experts, " must not be negative");
    s.router.scoring = RouterScoring::kSoftmax;
    s.router.selection_bias = true;
    s.router.normalize = false;
    s.router.scaling_factor = c_.number_or({"routed_scaling_factor"}, 6.0);
    s.activation = read_hidden_act(c_);
    const std::string p = layer_prefix(layer) + "mlp.";
    s.router_weight = p + "router.classifier.weight";
    s.selection_bias = p + "router.e_score_correction_bias";
    s.experts_prefix = p + "experts.";
  }
};

}  // namespace

HYMOE_MODEL_FAMILY(longcat_flash) { return std::make_unique<LongcatFlash>(config); }

}  // namespace hymoe
