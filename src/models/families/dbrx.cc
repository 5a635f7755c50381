// DBRX (dbrx: DBRX Base, Instruct): the MoE settings in config.json's ffn_config, the model's in d_model and
// n_layers. Every block's ffn is MoE: softmax over E in float32, top moe_top_k, the chosen weights divided by their
// p-norm of order moe_normalize_expert_weights (default 1: their sum, the only order hymoe runs; null: not
// renormalized); experts of ffn_hidden_size running act(w1 x) * v1 x, act = ACT2FN[ffn_act_fn.name] (default
// silu), then h @ w2. The experts are stacked: transformer.blocks.N.ffn.experts.mlp.w1, v1, w2, (E I, D) each,
// expert e rows [eI, (e + 1)I), and w2's rows are used untransposed (ExpertStorage::kStackedRowsDownInOut); the
// router is ffn.router.layer.weight.
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

HfConfig ffn_config_of(const HfConfig& c) {
  std::optional<HfConfig> ffn = c.object("ffn_config");
  if (!ffn) fail(c.label(), ": missing object 'ffn_config' (a dbrx model's MoE settings)");
  return *ffn;
}

CommonFields dbrx_fields(const HfConfig& c, const HfConfig& ffn) {
  CommonFields f;
  f.dim = c.integer_or({"d_model"}, 2048);
  f.top_k = ffn.integer_or({"moe_top_k"}, 1);
  f.num_layers = c.integer_or({"n_layers"}, 24);
  if (f.num_layers <= 0) fail(c.label(), ": n_layers=", f.num_layers, " must be positive");
  return f;
}

class Dbrx final : public FamilyBase {
 public:
  Dbrx(const HfConfig& c, const HfConfig& ffn) : FamilyBase(c, "dbrx", dbrx_fields(c, ffn)), ffn_(ffn) {
    normalize_ = !ffn.is_null("moe_normalize_expert_weights");
    const double p = ffn.number_or({"moe_normalize_expert_weights"}, 1.0);
    if (normalize_ && p != 1.0)
      fail(ffn.label(), ": ffn_config.moe_normalize_expert_weights=", p,
           " (a p-norm of the chosen weights other than 1, their sum) is not a normalization hymoe's router has");
    std::optional<HfConfig> act = ffn.object("ffn_act_fn");
    activation_ = activation_named(ffn, "ffn_config.ffn_act_fn.name", act ? act->string_or({"name"}, "silu") : "silu");
  }

 private:
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = ffn_.integer_or({"ffn_hidden_size"}, 3584);
    s.num_experts = ffn_.integer_or({"moe_num_experts"}, 4);
    s.router.scoring = RouterScoring::kSoftmax;
    s.router.normalize = normalize_;
    s.activation = activation_;
    const std::string p = "transformer.blocks." + std::to_string(layer) + ".ffn.";
    s.router_weight = p + "router.layer.weight";
    s.storage = ExpertStorage::kStackedRowsDownInOut;
    s.experts_prefix = p + "experts.mlp.";
    s.gate_name = "w1";
    s.up_name = "v1";
    s.down_name = "w2";
    s.fused_suffix = "";
  }

  HfConfig ffn_;
  bool normalize_ = true;
  ExpertActivation activation_ = ExpertActivation::kSwiGLU;
};

}  // namespace

HYMOE_MODEL_FAMILY(dbrx) {
  return std::make_unique<Dbrx>(config, ffn_config_of(config));
}

}  // namespace hymoe
