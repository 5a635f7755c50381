// OLMoE (OLMoE-1B-7B): every layer MoE; softmax top-k, renormalized only with norm_topk_prob (false in the
// release); expert size is intermediate_size.
#include "models/families.h"
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class Olmoe final : public ModelFamily {
 public:
  explicit Olmoe(const HfConfig& c) : c_(c), f_(read_common_fields(c)) {}
  std::string_view name() const override { return "olmoe"; }
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
    s.num_experts = c_.integer({"num_experts", "num_local_experts"});
    s.top_k = f_.top_k;
    s.router.scoring = RouterScoring::kSoftmax;
    s.router.normalize = c_.boolean_or({"norm_topk_prob"}, false);
    const std::string p = layer_prefix(layer) + "mlp.";
    s.router_weight = p + "gate.weight";
    s.experts_prefix = p + "experts.";
    return checked(c_, s);
  }

 private:
  HfConfig c_;
  CommonFields f_;
};

}  // namespace

std::unique_ptr<ModelFamily> make_olmoe_family(const HfConfig& config) { return std::make_unique<Olmoe>(config); }

}  // namespace hymoe
