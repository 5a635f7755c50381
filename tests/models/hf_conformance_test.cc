// The shared Hugging Face cases (tests/data/conformance/hf, made by transformers 5.24): every case's selected
// experts exactly, its routing weights and its output, through the library and through `hymoe forward --model`.
// hymoe computes in float32 with float32 accumulation, so y is compared with y.fp32_compute where a case has one
// (bf16 and quantized cases: the same stored weights computed in float32) at that tensor's suggested tolerance; the
// FP8 case's weights are exact too (fp8(q) * scale rounded once to float32, as y.fp32_compute has them).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "hymoe/model.h"
#include "hymoe/safetensors.h"
#include "models/model_test_util.h"
#include "test_util.h"

namespace hymoe {
namespace {

using test::hf_case_dir;

struct Tol {
  double rtol, atol;
};

struct HfCase {
  std::string dir;
  nlohmann::json meta;
  int64_t layer;
  SafetensorsFile input, expected;
  std::string y_key;
  Tol y_tol, w_tol;

  explicit HfCase(const std::string& name)
      : dir(hf_case_dir(name)),
        meta(nlohmann::json::parse(std::ifstream(dir + "/meta.json"))),
        layer(meta["layer"].get<int64_t>()),
        input(SafetensorsFile::open(dir + "/input.safetensors")),
        expected(SafetensorsFile::open(dir + "/expected.safetensors")) {
    const auto& st = meta["suggested_tolerance"];
    const bool fp32_compute = expected.contains("y.fp32_compute");
    y_key = fp32_compute ? "y.fp32_compute" : "y";
    const auto& yt = st[fp32_compute ? "y.fp32_compute" : "y"];
    y_tol = {yt["rtol"].get<double>(), yt["atol"].get<double>()};
    w_tol = {st["route.weights"]["rtol"].get<double>(), st["route.weights"]["atol"].get<double>()};
  }
};

void expect_matches(const HfCase& c, const Tensor& y, const std::vector<int32_t>& indices, const Tensor& weights) {
  const Tensor exp_idx = c.expected.read_f32("route.indices");
  const Tensor exp_w = c.expected.read_f32("route.weights");
  ASSERT_EQ(static_cast<int64_t>(indices.size()), exp_idx.numel());
  for (int64_t i = 0; i < exp_idx.numel(); ++i)
    ASSERT_EQ(indices[static_cast<size_t>(i)], static_cast<int32_t>(exp_idx[i])) << "route.indices flat " << i;
  EXPECT_TRUE(test::all_close(weights, exp_w, c.w_tol.rtol, c.w_tol.atol)) << "route.weights";
  EXPECT_TRUE(test::all_close(y, c.expected.read_f32(c.y_key), c.y_tol.rtol, c.y_tol.atol)) << c.y_key;
}

class HfConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(HfConformance, LibraryReproducesTransformers) {
  const HfCase c(GetParam());
  ModelMoELayer layer = load_model_layer(c.dir, c.layer);
  const Tensor x = c.input.read_f32("x");
  const Tensor y = layer.forward(x);
  const Routing& r = layer.last_routing();
  expect_matches(c, y, r.indices, Tensor(Shape{r.num_tokens, r.top_k}, r.weights));
  // Expert counts agree with the indices.
  double total = 0;
  for (float v : layer.expert_counts().values()) total += v;
  EXPECT_EQ(total, static_cast<double>(r.num_tokens * r.top_k));
}

TEST_P(HfConformance, CommandReproducesTransformers) {
  const HfCase c(GetParam());
  const test::TempDir tmp("hf_" + GetParam());
  const std::string out = tmp.path() + "/out.safetensors";
  std::string log;
  const int rc = test::run_command(test::tool_path() + " forward --model " + c.dir + " --layer " +
                                       std::to_string(c.layer) + " --input " + c.dir + "/input.safetensors --output " + out,
                                   &log);
  ASSERT_EQ(rc, 0) << log;
  const SafetensorsFile got = SafetensorsFile::open(out);
  EXPECT_EQ(got.info("route.indices").dtype, DType::kI64);
  const Tensor idx = got.read_f32("route.indices");
  std::vector<int32_t> indices(idx.values().begin(), idx.values().end());
  expect_matches(c, got.read_f32("y"), indices, got.read_f32("route.weights"));
}

INSTANTIATE_TEST_SUITE_P(Cases, HfConformance,
                         ::testing::Values("mixtral_e8_k2", "qwen2_moe_e8_k4", "qwen3_moe_e16_k4_norm",
                                           "qwen3_moe_e16_k8_norm_bf16", "olmoe_e16_k4", "deepseek_v2_greedy_e16_k6",
                                           "deepseek_v3_e16_g4_tg2_k4", "deepseek_v3_e16_g4_tg2_k4_fp8", "gpt_oss_e8_k2"));

}  // namespace
}  // namespace hymoe
