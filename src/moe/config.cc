// MoEConfig validation and JSON parsing. Every message names the field, the value and what is allowed, because
// a config error is the most common mistake a user makes.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "hymoe/error.h"
#include "hymoe/moe.h"
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
    fail("config: router_type='", router_type, "' is not one of ", known);
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

template <typename T>
T field(const nlohmann::json& j, const char* name, const std::string& label) {
  const auto& v = j.at(name);
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) fail(label, ": field '", name, "' must be true or false, got ", v.dump());
    return v.get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) fail(label, ": field '", name, "' must be a string, got ", v.dump());
    return v.get<std::string>();
  } else if constexpr (std::is_integral_v<T>) {
    if (v.is_number_integer()) return v.get<T>();
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() && std::abs(v.get<double>()) < 1e15)
      return static_cast<T>(v.get<double>());
    fail(label, ": field '", name, "' must be an integer, got ", v.dump());
  } else {
    if (!v.is_number()) fail(label, ": field '", name, "' must be a number, got ", v.dump());
    return v.get<double>();
  }
}

}  // namespace

MoEConfig parse_moe_config(std::string_view json_text, const std::string& label,
                           std::span<const std::string_view> extra_fields) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    fail(label, ": not valid JSON: ", e.what());
  }
  if (!j.is_object()) fail(label, ": config must be a JSON object");
  static constexpr std::string_view kFields[] = {
      "dim", "hidden_dim", "num_experts", "top_k", "activation", "router_type", "shared_experts",
      "capacity_factor", "gradient_scale", "sequence_aux_loss_weight", "bias_schedule", "packed_experts"};
  for (const auto& [key, value] : j.items()) {
    const bool known = std::find(std::begin(kFields), std::end(kFields), key) != std::end(kFields) ||
                       std::find(extra_fields.begin(), extra_fields.end(), key) != extra_fields.end();
    if (!known) fail(label, ": unknown field '", key, "'");
  }
  for (const char* required : {"dim", "hidden_dim", "num_experts", "top_k"})
    if (!j.contains(required)) fail(label, ": missing required field '", required, "'");
  MoEConfig c;
  c.dim = field<int64_t>(j, "dim", label);
  c.hidden_dim = field<int64_t>(j, "hidden_dim", label);
  c.num_experts = field<int64_t>(j, "num_experts", label);
  c.top_k = field<int64_t>(j, "top_k", label);
  if (j.contains("activation")) c.activation = field<std::string>(j, "activation", label);
  if (j.contains("router_type")) c.router_type = field<std::string>(j, "router_type", label);
  if (j.contains("shared_experts")) c.shared_experts = field<int64_t>(j, "shared_experts", label);
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
