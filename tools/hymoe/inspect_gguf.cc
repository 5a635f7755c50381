// `hymoe inspect model.gguf`: what llama.cpp would run from the file (architecture, dense and MoE blocks, experts,
// top-k, routing settings, tensor types, bytes per expert, block and file), then every metadata key and tensor.
#include "inspect_gguf.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "hymoe/error.h"
#include "hymoe/gguf.h"
#include "hymoe/gguf_moe.h"

namespace hymoe::tool {

namespace {

// "Q4_K" or "Q4_K/Q6_K": the distinct types of some tensors.
std::string types_of(std::initializer_list<const GgufTensorInfo*> tensors) {
  std::set<std::string> names;
  for (const GgufTensorInfo* t : tensors)
    if (t) names.insert(ggml_type_name(t->type));
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : "/") + n;
  return out;
}

// One more than the largest n of the tensor names "blk.<n>.*" (0 when there are none).
uint64_t blocks_with_tensors(const GgufFile& file) {
  uint64_t count = 0;
  for (const auto& t : file.tensors()) {
    if (t.name.rfind("blk.", 0) != 0) continue;
    uint64_t n = 0;
    size_t i = 4;
    while (i < t.name.size() && i < 14 && t.name[i] >= '0' && t.name[i] <= '9') n = n * 10 + static_cast<uint64_t>(t.name[i++] - '0');
    if (i > 4 && i < t.name.size() && t.name[i] == '.') count = std::max(count, n + 1);
  }
  return count;
}

void print_model(const GgufFile& file) {
  const GgufMoeConfig c = read_gguf_moe_config(file);
  fmt::print("architecture {}: {} blocks, embedding {}", c.architecture, c.block_count, c.embedding_length);
  if (c.expert_count == 0) {
    fmt::print(", no experts (dense)\n");
    return;
  }
  fmt::print(", {} experts, top-{}, expert hidden {} (from {})", c.expert_count, c.expert_used_count, c.expert_hidden,
             c.expert_hidden_from);
  if (c.shared_hidden) fmt::print(", shared expert hidden {}{}", c.shared_hidden, c.shared_gate ? " (sigmoid-gated)" : "");
  fmt::print("\n");
  fmt::print("routing: {} gating, weights normalized: {}, weights scale: {}, expert groups: {}\n",
             c.gating == GgufGating::kSoftmax   ? "softmax"
             : c.gating == GgufGating::kSigmoid ? "sigmoid"
                                                : "top-k logits softmax (SOFTMAX_WEIGHT)",
             c.norm_weights ? "yes" : "no",
             c.weights_scale == 0.0f || c.weights_scale == 1.0f ? std::string("none") : fmt::format("{}", c.weights_scale),
             c.group_count > 1 ? fmt::format("{} of {} (top-2 sum per group)", c.group_used_count, c.group_count)
                               : std::string("none"));
  fmt::print("  llama.cpp's {} graph: {}\n", c.architecture, c.fixed_by_architecture);
  uint64_t moe_bytes = 0;
  int moe_blocks = 0;
  std::string cannot_run;  // "1, 3": the MoE blocks hymoe cannot run, each flagged where it is listed
  // Blocks past the last one any tensor names are listed as one line: block_count comes from the file, and a
  // hostile one (4294967295) must not make the listing that long.
  const uint32_t listed = std::min<uint64_t>(c.block_count, blocks_with_tensors(file));
  for (uint32_t b = 0; b < listed; ++b) {
    const std::string prefix = "blk." + std::to_string(b) + ".";
    if (gguf_block_is_moe(file, b)) {
      ++moe_blocks;
      GgufMoeBlock m;
      try {
        m = find_gguf_moe_block(file, c, b);
      } catch (const Error& e) {
        // One block hymoe cannot run (a type it does not decode, a missing tensor) does not hide the others, which
        // `forward --layer N` runs: it is listed with the reason.
        std::string why = e.what();
        if (why.rfind(file.label() + ": ", 0) == 0) why.erase(0, file.label().size() + 2);
        fmt::print("  block {:>3}  MoE    cannot run: {}\n", b, why);
        cannot_run += (cannot_run.empty() ? "" : ", ") + std::to_string(b);
        continue;
      }
      const bool split = m.split_experts();
      const GgufTensorInfo* gate = split ? m.gate_split[0] : m.gate_up_exps ? m.gate_up_exps : m.gate_exps;
      const GgufTensorInfo* up = split ? m.up_split[0] : m.gate_up_exps ? m.gate_up_exps : m.up_exps;
      fmt::print("  block {:>3}  MoE    experts {}{} (gate {}, up {}, down {}), {} bytes per expert; router {}", b,
                 c.expert_count, split ? ", one tensor each" : m.gate_up_exps ? ", gate and up merged" : "",
                 gate ? ggml_type_name(gate->type) : std::string("none"), ggml_type_name(up->type),
                 ggml_type_name((split ? m.down_split[0] : m.down_exps)->type), m.expert_bytes(c.expert_count),
                 ggml_type_name(m.router->type));
      if (m.gate_shexp || m.up_shexp) fmt::print("; shared {}", types_of({m.gate_shexp, m.up_shexp, m.down_shexp}));
      if (m.exp_probs_b) fmt::print("; selection bias exp_probs_b");
      if (m.router_bias) fmt::print("; router and expert biases");
      fmt::print("; {} bytes\n", m.total_bytes());
      moe_bytes += m.total_bytes();
    } else if (const GgufTensorInfo* gate = file.find_tensor(prefix + "ffn_gate.weight")) {
      const GgufTensorInfo* up = file.find_tensor(prefix + "ffn_up.weight");
      const GgufTensorInfo* down = file.find_tensor(prefix + "ffn_down.weight");
      uint64_t bytes = 0;
      for (const GgufTensorInfo* t : {gate, up, down})
        if (t) bytes += t->nbytes;
      fmt::print("  block {:>3}  dense  ffn hidden {} ({}), {} bytes\n", b, gate->ne[1], types_of({gate, up, down}), bytes);
    } else {
      fmt::print("  block {:>3}  no FFN tensors\n", b);
    }
  }
  if (listed < c.block_count) fmt::print("  blocks {}-{}  no tensors\n", listed, c.block_count - 1);
  fmt::print("MoE blocks: {}, {} bytes{}\n", moe_blocks, moe_bytes,
             cannot_run.empty() ? std::string() : "; hymoe cannot run block(s) " + cannot_run + " (listed above)");
}

}  // namespace

void inspect_gguf(const GgufFile& file) {
  const std::string& path = file.label();
  uint64_t total = 0;
  for (const auto& t : file.tensors()) total += t.nbytes;
  fmt::print("{}: GGUF v{}, {} tensors ({} bytes of tensor data), {} metadata keys, alignment {}, data at byte {}\n",
             path, file.version(), file.tensors().size(), total, file.metadata().size(), file.alignment(),
             file.data_offset());
  print_model(file);
  size_t key_width = 3, name_width = 4;
  for (const auto& [key, value] : file.metadata()) key_width = std::max(key_width, key.size());
  for (const auto& t : file.tensors()) name_width = std::max(name_width, t.name.size());
  fmt::print("metadata:\n");
  for (const auto& [key, value] : file.metadata()) {
    std::string type = gguf_value_type_name(static_cast<uint32_t>(value.type()));
    if (value.type() == GgufValueType::kArray)
      type = fmt::format("{}[{}]", type, gguf_value_type_name(static_cast<uint32_t>(value.element_type())));
    fmt::print("  {:<{}}  {:<14}  {}\n", key, key_width, type, value.to_display(8));
  }
  fmt::print("tensors:\n  {:<{}}  {:<7}  {:<22}  {:>12}  {:>12}\n", "name", name_width, "type", "ne", "bytes", "offset");
  for (const auto& t : file.tensors())
    fmt::print("  {:<{}}  {:<7}  {:<22}  {:>12}  {:>12}\n", t.name, name_width, ggml_type_name(t.type), t.ne_text(),
               t.nbytes, t.offset);
}

}  // namespace hymoe::tool
