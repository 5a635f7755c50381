// hymoe inspect/forward/bench --model: released checkpoints through the library's Model and ModelMoELayer.
#include "model_commands.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "hymoe/error.h"
#include "hymoe/ggml_type.h"
#include "hymoe/model.h"
#include "hymoe/output_files.h"
#include "hymoe/rng.h"
#include "hymoe/safetensors.h"

namespace hymoe::tool {
namespace {

std::string router_description(const MoELayerSpec& s) {
  const RouterOptions& r = s.router;
  std::string out;
  switch (r.scoring) {
    case RouterScoring::kSoftmax: out = "softmax"; break;
    case RouterScoring::kSigmoid: out = "sigmoid"; break;
    case RouterScoring::kSoftmaxOverTopKLogits: out = "top-k logits, softmax over the k"; break;
    case RouterScoring::kSparseMixer: out = fmt::format("sparsemixer (jitter_eps {})", r.jitter_eps); break;
    case RouterScoring::kSqrtSoftplus: out = "sqrt-softplus"; break;
    case RouterScoring::kLogitsThenSigmoid: out = "top-k logits, their sigmoids"; break;
  }
  if (r.scale_input) out += ", weight multiplied into the expert's input";
  if (r.logit_bias) out += ", logit bias";
  if (r.selection_bias) out += ", selection-only bias";
  if (r.group_limited)
    out += fmt::format(", {} groups keep {} (group score {})", r.n_group, r.top_group,
                       r.group_score == GroupScore::kMax ? "max" : "top-2 sum");
  out += r.normalize ? ", normalized" : ", not normalized";
  if (r.scaling_factor != 1.0) out += fmt::format(", scaled by {}", r.scaling_factor);
  return out;
}

std::string layer_list(const std::vector<int64_t>& layers) {
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + (i == j ? std::to_string(layers[i]) : fmt::format("{}-{}", layers[i], layers[j]));
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

// Bytes on disk of a set of tensors, and their dtypes.
struct TensorBytes {
  int64_t bytes = 0;
  std::set<std::string> dtypes;
};
TensorBytes tensor_bytes(const TensorSource& src, const std::vector<std::string>& names) {
  TensorBytes out;
  for (const auto& n : names) {
    const TensorRef t = src.tensor(n);
    out.bytes += static_cast<int64_t>(t.bytes.size());
    out.dtypes.insert(t.ggml_type ? ggml_type_name(*t.ggml_type) : std::string(dtype_name(t.dtype)));
  }
  return out;
}

std::string joined(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

// Names as messages show them: each quoted, at most 16, then how many more.
std::string quoted_list(const std::vector<std::string>& names) {
  constexpr size_t kShown = 16;
  std::string out;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) out += (i ? ", " : "") + quote_for_message(names[i], 200);
  if (names.size() > kShown) out += fmt::format(" and {} more", names.size() - kShown);
  return out;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

int64_t resident_set_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * 4096;
}

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace

int run_model_inspect(const std::string& dir) {
  const Model m = Model::open(dir);
  const ModelFamily& f = m.family();
  std::vector<int64_t> moe, dense;
  for (int64_t l = 0; l < f.num_layers(); ++l) (f.is_moe_layer(l) ? moe : dense).push_back(l);
  // A layer is present when the checkpoint holds every tensor forward loads for it, absent when it holds none (a
  // single-layer extract holds just one); anything between is an error naming what is missing, found before a
  // line is printed.
  std::vector<int64_t> present, runnable;
  std::vector<std::pair<int64_t, std::string>> refused;  // MoE layers hymoe does not run, with the reason
  std::string incomplete;
  for (int64_t l : moe) {
    std::vector<std::string> names;
    try {
      names = m.layer_tensor_names(l);
    } catch (const Error& e) {  // one layer hymoe cannot run (DeepSeek-V4's hash layers) does not hide the others
      refused.emplace_back(l, e.what());
      continue;
    }
    runnable.push_back(l);
    std::vector<std::string> missing;
    for (const auto& n : names)
      if (!m.source().contains(n)) missing.push_back(n);
    if (missing.empty()) present.push_back(l);
    else if (missing.size() < names.size())
      incomplete += fmt::format("{}MoE layer {} lacks {} of the {} tensors hymoe forward loads: {}",
                                incomplete.empty() ? "" : "; ", l, missing.size(), names.size(), quoted_list(missing));
  }
  if (!incomplete.empty()) fail(dir, ": ", incomplete);
  // A model none of whose MoE layers runs (a config value hymoe refuses) is an error, not a listing.
  if (runnable.empty() && !refused.empty()) fail(refused.front().second);

  fmt::print("{}: family {}, {} layers\n", dir, f.name(), f.num_layers());
  fmt::print("  MoE layers:   {}\n  dense layers: {}\n", layer_list(moe), layer_list(dense));
  fmt::print("  quantization: {}\n", m.quantization().name());
  for (const auto& [l, why] : refused) fmt::print("  layer {}: cannot run: {}\n", l, why);
  if (runnable.empty()) return 0;
  const MoELayerSpec s = f.moe_layer(runnable.front());
  fmt::print("  experts {} x (hidden_size {} -> {}), top-k {}\n", s.num_experts, s.dim, s.hidden, s.top_k);
  fmt::print("  router: {}\n", router_description(s));
  fmt::print("  expert MLP: {}\n", s.activation == ExpertActivation::kClampedSwiGLU
                                       ? fmt::format("clamped SwiGLU{} (alpha {}, limit {})",
                                                     s.expert_biases || s.storage == ExpertStorage::kFusedInterleavedInOut
                                                         ? " with biases" : "",
                                                     s.swiglu_alpha, s.swiglu_limit)
                                       : s.activation == ExpertActivation::kLimitedSwiGLU ||
                                                 s.activation == ExpertActivation::kSiluClampedSwiGLU
                                       ? fmt::format("{} (limit {})", expert_activation_name(s.activation), s.swiglu_limit)
                                       : expert_activation_name(s.activation));
  if (s.shared.hidden > 0)
    fmt::print("  shared expert: {} of {}{}{}\n", expert_activation_name(s.shared.activation.value_or(s.activation)), s.shared.hidden,
               s.shared.gate_weight.empty() ? "" : ", sigmoid-gated per token",
               s.shared.average ? "; output (routed + shared) / 2" : "");
  else
    fmt::print("  shared expert: none\n");
  if (!s.output_bias.empty() || !s.output_norm.empty())
    fmt::print("  block output: {}\n", !s.output_bias.empty() ? std::string("plus a bias per channel")
                                                            : fmt::format("RMSNorm (eps {})", s.output_norm_eps));
  int64_t total = 0;
  for (int64_t l : present) {
    const std::vector<std::string> names = m.layer_tensor_names(l);
    const TensorBytes all = tensor_bytes(m.source(), names);
    const MoELayerSpec ls = f.moe_layer(l);
    std::vector<std::string> expert0;
    const std::string p0 = ls.storage == ExpertStorage::kPerExpertLinear ? ls.experts_prefix + "0." : "";
    for (const auto& n : names)
      if (!p0.empty() && n.rfind(p0, 0) == 0) expert0.push_back(n);
    if (ls.storage == ExpertStorage::kSplitOutIn)
      for (const std::string* n : {&ls.gate_name, &ls.up_name, &ls.down_name})
        expert0.push_back(expert_weight_name(ls.storage, ls.experts_prefix, *n, 0));
    const int64_t per_expert = expert0.empty() ? 0 : tensor_bytes(m.source(), expert0).bytes;
    fmt::print("  layer {}: {:.2f} MiB ({}), {}\n", l, mib(all.bytes), joined(all.dtypes),
               per_expert > 0 ? fmt::format("{:.3f} MiB per expert", mib(per_expert))
                              : fmt::format("{:.3f} MiB per expert (fused tensors / E)", mib(all.bytes / ls.num_experts)));
    total += all.bytes;
  }
  fmt::print("  MoE weights present: {} of {} MoE layers, {:.2f} MiB\n", present.size(), moe.size(), mib(total));
  return 0;
}

int run_model_forward(const std::string& dir, int64_t layer, const std::string& input, const std::string& output) {
  // Every file of the model (config, index, shards) is an input the output must not replace.
  OutputFiles files;
  files.add_input("--input", input);
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
      if (entry.is_regular_file(ec)) files.add_input("--model", entry.path().string());
  } else {
    files.add_input("--model", dir);
  }
  files.add_output("--output", output);
  files.check();
  const Model model = Model::open(dir);
  const MoELayerSpec spec = model.family().moe_layer(layer);  // a dense or missing layer fails before any reading
  const SafetensorsFile in = SafetensorsFile::open(input);
  // The configuration against the checkpoint before x against the configuration, so that a configuration that
  // disagrees with both its weights and x is the one named.
  if (model.source().contains(spec.router_weight)) {
    const TensorRef gate = model.source().tensor(spec.router_weight);
    const int64_t rows = spec.num_experts + spec.zero_experts;  // LongCat-Flash's router also scores its zero experts
    if (gate.shape != Shape{rows, spec.dim})
      fail(model.is_gguf() ? dir + " (metadata)" : model.config().label(), ": ", spec.num_experts,
           spec.zero_experts ? " + " + std::to_string(spec.zero_experts) + " zero" : std::string(),
           " experts of hidden_size=", spec.dim, " disagree with ", gate.file, ", whose tensor ",
           quote_for_message(gate.name), " has shape ", shape_to_string(gate.shape), " (the configuration implies ",
           shape_to_string(Shape{rows, spec.dim}), ")");
  }
  const TensorInfo& xi = in.info("x");
  if (xi.dtype != DType::kF32 && xi.dtype != DType::kBF16)
    fail(input, ": tensor 'x' has dtype ", dtype_name(xi.dtype), "; expected F32 or BF16");
  if ((xi.shape.size() != 2 && xi.shape.size() != 3) || xi.shape.back() != spec.dim)
    fail(input, ": tensor 'x' has shape ", shape_to_string(xi.shape), ", expected (batch, seq_len, hidden_size=", spec.dim,
         ") or (tokens, hidden_size=", spec.dim, ")");
  if (shape_numel(xi.shape) == 0) fail(input, ": tensor 'x' of shape ", shape_to_string(xi.shape), " has no tokens");
  const Tensor x = in.read_f32("x");
  ModelMoELayer moe = model.load_layer(layer);
  const Tensor y = moe.forward(x);
  const Routing& r = moe.last_routing();
  const int64_t T = r.num_tokens, K = r.top_k;
  SafetensorsWriter out;
  out.add("y", y);
  std::vector<std::byte> idx(static_cast<size_t>(T * K) * sizeof(int64_t));
  for (int64_t i = 0; i < T * K; ++i) {
    const int64_t v = r.indices[static_cast<size_t>(i)];
    std::memcpy(idx.data() + i * 8, &v, 8);
  }
  out.add_raw("route.indices", DType::kI64, {T, K}, std::move(idx));
  out.add("route.weights", Tensor(Shape{T, K}, r.weights));
  out.add("router_logits", Tensor(Shape{T, r.num_experts}, r.logits));
  out.add("expert_counts", r.expert_counts);
  files.stage("--output", out.serialize());
  files.commit();
  return 0;
}

int run_model_bench(const std::string& dir, int64_t layer, const std::vector<int64_t>& tokens, int repeats, bool json) {
  malloc_trim(0);
  const int64_t rss0 = resident_set_bytes();
  const auto t0 = Clock::now();
  int64_t disk_bytes = 0;
  std::set<std::string> dtypes;
  std::string quant;
  std::optional<ModelMoELayer> moe;
  {
    const Model model = Model::open(dir);
    const TensorBytes tb = tensor_bytes(model.source(), model.layer_tensor_names(layer));
    disk_bytes = tb.bytes;
    dtypes = tb.dtypes;
    quant = model.is_gguf() ? "GGUF (ggml blocks kept in compact panels; F16/BF16 widened to f32)" : model.quantization().name();
    moe.emplace(model.load_layer(layer));
  }  // the checkpoint is unmapped here: what stays resident is the layer
  const double load_ms = ms_since(t0);
  malloc_trim(0);  // return the loader's freed temporaries (copied scales and biases) to the system
  const int64_t resident = resident_set_bytes() - rss0;
  const MoELayerSpec& s = moe->spec();
  if (!json) {
    fmt::print("{} layer {}: {} E={} K={} D={} I={}{}, stored {} ({}), quantization {}\n", dir, layer, s.family,
               s.num_experts, s.top_k, s.dim, s.hidden,
               s.shared.hidden > 0 ? fmt::format(" shared={}", s.shared.hidden) : "", joined(dtypes),
               fmt::format("{:.1f} MiB on disk", mib(disk_bytes)), quant);
    fmt::print("load {:.0f} ms; resident +{:.1f} MiB measured (RSS), {:.1f} MiB of weights held = {:.3f}x the bytes on disk\n",
               load_ms, mib(resident), mib(moe->resident_weight_bytes()),
               static_cast<double>(resident) / static_cast<double>(std::max<int64_t>(disk_bytes, 1)));
    fmt::print("{:>8}  {:>12}  {:>12}\n", "tokens", "median ms", "tokens/s");
  }
  std::string rows;
  Rng rng(7);
  for (int64_t T : tokens) {
    if (T <= 0) fail("--tokens: ", T, " must be positive");
    Tensor x(Shape{1, T, s.dim});
    for (float& v : x.values()) v = static_cast<float>(rng.normal());
    const int reps = repeats > 0 ? repeats : (T <= 32 ? 9 : 5);
    std::vector<double> ms;
    moe->forward(x);  // warm-up: first-touch of the workspace
    for (int i = 0; i < reps; ++i) {
      const auto t = Clock::now();
      moe->forward(x);
      ms.push_back(ms_since(t));
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    if (json)
      rows += fmt::format("{}{{\"tokens\": {}, \"median_ms\": {:.4f}}}", rows.empty() ? "" : ", ", T, med);
    else
      fmt::print("{:>8}  {:>12.3f}  {:>12.0f}\n", T, med, static_cast<double>(T) / med * 1000.0);
  }
  if (json)
    fmt::print("{{\"model\": \"{}\", \"layer\": {}, \"family\": \"{}\", \"load_ms\": {:.1f}, \"disk_bytes\": {}, "
               "\"resident_bytes\": {}, \"weight_bytes\": {}, \"runs\": [{}]}}\n",
               dir, layer, s.family, load_ms, disk_bytes, resident, moe->resident_weight_bytes(), rows);
  return 0;
}

}  // namespace hymoe::tool
