// `hymoe forward`: one MoE layer forward pass (and with --backward, the backward pass) from files to a file. Everything is read and checked before
// anything is computed, and the output is written atomically, so a failure never leaves a partial output file.
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hymoe/compute.h"
#include "hymoe/error.h"
#include "hymoe/file_io.h"
#include "hymoe/moe.h"
#include "hymoe/output_files.h"
#include "hymoe/safetensors.h"
#include "io/json_io.h"
#include "model_commands.h"

namespace hymoe::tool {
namespace {

struct ForwardOptions {
  std::string config_path, weights_path, input_path, output_path, prefix;
  bool train = false;
  std::optional<int64_t> step, max_steps;
  bool backward = false;
  float aux_loss_weight = 0.0f, z_loss_weight = 0.0f;
  std::string model_dir;  // --model form: a released checkpoint's layer
  int64_t layer = -1;
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
  // 0 is legal: the router takes max(max_steps, 1), as KempnerForge's set_step does.
  if (j.contains("max_steps")) s.max_steps = json_int64(j["max_steps"], label, "max_steps", 0);
  return s;
}

// A tensor of the input file that holds activations: present, floating point, of the expected rank. Checked from
// the header alone, before any tensor is read or the layer is built.
const TensorInfo& activation_info(const SafetensorsFile& input, const std::string& name) {
  const TensorInfo& info = input.info(name);
  if (!dtype_is_floating(info.dtype))
    fail(input.label(), ": tensor '", name, "' has dtype ", dtype_name(info.dtype),
         "; it must be floating point (F32, F16, BF16 or F64)");
  return info;
}

Tensor as_tensor(const std::vector<float>& v, Shape shape) { return Tensor(std::move(shape), v); }

int run_forward(const ForwardOptions& o) {
  OutputFiles files;
  files.add_input("--config", o.config_path);
  files.add_input("--weights", o.weights_path);
  files.add_input("--input", o.input_path);
  files.add_output("--output", o.output_path);
  files.check();
  static constexpr std::string_view kRunFields[] = {"train", "step", "max_steps"};
  const std::string text = read_text_file(o.config_path, kMaxConfigFileBytes);
  const MoEConfig config = parse_moe_config(text, o.config_path, kRunFields);
  RunSettings run = parse_run_settings(text, o.config_path);
  if (o.train) run.train = true;
  if (o.step) run.step = *o.step;
  if (o.max_steps) run.max_steps = *o.max_steps;
  if (run.step < 0) fail("--step=", run.step, " must be >= 0");
  if (run.max_steps < 0) fail("--max-steps=", run.max_steps, " must be >= 0");
  if (o.backward && !run.train) fail("--backward needs train mode (--train or \"train\": true in ", o.config_path, ")");

  // Every input is opened and checked from its header before the layer is built: a missing or malformed file is
  // reported at once, not after the layer's weights were allocated.
  const SafetensorsFile weights = SafetensorsFile::open(o.weights_path);
  const SafetensorsFile input = SafetensorsFile::open(o.input_path);
  // The config against the weights before the input against the config: when the weights and x agree on a dim the
  // config does not have, the config is the file to blame, not x. Every router has gate.weight (num_experts, dim);
  // the strict load below checks every other tensor.
  if (weights.contains(o.prefix + "router.gate.weight")) {
    const TensorInfo& gate = weights.info(o.prefix + "router.gate.weight");
    if (gate.shape != Shape{config.num_experts, config.dim})
      fail(o.config_path, ": num_experts=", config.num_experts, " and dim=", config.dim, " disagree with ",
           o.weights_path, ", whose tensor ", quote_for_message(gate.name), " has shape ", shape_to_string(gate.shape),
           " (the config implies ", shape_to_string(Shape{config.num_experts, config.dim}), ")");
  }
  const TensorInfo& x_info = activation_info(input, "x");
  if (x_info.shape.size() != 3 || x_info.shape[2] != config.dim)
    fail(o.input_path, ": tensor 'x' has shape ", shape_to_string(x_info.shape), ", expected (batch, seq_len, ",
         config.dim, ")");
  if (x_info.shape[0] == 0 || x_info.shape[1] == 0)
    fail(o.input_path, ": tensor 'x' of shape ", shape_to_string(x_info.shape), " has no tokens");
  if (o.backward) {
    const TensorInfo& g_info = activation_info(input, "grad_output");
    if (g_info.shape != x_info.shape)
      fail(o.input_path, ": tensor 'grad_output' has shape ", shape_to_string(g_info.shape), ", expected ",
           shape_to_string(x_info.shape), " (the shape of x)");
  }
  // The file's bytes bound batch * seq_len * dim, so this product cannot wrap.
  const int64_t tokens = x_info.shape[0] * x_info.shape[1];
  const Mode mode = run.train ? Mode::kTrain : Mode::kEval;
  require_physical_memory(estimate_moe_memory(config, tokens, mode).total_bytes(),
                          detail::concat(o.config_path, ": a layer of ", moe_size_fields(config), " run on ", tokens,
                                         " tokens of ", o.input_path, run.train ? " in train mode" : ""));

  MoELayer layer(config);
  layer.load(weights, o.prefix);
  const Tensor x = input.read_f32("x");
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!std::isfinite(x[i])) fail(o.input_path, ": tensor 'x' has a non-finite value at flat index ", i);
  Tensor grad_output;
  if (o.backward) {
    grad_output = input.read_f32("grad_output", x.shape());
    for (int64_t i = 0; i < grad_output.numel(); ++i)
      if (!std::isfinite(grad_output[i]))
        fail(o.input_path, ": tensor 'grad_output' has a non-finite value at flat index ", i);
  }

  const Tensor y = layer.forward(x, mode, run.step, run.max_steps);
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
  files.stage("--output", out.serialize());
  files.commit();
  return 0;
}

}  // namespace

Action add_forward_command(CLI::App& app) {
  auto o = std::make_shared<ForwardOptions>();
  auto* cmd = app.add_subcommand("forward", "Run one MoE layer forward pass: config + weights + input -> output");
  cmd->add_option("--config", o->config_path, "JSON with the MoEConfig fields (+ optional train, step, max_steps)");
  cmd->add_option("--weights", o->weights_path, "safetensors state dict with PyTorch names");
  cmd->add_option("--input", o->input_path, "safetensors holding x (batch, seq_len, dim); with --model also (tokens, dim)")->required();
  cmd->add_option("--output", o->output_path, "safetensors to write (y, losses, counts, route.*, state.*)")->required();
  cmd->add_flag("--train", o->train, "train mode (overrides the config's train field)");
  cmd->add_option("--step", o->step, "training step for bias schedules (overrides the config)")
      ->check(kNonNegativeInteger);
  cmd->add_option("--max-steps", o->max_steps, "total steps for bias schedules, 0 taken as 1 (overrides the config)")
      ->check(kNonNegativeInteger);
  cmd->add_option("--prefix", o->prefix, "name prefix of the layer's tensors, e.g. model.layers.3.mlp.");
  cmd->add_flag("--backward", o->backward,
                "also run the backward pass of sum(y*grad_output) + A*aux_loss + Z*z_loss (grad_output from the input "
                "file) and write grad.x and grad.<parameter> (train mode only)");
  cmd->add_option("--aux-loss-weight", o->aux_loss_weight, "A: weight of aux_loss in the backward")
      ->capture_default_str()
      ->check(kFiniteNumber);
  cmd->add_option("--z-loss-weight", o->z_loss_weight, "Z: weight of z_loss in the backward")
      ->capture_default_str()
      ->check(kFiniteNumber);
  cmd->add_option("--model", o->model_dir,
                 "a Hugging Face model directory (config.json + safetensors) or a GGUF file (*.gguf or GGUF magic) "
                 "instead of --config/--weights");
  cmd->add_option("--layer", o->layer, "with --model: the MoE layer (GGUF: block) to run");
  return [o] {
    if (o->model_dir.empty()) {
      if (o->config_path.empty() || o->weights_path.empty()) fail("forward: --config and --weights are required (or --model)");
      return run_forward(*o);
    }
    if (!o->config_path.empty() || !o->weights_path.empty()) fail("forward: --model excludes --config and --weights");
    if (o->layer < 0) fail("forward: --model needs --layer N (N >= 0)");
    return run_model_forward(o->model_dir, o->layer, o->input_path, o->output_path);
  };
}

}  // namespace hymoe::tool
