// MoEConfig validation and JSON parsing. Every message names the field, the value and what is allowed, because
// a config error is the most common mistake a user makes.
#include <algorithm>
#include <cmath>

#include "hymoe/error.h"
#include "hymoe/moe.h"
#include "io/json_io.h"
#include "moe/bias_schedule.h"

namespace hymoe {

void MoEConfig::validate() const {
  if (dim <= 0) fail("config: dim=", dim, " must be positive");
  if (hidden_dim <= 0) fail("config: hidden_dim=", hidden_dim, " must be positive");
  if (num_experts <= 0) fail("config: num_experts=", num_experts, " must be positive");
  if (top_k < 1 || top_k > num_experts)
    fail("config: top_k=", top_k, " must be in 1..num_experts=", num_experts);
  const auto routers = router_names();
  if (std::find(routers.begin(), routers.end(), router_type) == routers.end()) {
    std::string known;
    for (const auto& r : routers) known += (known.empty() ? "" : ", ") + r;
    fail("config: router_type=", quote_for_message(router_type), " is not one of ", known);
  }
  mlp_name_for_activation(activation);  // throws for unknown activations
  if (shared_experts < 0) fail("config: shared_experts=", shared_experts, " must be >= 0");
  if (!std::isfinite(capacity_factor) || capacity_factor < 0)
    fail("config: capacity_factor=", capacity_factor, " must be a finite number >= 0 (0 disables capacity)");
  if (!std::isfinite(sequence_aux_loss_weight) || sequence_aux_loss_weight < 0)
    fail("config: sequence_aux_loss_weight=", sequence_aux_loss_weight, " must be a finite number >= 0");
  parse_bias_schedule(bias_schedule);  // throws for unknown schedules
}

namespace {

// Bounds on a config file's integers, far past any real model (DeepSeek-V3: dim 7168, 256 experts) and low enough
// that products of them (dim * hidden_dim * num_experts) cannot overflow int64.
constexpr int64_t kMaxConfigWidth = int64_t{1} << 20;
constexpr int64_t kMaxConfigExperts = int64_t{1} << 16;

template <typename T>
T field(const nlohmann::json& j, const char* name, const std::string& label, int64_t lo = 0, int64_t hi = 0) {
  const auto& v = j.at(name);
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) fail(label, ": field '", name, "' must be true or false, got ", describe_json(v));
    return v.get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) fail(label, ": field '", name, "' must be a string, got ", describe_json(v));
    return v.get<std::string>();
  } else if constexpr (std::is_integral_v<T>) {
    return json_int64(v, label, name, lo, hi);
  } else {
    if (!v.is_number()) fail(label, ": field '", name, "' must be a number, got ", describe_json(v));
    return v.get<double>();
  }
}

}  // namespace

MoEConfig parse_moe_config(std::string_view json_text, const std::string& label,
                           std::span<const std::string_view> extra_fields) {
  const nlohmann::json j = parse_json(json_text, label);
  if (!j.is_object()) fail(label, ": config must be a JSON object, got ", describe_json(j));
  static constexpr std::string_view kFields[] = {
      "dim", "hidden_dim", "num_experts", "top_k", "activation", "router_type", "shared_experts",
      "capacity_factor", "gradient_scale", "sequence_aux_loss_weight", "bias_schedule", "packed_experts"};
  for (const auto& [key, value] : j.items()) {
    const bool known = std::find(std::begin(kFields), std::end(kFields), key) != std::end(kFields) ||
                       std::find(extra_fields.begin(), extra_fields.end(), key) != extra_fields.end();
    if (!known) fail(label, ": unknown field ", quote_for_message(key));
  }
  for (const char* required : {"dim", "hidden_dim", "num_experts", "top_k"})
    if (!j.contains(required)) fail(label, ": missing required field '", required, "'");
  MoEConfig c;
  c.dim = field<int64_t>(j, "dim", label, 1, kMaxConfigWidth);
  c.hidden_dim = field<int64_t>(j, "hidden_dim", label, 1, kMaxConfigWidth);
  c.num_experts = field<int64_t>(j, "num_experts", label, 1, kMaxConfigExperts);
  c.top_k = field<int64_t>(j, "top_k", label, 1, kMaxConfigExperts);
  if (j.contains("activation")) c.activation = field<std::string>(j, "activation", label);
  if (j.contains("router_type")) c.router_type = field<std::string>(j, "router_type", label);
  if (j.contains("shared_experts")) c.shared_experts = field<int64_t>(j, "shared_experts", label, 0, kMaxConfigExperts);
  if (j.contains("capacity_factor")) c.capacity_factor = field<double>(j, "capacity_factor", label);
  if (j.contains("gradient_scale")) c.gradient_scale = field<bool>(j, "gradient_scale", label);
  if (j.contains("sequence_aux_loss_weight"))
    c.sequence_aux_loss_weight = field<double>(j, "sequence_aux_loss_weight", label);
  if (j.contains("bias_schedule")) c.bias_schedule = field<std::string>(j, "bias_schedule", label);
  if (j.contains("packed_experts")) c.packed_experts = field<bool>(j, "packed_experts", label);
  try {
    c.validate();
  } catch (const Error& e) {
    fail(label, ": ", e.what());
  }
  return c;
}

}  // namespace hymoe
