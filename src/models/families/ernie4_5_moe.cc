// ERNIE-4.5-MoE (ernie4_5_moe; ERNIE-4.5-21B-A3B, 300B-A47B): a float32 softmax over the experts; the choice is
// made on the probabilities plus the e_score_correction_bias of the router's moe_statics (a (1, E) tensor), the
// weights are the unbiased probabilities of the chosen experts divided by max(their sum, moe_norm_min); shared
// experts moe_intermediate_size * moe_num_shared_experts wide, ungated. Layer l is MoE when (l + 1) %
// moe_layer_interval == 0 and moe_layer_start_index <= l <= moe_layer_end_index (-1: the last layer). Counts and
// top-k go by Ernie4_5_MoeConfig's names (moe_num_experts, moe_k), with its defaults (64, 6, start 1, interval 1,
// 2 shared experts, norm_min 1e-12). use_bias puts biases on the shared experts' projections, which hymoe refuses.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

CommonFields ernie_common_fields(const HfConfig& c) {
  CommonFields f;
  f.dim = c.integer({"hidden_size"});
  f.top_k = c.integer_or({"moe_k", "num_experts_per_tok"}, 6);
  f.num_layers = c.integer({"num_hidden_layers"});
  if (f.num_layers <= 0) fail(c.label(), ": num_hidden_layers=", f.num_layers, " must be positive");
  return f;
}

class Ernie45Moe final : public FamilyBase {
 public:
  explicit Ernie45Moe(const HfConfig& c)
      : FamilyBase(c, "ernie4_5_moe", ernie_common_fields(c)),
        start_(c.integer_or({"moe_layer_start_index"}, 1)),
        end_(c.integer_or({"moe_layer_end_index"}, -1)),
        interval_(c.integer_or({"moe_layer_interval"}, 1)) {
    if (interval_ <= 0) fail(c.label(), ": moe_layer_interval=", interval_, " must be positive");
    if (end_ == -1) end_ = f_.num_layers - 1;
  }

 private:
  std::string dense_reason(int64_t layer) const override {
    if ((layer + 1) % interval_ != 0) return "moe_layer_interval=" + std::to_string(interval_);
    if (layer < start_) return "moe_layer_start_index=" + std::to_string(start_);
    if (layer > end_) return "moe_layer_end_index=" + std::to_string(end_);
    return "";
  }
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer_or({"moe_intermediate_size"}, 1536);
    s.num_experts = c_.integer_or({"moe_num_experts", "num_experts"}, 64);
    s.router.scoring = RouterScoring::kSoftmax;
    s.router.selection_bias = true;
    s.router.normalize = true;
    s.router.normalize_min_sum = c_.number_or({"moe_norm_min"}, 1e-12);
    s.activation = read_hidden_act(c_);
    const std::string p = layer_prefix(layer) + "mlp.";
    s.router_weight = p + "gate.weight";
    s.selection_bias = p + "moe_statics.e_score_correction_bias";
    s.experts_prefix = p + "experts.";
    const int64_t shared = c_.integer_or({"moe_num_shared_experts"}, 2);
    if (shared > 0 && c_.boolean_or({"use_bias"}, false))
      fail(c_.label(), ": use_bias=true puts biases on the shared experts' projections, which hymoe does not run");
    s.shared.hidden = s.hidden * shared;
    s.shared.prefix = p + "shared_experts.";
  }

  int64_t start_, end_, interval_;
};

}  // namespace

HYMOE_MODEL_FAMILY(ernie4_5_moe) {
  return std::make_unique<Ernie45Moe>(config);
}

}  // namespace hymoe
