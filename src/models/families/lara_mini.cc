// Lara-Mini (lara_mini): Qwen3-Next's routing without its shared-expert gate: fp32 softmax top-k, renormalized iff
// norm_topk_prob (default true, no epsilon), one shared expert of shared_expert_intermediate_size (default 512)
// added in full, ungated; every layer MoE whatever its attention; the experts saved fused as save_pretrained writes
// them (experts.gate_up_proj (E, 2I, D) gate rows first, experts.down_proj (E, D, I), no .weight suffix).
// Flint (flint) is the same shape of block with a sigmoid router: top-k of sigmoid(logits), no bias, no groups,
// renormalized iff norm_topk_prob (default true, no epsilon), an ungated shared expert (default 1024 wide), the
// experts one per expert; its MoE layers follow Qwen's rule with mlp_only_layers defaulting to [0, 1].
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class UngatedSharedQwen final : public FamilyBase {
 public:
  enum class Kind { kLaraMini, kFlint };
  UngatedSharedQwen(const HfConfig& c, Kind kind)
      : FamilyBase(c, kind == Kind::kFlint ? "flint" : "lara_mini", read_common_fields(c)),
        kind_(kind),
        experts_(c.integer_or({"num_experts"}, kind == Kind::kFlint ? 256 : 128)) {}

 private:
  std::string dense_reason(int64_t layer) const override {
    if (kind_ == Kind::kLaraMini) return "";
    return qwen_dense_reason(c_, layer, experts_, {0, 1});
  }
  void fill(int64_t layer, MoELayerSpec& s) const override {
    fill_qwen_routed(c_, layer, experts_, s, /*norm_default=*/true);
    if (kind_ == Kind::kFlint) s.router.scoring = RouterScoring::kSigmoid;
    const std::string p = layer_prefix(layer) + "mlp.";
    if (kind_ == Kind::kLaraMini) {
      s.storage = ExpertStorage::kFusedGateUpOutIn;
      s.gate_name = "gate_up_proj";
      s.fused_suffix = "";
    }
    s.shared.hidden = c_.integer_or({"shared_expert_intermediate_size"}, kind_ == Kind::kFlint ? 1024 : 512);
    s.shared.prefix = p + "shared_expert.";
  }

  Kind kind_;
  int64_t experts_;
};

}  // namespace

HYMOE_MODEL_FAMILY(lara_mini) { return std::make_unique<UngatedSharedQwen>(config, UngatedSharedQwen::Kind::kLaraMini); }
HYMOE_MODEL_FAMILY(flint) { return std::make_unique<UngatedSharedQwen>(config, UngatedSharedQwen::Kind::kFlint); }

}  // namespace hymoe
