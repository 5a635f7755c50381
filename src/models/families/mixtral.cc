// Mixtral (MixtralForCausalLM): every layer MoE; softmax over E in float32, top-k, weights always renormalized;
// experts w1 (gate), w3 (up), w2 (down) under block_sparse_moe, run as w2(act(w1 x) * w3 x) with act = hidden_act.
// MiniMax-Text-01 (minimax) is the same block (MiniMaxTopKRouter, Mixtral's names); its residual factors
// (mlp_alpha_factor, mlp_beta_factor) act outside the block.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class Mixtral final : public FamilyBase {
 public:
  Mixtral(const HfConfig& c, std::string_view name) : FamilyBase(c, name, read_common_fields(c)) {}

 private:
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"intermediate_size"});
    s.num_experts = c_.integer({"num_local_experts", "num_experts"});
    s.router.scoring = RouterScoring::kSoftmax;
    s.router.normalize = true;  // whatever the config says: MixtralTopKRouter always renormalizes
    s.activation = read_hidden_act(c_);
    const std::string p = layer_prefix(layer) + "block_sparse_moe.";
    s.router_weight = p + "gate.weight";
    s.experts_prefix = p + "experts.";
    s.gate_name = "w1";
    s.up_name = "w3";
    s.down_name = "w2";
  }
};

}  // namespace

HYMOE_MODEL_FAMILY(mixtral) { return std::make_unique<Mixtral>(config, "mixtral"); }
HYMOE_MODEL_FAMILY(minimax) { return std::make_unique<Mixtral>(config, "minimax"); }

}  // namespace hymoe
