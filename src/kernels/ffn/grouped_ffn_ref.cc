// Reference grouped FFN: the definition the fast kernels are tested against. Double accumulation, weights read
// through MatrixView::at in their stored layout and dtype, no SIMD, no threads, no packing. With a rounding model
// it first rounds what a weight format rounds (weights once, each projection's input rows as the kernels pack
// them), then computes exactly: the fast kernels of that format differ from it only by their f32 accumulation.
#include <algorithm>
#include <vector>

#include "hymoe/error.h"
#include "hymoe/ggml_type.h"
#include "hymoe/quant_formats.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/ffn/grouped_ffn.h"

namespace hymoe::kernels {
namespace {

// The activations ggml quantizes a row to before its dot products with weights of ggml type `type` (its
// vec_dot_type; MXFP4, GGUF's type 39 or a checkpoint's mxfp4 view with ggml_type 0: q8_0).
GgmlActivation ggml_activation_of(uint32_t type) {
  const GgufBlockFormat* b = gguf_block_format_of_type(type);
  return b ? b->activation : GgmlActivation::kQ8_0;
}

// Row x (n values) as the format's activation packing rounds it, exactly, in doubles; ggml_type: the type of the
// GGUF weights the row multiplies (kGgmlActivations). For q8_1 activations, s_delta gets per block of 32 what
// ggml's s adds beyond d * sum(q) (s - d * sum(q)): a block's offsets multiply s, not the rounded row.
void round_row(RoundingModel rounding, const float* x, int64_t n, std::vector<double>& out, uint32_t ggml_type = 0,
               std::vector<double>* s_delta = nullptr) {
  out.resize(static_cast<size_t>(n));
  if (rounding == RoundingModel::kGgmlActivations) {
    const GgmlActivation act = ggml_activation_of(ggml_type);
    const int block = act == GgmlActivation::kQ8_K ? kQ8KBlock : kQ8Block;
    int8_t q[kQ8KBlock];
    if (s_delta) s_delta->assign(static_cast<size_t>((n + block - 1) / block), 0.0);
    for (int64_t b = 0; b < n; b += block) {
      const int len = static_cast<int>(std::min<int64_t>(block, n - b));
      float d, s = 0.0f;
      if (act == GgmlActivation::kQ8_K) quantize_ggml_q8_k_block(x + b, len, q, &d);
      else if (act == GgmlActivation::kQ8_1) quantize_ggml_q8_1_block(x + b, len, q, &d, &s);
      else quantize_ggml_q8_0_block(x + b, len, q, &d);
      int64_t sum = 0;
      for (int i = 0; i < len; ++i) {
        out[static_cast<size_t>(b + i)] = static_cast<double>(q[i]) * d;
        sum += q[i];
      }
      if (s_delta && act == GgmlActivation::kQ8_1)
        (*s_delta)[static_cast<size_t>(b / block)] = static_cast<double>(s) - static_cast<double>(d) * sum;
    }
    return;
  }
  if (rounding == RoundingModel::kQ8Blocks) {
    for (int64_t b = 0; b < n; b += kQ8Block) {
      const int len = static_cast<int>(std::min<int64_t>(kQ8Block, n - b));
      int8_t q[kQ8Block];
      float d;
      quantize_q8_block(x + b, len, q, &d);
      for (int i = 0; i < len; ++i) out[static_cast<size_t>(b + i)] = static_cast<double>(q[i]) * d;
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = rounding == RoundingModel::kBf16Activations ? bf16_to_float(float_to_bf16(x[i])) : x[i];
}

// (K, N) doubles: the weights as the format stores them (bf16, or q8 blocks of 32 along K per column; exactly
// decoded block-quantized views unrounded).
std::vector<double> round_weights(RoundingModel rounding, const MatrixView& m) {
  std::vector<double> out(static_cast<size_t>(m.k * m.n));
  std::vector<float> column(static_cast<size_t>(m.k));
  std::vector<double> rounded;
  for (int64_t nn = 0; nn < m.n; ++nn) {
    if (m.quantized()) m.decode_quantized_row(nn, column.data());  // the values at() gives, a block at a time
    else
      for (int64_t kk = 0; kk < m.k; ++kk) column[static_cast<size_t>(kk)] = m.at(kk, nn);
    // ggml rounds activations only: its weights are the exactly decoded blocks. So does the fp8 dot format
    // (kBf16Activations on an fp8 view): every decoded fp8 value is exact there.
    round_row(rounding == RoundingModel::kGgmlActivations || m.quantized() ? RoundingModel::kNone : rounding,
              column.data(), m.k, rounded);
    for (int64_t kk = 0; kk < m.k; ++kk) out[static_cast<size_t>(kk * m.n + nn)] = rounded[static_cast<size_t>(kk)];
  }
  return out;
}

// (K / 32, N) doubles: the offsets (m) of a view whose ggml type runs against q8_1 activations, one per block
// of 32 along K and column; empty for any other view.
std::vector<double> q8_1_offsets(const MatrixView& m) {
  if (m.quant.scheme != QuantScheme::kGgml || ggml_activation_of(m.quant.ggml_type) != GgmlActivation::kQ8_1) return {};
  const GgmlTypeTraits& t = *ggml_type_traits(m.quant.ggml_type);
  HYMOE_CHECK(t.block_values == kQ8Block && m.layout == WeightLayout::kOutIn);
  const int64_t blocks = m.k / kQ8Block;
  std::vector<double> out(static_cast<size_t>(blocks * m.n));
  GgmlBlockCodes parts;
  for (int64_t nn = 0; nn < m.n; ++nn)
    for (int64_t b = 0; b < blocks; ++b) {
      split_block_ref(m.quant.ggml_type, static_cast<const std::byte*>(m.data) + (nn * blocks + b) * t.block_bytes,
                      &parts);
      out[static_cast<size_t>(b * m.n + nn)] = parts.offset[0];
    }
  return out;
}

class GroupedFfnRef final : public GroupedFfn {
 public:
  GroupedFfnRef(const GroupedFfnShape& shape, std::span<const MlpWeightsView> weights, RoundingModel rounding)
      : shape_(shape), weights_(weights.begin(), weights.end()), rounding_(rounding) {
    validate_grouped_ffn_weights(shape_, weights_);
    // Biases are copied, so with a rounding model (or quantized views) the reference holds everything it reads and
    // the views' buffers may go once it is built, as for the packed kernels (the scalar ISA's int8 path for a
    // checkpoint's MXFP4 layer relies on that: the loader frees gpt-oss's biases after building the kernels).
    biases_.reserve(weights_.size());
    for (MlpWeightsView& w : weights_) {
      Biases& b = biases_.emplace_back();
      auto own = [](std::vector<float>& to, const float*& bias, int64_t n) {
        if (!bias) return;
        to.assign(bias, bias + n);
        bias = to.data();
      };
      own(b.gate, w.gate_bias, shape_.hidden);
      own(b.up, w.up_bias, shape_.hidden);
      own(b.down, w.down_bias, shape_.dim);
    }
    // Block-quantized views are decoded once (exactly, as at() would per element: a block per call is too slow).
    bool quantized = false;
    for (const auto& w : weights_) quantized = quantized || w.up.quantized() || w.down.quantized() || w.gate.quantized();
    if (rounding_ == RoundingModel::kNone && !quantized) return;
    for (const auto& w : weights_) {
      Rounded r;
      if (w.gate.data) r.gate = round_weights(rounding_, w.gate);
      r.up = round_weights(rounding_, w.up);
      r.down = round_weights(rounding_, w.down);
      if (rounding_ == RoundingModel::kGgmlActivations) {
        if (w.gate.data) r.gate_offsets = q8_1_offsets(w.gate);
        r.up_offsets = q8_1_offsets(w.up);
        r.down_offsets = q8_1_offsets(w.down);
      }
      rounded_.push_back(std::move(r));
    }
  }

  void run(const GroupedFfnArgs& args) const override {
    validate_grouped_ffn_args(shape_, args);
    const int64_t D = shape_.dim, H = shape_.hidden;
    const bool gated = is_gated(shape_.activation);
    std::vector<double> gate(static_cast<size_t>(H)), up(static_cast<size_t>(H)), hidden(static_cast<size_t>(H));
    std::vector<float> hidden_f32(static_cast<size_t>(H));
    std::vector<double> xr, hr, x_delta, h_delta;
    // q8_1's share beyond the rounded row: sum over the blocks of 32 of s_delta times the column's offset.
    auto s_share = [](const std::vector<double>& offsets, const std::vector<double>& delta, int64_t n, int64_t col) {
      double share = 0.0;
      if (!offsets.empty())
        for (size_t b = 0; b < delta.size(); ++b) share += delta[b] * offsets[b * static_cast<size_t>(n) + static_cast<size_t>(col)];
      return share;
    };
    for (int64_t g = 0; g < shape_.num_groups; ++g) {
      const MlpWeightsView& w = weights_[static_cast<size_t>(g)];
      const Rounded* r = rounded_.empty() ? nullptr : &rounded_[static_cast<size_t>(g)];
      // B(kk, nn) as the format stores it.
      auto weight = [&](const MatrixView& m, const std::vector<double>* rm, int64_t kk, int64_t nn) {
        return rm ? (*rm)[static_cast<size_t>(kk * m.n + nn)] : static_cast<double>(m.at(kk, nn));
      };
      for (int64_t row = args.offsets[g]; row < args.offsets[g + 1]; ++row) {
        const float* x = args.x + (args.x_rows ? args.x_rows[row] : row) * D;
        round_row(rounding_, x, D, xr, w.up.quant.ggml_type, &x_delta);
        for (int64_t h = 0; h < H; ++h) {
          double su = 0.0, sg = 0.0;
          for (int64_t d = 0; d < D; ++d) {
            su += xr[static_cast<size_t>(d)] * weight(w.up, r ? &r->up : nullptr, d, h);
            if (gated) sg += xr[static_cast<size_t>(d)] * weight(w.gate, r ? &r->gate : nullptr, d, h);
          }
          if (r) {
            su += s_share(r->up_offsets, x_delta, H, h);
            if (gated) sg += s_share(r->gate_offsets, x_delta, H, h);
          }
          if (w.up_bias) su += w.up_bias[h];
          if (gated && w.gate_bias) sg += w.gate_bias[h];
          up[h] = su;
          gate[h] = sg;
          if (args.saved_up) args.saved_up[row * H + h] = static_cast<float>(su);
          if (gated && args.saved_gate) args.saved_gate[row * H + h] = static_cast<float>(sg);
          hidden[h] = gated ? gated_activation<double>(shape_.activation, sg, su, shape_.swiglu_alpha, shape_.swiglu_limit)
                            : apply_activation(shape_.activation, su);
        }
        // The kernels hold the hidden row in f32 before packing it for the down projection.
        if (rounding_ != RoundingModel::kNone) {
          for (int64_t h = 0; h < H; ++h) hidden_f32[static_cast<size_t>(h)] = static_cast<float>(hidden[h]);
          round_row(rounding_, hidden_f32.data(), H, hr, w.down.quant.ggml_type, &h_delta);
        }
        const double s = args.scale ? args.scale[row] : 1.0;
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0.0;
          for (int64_t h = 0; h < H; ++h)
            acc += (rounding_ != RoundingModel::kNone ? hr[static_cast<size_t>(h)] : hidden[h]) *
                   weight(w.down, r ? &r->down : nullptr, h, d);
          if (r) acc += s_share(r->down_offsets, h_delta, D, d);
          if (w.down_bias) acc += w.down_bias[d];
          args.y[row * D + d] = static_cast<float>(s * acc);
        }
      }
    }
  }

  const GroupedFfnShape& shape() const override { return shape_; }
  const char* name() const override {
    switch (rounding_) {
      case RoundingModel::kBf16Activations: return "grouped_ffn_bf16w_bf16__ref";
      case RoundingModel::kQ8Blocks: return "grouped_ffn_q8w_q8__ref";
      case RoundingModel::kGgmlActivations: return "grouped_ffn_ggml_q8__ref";
      case RoundingModel::kNone: break;
    }
    return "grouped_ffn_f32w_f32__ref";
  }

 private:
  struct Rounded {
    std::vector<double> gate, up, down;  // (dim, hidden), (dim, hidden), (hidden, dim)
    std::vector<double> gate_offsets, up_offsets, down_offsets;  // q8_1 types' offsets (q8_1_offsets), else empty
  };
  struct Biases {
    std::vector<float> gate, up, down;  // (hidden), (hidden), (dim); empty where the view has none
  };
  GroupedFfnShape shape_;
  std::vector<MlpWeightsView> weights_;  // bias pointers into biases_
  std::vector<Biases> biases_;
  RoundingModel rounding_;
  std::vector<Rounded> rounded_;
};

}  // namespace

std::unique_ptr<GroupedFfn> make_grouped_ffn_ref(const GroupedFfnShape& shape, std::span<const MlpWeightsView> weights,
                                                 RoundingModel rounding) {
  return std::make_unique<GroupedFfnRef>(shape, weights, rounding);
}

}  // namespace hymoe::kernels
