// The fast grouped FFN: weights packed once at construction into the ISA's panels, gate and up interleaved in one
// weight format and down in one (the same, except for GGUF layers whose down projection has a type of its own), then
// per run two phases of tiles over all groups together: gate/up with the fused activation epilogue writing the
// hidden rows once, and down with the fused row-scale epilogue writing y. Weights need not outlive the object.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "hymoe/error.h"
#include "kernels/driver/gemm_driver.h"
#include "kernels/ffn/grouped_ffn_impl.h"

namespace hymoe::kernels {
namespace {

class GroupedFfnPacked final : public GroupedFfn {
 public:
  GroupedFfnPacked(const GroupedFfnShape& shape, std::span<const MlpWeightsView> weights, const IsaKernels& ik,
                   WeightFormat first_format, WeightFormat down_format)
      : shape_(shape), ik_(ik), first_format_(ik.format(first_format)), down_format_(ik.format(down_format)),
        first_wf_(first_format), down_wf_(down_format) {
    validate_grouped_ffn_weights(shape_, weights);
    HYMOE_CHECK(first_format_, "isa ", isa_name(ik.isa), " has no ", weight_format_operands(first_format), " kernels");
    HYMOE_CHECK(down_format_, "isa ", isa_name(ik.isa), " has no ", weight_format_operands(down_format), " kernels");
    // The vector SwiGLU takes whole vectors of the ISA: a format with narrower panels (the GGUF formats' AVX2
    // kernels on an AVX-512 ISA) takes AVX2's, which every AVX-512 machine runs.
    swiglu_ = first_format_->nr % ik.nr == 0 ? ik.swiglu : isa_kernels_avx2().swiglu;
    for (const auto& w : weights) packed_.push_back(pack(w));
    released_.assign(packed_.size(), 0);
    // A layer whose down projection has a format of its own names both: grouped_ffn_q4_kw_f32+q6_kw_f32_4x16__avx2.
    name_ = std::string("grouped_ffn_") + weight_format_operands(first_format) +
            (down_format == first_format ? "" : std::string("+") + weight_format_operands(down_format)) + "_" +
            std::to_string(first_format_->mr) + "x" + std::to_string(first_format_->nr) + "__" +
            std::string(isa_name(ik_.isa));
  }

  void run(const GroupedFfnArgs& args) const override {
    validate_grouped_ffn_args(shape_, args);
    const int64_t G = shape_.num_groups, D = shape_.dim, H = shape_.hidden;
    const int64_t R = args.offsets[G];
    if (R == 0) return;
    for (int64_t g = 0; g < G; ++g)
      HYMOE_CHECK(!released_[static_cast<size_t>(g)] || args.offsets[g + 1] == args.offsets[g], "group ", g,
                  " was released but is given ", args.offsets[g + 1] - args.offsets[g], " rows");
    const bool gated = is_gated(shape_.activation);
    const int nr = first_format_->nr, half = nr / 2;
    const WorkspaceLease ws;
    const Workspace::Scope scope(*ws);
    float* const hidden = ws->floats(R * H);  // (R, H)

    // Phase 1: hidden = act(x . [gate|up]) per group. A group without rows stays empty (m = 0), its panels unread:
    // at one token 120 of Qwen3-30B-A3B's 128 experts, whose Packed entries a decode step finds out of cache.
    std::vector<GemmGroup> groups(static_cast<size_t>(G));
    for (int64_t g = 0; g < G; ++g) {
      if (args.offsets[g + 1] == args.offsets[g]) continue;
      const PackedMatrix& p = packed_[static_cast<size_t>(g)].first;
      GemmGroup& gr = groups[static_cast<size_t>(g)];
      gr = {args.x + (args.x_rows ? 0 : args.offsets[g] * D), D, args.x_rows ? args.x_rows + args.offsets[g] : nullptr,
            args.offsets[g + 1] - args.offsets[g], D, p.data(), p.panels};
    }
    run_gemm_groups(*first_format_, groups, *ws, [&](const GemmTile& t, const float* c, int64_t ldc) {
      const int64_t row0 = args.offsets[t.group] + t.r0;
      float tmp[64];
      for (int64_t r = 0; r < t.rows; ++r) {
        const float* cr = c + r * ldc;
        const int64_t row = row0 + r;
        float* h = hidden + row * H;
        for (int64_t j = 0; j < t.np; ++j) {
          const float* cp = cr + j * nr;
          if (gated) {
            const int64_t col = (t.p0 + j) * half, w = std::min<int64_t>(half, H - col);
            const Packed& pk = packed_[static_cast<size_t>(t.group)];
            if (shape_.activation == Activation::kSwiGLU && pk.gate_bias.empty() && pk.up_bias.empty()) {
              swiglu_(half, cp, cp + half, tmp);
            } else {  // biases (gpt-oss) or another gated form (GeGLU, ReGLU, clamped SwiGLU): a scalar epilogue
              for (int64_t i = 0; i < w; ++i) {
                const float g = cp[i] + (pk.gate_bias.empty() ? 0.0f : pk.gate_bias[static_cast<size_t>(col + i)]);
                const float u = cp[half + i] + (pk.up_bias.empty() ? 0.0f : pk.up_bias[static_cast<size_t>(col + i)]);
                tmp[i] = gated_activation(shape_.activation, g, u, shape_.swiglu_alpha, shape_.swiglu_limit);
              }
            }
            std::copy(tmp, tmp + w, h + col);
            if (args.saved_gate) std::copy(cp, cp + w, args.saved_gate + row * H + col);
            if (args.saved_up) std::copy(cp + half, cp + half + w, args.saved_up + row * H + col);
          } else {
            const int64_t col = (t.p0 + j) * nr, w = std::min<int64_t>(nr, H - col);
            if (args.saved_up) std::copy(cp, cp + w, args.saved_up + row * H + col);
            const std::vector<float>& ub = packed_[static_cast<size_t>(t.group)].up_bias;
            for (int64_t i = 0; i < w; ++i)
              h[col + i] = apply_activation(shape_.activation, cp[i] + (ub.empty() ? 0.0f : ub[static_cast<size_t>(col + i)]));
          }
        }
      }
    });

    // Phase 2: y = scale * (hidden . down) per group.
    for (int64_t g = 0; g < G; ++g) {
      if (args.offsets[g + 1] == args.offsets[g]) continue;
      const PackedMatrix& p = packed_[static_cast<size_t>(g)].down;
      groups[static_cast<size_t>(g)] = {hidden + args.offsets[g] * H, H, nullptr, args.offsets[g + 1] - args.offsets[g],
                                        H, p.data(), p.panels};
    }
    const int down_nr = down_format_->nr;
    run_gemm_groups(*down_format_, groups, *ws, [&](const GemmTile& t, const float* c, int64_t ldc) {
      const int64_t row0 = args.offsets[t.group] + t.r0;
      const int64_t col0 = t.p0 * down_nr, w = std::min<int64_t>(t.np * down_nr, D - col0);
      const std::vector<float>& db = packed_[static_cast<size_t>(t.group)].down_bias;
      for (int64_t r = 0; r < t.rows; ++r) {
        const float s = args.scale ? args.scale[row0 + r] : 1.0f;
        const float* cr = c + r * ldc;
        float* y = args.y + (row0 + r) * D + col0;
        if (db.empty()) {
          for (int64_t i = 0; i < w; ++i) y[i] = s * cr[i];
        } else {
          for (int64_t i = 0; i < w; ++i) y[i] = s * (cr[i] + db[static_cast<size_t>(col0 + i)]);
        }
      }
    });
  }

  const GroupedFfnShape& shape() const override { return shape_; }
  const char* name() const override { return name_.c_str(); }
  void release_group(int64_t g) override {
    HYMOE_CHECK(g >= 0 && g < shape_.num_groups, "release_group: group ", g, " of ", shape_.num_groups);
    packed_[static_cast<size_t>(g)] = Packed{};
    released_[static_cast<size_t>(g)] = 1;
  }
  void restore_group(int64_t g, const MlpWeightsView& w) override {
    HYMOE_CHECK(g >= 0 && g < shape_.num_groups, "restore_group: group ", g, " of ", shape_.num_groups);
    validate_grouped_ffn_weights(GroupedFfnShape{1, shape_.dim, shape_.hidden, shape_.activation}, {&w, 1});
    packed_[static_cast<size_t>(g)] = pack(w);
    released_[static_cast<size_t>(g)] = 0;
  }
  bool group_released(int64_t g) const override { return released_[static_cast<size_t>(g)] != 0; }
  int64_t weight_bytes() const override {
    int64_t n = 0;
    for (const Packed& p : packed_)
      n += static_cast<int64_t>(p.first.bytes() + p.down.bytes() +
                                (p.gate_bias.size() + p.up_bias.size() + p.down_bias.size()) * sizeof(float));
    return n;
  }

 private:
  struct Packed {
    PackedMatrix first;  // gate/up interleaved (gated) or up: // (H / (NR/2) or H / NR, dim, NR)
    PackedMatrix down;   // (dim / NR, hidden, NR)
    std::vector<float> gate_bias, up_bias, down_bias;  // (hidden), (hidden), (dim); empty without biases
  };
  Packed pack(const MlpWeightsView& w) const {
    Packed p;
    p.first = is_gated(shape_.activation) ? pack_gate_up(w.gate, w.up, first_format_->nr, first_wf_)
                                          : pack_matrix(w.up, first_format_->nr, first_wf_);
    p.down = pack_matrix(w.down, down_format_->nr, down_wf_);
    if (w.gate_bias) p.gate_bias.assign(w.gate_bias, w.gate_bias + shape_.hidden);
    if (w.up_bias) p.up_bias.assign(w.up_bias, w.up_bias + shape_.hidden);
    if (w.down_bias) p.down_bias.assign(w.down_bias, w.down_bias + shape_.dim);
    return p;
  }

  GroupedFfnShape shape_;
  const IsaKernels& ik_;
  const GemmFormat* first_format_;  // gate/up (or up)
  const GemmFormat* down_format_;
  WeightFormat first_wf_, down_wf_;
  std::vector<uint8_t> released_;  // (G) 1 where release_group freed the group's panels
  SwigluFn swiglu_;
  std::vector<Packed> packed_;
  std::string name_;
};

}  // namespace

std::unique_ptr<GroupedFfn> make_grouped_ffn_packed(const GroupedFfnShape& shape,
                                                    std::span<const MlpWeightsView> weights, Isa isa,
                                                    WeightFormat format) {
  const IsaKernels* ik = isa_kernels(isa);
  HYMOE_CHECK(ik, "no packed kernels for isa ", isa_name(isa));
  return std::make_unique<GroupedFfnPacked>(shape, weights, *ik, format, format);
}

std::unique_ptr<GroupedFfn> make_grouped_ffn_packed(const GroupedFfnShape& shape,
                                                    std::span<const MlpWeightsView> weights, Isa isa,
                                                    WeightFormat first_format, WeightFormat down_format) {
  const IsaKernels* ik = isa_kernels(isa);
  HYMOE_CHECK(ik, "no packed kernels for isa ", isa_name(isa));
  return std::make_unique<GroupedFfnPacked>(shape, weights, *ik, first_format, down_format);
}

std::unique_ptr<GroupedFfn> make_grouped_ffn_packed(const GroupedFfnShape& shape,
                                                    std::span<const MlpWeightsView> weights, Isa isa) {
  const bool bf16 = !weights.empty() && weights[0].up.dtype == DType::kBF16;
  return make_grouped_ffn_packed(shape, weights, isa, bf16 ? WeightFormat::kBf16Widen : WeightFormat::kF32);
}

}  // namespace hymoe::kernels
