// MiniMax-M2 (minimax_m2): sigmoid scores; e_score_correction_bias (a buffer of the block, not of its gate) added
// for choosing only; no groups; the unbiased scores of the chosen experts always renormalized (MiniMaxM2TopKRouter
// divides by their sum, without an epsilon: a sum of sigmoids is never 0); no scaling factor, no shared expert;
// expert size intermediate_size, num_local_experts experts; experts run act(gate x) * up x with act = hidden_act,
// stored as Mixtral's w1 (gate), w3 (up), w2 (down) under block_sparse_moe.
// Every layer is MoE.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class MiniMaxM2 final : public FamilyBase {
 public:
  explicit MiniMaxM2(const HfConfig& c) : FamilyBase(c, "minimax_m2", read_common_fields(c)) {}

 private:
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"intermediate_size"});
    s.num_experts = c_.integer({"num_local_experts", "num_experts"});
    s.router.scoring = RouterScoring::kSigmoid;
    s.router.selection_bias = true;
    s.router.normalize = true;
    s.activation = read_hidden_act(c_);
    // The released names, which transformers' conversion keeps on save: Mixtral's block_sparse_moe and w1/w3/w2.
    const std::string p = layer_prefix(layer) + "block_sparse_moe.";
    s.router_weight = p + "gate.weight";
    s.selection_bias = p + "e_score_correction_bias";
    s.experts_prefix = p + "experts.";
    s.gate_name = "w1";
    s.up_name = "w3";
    s.down_name = "w2";
  }
};

}  // namespace

HYMOE_MODEL_FAMILY(minimax_m2) {
  return std::make_unique<MiniMaxM2>(config);
}

}  // namespace hymoe
