// Step-3.7 (step3p7), its language model: keys under text_config, tensors under model.layers.N. MiniMax-M3's router
// (fp32 sigmoid, the correction bias moe.router_bias for choosing only, the chosen scores divided by their sum, no
// epsilon), the routed output times moe_router_scaling_factor (1.0; the same as scaling the weights), plus an ungated
// shared MLP share_expert of share_expert_dim (1280). The experts are stacked (E, I, D) / (E, D, I) as moe.gate_proj,
// moe.up_proj, moe.down_proj (.weight). Both run SwiGLU clamped after the silu, min(silu(g), L) * clamp(u, -L, L),
// with limits per layer and apart: swiglu_limits[l] for the routed experts, swiglu_limits_shared[l] for the shared
// one (absent, null or 0: no limit; the lists may run past num_hidden_layers with MTP entries). hidden_act is forced
// to silu by the config class. MoE where mlp_layer_types says "sparse" (absent: the layers moe_layers_enum lists, a
// comma-separated string or a list, else layers >= 3).
#include <set>

#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class Step3p7 final : public FamilyBase {
 public:
  explicit Step3p7(const HfConfig& text)
      : FamilyBase(text, "step3p7", read_common_fields(text, {"num_experts_per_tok", "moe_top_k"})) {
    const int64_t n = f_.num_layers;
    std::vector<std::string> fallback;
    std::set<int64_t> moe;
    if (text.is_list("moe_layers_enum")) {
      for (int64_t l : text.integer_list_or("moe_layers_enum", {})) moe.insert(l);
    } else if (text.has("moe_layers_enum")) {
      const std::string list = text.string({"moe_layers_enum"});
      size_t start = 0;
      while (start <= list.size()) {
        const size_t comma = std::min(list.find(',', start), list.size());
        std::string item = list.substr(start, comma - start);
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        if (!item.empty()) {
          if (item.find_first_not_of("0123456789") != std::string::npos)
            fail(text.label(), ": 'moe_layers_enum' holds '", item, "', not a layer index");
          moe.insert(std::stoll(item));
        }
        start = comma + 1;
      }
    } else {
      for (int64_t l = 3; l < n; ++l) moe.insert(l);
    }
    for (int64_t l = 0; l < n; ++l) fallback.push_back(moe.count(l) ? "sparse" : "dense");
    // Legacy configs pad it with the MTP layers' entries.
    layer_types_ = read_layer_types(text, "step3p7", n, std::move(fallback), {"dense", "sparse"}, /*padded=*/true);
  }

 private:
  std::string dense_reason(int64_t layer) const override {
    return layer_types_[static_cast<size_t>(layer)] == "sparse"
               ? ""
               : "mlp_layer_types[" + std::to_string(layer) + "] is not \"sparse\"";
  }
  void fill(int64_t layer, MoELayerSpec& s) const override {
    s.hidden = c_.integer_or({"moe_intermediate_size"}, 1280);
    s.num_experts = c_.integer({"n_routed_experts", "num_local_experts", "moe_num_experts"});
    s.router.scoring = RouterScoring::kSigmoid;
    s.router.selection_bias = true;
    s.router.normalize = true;
    s.router.scaling_factor = c_.number_or({"moe_router_scaling_factor"}, 1.0);
    const std::string p = layer_prefix(layer);
    s.router_weight = p + "moe.gate.weight";
    s.selection_bias = p + "moe.router_bias";
    s.storage = ExpertStorage::kFusedOutIn;
    s.experts_prefix = p + "moe.";
    s.shared.hidden = c_.integer_or({"share_expert_dim"}, 1280);
    s.shared.prefix = p + "share_expert.";
    const auto limit = [&](const char* key) {
      const double l = c_.number_of_layer(key, layer).value_or(0.0);
      if (l < 0) fail(c_.label(), ": '", key, "'[", layer, "] = ", l, " must not be negative");
      return l;
    };
    const double routed = limit("swiglu_limits"), shared = limit("swiglu_limits_shared");
    if (routed > 0) {
      s.activation = ExpertActivation::kSiluClampedSwiGLU;
      s.swiglu_limit = routed;
    }
    s.shared.activation = shared > 0 ? ExpertActivation::kSiluClampedSwiGLU : ExpertActivation::kSwiGLU;
    if (shared > 0) s.shared.swiglu_limit = shared;
  }

  std::vector<std::string> layer_types_;
};

}  // namespace

HYMOE_MODEL_FAMILY(step3p7) { return std::make_unique<Step3p7>(text_config_of(config, "step3p7")); }

}  // namespace hymoe
