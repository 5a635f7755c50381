// IBM Granite MoE (granitemoe), with a shared MLP (granitemoeshared), and the Mamba/attention hybrid
// (granitemoehybrid), all as released: the block's router (block_sparse_moe.router.layer, (E, D)) takes the top-k
// logits and softmaxes those alone (GraniteMoeTopKRouter), which is softmax scores renormalized over the chosen;
// the experts are one (E, 2I, D) tensor input_linear (each expert's gate rows, then its up rows: the chunk(2) of
// its output) and output_linear (E, D, I); act = hidden_act. The shared MLP (shared_mlp.input_linear (2S, D), the
// same gate-then-up halves, output_linear (D, S)) runs on every token when shared_intermediate_size > 0 (always
// in granitemoehybrid). Every layer is MoE (a hybrid's mamba layers too) when num_local_experts > 0.
// granitemoe_swa is the same block stored under transformers' own names (no conversion mapping renames them on
// save): block_sparse_moe.router.weight, block_sparse_moe.experts.gate_up_proj (E, 2I, D) gate rows first and
// experts.down_proj (E, D, I), without a .weight suffix; its shared_mlp as granitemoeshared's.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class GraniteMoe final : public FamilyBase {
 public:
  GraniteMoe(const HfConfig& c, std::string_view name, bool shared_key, bool transformers_names = false)
      : FamilyBase(c, name, read_common_fields(c)), shared_key_(shared_key), transformers_names_(transformers_names) {}

 private:
  std::string dense_reason(int64_t) const override {
    return c_.integer_or({"num_local_experts"}, 0) > 0 ? "" : "num_local_experts is 0";
  }

  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"intermediate_size"});
    s.num_experts = c_.integer({"num_local_experts"});
    s.router.scoring = RouterScoring::kSoftmax;
    s.router.normalize = true;
    s.activation = read_hidden_act(c_);
    const std::string p = layer_prefix(layer);
    s.router_weight = p + "block_sparse_moe.router.layer.weight";
    s.storage = ExpertStorage::kFusedGateUpOutIn;
    s.experts_prefix = p + "block_sparse_moe.";
    s.gate_name = "input_linear";
    s.down_name = "output_linear";
    if (transformers_names_) {
      s.router_weight = p + "block_sparse_moe.router.weight";
      s.experts_prefix = p + "block_sparse_moe.experts.";
      s.gate_name = "gate_up_proj";
      s.down_name = "down_proj";
      s.fused_suffix = "";
    }
    if (shared_key_) {
      s.shared.hidden = c_.integer_or({"shared_intermediate_size"}, 0);
      s.shared.prefix = p + "shared_mlp.";
      s.shared.gate_name = "input_linear";
      s.shared.down_name = "output_linear";
      s.shared.merged_gate_up = true;
    }
  }

  bool shared_key_;
  bool transformers_names_;  // granitemoe_swa
};

}  // namespace

HYMOE_MODEL_FAMILY(granitemoe) {
  return std::make_unique<GraniteMoe>(config, "granitemoe", false);
}
HYMOE_MODEL_FAMILY(granitemoeshared) {
  return std::make_unique<GraniteMoe>(config, "granitemoeshared", true);
}
HYMOE_MODEL_FAMILY(granitemoehybrid) {
  return std::make_unique<GraniteMoe>(config, "granitemoehybrid", true);
}
HYMOE_MODEL_FAMILY(granitemoe_swa) {
  return std::make_unique<GraniteMoe>(config, "granitemoe_swa", true, true);
}

}  // namespace hymoe
