// `hymoe demo`: the README's main job. A forward pass of a DeepSeek-V2-Lite-shaped MoE layer on seeded random
// weights, printing the routing histogram, the losses and the throughput, then the benchmark summary of the shape
// against the machine's measured limits and the OpenBLAS baseline (hymoe bench).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "commands.h"
#include "hymoe/error.h"
#include "hymoe/moe.h"
#include "hymoe/rng.h"

namespace hymoe::tool {
namespace {

// Timed passes at most: each costs a forward and a timing kept in memory; more says nothing a median of fewer does not.
constexpr int kMaxRepeats = 10000;

struct DemoOptions {
  int64_t tokens = 128;
  uint64_t seed = 0;
  int repeats = 3;
  bool bench = true;
};

int run_demo_forward(const DemoOptions& o) {
  if (o.tokens < 1) fail("--tokens=", o.tokens, " must be >= 1");
  if (o.repeats < 1 || o.repeats > kMaxRepeats) fail("--repeats=", o.repeats, " must be in 1..", kMaxRepeats);
  MoEConfig c;
  c.dim = 2048;
  c.hidden_dim = 1408;
  c.num_experts = 64;
  c.top_k = 6;
  c.shared_experts = 2;
  c.activation = "silu";
  c.router_type = "softmax_topk";
  // The layer, its input and output: refused before any of it is allocated when the machine cannot hold it.
  require_physical_memory(estimate_moe_memory(c, o.tokens, Mode::kEval).total_bytes(),
                          detail::concat("--tokens=", o.tokens, " through the demo layer (", moe_size_fields(c), ")"));
  fmt::print("hymoe demo: DeepSeek-V2-Lite-shaped MoE layer (dim {}, expert hidden {}, {} experts, top-{}, "
             "shared experts {}, SwiGLU, {}), {} tokens, seed {}\n",
             c.dim, c.hidden_dim, c.num_experts, c.top_k, c.shared_experts, c.router_type, o.tokens, o.seed);
  Rng rng(o.seed);
  MoELayer layer(c);
  layer.init_random(rng);
  const Tensor x = random_normal(rng, Shape{1, o.tokens, c.dim}, 1.0);
  fmt::print("expert weights: {:.1f} MiB (f32)\n", static_cast<double>(layer.expert_weight_bytes()) / (1 << 20));

  std::vector<double> ms;
  Tensor y;
  for (int i = 0; i < o.repeats + 1; ++i) {  // the first pass also prepares the kernels' weights: not timed
    const auto start = std::chrono::steady_clock::now();
    y = layer.forward(x, Mode::kEval);
    const auto stop = std::chrono::steady_clock::now();
    if (i > 0) ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
  }
  std::sort(ms.begin(), ms.end());
  const double median_ms = ms[ms.size() / 2];

  const Tensor& counts = layer.expert_counts();
  const float max_count = *std::max_element(counts.values().begin(), counts.values().end());
  fmt::print("\ntokens per expert (top-{} assignments, {} in all):\n", c.top_k, o.tokens * c.top_k);
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const int bar = max_count > 0 ? static_cast<int>(counts[e] / max_count * 20.0f + 0.5f) : 0;
    fmt::print("  e{:02d} {:>4} {:<20}{}", e, static_cast<int>(counts[e]), std::string(static_cast<size_t>(bar), '#'),
               e % 2 == 1 ? "\n" : "   ");
  }
  double y_norm = 0.0;
  for (float v : y.values()) y_norm += static_cast<double>(v) * v;
  fmt::print("\naux_loss {:.6f}   z_loss {:.6f}   |y| {:.4f}\n", layer.aux_loss(), layer.z_loss(), std::sqrt(y_norm));
  fmt::print("forward: {:.2f} ms median of {} runs, {:.0f} tokens/s\n", median_ms, o.repeats,
             static_cast<double>(o.tokens) / (median_ms / 1000.0));
  return 0;
}

int run_demo(const DemoOptions& o) {
  run_demo_forward(o);  // its layer is freed before the benchmark builds its own weights
  if (!o.bench) return 0;
  fmt::print("\nbenchmark of this shape (hymoe bench --shape deepseek-v2-lite --tokens 1 512 --dtype f32 --repeats 3):\n");
  return print_bench_summary("deepseek-v2-lite", {1, 512});
}

}  // namespace

Action add_demo_command(CLI::App& app) {
  auto o = std::make_shared<DemoOptions>();
  auto* cmd = app.add_subcommand("demo", "Forward pass of the default DeepSeek-V2-Lite-shaped layer (seeded random)");
  cmd->add_option("--tokens", o->tokens, "tokens in the batch")->capture_default_str();
  // Parsed into uint64: without the check "-1" would wrap to 2^64 - 1.
  cmd->add_option("--seed", o->seed, "random seed for weights and input")->capture_default_str()->check(kNonNegativeInteger);
  cmd->add_option("--repeats", o->repeats, "timed forward passes (median reported)")->capture_default_str();
  cmd->add_flag("!--no-bench", o->bench, "skip the benchmark summary of the shape");
  return [o] { return run_demo(*o); };
}

}  // namespace hymoe::tool
