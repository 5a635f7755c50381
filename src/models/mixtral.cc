// Mixtral (MixtralForCausalLM): every layer MoE; softmax over E in float32, top-k, weights always renormalized;
// experts w1 (gate), w3 (up), w2 (down) under block_sparse_moe.
#include "models/families.h"
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class Mixtral final : public ModelFamily {
 public:
  explicit Mixtral(const HfConfig& c) : c_(c), f_(read_common_fields(c)) {}
  std::string_view name() const override { return "mixtral"; }
  int64_t num_layers() const override { return f_.num_layers; }
  bool is_moe_layer(int64_t layer) const override {
    check_layer_in_range(c_, name(), layer, f_.num_layers);
    return true;
  }
  MoELayerSpec moe_layer(int64_t layer) const override {
    check_layer_in_range(c_, name(), layer, f_.num_layers);
    MoELayerSpec s;
    s.family = name();
    s.layer = layer;
    s.dim = f_.dim;
    s.hidden = c_.integer({"intermediate_size"});
    s.num_experts = c_.integer({"num_local_experts", "num_experts"});
    s.top_k = f_.top_k;
    s.router.scoring = RouterScoring::kSoftmax;
    s.router.normalize = true;  // whatever the config says: MixtralTopKRouter always renormalizes
    const std::string p = layer_prefix(layer) + "block_sparse_moe.";
    s.router_weight = p + "gate.weight";
    s.experts_prefix = p + "experts.";
    s.gate_name = "w1";
    s.up_name = "w3";
    s.down_name = "w2";
    return checked(c_, s);
  }

 private:
  HfConfig c_;
  CommonFields f_;
};

}  // namespace

std::unique_ptr<ModelFamily> make_mixtral_family(const HfConfig& config) { return std::make_unique<Mixtral>(config); }

}  // namespace hymoe
