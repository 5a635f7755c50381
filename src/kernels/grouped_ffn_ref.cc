// Reference grouped FFN: the definition the fast kernels are tested against. Double accumulation, weights read
// through MatrixView::at in their stored layout and dtype, no SIMD, no threads, no packing.
#include <vector>

#include "kernels/grouped_ffn.h"

namespace hymoe::kernels {
namespace {

class GroupedFfnRef final : public GroupedFfn {
 public:
  GroupedFfnRef(const GroupedFfnShape& shape, std::span<const MlpWeightsView> weights)
      : shape_(shape), weights_(weights.begin(), weights.end()) {
    validate_grouped_ffn_weights(shape_, weights_);
  }

  void run(const GroupedFfnArgs& args) const override {
    validate_grouped_ffn_args(shape_, args);
    const int64_t D = shape_.dim, H = shape_.hidden;
    const bool gated = is_gated(shape_.activation);
    std::vector<double> gate(static_cast<size_t>(H)), up(static_cast<size_t>(H)), hidden(static_cast<size_t>(H));
    for (int64_t g = 0; g < shape_.num_groups; ++g) {
      const MlpWeightsView& w = weights_[static_cast<size_t>(g)];
      for (int64_t r = args.offsets[g]; r < args.offsets[g + 1]; ++r) {
        const float* x = args.x + (args.x_rows ? args.x_rows[r] : r) * D;
        for (int64_t h = 0; h < H; ++h) {
          double su = 0.0, sg = 0.0;
          for (int64_t d = 0; d < D; ++d) {
            su += static_cast<double>(x[d]) * w.up.at(d, h);
            if (gated) sg += static_cast<double>(x[d]) * w.gate.at(d, h);
          }
          if (w.up_bias) su += w.up_bias[h];
          if (gated && w.gate_bias) sg += w.gate_bias[h];
          up[h] = su;
          gate[h] = sg;
          if (args.saved_up) args.saved_up[r * H + h] = static_cast<float>(su);
          if (gated && args.saved_gate) args.saved_gate[r * H + h] = static_cast<float>(sg);
          hidden[h] = gated ? gated_activation<double>(shape_.activation, sg, su, shape_.swiglu_alpha, shape_.swiglu_limit)
                            : apply_activation(shape_.activation, su);
        }
        const double s = args.scale ? args.scale[r] : 1.0;
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0.0;
          for (int64_t h = 0; h < H; ++h) acc += hidden[h] * w.down.at(h, d);
          if (w.down_bias) acc += w.down_bias[d];
          args.y[r * D + d] = static_cast<float>(s * acc);
        }
      }
    }
  }

  const GroupedFfnShape& shape() const override { return shape_; }
  const char* name() const override { return "grouped_ffn_f32w_f32__ref"; }

 private:
  GroupedFfnShape shape_;
  std::vector<MlpWeightsView> weights_;
};

}  // namespace

std::unique_ptr<GroupedFfn> make_grouped_ffn_ref(const GroupedFfnShape& shape, std::span<const MlpWeightsView> weights) {
  return std::make_unique<GroupedFfnRef>(shape, weights);
}

}  // namespace hymoe::kernels
