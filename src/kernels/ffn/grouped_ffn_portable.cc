// Portable grouped FFN: weights repacked once into float32 (K, N) row-major so the inner loop is a contiguous
// axpy over N that any compiler vectorizes; ROWS token rows share each pass over a weight row. It is the
// scalar-ISA path and the fallback for shapes the ISA kernels do not cover. The result does not depend on how
// groups are scheduled: each output element has one fixed summation order.
#include <algorithm>
#include <vector>

#include "kernels/ffn/grouped_ffn_impl.h"

namespace hymoe::kernels {
namespace {

constexpr int64_t kRows = 4;  // token rows per pass over a weight matrix

// (K, N) float32 copy of a weight matrix, whatever its stored layout and dtype.
std::vector<float> pack_k_by_n(const MatrixView& m) {
  std::vector<float> out(static_cast<size_t>(m.k * m.n));
  if (m.quantized()) {  // a row of the stored (N, K) matrix at a time, by the scheme's exact decoder
    std::vector<float> row(static_cast<size_t>(m.k));
    for (int64_t nn = 0; nn < m.n; ++nn) {
      m.decode_quantized_row(nn, row.data());
      for (int64_t kk = 0; kk < m.k; ++kk) out[static_cast<size_t>(kk * m.n + nn)] = row[static_cast<size_t>(kk)];
    }
    return out;
  }
  for (int64_t kk = 0; kk < m.k; ++kk)
    for (int64_t nn = 0; nn < m.n; ++nn) out[static_cast<size_t>(kk * m.n + nn)] = m.at(kk, nn);
  return out;
}

// out[r, :] = sum_k a[r, k] * b[k, :] for `rows` rows (rows <= kRows).
void gemm_rows(int64_t rows, int64_t K, int64_t N, const float* a, int64_t lda, const float* b, float* out,
               int64_t ldo) {
  for (int64_t r = 0; r < rows; ++r) std::fill(out + r * ldo, out + r * ldo + N, 0.0f);
  for (int64_t kk = 0; kk < K; ++kk) {
    const float* brow = b + kk * N;
    for (int64_t r = 0; r < rows; ++r) {
      const float av = a[r * lda + kk];
      float* o = out + r * ldo;
      for (int64_t nn = 0; nn < N; ++nn) o[nn] += av * brow[nn];
    }
  }
}

class GroupedFfnPortable final : public GroupedFfn {
 public:
  GroupedFfnPortable(const GroupedFfnShape& shape, std::span<const MlpWeightsView> weights) : shape_(shape) {
    validate_grouped_ffn_weights(shape_, weights);
    for (const auto& w : weights) {
      Packed p;
      if (is_gated(shape_.activation)) p.gate = pack_k_by_n(w.gate);
      p.up = pack_k_by_n(w.up);
      p.down = pack_k_by_n(w.down);
      if (w.gate_bias) p.gate_bias.assign(w.gate_bias, w.gate_bias + shape_.hidden);
      if (w.up_bias) p.up_bias.assign(w.up_bias, w.up_bias + shape_.hidden);
      if (w.down_bias) p.down_bias.assign(w.down_bias, w.down_bias + shape_.dim);
      packed_.push_back(std::move(p));
    }
  }

  void run(const GroupedFfnArgs& args) const override {
    validate_grouped_ffn_args(shape_, args);
    const int64_t D = shape_.dim, H = shape_.hidden;
    const bool gated = is_gated(shape_.activation);
    std::vector<float> up(static_cast<size_t>(kRows * H)), gate(static_cast<size_t>(kRows * H));
    std::vector<float> gathered(args.x_rows ? static_cast<size_t>(kRows * D) : 0);
    for (int64_t g = 0; g < shape_.num_groups; ++g) {
      const Packed& p = packed_[static_cast<size_t>(g)];
      for (int64_t r0 = args.offsets[g]; r0 < args.offsets[g + 1]; r0 += kRows) {
        const int64_t rows = std::min(kRows, args.offsets[g + 1] - r0);
        const float* x = args.x + r0 * D;
        if (args.x_rows) {
          for (int64_t r = 0; r < rows; ++r)
            std::copy_n(args.x + args.x_rows[r0 + r] * D, D, gathered.data() + r * D);
          x = gathered.data();
        }
        gemm_rows(rows, D, H, x, D, p.up.data(), up.data(), H);
        if (gated) gemm_rows(rows, D, H, x, D, p.gate.data(), gate.data(), H);
        for (int64_t r = 0; r < rows; ++r) {
          float* u = up.data() + r * H;
          float* gt = gate.data() + r * H;
          if (!p.up_bias.empty())
            for (int64_t h = 0; h < H; ++h) u[h] += p.up_bias[static_cast<size_t>(h)];
          if (gated && !p.gate_bias.empty())
            for (int64_t h = 0; h < H; ++h) gt[h] += p.gate_bias[static_cast<size_t>(h)];
          if (args.saved_up) std::copy(u, u + H, args.saved_up + (r0 + r) * H);
          if (gated && args.saved_gate) std::copy(gt, gt + H, args.saved_gate + (r0 + r) * H);
          if (gated) {
            for (int64_t h = 0; h < H; ++h)
              u[h] = gated_activation(shape_.activation, gt[h], u[h], shape_.swiglu_alpha, shape_.swiglu_limit);
          } else {
            for (int64_t h = 0; h < H; ++h) u[h] = apply_activation(shape_.activation, u[h]);
          }
        }
        float* y = args.y + r0 * D;
        gemm_rows(rows, H, D, up.data(), H, p.down.data(), y, D);
        if (!p.down_bias.empty())
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t d = 0; d < D; ++d) y[r * D + d] += p.down_bias[static_cast<size_t>(d)];
        if (args.scale) {
          for (int64_t r = 0; r < rows; ++r) {
            const float s = args.scale[r0 + r];
            for (int64_t d = 0; d < D; ++d) y[r * D + d] *= s;
          }
        }
      }
    }
  }

  const GroupedFfnShape& shape() const override { return shape_; }
  const char* name() const override { return "grouped_ffn_f32w_f32_4xN__portable"; }
  int64_t weight_bytes() const override {
    size_t n = 0;
    for (const Packed& p : packed_)
      n += p.gate.size() + p.up.size() + p.down.size() + p.gate_bias.size() + p.up_bias.size() + p.down_bias.size();
    return static_cast<int64_t>(n * sizeof(float));
  }

 private:
  struct Packed {
    std::vector<float> gate, up, down;  // (dim, hidden), (dim, hidden), (hidden, dim)
    std::vector<float> gate_bias, up_bias, down_bias;  // (hidden), (hidden), (dim); empty without biases
  };
  GroupedFfnShape shape_;
  std::vector<Packed> packed_;
};

}  // namespace

std::unique_ptr<GroupedFfn> make_grouped_ffn_portable(const GroupedFfnShape& shape,
                                                      std::span<const MlpWeightsView> weights) {
  return std::make_unique<GroupedFfnPortable>(shape, weights);
}

}  // namespace hymoe::kernels
