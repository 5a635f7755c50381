// Jamba (jamba: Jamba-v0.1, Jamba-1.5, Jamba-Reasoning): softmax over E in float32, top-k, the weights NOT
// renormalized (JambaTopKRouter); experts of intermediate_size (the dense MLP's size) running act(gate x) * up x. A
// layer is MoE where num_experts > 1 and layer % expert_layer_period == expert_layer_offset (JambaConfig's
// layers_num_experts; defaults 2 and 1), whether its mixer is attention or Mamba. The block sits under
// model.layers.N.feed_forward: router.weight and the experts one per expert as save_pretrained writes them.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class Jamba final : public FamilyBase {
 public:
  explicit Jamba(const HfConfig& c)
      : FamilyBase(c, "jamba", read_common_fields(c)),
        experts_(c.integer_or({"num_experts", "num_local_experts"}, 16)),
        period_(c.integer_or({"expert_layer_period"}, 2)),
        offset_(c.integer_or({"expert_layer_offset"}, 1)) {
    if (period_ <= 0) fail(c.label(), ": expert_layer_period=", period_, " must be positive");
  }

 private:
  std::string dense_reason(int64_t layer) const override {
    if (experts_ <= 1) return "num_experts=" + std::to_string(experts_);
    if (layer % period_ != offset_)
      return "layer % expert_layer_period (" + std::to_string(period_) + ") != expert_layer_offset (" +
             std::to_string(offset_) + ")";
    return "";
  }
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer({"intermediate_size"});
    s.num_experts = experts_;
    s.router.scoring = RouterScoring::kSoftmax;
    s.router.normalize = false;
    s.activation = read_hidden_act(c_);
    const std::string p = layer_prefix(layer) + "feed_forward.";
    s.router_weight = p + "router.weight";
    s.experts_prefix = p + "experts.";
  }

  int64_t experts_, period_, offset_;
};

}  // namespace

HYMOE_MODEL_FAMILY(jamba) { return std::make_unique<Jamba>(config); }

}  // namespace hymoe
