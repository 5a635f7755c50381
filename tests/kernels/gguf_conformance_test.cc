// The GGUF panel formats on real llama.cpp-written expert tensors: block 1 of the qwen3moe conformance cases
// (tests/data/conformance/gguf: Q8_0 and Q4_K experts, written by gguf-py) viewed in place as kGgml matrices, run
// through make_grouped_ffn with the cases' own routing (route.indices, route.weights), against `y` (float64 on
// the dequantized weights) within the cases' suggested tolerance for an exact-weights engine (QuantCompute::kExact),
// and with ggml's activation rounding (kInt8) against `y.act_rounded` within its tolerance. Not in the static
// kernel-test list: it reads data files.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "hymoe/gguf.h"
#include "hymoe/safetensors.h"
#include "kernels/ffn/grouped_ffn.h"
#include "kernels/isa/isa.h"
#include "test_util.h"

namespace hymoe::kernels {
namespace {

// Expert e of a 3-D expert tensor (ne = [k, n, E]) as a kGgml (n, k) view of the file's bytes.
MatrixView expert_view(const GgufFile& f, const std::string& name, int64_t e) {
  const GgufTensorInfo& t = f.tensor(name);
  MatrixView v;
  v.data = f.bytes(t).data() + e * static_cast<int64_t>(t.ne[1] * t.row_bytes);
  v.layout = WeightLayout::kOutIn;
  v.k = static_cast<int64_t>(t.ne[0]);
  v.n = static_cast<int64_t>(t.ne[1]);
  v.quant = {QuantScheme::kGgml, t.type};
  return v;
}

TEST(GgufFormatsConformance, Qwen3MoeExpertsMatchTheF64Reference) {
  for (const QuantCompute mode : {QuantCompute::kExact, QuantCompute::kInt8})
  for (const std::string c : {"qwen3moe_q8_0", "qwen3moe_q4_k"}) {
    SCOPED_TRACE(c + " " + std::string(quant_compute_name(mode)));
    const bool int8 = mode == QuantCompute::kInt8;
    const std::string dir = test::data_dir() + "/conformance/gguf/" + c + "/";
    const GgufFile f = GgufFile::open(dir + "model.gguf");
    const GgufTensorInfo& gate = f.tensor("blk.1.ffn_gate_exps.weight");
    const int64_t D = static_cast<int64_t>(gate.ne[0]), H = static_cast<int64_t>(gate.ne[1]),
                  E = static_cast<int64_t>(gate.ne[2]);
    std::vector<MlpWeightsView> views(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) {
      views[static_cast<size_t>(e)].gate = expert_view(f, "blk.1.ffn_gate_exps.weight", e);
      views[static_cast<size_t>(e)].up = expert_view(f, "blk.1.ffn_up_exps.weight", e);
      views[static_cast<size_t>(e)].down = expert_view(f, "blk.1.ffn_down_exps.weight", e);
    }
    const Tensor x = SafetensorsFile::open(dir + "input.safetensors").read_f32("x");
    const auto expected = SafetensorsFile::open(dir + "expected.safetensors");
    const Tensor y_exp = expected.read_f32(int8 ? "y.act_rounded" : "y"), idx = expected.read_f32("route.indices"),
                 w = expected.read_f32("route.weights");
    const int64_t T = x.dim(0), K = idx.dim(1);
    // The ragged batch: (token, slot) pairs grouped by expert, each row scaled by its routing weight.
    std::vector<int64_t> offsets{0}, rows, slot_of;
    std::vector<float> scale;
    for (int64_t e = 0; e < E; ++e) {
      for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < K; ++k)
          if (static_cast<int64_t>(idx.data()[t * K + k]) == e) {
            rows.push_back(t);
            slot_of.push_back(t * K + k);
            scale.push_back(w.data()[t * K + k]);
          }
      offsets.push_back(static_cast<int64_t>(rows.size()));
    }
    GroupedFfnOptions options;
    options.quant = mode;
    const auto ffn = make_grouped_ffn({E, D, H, Activation::kSwiGLU}, views, active_isa(), options);
    if (active_isa() != Isa::kScalar) {  // the scalar ISA runs the portable kernel (exact) or the reference (int8)
      const std::string kernel = c == "qwen3moe_q8_0" ? (int8 ? "_q8_0w_q8_0_" : "_q8_0w_f32_")
                                                      : (int8 ? "_q4_kw_q8_k_" : "_q4_kw_f32_");
      EXPECT_NE(std::string(ffn->name()).find(kernel), std::string::npos) << ffn->name();
    }
    std::vector<float> out(rows.size() * static_cast<size_t>(D));
    GroupedFfnArgs args{offsets.data(), x.data(), scale.data(), out.data()};
    args.x_rows = rows.data();
    ffn->run(args);
    std::vector<double> y(static_cast<size_t>(T * D), 0.0);
    for (size_t r = 0; r < rows.size(); ++r)
      for (int64_t d = 0; d < D; ++d) y[static_cast<size_t>(rows[r] * D + d)] += out[r * static_cast<size_t>(D) + d];
    // README: |got - exp| <= atol + rtol |exp|, rtol 1e-4, atol 2e-5 max(1, max|y|) (y.act_rounded: 1e-4 max(1, ...)).
    double max_y = 0;
    for (int64_t i = 0; i < T * D; ++i) max_y = std::max(max_y, std::abs(static_cast<double>(y_exp.data()[i])));
    const double atol = (int8 ? 1e-4 : 2e-5) * std::max(1.0, max_y);
    double worst = 0;
    for (int64_t i = 0; i < T * D; ++i) {
      const double want = y_exp.data()[i];
      ASSERT_LE(std::abs(y[static_cast<size_t>(i)] - want), atol + 1e-4 * std::abs(want)) << ffn->name() << " at " << i;
      worst = std::max(worst, std::abs(y[static_cast<size_t>(i)] - want));
    }
    EXPECT_GT(max_y, 0.1);
    RecordProperty(c + "_" + std::string(quant_compute_name(mode)) + "_max_abs_error", std::to_string(worst));
  }
}

}  // namespace
}  // namespace hymoe::kernels
