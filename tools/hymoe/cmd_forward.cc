// `hymoe forward`: one MoE layer forward pass (and with --backward, the backward pass) from files to a file. Everything is read and checked before
// anything is computed, and the output is written atomically, so a failure never leaves a partial output file.
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hymoe/error.h"
#include "hymoe/file_io.h"
#include "hymoe/moe.h"
#include "hymoe/safetensors.h"
#include "io/json_io.h"

namespace hymoe::tool {
namespace {

struct ForwardOptions {
  std::string config_path, weights_path, input_path, output_path, prefix;
  bool train = false;
  std::optional<int64_t> step, max_steps;
  bool backward = false;
  float aux_loss_weight = 0.0f, z_loss_weight = 0.0f;
};

// Run settings that live beside the MoEConfig fields in the config file.
struct RunSettings {
  bool train = false;
  int64_t step = 0;
  int64_t max_steps = 1;
};

RunSettings parse_run_settings(const std::string& text, const std::string& label) {
  const nlohmann::json j = parse_json(text, label);  // already parsed once, and checked, by parse_moe_config
  RunSettings s;
  if (j.contains("train")) {
    if (!j["train"].is_boolean()) fail(label, ": field 'train' must be true or false, got ", describe_json(j["train"]));
    s.train = j["train"].get<bool>();
  }
  if (j.contains("step")) s.step = json_int64(j["step"], label, "step", 0);
  if (j.contains("max_steps")) s.max_steps = json_int64(j["max_steps"], label, "max_steps");
  return s;
}

Tensor as_tensor(const std::vector<float>& v, Shape shape) { return Tensor(std::move(shape), v); }

int run_forward(const ForwardOptions& o) {
  static constexpr std::string_view kRunFields[] = {"train", "step", "max_steps"};
  const std::string text = read_text_file(o.config_path, kMaxConfigFileBytes);
  const MoEConfig config = parse_moe_config(text, o.config_path, kRunFields);
  RunSettings run = parse_run_settings(text, o.config_path);
  if (o.train) run.train = true;
  if (o.step) run.step = *o.step;
  if (o.max_steps) run.max_steps = *o.max_steps;
  if (run.step < 0) fail("--step=", run.step, " must be >= 0");

  MoELayer layer(config);
  layer.load(SafetensorsFile::open(o.weights_path), o.prefix);
  const SafetensorsFile input = SafetensorsFile::open(o.input_path);
  const Tensor x = input.read_f32("x");
  if (x.rank() != 3 || x.dim(2) != config.dim)
    fail(o.input_path, ": tensor 'x' has shape ", shape_to_string(x.shape()), ", expected (batch, seq_len, ",
         config.dim, ")");
  if (x.dim(0) * x.dim(1) == 0) fail(o.input_path, ": tensor 'x' of shape ", shape_to_string(x.shape()), " has no tokens");
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!std::isfinite(x[i])) fail(o.input_path, ": tensor 'x' has a non-finite value at flat index ", i);
  Tensor grad_output;
  if (o.backward) {
    if (!run.train) fail("--backward needs train mode (--train or \"train\": true in ", o.config_path, ")");
    if (!std::isfinite(o.aux_loss_weight) || !std::isfinite(o.z_loss_weight))
      fail("--aux-loss-weight and --z-loss-weight must be finite");
    grad_output = input.read_f32("grad_output", x.shape());
    for (int64_t i = 0; i < grad_output.numel(); ++i)
      if (!std::isfinite(grad_output[i]))
        fail(o.input_path, ": tensor 'grad_output' has a non-finite value at flat index ", i);
  }

  const Tensor y = layer.forward(x, run.train ? Mode::kTrain : Mode::kEval, run.step, run.max_steps);
  const Routing& r = layer.last_routing();
  const int64_t T = r.num_tokens, K = r.top_k;

  SafetensorsWriter out;
  out.add("y", y);
  out.add("aux_loss", Tensor::scalar(layer.aux_loss()));
  out.add("z_loss", Tensor::scalar(layer.z_loss()));
  out.add("expert_counts", layer.expert_counts());
  std::vector<float> indices(r.indices.begin(), r.indices.end());
  out.add("route.indices", as_tensor(indices, {T, K}));
  out.add("route.router_weights", as_tensor(r.router_weights, {T, K}));
  out.add("route.weights", as_tensor(r.weights, {T, K}));
  for (auto& [name, t] : layer.router().named_tensors())
    if (name != "gate.weight") out.add("state.router." + name, *t);
  if (o.backward) {
    out.add("grad.x", layer.backward(grad_output, o.aux_loss_weight, o.z_loss_weight));
    for (const auto& [name, g] : layer.named_gradients()) out.add("grad." + name, *g);
  }
  out.write(o.output_path);
  return 0;
}

}  // namespace

Action add_forward_command(CLI::App& app) {
  auto o = std::make_shared<ForwardOptions>();
  auto* cmd = app.add_subcommand("forward", "Run one MoE layer forward pass: config + weights + input -> output");
  cmd->add_option("--config", o->config_path, "JSON with the MoEConfig fields (+ optional train, step, max_steps)")->required();
  cmd->add_option("--weights", o->weights_path, "safetensors state dict with PyTorch names")->required();
  cmd->add_option("--input", o->input_path, "safetensors holding x (batch, seq_len, dim)")->required();
  cmd->add_option("--output", o->output_path, "safetensors to write (y, losses, counts, route.*, state.*)")->required();
  cmd->add_flag("--train", o->train, "train mode (overrides the config's train field)");
  cmd->add_option("--step", o->step, "training step for bias schedules (overrides the config)");
  cmd->add_option("--max-steps", o->max_steps, "total steps for bias schedules (overrides the config)");
  cmd->add_option("--prefix", o->prefix, "name prefix of the layer's tensors, e.g. model.layers.3.mlp.");
  cmd->add_flag("--backward", o->backward,
                "also run the backward pass of sum(y*grad_output) + A*aux_loss + Z*z_loss (grad_output from the input "
                "file) and write grad.x and grad.<parameter> (train mode only)");
  cmd->add_option("--aux-loss-weight", o->aux_loss_weight, "A: weight of aux_loss in the backward")->capture_default_str();
  cmd->add_option("--z-loss-weight", o->z_loss_weight, "Z: weight of z_loss in the backward")->capture_default_str();
  return [o] { return run_forward(*o); };
}

}  // namespace hymoe::tool
