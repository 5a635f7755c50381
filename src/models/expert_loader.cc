// Expert weight loading (see expert_loader.h). Every shape is checked against the one config.json implies, and
// every mismatch names the tensor, its file, both shapes and the config fields behind the expected one.
#include "models/expert_loader.h"

#include <cstring>

#include <cmath>

#include "hymoe/error.h"
#include "hymoe/ggml_type.h"
#include "hymoe/quant_decode.h"
#include "hymoe/quant_formats.h"

namespace hymoe {
namespace {

using kernels::MatrixView;
using kernels::WeightLayout;

TensorRef checked_tensor(const TensorSource& src, const std::string& name, const Shape& shape, const std::string& why) {
  TensorRef t = src.tensor(name);
  if (t.shape != shape)
    fail(t.file, ": tensor '", name, "' has shape ", shape_to_string(t.shape), ", but config.json implies ",
         shape_to_string(shape), " (", why, ")");
  return t;
}

template <typename T>
T load_element(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Element i of a float tensor as float.
float float_element(const TensorRef& t, int64_t i) {
  const std::byte* p = t.bytes.data() + i * dtype_size(t.dtype);
  switch (t.dtype) {
    case DType::kF32: return load_element<float>(p);
    case DType::kBF16: return bf16_to_float(load_element<uint16_t>(p));
    case DType::kF16: return f16_to_float(load_element<uint16_t>(p));
    default: break;
  }
  fail(t.file, ": tensor '", t.name, "' has dtype ", dtype_name(t.dtype), "; expected F32, BF16 or F16");
}

void require_float(const TensorRef& t) { (void)float_element(t, 0); }

bool aligned_for(const TensorRef& t) {
  return reinterpret_cast<uintptr_t>(t.bytes.data()) % static_cast<uintptr_t>(dtype_size(t.dtype)) == 0;
}

// The (rows, cols) matrix starting at row `first_row` of a GGUF tensor (ne = [cols, ...]): one routed expert's
// slice of a fused (E, out, in) tensor, or a whole 2-D one. Every GGUF weight view is made here, so this is the
// one function that decides how the kernels see ggml blocks. Block types (those of the kernels' registry, and MXFP4) are
// viewed in place as kGgml views: the grouped kernels repack the slice's codes into their compact panels when
// the layer is built, while the file is still mapped (docs/kernels.md, "Formats"). F16 and BF16 are widened
// exactly to f32 (dequantize_row_ref) into a buffer of `w`, F32 copied there (GGUF data need not be aligned).
MatrixView ggml_rows_view(const TensorRef& t, int64_t first_row, int64_t rows, int64_t cols, ExpertWeights& w) {
  HYMOE_CHECK(t.ggml_type.has_value());
  const uint32_t type = *t.ggml_type;
  const GgmlTypeTraits* traits = ggml_type_traits(type);
  if (!traits || !can_dequantize(type))
    fail(t.file, ": tensor ", quote_for_message(t.name), " has type ", ggml_type_name(type),
         ", which hymoe does not decode (", decodable_type_names(), ")");
  HYMOE_CHECK(cols % traits->block_values == 0);
  const int64_t row_bytes = cols / traits->block_values * traits->block_bytes;
  HYMOE_CHECK(first_row >= 0 && rows >= 0 && static_cast<uint64_t>((first_row + rows) * row_bytes) <= t.bytes.size());
  const std::byte* codes = t.bytes.data() + first_row * row_bytes;
  w.weight_elements += rows * cols;
  // MXFP4's E8M0 255 is NaN in OCP MX (ggml reads it as 2^127): refused here, where the file and tensor are known.
  if (type == static_cast<uint32_t>(GgmlType::kMXFP4))
    for (int64_t b = 0; b < rows * (cols / traits->block_values); ++b)
      if (static_cast<uint8_t>(codes[b * traits->block_bytes]) == 255)
        fail(t.file, ": tensor ", quote_for_message(t.name), " has E8M0 scale 255 (NaN) in row ",
             first_row + b / (cols / traits->block_values), ", block ", b % (cols / traits->block_values),
             " of MXFP4 weights; hymoe takes finite scales only");
  if (traits->block_values > 1)
    return MatrixView{codes, DType::kF32, WeightLayout::kOutIn, cols, rows, {kernels::QuantScheme::kGgml, type}};
  auto& buf = w.f32_buffers.emplace_back(static_cast<size_t>(rows * cols));
  dequantize_row_ref(type, codes, buf.data(), rows * cols);  // the rows are contiguous: one run of blocks
  return MatrixView{buf.data(), DType::kF32, WeightLayout::kOutIn, cols, rows, {}};
}

std::string fp8_scale_name(const std::string& weight_name) { return weight_name + "_scale_inv"; }

MatrixView linear_view_of(const TensorSource& src, const TensorRef& t, int64_t out, int64_t in,
                          const Quantization& quant, ExpertWeights& w);

// One nn.Linear (out, in) matrix of an expert, by name, as a kernel view (k = in, n = out).
MatrixView linear_view(const TensorSource& src, const std::string& name, int64_t out, int64_t in,
                       const Quantization& quant, const std::string& why, ExpertWeights& w) {
  const TensorRef t = checked_tensor(src, name, {out, in}, why);
  if (t.ggml_type) return ggml_rows_view(t, 0, out, in, w);
  return linear_view_of(src, t, out, in, quant, w);
}

// Rows [first, first + rows) of a (.., cols) float tensor as a tensor of its own (a fused (E, out, in) tensor's
// expert), for linear_view_of.
TensorRef row_slice(const TensorRef& t, int64_t first, int64_t rows, int64_t cols) {
  TensorRef s = t;
  const auto size = static_cast<size_t>(dtype_size(t.dtype));
  s.shape = {rows, cols};
  s.bytes = t.bytes.subspan(static_cast<size_t>(first * cols) * size, static_cast<size_t>(rows * cols) * size);
  return s;
}

// One (out, in) matrix (nn.Linear's layout) of float, bf16 or FP8 values as a kernel view (k = in, n = out).
MatrixView linear_view_of(const TensorSource& src, const TensorRef& t, int64_t out, int64_t in,
                          const Quantization& quant, ExpertWeights& w) {
  const std::string& name = t.name;
  MatrixView v{nullptr, DType::kF32, WeightLayout::kOutIn, in, out, {}};
  if (t.dtype == DType::kF8E4M3) {
    if (quant.method != Quantization::Method::kFp8Block)
      fail(t.file, ": tensor '", name, "' is F8_E4M3 but config.json has no fp8 quantization_config");
    const int64_t bn = quant.block_n, bk = quant.block_k;
    const TensorRef s = checked_tensor(src, fp8_scale_name(name), {(out + bn - 1) / bn, (in + bk - 1) / bk},
                                       "ceil of the weight's shape over weight_block_size");
    if (s.dtype != DType::kF32) fail(s.file, ": tensor '", s.name, "' has dtype ", dtype_name(s.dtype), "; expected F32");
    // The codes are viewed in place (the kernels repack them into their fp8 panels, about 1 byte a weight); the
    // few scales are copied for alignment.
    auto& scales = w.f32_buffers.emplace_back(static_cast<size_t>(shape_numel(s.shape)));
    std::memcpy(scales.data(), s.bytes.data(), s.bytes.size());
    v.data = t.bytes.data();
    v.quant = {kernels::QuantScheme::kFp8Block, 0, scales.data(), bn, bk};
  } else if ((t.dtype == DType::kF32 || t.dtype == DType::kBF16) && aligned_for(t)) {
    v.data = t.bytes.data();  // viewed in place: the kernels pack straight from the mapping
    v.dtype = t.dtype;
  } else if (t.dtype == DType::kBF16) {
    auto& buf = w.bf16_buffers.emplace_back(static_cast<size_t>(out * in));
    std::memcpy(buf.data(), t.bytes.data(), t.bytes.size());
    v.data = buf.data();
    v.dtype = DType::kBF16;
  } else {
    require_float(t);
    auto& buf = w.f32_buffers.emplace_back(static_cast<size_t>(out * in));
    for (int64_t i = 0; i < out * in; ++i) buf[static_cast<size_t>(i)] = float_element(t, i);
    v.data = buf.data();
    v.dtype = DType::kF32;
  }
  w.weight_elements += out * in;
  return v;
}

void note_dtype(ExpertWeights& w, const kernels::MlpWeightsView& v) { w.dtype = v.up.dtype; }

// The names of an expert's three matrices under a prefix.
struct MlpNames {
  const std::string &gate, &up, &down;
};

// `count` experts with tensors of their own, numbered under `prefix` as `storage` numbers them (or one unnumbered).
ExpertWeights load_linear_experts(const TensorSource& src, ExpertStorage storage, const std::string& prefix,
                                  int64_t count, bool numbered, MlpNames names, int64_t D, int64_t H,
                                  const Quantization& quant, const std::string& why) {
  ExpertWeights w;
  for (int64_t e = 0; e < count; ++e) {
    auto name = [&](const std::string& matrix) { return expert_weight_name(storage, prefix, matrix, numbered ? e : -1); };
    kernels::MlpWeightsView v;
    if (!names.gate.empty()) v.gate = linear_view(src, name(names.gate), H, D, quant, why, w);  // "": no gate
    v.up = linear_view(src, name(names.up), H, D, quant, why, w);
    v.down = linear_view(src, name(names.down), D, H, quant, why, w);
    w.views.push_back(v);
  }
  if (!w.views.empty()) note_dtype(w, w.views[0]);
  return w;
}

// gpt-oss: fused (E, D, 2I) / (E, I, D) tensors used as x @ W, gate/up interleaved along the output columns, with
// biases; or their MXFP4 form (E, out, in/32, 16) blocks and (E, out, in/32) scales.
ExpertWeights load_fused_experts(const TensorSource& src, const MoELayerSpec& spec, const Quantization& quant) {
  const int64_t E = spec.num_experts, D = spec.dim, I = spec.hidden;
  const std::string& p = spec.experts_prefix;
  const std::string why = "num_local_experts=" + std::to_string(E) + ", hidden_size=" + std::to_string(D) +
                          ", intermediate_size=" + std::to_string(I);
  ExpertWeights w;
  w.views.resize(static_cast<size_t>(E));
  // gpt-oss interleaves gate and up columns (2i, 2i + 1) and has biases; Qwen3-VL-MoE concatenates them (i, I + i)
  // and has none; OpenAI's privacy filter concatenates them and has biases (expert_biases).
  const bool concat = spec.storage == ExpertStorage::kFusedConcatInOut;
  auto gate_col = [&](int64_t i) { return concat ? i : 2 * i; };
  auto up_col = [&](int64_t i) { return concat ? I + i : 2 * i + 1; };
  if (concat && quant.method == Quantization::Method::kMxfp4)
    fail(src.label(), ": quant_method mxfp4 is only known for gpt-oss's fused experts, not ", spec.family);
  if (!concat || spec.expert_biases) {
  // Biases: gate_up_proj_bias (E, 2I) laid out as the weights' columns, down_proj_bias (E, D).
  const TensorRef gub = checked_tensor(src, p + "gate_up_proj_bias", {E, 2 * I}, why);
  const TensorRef db = checked_tensor(src, p + "down_proj_bias", {E, D}, why);
  for (int64_t e = 0; e < E; ++e) {
    auto& gb = w.f32_buffers.emplace_back(static_cast<size_t>(I));
    auto& ub = w.f32_buffers.emplace_back(static_cast<size_t>(I));
    auto& dbv = w.f32_buffers.emplace_back(static_cast<size_t>(D));
    for (int64_t i = 0; i < I; ++i) {
      gb[static_cast<size_t>(i)] = float_element(gub, e * 2 * I + gate_col(i));
      ub[static_cast<size_t>(i)] = float_element(gub, e * 2 * I + up_col(i));
    }
    for (int64_t d = 0; d < D; ++d) dbv[static_cast<size_t>(d)] = float_element(db, e * D + d);
    auto& v = w.views[static_cast<size_t>(e)];
    v.gate_bias = gb.data();
    v.up_bias = ub.data();
    v.down_bias = dbv.data();
  }
  }
  if (quant.method == Quantization::Method::kMxfp4) {
    const int64_t g = kMxfp4GroupSize;
    if (D % g != 0 || I % g != 0)
      fail(src.label(), ": MXFP4 needs hidden_size=", D, " and intermediate_size=", I, " to be multiples of ", g);
    const TensorRef gu_blocks = checked_tensor(src, p + "gate_up_proj_blocks", {E, 2 * I, D / g, g / 2}, why);
    const TensorRef gu_scales = checked_tensor(src, p + "gate_up_proj_scales", {E, 2 * I, D / g}, why);
    const TensorRef dn_blocks = checked_tensor(src, p + "down_proj_blocks", {E, D, I / g, g / 2}, why);
    const TensorRef dn_scales = checked_tensor(src, p + "down_proj_scales", {E, D, I / g}, why);
    for (const TensorRef* t : {&gu_blocks, &gu_scales, &dn_blocks, &dn_scales})
      if (t->dtype != DType::kU8) fail(t->file, ": tensor '", t->name, "' has dtype ", dtype_name(t->dtype), "; expected U8");
    auto u8 = [](const TensorRef& t) { return reinterpret_cast<const uint8_t*>(t.bytes.data()); };
    // Viewed in place; the kernels repack them into their mxfp4 panels (about 0.53 bytes a weight).
    auto mxfp4 = [](const uint8_t* blocks, const uint8_t* scales, int64_t in, int64_t out, int64_t row_step) {
      MatrixView m{blocks, DType::kF32, WeightLayout::kOutIn, in, out, {}};
      m.quant.scheme = kernels::QuantScheme::kMxfp4;
      m.quant.scales = scales;
      m.quant.row_step = row_step;
      return m;
    };
    for (int64_t e = 0; e < E; ++e) {
      // Rows of gate_up are its outputs: even rows gate, odd rows up: two views of row step 2, up one row on.
      const uint8_t* gu = u8(gu_blocks) + e * 2 * I * (D / 2);
      const uint8_t* gus = u8(gu_scales) + e * 2 * I * (D / g);
      auto& v = w.views[static_cast<size_t>(e)];
      v.gate = mxfp4(gu, gus, D, I, 2);
      v.up = mxfp4(gu + D / 2, gus + D / g, D, I, 2);
      v.down = mxfp4(u8(dn_blocks) + e * D * (I / 2), u8(dn_scales) + e * D * (I / g), I, D, 1);
    }
  } else {
    const TensorRef gu = checked_tensor(src, p + spec.in_out_gate_up, {E, D, 2 * I}, why);
    const TensorRef dn = checked_tensor(src, p + spec.in_out_down, {E, I, D}, why);
    require_float(gu);
    require_float(dn);
    // The kernels take f32 or bf16; f16 is widened to f32.
    const DType kept = gu.dtype == DType::kBF16 && dn.dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
    auto matrix_copy = [&](auto&& element, int64_t rows, int64_t cols) -> const void* {
      if (kept == DType::kBF16) {
        auto& b = w.bf16_buffers.emplace_back(static_cast<size_t>(rows * cols));
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) b[static_cast<size_t>(r * cols + c)] = float_to_bf16(element(r, c));  // exact
        return b.data();
      }
      auto& b = w.f32_buffers.emplace_back(static_cast<size_t>(rows * cols));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) b[static_cast<size_t>(r * cols + c)] = element(r, c);
      return b.data();
    };
    for (int64_t e = 0; e < E; ++e) {
      const int64_t gu0 = e * D * 2 * I, dn0 = e * I * D;
      auto& v = w.views[static_cast<size_t>(e)];
      v.gate = MatrixView{matrix_copy([&](int64_t d, int64_t i) { return float_element(gu, gu0 + d * 2 * I + gate_col(i)); }, D, I),
                          kept, WeightLayout::kInOut, D, I, {}};
      v.up = MatrixView{matrix_copy([&](int64_t d, int64_t i) { return float_element(gu, gu0 + d * 2 * I + up_col(i)); }, D, I),
                        kept, WeightLayout::kInOut, D, I, {}};
      v.down = MatrixView{matrix_copy([&](int64_t i, int64_t d) { return float_element(dn, dn0 + i * D + d); }, I, D),
                          kept, WeightLayout::kInOut, I, D, {}};
    }
    w.dtype = kept;
  }
  w.weight_elements = E * 3 * D * I;
  return w;
}

// GGUF's fused experts: gate and up (E, H, D), down (E, D, H); expert e is a slice of rows of each.
ExpertWeights load_fused_out_in_experts(const TensorSource& src, const MoELayerSpec& spec, const std::string& why) {
  const int64_t E = spec.num_experts, D = spec.dim, H = spec.hidden;
  const std::string& p = spec.experts_prefix;
  // Gate and up in tensors of their own, or merged into one (E, 2H, D) with each expert's gate rows before its up.
  const bool merged = spec.storage == ExpertStorage::kFusedGateUpOutIn;
  const std::string& suffix = spec.fused_suffix;
  const bool gated = !spec.gate_name.empty();  // nemotron_h_moe's experts have no gate
  const TensorRef up = checked_tensor(src, p + (merged ? spec.gate_name : spec.up_name) + suffix,
                                     {E, merged ? 2 * H : H, D}, why);
  const TensorRef gate = merged || !gated ? up : checked_tensor(src, p + spec.gate_name + suffix, {E, H, D}, why);
  const TensorRef down = checked_tensor(src, p + spec.down_name + suffix, {E, D, H}, why);
  HYMOE_CHECK(!merged || !spec.expert_biases, "merged gate/up experts have no biases");
  ExpertWeights w;
  if (!gate.ggml_type || !up.ggml_type || !down.ggml_type) {
    // A checkpoint's float tensors (Granite-MoE's input_linear / output_linear): each expert's rows viewed as an
    // nn.Linear matrix of its own.
    for (const TensorRef* t : {&gate, &up, &down})
      if (t->ggml_type || (t->dtype != DType::kF32 && t->dtype != DType::kBF16 && t->dtype != DType::kF16))
        fail(t->file, ": tensor '", t->name, "' has dtype ", dtype_name(t->dtype),
             "; fused (E, out, in) experts of a checkpoint are read as F32, BF16 or F16");
    const Quantization none;
    for (int64_t e = 0; e < E; ++e) {
      kernels::MlpWeightsView v;
      if (gated) v.gate = linear_view_of(src, row_slice(gate, merged ? 2 * e * H : e * H, H, D), H, D, none, w);
      v.up = linear_view_of(src, row_slice(up, merged ? 2 * e * H + H : e * H, H, D), H, D, none, w);
      v.down = linear_view_of(src, row_slice(down, e * D, D, H), D, H, none, w);
      w.views.push_back(v);
    }
    note_dtype(w, w.views[0]);
    return w;
  }
  for (int64_t e = 0; e < E; ++e) {
    kernels::MlpWeightsView v;
    if (gated) v.gate = ggml_rows_view(gate, merged ? 2 * e * H : e * H, H, D, w);
    v.up = ggml_rows_view(up, merged ? 2 * e * H + H : e * H, H, D, w);
    v.down = ggml_rows_view(down, e * D, D, H, w);
    w.views.push_back(v);
  }
  if (spec.expert_biases) {  // (E, out) each; expert e's row is its bias
    const float* gb = w.f32_buffers.emplace_back(load_f32(src, p + spec.gate_name + ".bias", {E, H}, why)).data();
    const float* ub = w.f32_buffers.emplace_back(load_f32(src, p + spec.up_name + ".bias", {E, H}, why)).data();
    const float* db = w.f32_buffers.emplace_back(load_f32(src, p + spec.down_name + ".bias", {E, D}, why)).data();
    for (int64_t e = 0; e < E; ++e) {
      auto& v = w.views[static_cast<size_t>(e)];
      v.gate_bias = gb + e * H;
      v.up_bias = ub + e * H;
      v.down_bias = db + e * D;
    }
  }
  w.dtype = DType::kF32;
  return w;
}

}  // namespace

kernels::Activation kernel_activation(ExpertActivation a) {
  switch (a) {
    case ExpertActivation::kSwiGLU: return kernels::Activation::kSwiGLU;
    case ExpertActivation::kClampedSwiGLU: return kernels::Activation::kClampedSwiGLU;
    case ExpertActivation::kLimitedSwiGLU: return kernels::Activation::kLimitedSwiGLU;
    case ExpertActivation::kSiluClampedSwiGLU: return kernels::Activation::kSiluClampedSwiGLU;
    case ExpertActivation::kGeGLU: return kernels::Activation::kGeGLU;
    case ExpertActivation::kGeGLUTanh: return kernels::Activation::kGeGLUTanh;
    case ExpertActivation::kReGLU: return kernels::Activation::kReGLU;
    case ExpertActivation::kSquaredReLU: return kernels::Activation::kRelu2;
  }
  HYMOE_CHECK(false, "unknown expert activation ", static_cast<int>(a));
  return kernels::Activation::kSwiGLU;
}

std::unique_ptr<kernels::GroupedFfn> make_expert_ffn(const MoELayerSpec& spec,
                                                     std::span<const kernels::MlpWeightsView> views, int64_t hidden,
                                                     const kernels::GroupedFfnOptions& options) {
  kernels::GroupedFfnShape shape{static_cast<int64_t>(views.size()), spec.dim, hidden, kernel_activation(spec.activation)};
  shape.swiglu_alpha = static_cast<float>(spec.swiglu_alpha);
  shape.swiglu_limit = static_cast<float>(spec.swiglu_limit);
  return kernels::make_grouped_ffn(shape, views, kernels::active_isa(), options);
}

std::unique_ptr<kernels::GroupedFfn> make_shared_expert_ffn(const MoELayerSpec& spec,
                                                            std::span<const kernels::MlpWeightsView> views) {
  if (!spec.shared.activation && !spec.shared.swiglu_limit) return make_expert_ffn(spec, views, spec.shared.hidden);
  MoELayerSpec with_own = spec;
  if (spec.shared.activation) with_own.activation = *spec.shared.activation;
  if (spec.shared.swiglu_limit) with_own.swiglu_limit = *spec.shared.swiglu_limit;
  return make_expert_ffn(with_own, views, spec.shared.hidden);
}

std::vector<float> load_shared_gate(const TensorSource& source, const MoELayerSpec& spec) {
  if (spec.shared.gate_weight.empty()) return {};
  const int64_t D = spec.dim;
  const Shape shape = source.tensor(spec.shared.gate_weight).shape.size() == 1 ? Shape{D} : Shape{1, D};
  return load_f32(source, spec.shared.gate_weight, shape, "hidden_size=" + std::to_string(D));
}

void shared_gate_scales(std::span<const float> gate, const float* x, int64_t tokens, float* out) {
  const auto D = static_cast<int64_t>(gate.size());
  for (int64_t t = 0; t < tokens; ++t) {
    double z = 0.0;
    for (int64_t d = 0; d < D; ++d) z += static_cast<double>(x[t * D + d]) * gate[static_cast<size_t>(d)];
    out[t] = static_cast<float>(1.0 / (1.0 + std::exp(-z)));
  }
}

std::vector<float> load_f32(const TensorSource& source, const std::string& name, const Shape& shape, const std::string& why) {
  const TensorRef t = checked_tensor(source, name, shape, why);
  std::vector<float> out(static_cast<size_t>(shape_numel(shape)));
  if (t.ggml_type && can_dequantize(*t.ggml_type)) {
    dequantize_row_ref(*t.ggml_type, t.bytes.data(), out.data(), static_cast<int64_t>(out.size()));
    return out;
  }
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) out[static_cast<size_t>(i)] = float_element(t, i);
  return out;
}

// DBRX: w1 (gate), v1 (up) and w2 (down) stacked as (E I, D) each; gate and up rows are nn.Linear rows, and an
// expert's I rows of w2 are used as h @ W, so they are an (in I, out D) matrix: the same bytes as an (out I, in D)
// view, read with the layout flipped.
ExpertWeights load_stacked_rows_experts(const TensorSource& src, const MoELayerSpec& spec, const Quantization& quant,
                                        const std::string& why) {
  const int64_t E = spec.num_experts, D = spec.dim, I = spec.hidden;
  const std::string& p = spec.experts_prefix;
  if (quant.method != Quantization::Method::kNone)
    fail(src.label(), ": quantization_config is not read for ", spec.family, "'s stacked experts");
  const TensorRef gate = checked_tensor(src, p + spec.gate_name + spec.fused_suffix, {E * I, D}, why);
  const TensorRef up = checked_tensor(src, p + spec.up_name + spec.fused_suffix, {E * I, D}, why);
  const TensorRef down = checked_tensor(src, p + spec.down_name + spec.fused_suffix, {E * I, D}, why);
  ExpertWeights w;
  for (int64_t e = 0; e < E; ++e) {
    kernels::MlpWeightsView v;
    v.gate = linear_view_of(src, row_slice(gate, e * I, I, D), I, D, quant, w);
    v.up = linear_view_of(src, row_slice(up, e * I, I, D), I, D, quant, w);
    v.down = linear_view_of(src, row_slice(down, e * I, I, D), I, D, quant, w);
    v.down.layout = WeightLayout::kInOut;  // (I, D) row-major: k = I inputs, n = D outputs
    v.down.k = I;
    v.down.n = D;
    w.views.push_back(v);
  }
  note_dtype(w, w.views[0]);
  return w;
}

ExpertWeights load_routed_experts(const TensorSource& source, const MoELayerSpec& spec, const Quantization& quant) {
  if (spec.storage == ExpertStorage::kFusedInterleavedInOut || spec.storage == ExpertStorage::kFusedConcatInOut)
    return load_fused_experts(source, spec, quant);
  const std::string why = std::to_string(spec.num_experts) + " experts, hidden_size=" + std::to_string(spec.dim) +
                          ", expert intermediate size " + std::to_string(spec.hidden);
  if (spec.storage == ExpertStorage::kFusedOutIn || spec.storage == ExpertStorage::kFusedGateUpOutIn)
    return load_fused_out_in_experts(source, spec, why);
  if (spec.storage == ExpertStorage::kStackedRowsDownInOut) return load_stacked_rows_experts(source, spec, quant, why);
  if (quant.method == Quantization::Method::kMxfp4)
    fail(source.label(), ": quant_method mxfp4 is only known for gpt-oss's fused experts, not ", spec.family);
  // kPerExpertLinear, or GGUF's split layout (each expert's tensor viewed in place like a row range of the fused one)
  return load_linear_experts(source, spec.storage, spec.experts_prefix, spec.num_experts, true,
                             {spec.gate_name, spec.up_name, spec.down_name}, spec.dim, spec.hidden, quant, why);
}

ExpertWeights load_shared_expert(const TensorSource& source, const MoELayerSpec& spec, const Quantization& quant) {
  const std::string why = "hidden_size=" + std::to_string(spec.dim) + ", shared expert intermediate size " +
                          std::to_string(spec.shared.hidden);
  if (spec.shared.merged_gate_up) {  // gate and up rows of one (2H, D) tensor
    const int64_t D = spec.dim, H = spec.shared.hidden;
    const TensorRef gate_up = checked_tensor(source, spec.shared.prefix + spec.shared.gate_name + ".weight", {2 * H, D}, why);
    const TensorRef down = checked_tensor(source, spec.shared.prefix + spec.shared.down_name + ".weight", {D, H}, why);
    for (const TensorRef* t : {&gate_up, &down})
      if (!t->ggml_type && t->dtype != DType::kF32 && t->dtype != DType::kBF16 && t->dtype != DType::kF16)
        fail(t->file, ": tensor '", t->name, "' has dtype ", dtype_name(t->dtype),
             "; a merged shared expert is read as F32, BF16, F16 or a GGUF block type");
    ExpertWeights w;
    kernels::MlpWeightsView v;
    // A GGUF tensor's rows are viewed in place (granite_swa's ffn_up_shexp); a checkpoint's are sliced.
    v.gate = gate_up.ggml_type ? ggml_rows_view(gate_up, 0, H, D, w)
                               : linear_view_of(source, row_slice(gate_up, 0, H, D), H, D, quant, w);
    v.up = gate_up.ggml_type ? ggml_rows_view(gate_up, H, H, D, w)
                             : linear_view_of(source, row_slice(gate_up, H, H, D), H, D, quant, w);
    v.down = down.ggml_type ? ggml_rows_view(down, 0, D, H, w) : linear_view_of(source, down, D, H, quant, w);
    w.views.push_back(v);
    note_dtype(w, v);
    return w;
  }
  return load_linear_experts(source, spec.storage, spec.shared.prefix, 1, false,
                             {spec.shared.gate_name, spec.shared.up_name, spec.shared.down_name}, spec.dim,
                             spec.shared.hidden, quant, why);
}

}  // namespace hymoe
