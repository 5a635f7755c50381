// Qwen2-MoE (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): softmax top-k, renormalized only with norm_topk_prob (false in
// the releases), plus one shared expert of shared_expert_intermediate_size (default 5632, transformers') scaled per
// token by sigmoid(shared_expert_gate x); routed and shared experts run act(gate x) * up x with act = hidden_act.
// MoE layers follow decoder_sparse_step and mlp_only_layers.
#include "models/families.h"
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class Qwen2Moe final : public FamilyBase {
 public:
  explicit Qwen2Moe(const HfConfig& c) : FamilyBase(c, "qwen2_moe", read_common_fields(c)), experts_(c.integer({"num_experts"})) {}

 private:
  std::string dense_reason(int64_t layer) const override { return qwen_dense_reason(c_, layer, experts_); }
  void fill(int64_t layer, MoELayerSpec& s) const override {
    fill_qwen_routed(c_, layer, experts_, s);
    const std::string p = layer_prefix(layer) + "mlp.";
    // transformers' default: Qwen2MoeConfig builds a 5632-wide shared expert when the key is absent (0: none).
    s.shared.hidden = c_.integer_or({"shared_expert_intermediate_size"}, 5632);
    s.shared.prefix = p + "shared_expert.";
    s.shared.gate_weight = p + "shared_expert_gate.weight";
  }

  int64_t experts_;
};

}  // namespace

std::unique_ptr<ModelFamily> make_qwen2_moe_family(const HfConfig& config) { return std::make_unique<Qwen2Moe>(config); }

}  // namespace hymoe
