// Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B): softmax top-k, renormalized with norm_topk_prob (true in the
// releases), no shared expert; experts run act(gate x) * up x with act = hidden_act. Released configs say
// num_experts, transformers 5 writes num_local_experts.
#include "models/families.h"
#include "models/family_common.h"

namespace hymoe {
namespace {

using namespace family_detail;

class Qwen3Moe final : public FamilyBase {
 public:
  explicit Qwen3Moe(const HfConfig& c) : FamilyBase(c, "qwen3_moe", read_common_fields(c)), experts_(c.integer({"num_experts", "num_local_experts"})) {}

 private:
  std::string dense_reason(int64_t layer) const override { return qwen_dense_reason(c_, layer, experts_); }
  void fill(int64_t layer, MoELayerSpec& s) const override {
    fill_qwen_routed(c_, layer, experts_, s);
  }

  int64_t experts_;
};

}  // namespace

std::unique_ptr<ModelFamily> make_qwen3_moe_family(const HfConfig& config) { return std::make_unique<Qwen3Moe>(config); }

}  // namespace hymoe
