// The shared Hugging Face cases (tests/data/conformance/hf, made by transformers 5.24): every case's selected
// experts exactly, its routing weights and its output, through the library and through `hymoe forward --model`.
// hymoe computes in float32 with float32 accumulation, so y is compared with y.fp32_compute where a case has one
// (bf16 and quantized cases: the same stored weights computed in float32) at that tensor's suggested tolerance; the
// FP8 case's weights are exact too (fp8(q) * scale rounded once to float32, as y.fp32_compute has them). bf16 weights
// on the native path (Bf16Compute::kNative, docs/semantics.md) have their activations rounded to bf16: that path is
// held to the bound semantics.md states for it, 1e-2 of max|y.fp32_compute|, and each path is also run forced.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "hymoe/compute.h"
#include "hymoe/model.h"
#include "hymoe/safetensors.h"
#include "kernels/ffn/grouped_ffn.h"
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
  bool bf16_weights;  // expert weights stored in bf16 (a quantized checkpoint's bf16 compute never reaches them)
  int64_t fp8_block_k = 0;  // fp8 expert weights: the blocks' k extent (0: not fp8)
  // Whether the fp8 panel formats run these weights (block_k a multiple of 128); smaller blocks run on the
  // portable path, which decodes them exactly under every QuantCompute setting.
  bool fp8_packed() const { return fp8_block_k > 0 && fp8_block_k % 128 == 0; }

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
    std::ifstream in(dir + "/config.json");
    const std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    bf16_weights =
        meta["dtype"].get<std::string>() == "bfloat16" && config.find("quantization_config") == std::string::npos;
    const auto cfg = nlohmann::json::parse(config);
    if (cfg.contains("quantization_config") && cfg["quantization_config"].value("quant_method", "") == "fp8")
      fp8_block_k = cfg["quantization_config"]["weight_block_size"][1].get<int64_t>();
  }
};

// The bf16 path `setting` runs on this CPU (kWiden or kNative).
Bf16Compute path_of(Bf16Compute setting) { return kernels::resolve_bf16_compute(kernels::active_isa(), setting); }

void expect_matches(const HfCase& c, const Tensor& y, const std::vector<int32_t>& indices, const Tensor& weights,
                    Bf16Compute path = path_of(bf16_compute()), QuantCompute quant = quant_compute()) {
  const Tensor exp_idx = c.expected.read_f32("route.indices");
  const Tensor exp_w = c.expected.read_f32("route.weights");
  ASSERT_EQ(static_cast<int64_t>(indices.size()), exp_idx.numel());
  for (int64_t i = 0; i < exp_idx.numel(); ++i)
    ASSERT_EQ(indices[static_cast<size_t>(i)], static_cast<int32_t>(exp_idx[i])) << "route.indices flat " << i;
  EXPECT_TRUE(test::all_close(weights, exp_w, c.w_tol.rtol, c.w_tol.atol)) << "route.weights";
  const Tensor want = c.expected.read_f32(c.y_key);
  Tol tol = c.y_tol;
  const bool fp8_rounded = c.fp8_packed() && kernels::fp8_rounds_activations(kernels::active_isa(), quant);
  if ((c.bf16_weights && path == Bf16Compute::kNative) || fp8_rounded) {
    double max_abs = 0;
    for (int64_t i = 0; i < want.numel(); ++i) max_abs = std::max(max_abs, std::abs(static_cast<double>(want[i])));
    tol = {0.0, 1e-2 * max_abs};
  }
  EXPECT_TRUE(test::all_close(y, want, tol.rtol, tol.atol))
      << c.y_key << " on the bf16 path " << bf16_compute_name(path) << (fp8_rounded ? ", fp8 on the bf16 dot" : "");
}

// The bits of y, to tell the two bf16 paths apart.
std::vector<float> values_of(const Tensor& t) { return {t.values().begin(), t.values().end()}; }

// `hymoe forward` on the case with a setting given by its flag and by its environment variable: y's bits are `want`.
void expect_command_gives(const HfCase& c, const test::TempDir& tmp, const std::string& flag, const std::string& env,
                          const std::string& name, const std::vector<float>& want) {
  for (const std::string how : {"flag", "env"}) {
    const std::string out = tmp.path() + "/" + name + "_" + how + ".safetensors";
    std::string log;
    const std::string args = " forward --model " + c.dir + " --layer " + std::to_string(c.layer) + " --input " +
                             c.dir + "/input.safetensors --output " + out;
    const int rc = test::run_command(how == "flag" ? test::tool_path() + args + " " + flag + " " + name
                                                   : env + "=" + name + " " + test::tool_path() + args,
                                     &log);
    ASSERT_EQ(rc, 0) << log;
    EXPECT_EQ(values_of(SafetensorsFile::open(out).read_f32("y")), want) << name << " by " << how;
  }
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
  // The model's listing reads the same declarations: it describes the case's layer.
  ASSERT_EQ(test::run_command(test::tool_path() + " inspect " + c.dir, &log), 0) << log;
  EXPECT_NE(log.find("family " + c.meta["family"].get<std::string>()), std::string::npos) << log;
}

// The bf16 cases on each bf16 path this CPU has, forced through the library's setting and through the command's
// flag and HYMOE_BF16_COMPUTE: widen within float32 rounding, native within its bound, and the two differ (the
// activations' rounding shows), so each run took the path it names.
class HfBf16Conformance : public ::testing::TestWithParam<std::string> {};

TEST_P(HfBf16Conformance, EachBf16PathReproducesTransformers) {
  const HfCase c(GetParam());
  ASSERT_TRUE(c.bf16_weights);
  const Bf16Compute before = bf16_compute();
  const Tensor x = c.input.read_f32("x");
  std::vector<std::vector<float>> outputs;
  const test::TempDir tmp("hf_paths_" + GetParam());
  for (Bf16Compute setting : {Bf16Compute::kWiden, Bf16Compute::kNative}) {
    if (setting == Bf16Compute::kNative && kernels::active_isa() < kernels::Isa::kAvx512Bf16) continue;
    set_bf16_compute(setting);
    ModelMoELayer layer = load_model_layer(c.dir, c.layer);
    set_bf16_compute(before);
    const Tensor y = layer.forward(x);
    const Routing& r = layer.last_routing();
    expect_matches(c, y, r.indices, Tensor(Shape{r.num_tokens, r.top_k}, r.weights), setting);
    outputs.push_back(values_of(y));
    const std::string name(bf16_compute_name(setting));
    expect_command_gives(c, tmp, "--bf16-compute", "HYMOE_BF16_COMPUTE", name, outputs.back());
  }
  if (outputs.size() == 2) EXPECT_NE(outputs[0], outputs[1]) << "widen and native gave the same bits";
}

// The FP8 case under each QuantCompute setting, through the library's setting and the command's flag and
// HYMOE_QUANT_COMPUTE. Its 16 x 16 blocks are smaller than the panel formats' 128-k unit, so it runs on the
// portable path, exact under both settings: the same bits, within float32 rounding of y.fp32_compute. (The bf16
// dot path on 128-blocks: tests/kernels/gemm_quantized_test.cc and python/tests/hf_transformers' FP8 checkpoint.)
// A case with 128-blocks would take the bf16 dot path where the CPU has AVX512_BF16 and differ.
class HfFp8Conformance : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFp8Conformance, EachFp8PathReproducesTransformers) {
  const HfCase c(GetParam());
  ASSERT_GT(c.fp8_block_k, 0);
  const QuantCompute before = quant_compute();
  const Tensor x = c.input.read_f32("x");
  std::vector<std::vector<float>> outputs;
  const test::TempDir tmp("hf_fp8_paths_" + GetParam());
  for (QuantCompute setting : {QuantCompute::kExact, QuantCompute::kAuto}) {
    if (setting == QuantCompute::kAuto && c.fp8_packed() &&
        !kernels::fp8_rounds_activations(kernels::active_isa(), setting))
      continue;
    set_quant_compute(setting);
    ModelMoELayer layer = load_model_layer(c.dir, c.layer);
    set_quant_compute(before);
    const Tensor y = layer.forward(x);
    const Routing& r = layer.last_routing();
    expect_matches(c, y, r.indices, Tensor(Shape{r.num_tokens, r.top_k}, r.weights), path_of(bf16_compute()), setting);
    outputs.push_back(values_of(y));
    const std::string name(quant_compute_name(setting));
    expect_command_gives(c, tmp, "--quant-compute", "HYMOE_QUANT_COMPUTE", name, outputs.back());
  }
  if (outputs.size() == 2 && c.fp8_packed()) EXPECT_NE(outputs[0], outputs[1]) << "exact and bf16-dot fp8 gave the same bits";
  if (outputs.size() == 2 && !c.fp8_packed()) EXPECT_EQ(outputs[0], outputs[1]) << "the portable path is exact";
}

// Every case directory under conformance/hf (the shared cases) and conformance/hf-extra
// (scripts/make_hf_family_cases.py): committing a case is what runs it.
std::vector<std::string> all_hf_cases() {
  std::vector<std::string> names;
  for (const char* set : {"/conformance/hf", "/conformance/hf-extra"})
    for (const auto& entry : std::filesystem::directory_iterator(test::data_dir() + set))
      if (std::filesystem::exists(entry.path() / "meta.json")) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

INSTANTIATE_TEST_SUITE_P(Cases, HfConformance, ::testing::ValuesIn(all_hf_cases()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// A family counts as run only with a case made by transformers itself: every built-in model_type has one, but
// kimi_k2, which is DeepSeek-V3's code under Kimi-K2's own model_type (transformers 5.24 has no class of that name;
// model_options_test checks that it routes as deepseek_v3).
TEST(HfConformanceSet, EveryBuiltInFamilyHasACase) {
  std::set<std::string> covered;
  for (const std::string& name : all_hf_cases())
    covered.insert(HfCase(name).meta["family"].get<std::string>());
  EXPECT_GE(covered.size(), 49u) << "cases were not found under " << test::data_dir();
  for (const std::string& type : model_family_names())
    if (type != "kimi_k2") EXPECT_TRUE(covered.count(type)) << "model family '" << type << "' has no conformance case";
}
INSTANTIATE_TEST_SUITE_P(Cases, HfBf16Conformance, ::testing::Values("qwen3_moe_e16_k8_norm_bf16"));
INSTANTIATE_TEST_SUITE_P(Cases, HfFp8Conformance, ::testing::Values("deepseek_v3_e16_g4_tg2_k4_fp8"));

}  // namespace
}  // namespace hymoe
