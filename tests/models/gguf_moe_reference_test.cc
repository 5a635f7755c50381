// The conformance cases' expected outputs reproduced from the GGUF reader, the block decoders and the config
// read_gguf_moe_config derives, by a plain double-precision computation of llama.cpp's build_moe_ffn: routing
// (softmax or sigmoid, selection bias, expert groups by top-2 sum, top-k, normalization, scale), SwiGLU experts
// and the (optionally sigmoid-gated) shared expert. It pins the config and the decoded weights to llama.cpp's
// results independently of the engine's GGUF path (tests/models/gguf_model_test.cc runs that).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "hymoe/file_io.h"
#include "hymoe/gguf_moe.h"
#include "hymoe/quant_formats.h"
#include "hymoe/safetensors.h"
#include "test_util.h"

namespace hymoe {
namespace {

std::vector<double> dequantized(const GgufFile& f, const GgufTensorInfo* t) {
  std::vector<float> v(static_cast<size_t>(t->numel()));
  dequantize_row_ref(t->type, f.bytes(*t).data(), v.data(), static_cast<int64_t>(v.size()));
  return {v.begin(), v.end()};
}

// out[r] = sum_k w[r * K + k] * x[k] for r < rows: a (rows, K) row-major matrix times x.
std::vector<double> matvec(const double* w, size_t rows, const std::vector<double>& x) {
  std::vector<double> out(rows, 0.0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t k = 0; k < x.size(); ++k) out[r] += w[r * x.size() + k] * x[k];
  return out;
}

double silu(double z) { return z / (1.0 + std::exp(-z)); }

// down @ (silu(gate @ x) * (up @ x)) with gate, up (hidden, D) and down (D, hidden).
std::vector<double> swiglu(const double* gate, const double* up, const double* down, size_t hidden,
                           const std::vector<double>& x) {
  auto g = matvec(gate, hidden, x), u = matvec(up, hidden, x);
  for (size_t i = 0; i < hidden; ++i) g[i] = silu(g[i]) * u[i];
  return matvec(down, x.size(), g);
}

TEST(GgufMoeReference, ConformanceCasesMatchLlamaCpp) {
  const std::string root = test::data_dir() + "/conformance/gguf/";
  for (const std::string c : {"qwen3moe_q8_0", "qwen3moe_q4_k", "qwen2moe_q8_0"}) {
    SCOPED_TRACE(c);
    const auto meta = nlohmann::json::parse(read_text_file(root + c + "/meta.json"));
    const auto f = GgufFile::open(root + c + "/model.gguf");
    const GgufMoeConfig cfg = read_gguf_moe_config(f);
    const GgufMoeBlock b = find_gguf_moe_block(f, cfg, meta["block"].get<uint32_t>());
    const size_t D = cfg.embedding_length, H = cfg.expert_hidden, E = cfg.expert_count, K = cfg.expert_used_count;
    const auto router = dequantized(f, b.router), gate = dequantized(f, b.gate_exps), up = dequantized(f, b.up_exps),
               down = dequantized(f, b.down_exps);
    const Tensor x = SafetensorsFile::open(root + c + "/input.safetensors").read_f32("x");
    const auto expected = SafetensorsFile::open(root + c + "/expected.safetensors");
    const Tensor y_exp = expected.read_f32("y"), idx_exp = expected.read_f32("route.indices"),
                 w_exp = expected.read_f32("route.weights");
    const size_t T = static_cast<size_t>(x.dim(0));
    Tensor y(Shape{static_cast<int64_t>(T), static_cast<int64_t>(D)});
    for (size_t t = 0; t < T; ++t) {
      const std::vector<double> xt(x.data() + t * D, x.data() + (t + 1) * D);
      auto p = matvec(router.data(), E, xt);
      if (cfg.gating == GgufGating::kSoftmax) {
        const double m = *std::max_element(p.begin(), p.end());
        double sum = 0;
        for (double& v : p) sum += (v = std::exp(v - m));
        for (double& v : p) v /= sum;
      } else {
        for (double& v : p) v = 1.0 / (1.0 + std::exp(-v));
      }
      std::vector<double> s = p;
      if (b.exp_probs_b) {
        const auto bias = dequantized(f, b.exp_probs_b);
        for (size_t e = 0; e < E; ++e) s[e] += bias[e];
      }
      if (cfg.group_count > 1) {
        const size_t G = cfg.group_count, per = E / G;
        std::vector<double> score(G);
        for (size_t g = 0; g < G; ++g) {
          std::vector<double> in(s.begin() + g * per, s.begin() + (g + 1) * per);
          std::sort(in.rbegin(), in.rend());
          score[g] = in[0] + (per > 1 ? in[1] : 0.0);
        }
        std::vector<size_t> order(G);
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](size_t a, size_t c2) { return score[a] > score[c2]; });
        for (size_t r = cfg.group_used_count; r < G; ++r)
          for (size_t e = 0; e < per; ++e) s[order[r] * per + e] = -INFINITY;
      }
      std::vector<size_t> idx(E);
      std::iota(idx.begin(), idx.end(), 0);
      std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t c2) { return s[a] > s[c2]; });
      idx.resize(K);
      std::vector<double> w(K);
      for (size_t k = 0; k < K; ++k) w[k] = p[idx[k]];
      if (cfg.norm_weights) {
        const double sum = std::max(std::accumulate(w.begin(), w.end(), 0.0), 6.103515625e-5);
        for (double& v : w) v /= sum;
      }
      if (cfg.weights_scale != 0.0f && cfg.weights_scale != 1.0f)
        for (double& v : w) v *= cfg.weights_scale;
      std::vector<double> yt(D, 0.0);
      for (size_t k = 0; k < K; ++k) {
        EXPECT_EQ(idx[k], static_cast<size_t>(idx_exp[static_cast<int64_t>(t * K + k)])) << "token " << t << " slot " << k;
        EXPECT_NEAR(w[k], w_exp[static_cast<int64_t>(t * K + k)], 1e-6 + 1e-5 * std::abs(w[k]));
        const size_t e = idx[k];
        const auto out = swiglu(gate.data() + e * H * D, up.data() + e * H * D, down.data() + e * D * H, H, xt);
        for (size_t d = 0; d < D; ++d) yt[d] += w[k] * out[d];
      }
      if (b.gate_shexp) {
        const auto sg = dequantized(f, b.gate_shexp), su = dequantized(f, b.up_shexp), sd = dequantized(f, b.down_shexp);
        const auto out = swiglu(sg.data(), su.data(), sd.data(), cfg.shared_hidden, xt);
        double scale = 1.0;
        if (b.gate_inp_shexp) {
          const auto gi = dequantized(f, b.gate_inp_shexp);
          scale = 1.0 / (1.0 + std::exp(-matvec(gi.data(), 1, xt)[0]));
        }
        for (size_t d = 0; d < D; ++d) yt[d] += scale * out[d];
      }
      for (size_t d = 0; d < D; ++d) y[static_cast<int64_t>(t * D + d)] = static_cast<float>(yt[d]);
    }
    const auto& tol = meta["suggested_tolerance"]["y"];
    EXPECT_TRUE(test::all_close(y, y_exp, tol["rtol"].get<double>(), tol["atol"].get<double>()));
  }
}

}  // namespace
}  // namespace hymoe
