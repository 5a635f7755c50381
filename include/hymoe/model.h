// Released checkpoints: the MoE layers of Hugging Face models (Mixtral, Qwen2/3-MoE, OLMoE, DeepSeek-V2/V3,
// gpt-oss) run as transformers runs them, from a model directory as downloaded; and the MoE blocks of llama.cpp's
// GGUF files (llama/Mixtral, qwen2moe, qwen3moe, olmoe, deepseek2) run as llama.cpp runs them.
//
//   TensorSource  name -> dtype, shape, byte span over memory-mapped files (safetensors shard sets, a GGUF file)
//   ModelFamily   one per model_type (or one for every GGUF architecture): reads the configuration, says which
//                 layers are MoE, names layer N's tensors, sets the router and expert-MLP options (MoELayerSpec,
//                 plain data)
//   ModelMoELayer an inference layer holding the experts in their stored precision (bf16 stays bf16; FP8 and
//                 MXFP4 stay in compact panels of their codes), run by the shared dispatch and grouped expert kernels
//
// docs/models.md states each family's semantics; docs/architecture.md shows where this layer sits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hymoe/dtype.h"
#include "hymoe/moe.h"
#include "hymoe/tensor.h"

namespace hymoe {

// ---- Tensor sources ----

// One stored tensor: its bytes stay in the source's mapping (valid while the source lives).
struct TensorRef {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  std::span<const std::byte> bytes;
  std::string file;  // the file holding it, for messages
  // GGUF tensors: the ggml type id (ggml_type.h). `shape` is then in values and `bytes` holds rows of the type's
  // blocks; dtype is the element type for F32/F16/BF16 and kU8 for block types.
  std::optional<uint32_t> ggml_type;
};

// A set of named tensors over memory-mapped files, validated once when opened. Reading a tensor touches only its
// bytes.
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  // The source's path, for messages.
  virtual const std::string& label() const = 0;
  virtual bool contains(const std::string& name) const = 0;
  // Throws naming the source and the tensor when absent.
  virtual TensorRef tensor(const std::string& name) const = 0;
  virtual std::vector<std::string> names() const = 0;
};

// A safetensors checkpoint: a directory with model.safetensors.index.json (its weight_map names each tensor's
// shard) or with one or more *.safetensors files, or a single .safetensors file. A shard named by the index but
// missing, a tensor the index places in a shard that lacks it, and a tensor stored twice are errors.
std::unique_ptr<TensorSource> open_safetensors_source(const std::string& path);

// How a path given as a model is read: a path that is not a directory is a GGUF file when its name ends in
// ".gguf" or its first four bytes are the GGUF magic; everything else is a Hugging Face model directory.
bool is_gguf_model_path(const std::string& path);
// The same rule for an input already opened: `path`'s name, or `head`, its first bytes (any number; four decide).
bool is_gguf_image(const std::string& path, std::span<const std::byte> head);

// ---- config.json ----

// A parsed JSON object (config.json, or a nested object of it) with typed, named look-ups. Messages name the
// file and the key.
class HfConfig {
 public:
  static HfConfig parse(const std::string& text, const std::string& label);
  static HfConfig load(const std::string& path);
  ~HfConfig();
  HfConfig(const HfConfig&);
  HfConfig& operator=(const HfConfig&);

  const std::string& label() const { return label_; }
  bool has(const std::string& key) const;  // present and not null
  bool is_null(const std::string& key) const;  // present, with the value null
  bool is_list(const std::string& key) const;  // present, with a list as its value
  // The first present key of `keys` (accepting the spellings releases and transformers use), else an error
  // naming all of them.
  int64_t integer(std::initializer_list<const char*> keys) const;
  double number(std::initializer_list<const char*> keys) const;
  std::string string(std::initializer_list<const char*> keys) const;
  bool boolean(std::initializer_list<const char*> keys) const;
  // With a default when none of the keys is present.
  int64_t integer_or(std::initializer_list<const char*> keys, int64_t fallback) const;
  double number_or(std::initializer_list<const char*> keys, double fallback) const;
  std::string string_or(std::initializer_list<const char*> keys, const std::string& fallback) const;
  bool boolean_or(std::initializer_list<const char*> keys, bool fallback) const;
  std::vector<int64_t> integer_list_or(const char* key, std::vector<int64_t> fallback) const;
  // A key that is an integer or one integer per layer (HunYuan's moe_topk): the value for `layer`.
  int64_t integer_per_layer_or(const char* key, int64_t layer, int64_t fallback) const;
  std::vector<std::string> string_list_or(const char* key, std::vector<std::string> fallback) const;
  // A list with a number or null per layer (Step-3.7's swiglu_limits, possibly padded past num_hidden_layers): the
  // entry of `layer`; nullopt where the key is absent or null or the entry null. An error naming the key for a list
  // too short or an entry that is not a number.
  std::optional<double> number_of_layer(const char* key, int64_t layer) const;
  std::optional<HfConfig> object(const char* key) const;
  // An object of strings (the index's weight_map), in key order; an error when absent or of another kind.
  std::vector<std::pair<std::string, std::string>> string_map(const char* key) const;

 private:
  struct Json;
  HfConfig(std::unique_ptr<Json> json, std::string label);
  std::unique_ptr<Json> json_;
  std::string label_;
};

// ---- What a family says about one MoE layer ----

enum class RouterScoring {
  kSoftmax,               // p = softmax(logits); select top-k of p (Mixtral, Qwen, OLMoE, DeepSeek-V2)
  kSigmoid,               // s = sigmoid(logits); select on s (+ selection bias); weights from s (DeepSeek-V3)
  kSoftmaxOverTopKLogits, // select top-k logits; weights = softmax over those K (gpt-oss)
  // PhiMoE's sparsemixer in eval mode, top-2: expert 1 = the largest logit m1, weight = softmax over the logits l
  // with (m1 - l) / max(|l|, m1) <= 2 jitter_eps at it; expert 2 = the largest of the others, m2, weight = softmax
  // over the others with (m2 - l) / max(|l|, m2) <= 2 jitter_eps at it. Not renormalized.
  kSparseMixer,
  // s = sqrt(softplus(logits)); select on s (+ selection bias); weights from s (DeepSeek-V4's scoring_func
  // "sqrtsoftplus", llama.cpp's expert_gating_func 4)
  kSqrtSoftplus,
  // select on the logits (+ selection bias: Kolibri-1 adds its correction bias to the logits); weights = sigmoid of
  // the chosen logits
  kLogitsThenSigmoid,
};
enum class GroupScore {
  kMax,      // a group's score is its best expert's score (DeepSeek-V2 group_limited_greedy)
  kTop2Sum,  // the sum of its two best (DeepSeek-V3)
};

struct RouterOptions {
  RouterScoring scoring = RouterScoring::kSoftmax;
  bool logit_bias = false;      // a bias added to the logits (gpt-oss router.bias)
  bool selection_bias = false;  // added (in float32) to the scores for choosing only, whatever the scoring
                                // (DeepSeek-V3 e_score_correction_bias, GGUF exp_probs_b)
  // Group-limited top-k: experts in n_group consecutive groups, only the top_group best groups selectable.
  int64_t n_group = 1;
  int64_t top_group = 1;
  GroupScore group_score = GroupScore::kMax;
  float excluded_score = 0.0f;  // the score experts of excluded groups get (0.0 or -inf)
  bool group_limited = false;
  bool normalize = false;           // divide the K weights by max(sum + normalize_epsilon, normalize_min_sum)
  double normalize_epsilon = 0.0;
  double normalize_min_sum = 0.0;   // llama.cpp clamps the sum at 6.103515625e-5 (the smallest normal f16)
  double scaling_factor = 1.0;      // multiplies the weights after normalization
  // Llama 4: each chosen expert runs on the token's input times its weight, expert(w x), and its output is added
  // unscaled; otherwise the output is scaled, w expert(x).
  bool scale_input = false;
  double jitter_eps = 0.01;  // kSparseMixer's router_jitter_noise
};

// The expert MLP's form. Every family but gpt-oss runs down(act(gate x) * up x) with act = transformers'
// ACT2FN[config.hidden_act]; the shared expert uses the same activation.
enum class ExpertActivation {
  kSwiGLU,         // down(silu(gate x) * up x); hidden_act "silu" / "swish"
  kClampedSwiGLU,  // gpt-oss: biases, (clamp(up) + 1) * g * sigmoid(alpha g), g = min(gate, limit)
  kLimitedSwiGLU,  // GLM-5-Next: down(silu(min(gate x, limit)) * clamp(up x, -limit, limit)), limit swiglu_limit
  // Step-3.7: down(min(silu(gate x), limit) * clamp(up x, -limit, limit)), the clamp after the silu, limit swiglu_limit
  kSiluClampedSwiGLU,
  kGeGLU,          // down(gelu(gate x) * up x), the exact erf GELU; hidden_act "gelu" / "gelu_python"
  // down(gelu_tanh(gate x) * up x), 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))); hidden_act
  // "gelu_pytorch_tanh", "gelu_python_tanh", "gelu_new", "gelu_fast"
  kGeGLUTanh,
  kReGLU,          // down(relu(gate x) * up x); hidden_act "relu"
  kSquaredReLU,    // down(relu(up x)^2), no gate tensor (Nemotron-H's mlp_hidden_act "relu2"; gate_name "")
};
// "SwiGLU", "GeGLU (exact erf GELU)", ...: for messages and `hymoe inspect`.
std::string expert_activation_name(ExpertActivation a);

// How the routed experts are stored in the checkpoint.
enum class ExpertStorage {
  kPerExpertLinear,       // <experts_prefix><e>.<gate|up|down>.weight, nn.Linear (out, in) per expert
  kFusedInterleavedInOut,  // gpt-oss: <experts_prefix>gate_up_proj (E, D, 2I) columns gate,up interleaved;
                           // down_proj (E, I, D); *_bias; or MXFP4 *_blocks/*_scales (E, out, in/32, 16)
  kFusedOutIn,             // GGUF: <experts_prefix><gate_name>.weight (E, I, D), up (E, I, D), down (E, D, I);
                           // expert e is rows [e*out, (e+1)*out), any ggml type hymoe decodes
  kSplitOutIn,             // GGUF's older split layout (early Mixtral files): <experts_prefix><name>.<e>.weight,
                           // (out, in) per expert, any ggml type hymoe decodes
  kFusedConcatInOut,       // Qwen3-VL-MoE as released: <experts_prefix>gate_up_proj (E, D, 2I), gate columns [0, I),
                           // up [I, 2I); down_proj (E, I, D); no biases
  kFusedGateUpOutIn,       // GGUF with gate and up merged: <experts_prefix><gate_name>.weight (E, 2I, D), expert e's
                           // gate rows [2Ie, 2Ie + I), up [2Ie + I, 2I(e + 1)); down as kFusedOutIn (Granite-MoE's
                           // input_linear / output_linear; Mistral 4's gate_up_proj / down_proj, fused_suffix "")
  kStackedRowsDownInOut,   // DBRX: <experts_prefix><gate_name>, <up_name>, <down_name> with fused_suffix, (E I, D)
                           // each, expert e rows [eI, (e + 1)I); gate and up nn.Linear (out I, in D), down used as
                           // h @ W (in I, out D)
};

// The tensor of expert e's matrix `matrix` where each expert has tensors of its own: <prefix><e>.<matrix>.weight
// (kPerExpertLinear), <prefix><matrix>.<e>.weight (kSplitOutIn: GGUF's blk.N.ffn_gate.E.weight, as llama.cpp reads
// it); e < 0, an unnumbered MLP (a shared expert): <prefix><matrix>.weight.
std::string expert_weight_name(ExpertStorage storage, const std::string& prefix, const std::string& matrix,
                               int64_t expert);

// A dense MLP beside the routed experts, run on every token, with the routed experts' activation.
struct SharedExpertSpec {
  int64_t hidden = 0;        // 0: none
  std::string prefix;        // "<prefix><gate_name>.weight", ...
  std::string gate_name = "gate_proj", up_name = "up_proj", down_name = "down_proj";
  std::string gate_weight;   // Qwen2-MoE's sigmoid gate (1, D) or (D); empty: ungated
  // Granite-MoE's shared_mlp: gate and up as one (2 hidden, D) tensor <prefix><gate_name>.weight, gate rows
  // [0, hidden), up [hidden, 2 hidden); up_name unused.
  bool merged_gate_up = false;
  bool average = false;  // Cohere2-MoE's "average": the layer's output is (routed + shared) / 2, not their sum
  // Its own activation where it differs from the routed experts' (Hunyuan-V4: the routed experts' SwiGLU is
  // limited, the shared MLP's is not); unset: the routed experts' activation.
  std::optional<ExpertActivation> activation;
  // Its own swiglu_limit where it differs from the routed experts' (Step-3.7 limits them per layer, apart).
  std::optional<double> swiglu_limit;
};

struct MoELayerSpec {
  std::string family;
  int64_t layer = 0;
  int64_t dim = 0;
  int64_t hidden = 0;  // expert hidden size
  int64_t num_experts = 0;
  // LongCat-Flash's zero-computation experts: router rows num_experts .. num_experts + zero_experts - 1, whose expert
  // is the identity (a chosen one adds w x); the router weight and selection bias then have E + zero_experts rows.
  int64_t zero_experts = 0;
  int64_t top_k = 0;
  RouterOptions router;
  std::string router_weight;  // (E, D)
  std::string router_bias;    // (E) when router.logit_bias
  std::string selection_bias; // (E) when router.selection_bias
  bool selection_bias_optional = false;  // absent from the checkpoint: zeros (A.X K1's releases route without one)
  ExpertActivation activation = ExpertActivation::kSwiGLU;
  double swiglu_alpha = 1.702;
  double swiglu_limit = 7.0;
  ExpertStorage storage = ExpertStorage::kPerExpertLinear;
  std::string experts_prefix;                           // "model.layers.1.mlp.experts."
  std::string gate_name = "gate_proj", up_name = "up_proj", down_name = "down_proj";  // per-expert names
  std::string fused_suffix = ".weight";  // kFusedOutIn, kFusedGateUpOutIn: <experts_prefix><name><fused_suffix>
  // kFusedInterleavedInOut, kFusedConcatInOut: the (E, D, 2I) and (E, I, D) tensors under experts_prefix (Aria's
  // fc1.weight and fc2.weight)
  std::string in_out_gate_up = "gate_up_proj", in_out_down = "down_proj";
  // kFusedOutIn: float biases <experts_prefix><name>.bias, (E, out) each (GGUF gpt-oss); kFusedConcatInOut:
  // gate_up_proj_bias (E, 2I) concatenated and down_proj_bias (E, D) (OpenAI's privacy filter); added as the kernels
  // add gpt-oss's (grouped_ffn.h, MlpWeightsView). kFusedInterleavedInOut always has its biases.
  bool expert_biases = false;
  SharedExpertSpec shared;
  // What the block applies to its output, routed + shared, where the family's block does:
  std::string output_bias;       // (D) added to every token (JetMoE's mlp.bias)
  std::string output_norm;       // (D) RMSNorm weight w: y = w * y / sqrt(mean(y^2) + output_norm_eps) (A.X K1)
  double output_norm_eps = 1e-6;
};

// How the checkpoint's weights are quantized (config.json quantization_config).
struct Quantization {
  enum class Method { kNone, kFp8Block, kMxfp4 };
  Method method = Method::kNone;
  int64_t block_n = 128, block_k = 128;  // kFp8Block: weight_block_size
  std::string name() const;              // "none", "fp8 e4m3 block [128, 128]", "mxfp4"
};
// Reads quantization_config; an unknown quant_method (or fp8 fmt) is an error naming it and the known ones.
Quantization parse_quantization(const HfConfig& config);

// ---- Families ----

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;
  virtual std::string_view name() const = 0;  // config.json model_type, or a GGUF file's general.architecture
  virtual int64_t num_layers() const = 0;
  virtual bool is_moe_layer(int64_t layer) const = 0;
  // Throws when `layer` is out of range or dense.
  virtual MoELayerSpec moe_layer(int64_t layer) const = 0;
};

using ModelFamilyFactory = std::function<std::unique_ptr<ModelFamily>(const HfConfig& config)>;
// A family added at run time is one register call (the built-ins are the HYMOE_MODEL_FAMILY definitions in
// src/models/families/).
void register_model_family(const std::string& model_type, ModelFamilyFactory factory);
std::vector<std::string> model_family_names();
// The family of config.json's model_type; an unknown one is an error listing the known ones.
std::unique_ptr<ModelFamily> make_model_family(const HfConfig& config);

// ---- The inference layer ----

// One MoE layer of a checkpoint, ready to run: weights in the kernels' packed layout at their stored precision
// (f32 or bf16; FP8 and MXFP4 as compact panels of their codes, decoded exactly in registers), router weights and biases in float32. Compute is float32 with
// float32 accumulation (docs/models.md: how that compares with transformers' bf16 rounding).
class ModelMoELayer {
 public:
  ~ModelMoELayer();
  ModelMoELayer(ModelMoELayer&&) noexcept;
  const MoELayerSpec& spec() const { return spec_; }
  // x (B, L, dim) or (T, dim) -> y of x's shape; token t = b*L + l. Non-finite inputs are an error.
  Tensor forward(const Tensor& x);
  // The last forward's routing: indices and weights (T, K) in descending selection-score order, logits (T, E),
  // selection scores (T, E), expert counts (E).
  const Routing& last_routing() const { return routing_; }
  const Tensor& expert_counts() const { return routing_.expert_counts; }
  // Bytes the layer's weights occupy once loaded (packed expert panels, router, biases).
  int64_t resident_weight_bytes() const;
  // Builds the layer from `source` (only the layer's tensors are read). Shapes are checked against the spec.
  static ModelMoELayer load(const TensorSource& source, const MoELayerSpec& spec, const Quantization& quant);

 private:
  struct Impl;
  ModelMoELayer(MoELayerSpec spec, std::unique_ptr<Impl> impl);
  MoELayerSpec spec_;
  std::unique_ptr<Impl> impl_;
  Routing routing_;
};

// A model directory as downloaded (config.json plus its safetensors), or a GGUF file (is_gguf_model_path): its
// metadata gives the family (one for every architecture in gguf_moe.h, with llama.cpp's routing) and its tensors
// the source.
class Model {
 public:
  static Model open(const std::string& path);
  bool is_gguf() const { return config_ == nullptr; }
  // Hugging Face directories only (HYMOE_CHECK).
  const HfConfig& config() const;
  const ModelFamily& family() const { return *family_; }
  const TensorSource& source() const { return *source_; }
  const Quantization& quantization() const { return quant_; }
  // The tensor names of MoE layer `layer` that the loader reads, in a fixed order, whether or not the source holds
  // them: one it lacks is a tensor load_layer would report missing.
  std::vector<std::string> layer_tensor_names(int64_t layer) const;
  ModelMoELayer load_layer(int64_t layer) const;

 private:
  std::shared_ptr<HfConfig> config_;
  std::shared_ptr<ModelFamily> family_;
  std::shared_ptr<TensorSource> source_;
  Quantization quant_;
};

// The one call: opens `path` (a model directory or a GGUF file) and returns MoE layer (GGUF: block) `layer` ready
// to run (the files are unmapped on return).
ModelMoELayer load_model_layer(const std::string& path, int64_t layer);

}  // namespace hymoe
