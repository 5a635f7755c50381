// The memory a MoE layer needs, from its configuration alone: commands compare it with the machine's memory before
// they allocate anything, so an impossible size is refused with the fields that caused it instead of dying in
// std::bad_alloc after minutes of zero-filling. Depends only on the configuration (no kernels, no tensors).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>

#include "hymoe/error.h"
#include "hymoe/moe.h"

namespace hymoe {

MoEMemoryEstimate estimate_moe_memory(const MoEConfig& c, int64_t tokens, Mode mode) {
  constexpr double kF32 = 4.0;
  const double D = static_cast<double>(c.dim), H = static_cast<double>(c.hidden_dim);
  const double E = static_cast<double>(c.num_experts), K = static_cast<double>(c.top_k);
  const double T = static_cast<double>(std::max<int64_t>(tokens, 0));
  const bool gated = c.activation == "silu";
  const double projections = gated ? 3.0 : 2.0;
  const double mlps = E + (c.shared_experts > 0 ? 1.0 : 0.0);
  const double mlp_weights = mlps * projections * D * H;
  const double router_weights = E * D + 2.0 * E;  // gate, and a sigmoid router's bias and EMA
  MoEMemoryEstimate m;
  // The f32 weights and the kernels' packed copy of every expert MLP.
  m.weight_bytes = kF32 * (2.0 * mlp_weights + router_weights);
  // Per token: x and y (with a reshaped copy each), the routed rows' outputs and hidden activations, the shared
  // expert's, the router's logits and scores, and the dispatch (indices, weights, row maps: 8 words a slot).
  const double hidden_per_token = (gated ? 2.0 : 1.0) * H * (K + (c.shared_experts > 0 ? 1.0 : 0.0));
  double per_token = 4.0 * D + K * D + D + hidden_per_token + 2.0 * E + 8.0 * K;
  if (mode == Mode::kTrain) {
    // Saved pre-activations and input, then the backward's gathered rows, their gradients and grad_x.
    per_token += hidden_per_token + D + 3.0 * K * D + 3.0 * D;
    m.weight_bytes += kF32 * (mlp_weights + router_weights);  // one gradient per weight
  }
  m.activation_bytes = kF32 * T * per_token;
  return m;
}

double physical_memory_bytes() {
  static const double bytes = [] {  // once: every forward pass checks against it
    const long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_bytes <= 0) return std::numeric_limits<double>::infinity();
    return static_cast<double>(pages) * static_cast<double>(page_bytes);
  }();
  return bytes;
}

namespace {

// "412316860416 bytes (384.0 GiB)", or in scientific notation past what an integer prints sensibly.
std::string describe_bytes(double bytes) {
  char text[96];
  if (bytes < 1e18)
    std::snprintf(text, sizeof text, "%.0f bytes (%.1f GiB)", bytes, bytes / (1024.0 * 1024.0 * 1024.0));
  else
    std::snprintf(text, sizeof text, "%.3g bytes (%.3g GiB)", bytes, bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace

void require_physical_memory(double need_bytes, const std::string& what) {
  const double have = physical_memory_bytes();
  if (!(need_bytes <= have))
    fail(what, " needs about ", describe_bytes(need_bytes), ", more than this machine's physical memory of ",
         describe_bytes(have));
}

std::string moe_size_fields(const MoEConfig& c) {
  return detail::concat("dim=", c.dim, ", hidden_dim=", c.hidden_dim, ", num_experts=", c.num_experts,
                        ", top_k=", c.top_k, ", activation=", c.activation, ", shared_experts=", c.shared_experts);
}

}  // namespace hymoe
