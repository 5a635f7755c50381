// Phi-3.5-MoE (phimoe): every layer MoE; PhimoeTopKRouter's sparsemixer in eval mode (RouterScoring::kSparseMixer,
// jitter_eps = router_jitter_noise, default 0.01): top-2 only, each weight a softmax over the logits within the
// jitter threshold of the chosen one, not renormalized; experts as Mixtral's (block_sparse_moe, w1 gate, w3 up,
// w2 down; the names transformers' conversion keeps on save), act = hidden_act. input_jitter_noise acts in training
// only.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class Phimoe final : public FamilyBase {
 public:
  explicit Phimoe(const HfConfig& c) : FamilyBase(c, "phimoe", read_common_fields(c)) {
    if (f_.top_k != 2)
      fail(c.label(), ": num_experts_per_tok is ", f_.top_k, "; PhiMoE's sparsemixer selects exactly 2 experts");
  }

 private:
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"intermediate_size"});
    s.num_experts = c_.integer({"num_local_experts"});
    s.router.scoring = RouterScoring::kSparseMixer;
    s.router.jitter_eps = c_.number_or({"router_jitter_noise"}, 0.01);
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

HYMOE_MODEL_FAMILY(phimoe) { return std::make_unique<Phimoe>(config); }

}  // namespace hymoe
