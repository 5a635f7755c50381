// Expert weight loading (see expert_loader.h). Every shape is checked against the one config.json implies, and
// every mismatch names the tensor, its file, both shapes and the config fields behind the expected one.
#include "models/expert_loader.h"

#include <cstring>

#include "hymoe/error.h"
#include "hymoe/quant_decode.h"

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

std::string fp8_scale_name(const std::string& weight_name) { return weight_name + "_scale_inv"; }

// One nn.Linear (out, in) matrix of an expert as a kernel view (k = in, n = out).
MatrixView linear_view(const TensorSource& src, const std::string& name, int64_t out, int64_t in,
                       const Quantization& quant, const std::string& why, ExpertWeights& w) {
  const TensorRef t = checked_tensor(src, name, {out, in}, why);
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

ExpertWeights load_linear_experts(const TensorSource& src, const std::string& prefix, int64_t count, bool numbered,
                                  const MoELayerSpec& spec, int64_t D, int64_t H, const Quantization& quant,
                                  const std::string& why) {
  ExpertWeights w;
  for (int64_t e = 0; e < count; ++e) {
    const std::string p = prefix + (numbered ? std::to_string(e) + "." : "");
    kernels::MlpWeightsView v;
    v.gate = linear_view(src, p + spec.gate_name + ".weight", H, D, quant, why, w);
    v.up = linear_view(src, p + spec.up_name + ".weight", H, D, quant, why, w);
    v.down = linear_view(src, p + spec.down_name + ".weight", D, H, quant, why, w);
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
  // Biases: gate_up_proj_bias (E, 2I) interleaved, down_proj_bias (E, D).
  const TensorRef gub = checked_tensor(src, p + "gate_up_proj_bias", {E, 2 * I}, why);
  const TensorRef db = checked_tensor(src, p + "down_proj_bias", {E, D}, why);
  for (int64_t e = 0; e < E; ++e) {
    auto& gb = w.f32_buffers.emplace_back(static_cast<size_t>(I));
    auto& ub = w.f32_buffers.emplace_back(static_cast<size_t>(I));
    auto& dbv = w.f32_buffers.emplace_back(static_cast<size_t>(D));
    for (int64_t i = 0; i < I; ++i) {
      gb[static_cast<size_t>(i)] = float_element(gub, e * 2 * I + 2 * i);
      ub[static_cast<size_t>(i)] = float_element(gub, e * 2 * I + 2 * i + 1);
    }
    for (int64_t d = 0; d < D; ++d) dbv[static_cast<size_t>(d)] = float_element(db, e * D + d);
    auto& v = w.views[static_cast<size_t>(e)];
    v.gate_bias = gb.data();
    v.up_bias = ub.data();
    v.down_bias = dbv.data();
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
    const TensorRef gu = checked_tensor(src, p + "gate_up_proj", {E, D, 2 * I}, why);
    const TensorRef dn = checked_tensor(src, p + "down_proj", {E, I, D}, why);
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
      v.gate = MatrixView{matrix_copy([&](int64_t d, int64_t i) { return float_element(gu, gu0 + d * 2 * I + 2 * i); }, D, I),
                          kept, WeightLayout::kInOut, D, I, {}};
      v.up = MatrixView{matrix_copy([&](int64_t d, int64_t i) { return float_element(gu, gu0 + d * 2 * I + 2 * i + 1); }, D, I),
                        kept, WeightLayout::kInOut, D, I, {}};
      v.down = MatrixView{matrix_copy([&](int64_t i, int64_t d) { return float_element(dn, dn0 + i * D + d); }, I, D),
                          kept, WeightLayout::kInOut, I, D, {}};
    }
    w.dtype = kept;
  }
  w.weight_elements = E * 3 * D * I;
  return w;
}

}  // namespace

std::vector<float> load_f32(const TensorSource& source, const std::string& name, const Shape& shape, const std::string& why) {
  const TensorRef t = checked_tensor(source, name, shape, why);
  std::vector<float> out(static_cast<size_t>(shape_numel(shape)));
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) out[static_cast<size_t>(i)] = float_element(t, i);
  return out;
}

ExpertWeights load_routed_experts(const TensorSource& source, const MoELayerSpec& spec, const Quantization& quant) {
  if (spec.storage == ExpertStorage::kFusedInterleavedInOut) return load_fused_experts(source, spec, quant);
  const std::string why = std::to_string(spec.num_experts) + " experts, hidden_size=" + std::to_string(spec.dim) +
                          ", expert intermediate size " + std::to_string(spec.hidden);
  if (quant.method == Quantization::Method::kMxfp4)
    fail(source.label(), ": quant_method mxfp4 is only known for gpt-oss's fused experts, not ", spec.family);
  return load_linear_experts(source, spec.experts_prefix, spec.num_experts, true, spec, spec.dim, spec.hidden, quant, why);
}

ExpertWeights load_shared_expert(const TensorSource& source, const MoELayerSpec& spec, const Quantization& quant) {
  const std::string why = "hidden_size=" + std::to_string(spec.dim) + ", shared expert intermediate size " +
                          std::to_string(spec.shared.hidden);
  return load_linear_experts(source, spec.shared.prefix, 1, false, spec, spec.dim, spec.shared.hidden, quant, why);
}

}  // namespace hymoe
