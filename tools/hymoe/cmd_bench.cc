// `hymoe bench`: the MoE layer on real model shapes (bench/shapes/*.json) against the machine's own limits,
// measured in the same run, and against the OpenBLAS-per-expert baseline. Medians of repeated runs; --json
// writes one object per line per measurement (docs/performance.md describes the method and the fields).
//
// The timed layer is MoELayer::forward's: the router, the dispatch, then run_expert_pass (the expert half every
// forward runs: routed grouped FFN with the gather fused, combine, shared expert), but with its routing taken from
// the benchmark (uniform or Zipf) so every configuration routes the same way whatever the random router weights
// say; the router still runs in full.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>

#include "bench_quantize.h"
#include "bench_ep.h"
#include "bench_shape.h"
#include "commands.h"
#include "model_commands.h"
#include "hymoe/compute.h"
#include "hymoe/error.h"
#include "hymoe/ggml_type.h"
#include "hymoe/moe.h"
#include "hymoe/quant_encode.h"
#include "hymoe/rng.h"
#include "hymoe/threads.h"
#include "kernels/driver/gemm_driver.h"
#include "kernels/formats/gemm_kernels.h"
#include "kernels/ffn/grouped_ffn.h"
#include "kernels/ffn/grouped_ffn_impl.h"
#include "kernels/driver/thread_pool.h"
#include "kernels/driver/workspace.h"
#include "moe/dispatch.h"
#include "moe/expert_pass.h"

#ifdef HYMOE_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace hymoe::tool {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---- machine limits, measured in this run --------------------------------------------------------------------

struct Limits {
  double peak_gflops = 0, read_gbps = 0, kernel_gflops = 0;
  double bf16_dot_gflops = 0, int8_dot_gops = 0;  // 0 where the ISA lacks the instruction
};

// The compute peak that bounds a weight format's GEMMs: f32 FMA for f32 and widened bf16, the bf16 dot product
// (vdpbf16ps) for native bf16, the int8 dot product (vpdpbusd, or the vpmaddubsw idiom without VNNI) for q8.
enum class PeakKind { kFma, kBf16Dot, kInt8Dot };
const char* peak_name(PeakKind k) { return k == PeakKind::kFma ? "fma" : k == PeakKind::kBf16Dot ? "bf16dot" : "int8dot"; }

// The active ISA's probes; under HYMOE_ISA=scalar, AVX2's (the probes only need the CPU to have some vector ISA).
const kernels::IsaKernels& probe_kernels() {
  const kernels::IsaKernels* ik = kernels::isa_kernels(kernels::active_isa());
  return ik ? *ik : *kernels::isa_kernels(kernels::Isa::kAvx2);
}

// A buffer of ones far beyond the last-level cache, read in timed passes over all threads: the read-bandwidth
// probe, and (before every cold repeat) the pass that evicts the caches. A pass reads each chunk as one stream,
// or as `streams` regions of it interleaved a cache line at a time (the decode kernel's pattern).
class ReadBuffer {
 public:
  ReadBuffer(int64_t floats, int64_t chunks)
      : floats_(floats), chunks_(chunks), buf_(new float[static_cast<size_t>(floats)]) {
    const int64_t chunk = floats_ / chunks_;
    kernels::parallel_for(chunks_, [&](int64_t c, int) { std::fill(buf_.get() + c * chunk, buf_.get() + (c + 1) * chunk, 1.0f); });
  }
  // One pass; returns its bandwidth in GB/s.
  double read_gbps(int streams) const {
    const kernels::IsaKernels& ik = probe_kernels();
    const int64_t chunk = floats_ / chunks_;
    std::vector<float> sums(static_cast<size_t>(chunks_));
    const auto t0 = Clock::now();
    kernels::parallel_for(chunks_, [&](int64_t c, int) {
      const float* base = buf_.get() + c * chunk;
      sums[static_cast<size_t>(c)] = streams == 1 ? ik.sum_probe(base, chunk)
                                                  : ik.sum_probe_streams(base, chunk / streams, streams, chunk / streams);
    });
    const double gbps = static_cast<double>(floats_) * 4 / (ms_since(t0) * 1e6);
    if (std::accumulate(sums.begin(), sums.end(), 0.0) != static_cast<double>(floats_)) fail("read probe: wrong sum");
    return gbps;
  }

 private:
  int64_t floats_, chunks_;
  std::unique_ptr<float[]> buf_;
};

// One pass of the FMA probe on every thread: GFLOP/s.
double probe_peak_once(int64_t iters, PeakKind kind = PeakKind::kFma) {
  const kernels::IsaKernels& ik = probe_kernels();
  auto probe = kind == PeakKind::kFma ? ik.fma_probe : kind == PeakKind::kBf16Dot ? ik.bf16_dot_probe : ik.int8_dot_probe;
  if (!probe) return 0.0;
  const int threads = num_threads();
  std::vector<float> sink(static_cast<size_t>(64 * std::max(threads, 1)));
  const int64_t tasks = 8 * threads;
  std::vector<double> flops(static_cast<size_t>(tasks));
  const auto t0 = Clock::now();
  kernels::parallel_for(tasks, [&](int64_t t, int thread) {
    flops[static_cast<size_t>(t)] = probe(iters, sink.data() + 64 * thread);
  });
  return std::accumulate(flops.begin(), flops.end(), 0.0) / (ms_since(t0) * 1e6);
}

// One pass of the f32 micro-kernel, hot in L1 (one full MR x NR tile over the driver's KC, again and again), on
// every thread: GFLOP/s. It is what the layer's GEMMs could reach if nothing but their own arithmetic mattered.
// The FMA probe's register-only chains do not feel a neighbour that takes issue slots, load ports or L1 from the
// kernels (a micro-kernel with a test per k step swings well below the FMA probe under a busy neighbour while the
// probe stays flat: docs/performance.md, "Kernel design measurements"), so the layer is also given as a fraction
// of this.
double probe_kernel_once(int64_t calls) {
  const kernels::IsaKernels& ik = probe_kernels();
  const int threads = num_threads();
  const int64_t kc = kernels::kKc, tasks = 8 * threads;
  const int64_t a_size = ik.mr * kc, b_size = kc * ik.nr, c_size = ik.mr * ik.nr;
  // Per thread: its A panel, weight panel and C tile (64-float gaps keep the threads' lines apart).
  const int64_t stride = a_size + b_size + c_size + 64;
  std::vector<float> buf(static_cast<size_t>(stride * threads));
  for (int64_t th = 0; th < threads; ++th) {
    std::fill_n(buf.begin() + th * stride, a_size, 0.5f);
    std::fill_n(buf.begin() + th * stride + a_size, b_size, 0.25f);
  }
  const auto t0 = Clock::now();
  kernels::parallel_for(tasks, [&](int64_t, int thread) {
    float* a = buf.data() + thread * stride;
    for (int64_t i = 0; i < calls; ++i) ik.gemm_f32w(ik.mr, kc, a, a + a_size, a + a_size + b_size, ik.nr, false, nullptr, 0);
  });
  const double ms = ms_since(t0);
  for (int64_t th = 0; th < threads; ++th)  // every C element is 0.5 * 0.25 summed kc times, exactly
    if (buf[static_cast<size_t>(th * stride + a_size + b_size)] != 0.125f * static_cast<float>(kc))
      fail("micro-kernel probe: wrong result");
  return 2.0 * static_cast<double>(tasks * calls * ik.mr * ik.nr * kc) / (ms * 1e6);
}
constexpr int64_t kKernelProbeCalls = 1'024'000 / kernels::kKc;  // about 200 MFLOP per task on AVX2

Limits measure_limits() {
  Limits l;
  for (int rep = 0; rep < 5; ++rep) l.peak_gflops = std::max(l.peak_gflops, probe_peak_once(2'000'000));
  for (int rep = 0; rep < 5; ++rep) l.kernel_gflops = std::max(l.kernel_gflops, probe_kernel_once(kKernelProbeCalls));
  for (int rep = 0; rep < 5; ++rep) l.bf16_dot_gflops = std::max(l.bf16_dot_gflops, probe_peak_once(1'000'000, PeakKind::kBf16Dot));
  for (int rep = 0; rep < 5; ++rep) l.int8_dot_gops = std::max(l.int8_dot_gops, probe_peak_once(1'000'000, PeakKind::kInt8Dot));
  // Streaming reads in three patterns; the best pass is the limit. One sequential stream per thread under-reads
  // this machine: the decode kernel, which reads four weight panels side by side, read faster than it. So the
  // probe also reads 4 and 8 regions of each chunk interleaved a cache line at a time, the decode kernel's pattern.
  const ReadBuffer probe(int64_t{1} << 27, 256);  // 512 MiB
  for (const int streams : {1, 4, 8})
    for (int rep = 0; rep < 5; ++rep) l.read_gbps = std::max(l.read_gbps, probe.read_gbps(streams));
  return l;
}

// Cold weights must come from memory, but a shape's shared expert (read by every token) can fit in the last-level
// cache and would stay there between repeats. A read pass over a buffer several times the LLC's size before each
// cold repeat (untimed for the layer) evicts it, and its bandwidth is a probe taken in the same moment.
ReadBuffer make_cache_evictor() { return ReadBuffer(int64_t{256} << 18, 64); }  // 256 MiB

// ---- weights and routings --------------------------------------------------------------------------------------

// Uniform values in [-scale, scale), from a cheap counter hash: filling gigabytes with Box-Muller would dominate.
void fill_uniform(float* p, int64_t n, float scale, uint64_t seed) {
  const int64_t chunks = 256, per = (n + chunks - 1) / chunks;
  kernels::parallel_for(chunks, [&](int64_t c, int) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(c) * 0xBF58476D1CE4E5B9ull + 1;
    for (int64_t i = c * per; i < std::min(n, (c + 1) * per); ++i) {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      p[i] = scale * (static_cast<float>(s >> 40) * 0x1p-23f - 1.0f);
    }
  });
}

// One shape's expert weights in nn.Linear layout: routed experts, then the shared MLP (its hidden width is
// shared_experts * expert_hidden, as DeepSeek fuses its shared experts). f32 always (the baseline needs it); a
// bf16 copy when asked.
struct ShapeWeights {
  BenchShape shape;
  int64_t shared_hidden = 0;
  std::vector<float> routed;   // (E, 3, H*D): gate (H, D), up (H, D), down (D, H)
  std::vector<float> shared;   // 3 matrices of shared_hidden x D
  std::vector<uint16_t> routed_bf16, shared_bf16;
  Tensor router_gate;          // (E, D)

  const float* mat(int64_t e, int which) const { return routed.data() + (e * 3 + which) * shape.hidden * shape.dim; }
};

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  const int64_t n = static_cast<int64_t>(v.size()), chunks = 64, per = (n + chunks - 1) / chunks;
  kernels::parallel_for(chunks, [&](int64_t c, int) {
    for (int64_t i = c * per; i < std::min(n, (c + 1) * per); ++i) out[static_cast<size_t>(i)] = float_to_bf16(v[static_cast<size_t>(i)]);
  });
  return out;
}

// GGUF block weights (--dtype q4_0, q4_k, ..., gguf_q8_0: every registry type): the bench's f32 weights encoded into
// that type by the simple encoders (quant_encode.h), each matrix row by row, and run from the GGUF panel formats.
struct GgufWeights {
  uint32_t first_type = 0, down_type = 0;  // gate/up and down: the asked type, or llama-quantize's fallback
                                           // where K is not a multiple of its block (gguf_type_for_rows)
  std::vector<std::byte> routed, shared;   // (E, 3) matrices, each gate/up then down at gate_bytes apart
};

// The --dtype name of a GGUF type: its name in lower case, "gguf_q8_0" for Q8_0 ("q8_0" is hymoe's own blocks).
std::string gguf_dtype_name(const kernels::GgufBlockFormat& b) {
  std::string name = b.type_name;
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name == "q8_0" ? "gguf_q8_0" : name;
}

// The ggml type of a --dtype naming a type of the kernels' registry, or 0.
uint32_t gguf_dtype_type(const std::string& dtype) {
  for (const kernels::GgufBlockFormat& b : kernels::kGgufBlockFormats)
    if (dtype == gguf_dtype_name(b)) return b.ggml_type;
  return 0;
}

// "q4_0, q4_1, ..., gguf_q8_0": the GGUF --dtype names, for the help and errors.
std::string gguf_dtype_names() {
  std::string names;
  for (const kernels::GgufBlockFormat& b : kernels::kGgufBlockFormats)
    names += (names.empty() ? "" : ", ") + gguf_dtype_name(b);
  return names;
}

// The type llama-quantize stores a matrix of rows of k values in when `type` is asked for (llama-quant.cpp's
// tensor_type_fallback at 0c1e57098, the peers' pin): `type` where k is a multiple of its block, else Q4_K -> Q5_0,
// Q5_K -> Q5_1, IQ4_XS and the IQ1/IQ2/IQ3 types -> IQ4_NL, Q2_K, Q3_K, TQ1_0 and TQ2_0 -> Q4_0, any other -> Q8_0
// (Q6_K's fallback; the bench's shapes have k a multiple of 32).
uint32_t gguf_type_for_rows(uint32_t type, int64_t k) {
  if (k % ggml_type_traits(type)->block_values == 0) return type;
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kQ4_K: return static_cast<uint32_t>(GgmlType::kQ5_0);
    case GgmlType::kQ5_K: return static_cast<uint32_t>(GgmlType::kQ5_1);
    case GgmlType::kIQ4_XS:
    case GgmlType::kIQ1_S:
    case GgmlType::kIQ1_M:
    case GgmlType::kIQ2_XXS:
    case GgmlType::kIQ2_XS:
    case GgmlType::kIQ2_S:
    case GgmlType::kIQ3_XXS:
    case GgmlType::kIQ3_S: return static_cast<uint32_t>(GgmlType::kIQ4_NL);
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kTQ1_0:
    case GgmlType::kTQ2_0: return static_cast<uint32_t>(GgmlType::kQ4_0);
    default: return static_cast<uint32_t>(GgmlType::kQ8_0);
  }
}

// Bytes of one (n, k) matrix of `type`, and `count` MLPs of f32 weights (E, 3, H*D) encoded matrix by matrix.
int64_t gguf_matrix_bytes(uint32_t type, int64_t k, int64_t n) {
  const GgmlTypeTraits& t = *ggml_type_traits(type);
  return n * (k / t.block_values) * t.block_bytes;
}
std::vector<std::byte> encode_mlps(const float* f32, int64_t count, int64_t D, int64_t H, uint32_t first,
                                   uint32_t down) {
  const int64_t first_bytes = gguf_matrix_bytes(first, D, H), down_bytes = gguf_matrix_bytes(down, H, D);
  std::vector<std::byte> out(static_cast<size_t>(count * (2 * first_bytes + down_bytes)));
  kernels::parallel_for(count * 3, [&](int64_t m, int) {
    const int64_t e = m / 3, which = m % 3;
    std::byte* dst = out.data() + e * (2 * first_bytes + down_bytes) + which * first_bytes;
    quantize_row_simple(which == 2 ? down : first, f32 + m * H * D, H * D, dst);
  });
  return out;
}

std::vector<kernels::MlpWeightsView> mlp_views(const void* base, DType dt, int64_t count, int64_t D, int64_t H,
                                               const GgufWeights* gguf = nullptr) {
  const size_t elem = dt == DType::kBF16 ? 2 : 4;
  const int64_t first_bytes = gguf ? gguf_matrix_bytes(gguf->first_type, D, H) : static_cast<int64_t>(H * D * elem);
  const int64_t down_bytes = gguf ? gguf_matrix_bytes(gguf->down_type, H, D) : first_bytes;
  std::vector<kernels::MlpWeightsView> views;
  for (int64_t e = 0; e < count; ++e) {
    auto at = [&](int which) { return static_cast<const char*>(base) + e * (2 * first_bytes + down_bytes) + which * first_bytes; };
    kernels::MlpWeightsView v;
    v.gate = {at(0), dt, kernels::WeightLayout::kOutIn, D, H, {}};
    v.up = {at(1), dt, kernels::WeightLayout::kOutIn, D, H, {}};
    v.down = {at(2), dt, kernels::WeightLayout::kOutIn, H, D, {}};
    if (gguf) {
      v.gate.quant = v.up.quant = {kernels::QuantScheme::kGgml, gguf->first_type};
      v.down.quant = {kernels::QuantScheme::kGgml, gguf->down_type};
    }
    views.push_back(v);
  }
  return views;
}

// top_k distinct experts per token. Uniform, or Zipf: expert e drawn with weight (e+1)^-s, without replacement,
// s tuned so the most popular expert receives a third of the tokens.
std::vector<int32_t> make_indices(const BenchShape& s, int64_t T, bool zipf, double zipf_s, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> idx(static_cast<size_t>(T * s.top_k));
  std::vector<double> w(static_cast<size_t>(s.experts));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < s.experts; ++e) w[static_cast<size_t>(e)] = zipf ? std::pow(static_cast<double>(e + 1), -zipf_s) : 1.0;
    for (int64_t k = 0; k < s.top_k; ++k) {
      double total = 0;
      for (double x : w) total += x;
      double u = rng.uniform() * total;
      int64_t e = 0;
      while (e + 1 < s.experts && (u -= w[static_cast<size_t>(e)]) >= 0) ++e;
      while (w[static_cast<size_t>(e)] == 0) e = (e + 1) % s.experts;  // rounding landed on a taken expert
      idx[static_cast<size_t>(t * s.top_k + k)] = static_cast<int32_t>(e);
      w[static_cast<size_t>(e)] = 0;
    }
  }
  return idx;
}

double tune_zipf(const BenchShape& s) {
  double lo = 0.0, hi = 4.0;
  for (int it = 0; it < 20; ++it) {
    const double mid = 0.5 * (lo + hi);
    const int64_t T = 1024;
    const auto idx = make_indices(s, T, true, mid, 12345);
    const double share = static_cast<double>(std::count(idx.begin(), idx.end(), 0)) / static_cast<double>(T);
    (share < 1.0 / 3.0 ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// ---- the timed layer ---------------------------------------------------------------------------------------------

// The OpenBLAS baseline's expert MLPs of one layer: (tokens' rows x, dispatch, scale) -> sorted rows out, and the
// shared MLP on every token.
struct ExpertStep {
  std::function<void(const Dispatch&, const float* x, const float* scale, float* out)> routed;
  std::function<void(int64_t T, const float* x, float* out)> shared;  // empty when the shape has none
};

struct LayerTimes {
  double layer_ms = 0, expert_ms = 0;
};

// What the timed layer runs after routing: hymoe's kernels through run_expert_pass, the expert half of every
// forward (MoELayer's and ModelMoELayer's), or the baseline's own assembly.
struct ExpertHalf {
  const kernels::GroupedFfn* routed = nullptr;  // hymoe
  const kernels::GroupedFfn* shared = nullptr;
  const ExpertStep* baseline = nullptr;         // or the OpenBLAS baseline
};

LayerTimes run_layer(Router& router, const Tensor& x2, const std::vector<int32_t>& indices, int64_t K,
                     const ExpertHalf& half, Tensor& y) {
  const int64_t T = x2.dim(0), D = x2.dim(1);
  LayerTimes lt;
  const auto t0 = Clock::now();
  Routing routing = router.route(x2, Mode::kEval);
  routing.indices = indices;  // the benchmark's routing; the router's arithmetic has been paid for
  routing.weights = routing.router_weights;
  routing.dropped.assign(indices.size(), 0);
  const Dispatch dispatch = build_dispatch(routing);
  std::vector<float> scale(static_cast<size_t>(dispatch.rows()));
  for (int64_t r = 0; r < dispatch.rows(); ++r)
    scale[static_cast<size_t>(r)] = routing.weights[static_cast<size_t>(dispatch.row_token[static_cast<size_t>(r)] * K + dispatch.row_slot[static_cast<size_t>(r)])];
  if (half.routed) {
    // The expert time is read off the pass's stage boundaries: its start to the routed experts' output, and the
    // combined output to the shared expert's.
    ExpertPassArgs a;
    a.routed = half.routed;
    a.shared = half.shared;
    a.x = x2.data();
    a.num_tokens = T;
    a.top_k = K;
    a.dispatch = &dispatch;
    a.row_scale = scale.data();
    a.y = y.data();
    auto stage_start = Clock::now();
    a.check_stage = [&](const char* stage, const float*, int64_t, int64_t, const char*) {
      const std::string_view s = stage;
      if (s == "routed expert outputs" || s == "shared expert outputs") lt.expert_ms += ms_since(stage_start);
      if (s == "combined routed outputs") stage_start = Clock::now();
    };
    run_expert_pass(a);
    lt.layer_ms = ms_since(t0);
    return lt;
  }
  const ExpertStep& step = *half.baseline;
  const kernels::WorkspaceLease ws;  // the temporaries as run_expert_pass takes them
  const kernels::Workspace::Scope scope(*ws);
  float* const out = ws->floats(dispatch.rows() * D);
  auto te = Clock::now();
  step.routed(dispatch, x2.data(), scale.data(), out);
  lt.expert_ms += ms_since(te);
  combine_rows(out, D, dispatch, T, K, y.data());
  if (step.shared) {
    float* const sh = ws->floats(T * D);
    te = Clock::now();
    step.shared(T, x2.data(), sh);
    lt.expert_ms += ms_since(te);
    for (int64_t i = 0; i < T * D; ++i) y[i] += sh[i];
  }
  lt.layer_ms = ms_since(t0);
  return lt;
}

#ifdef HYMOE_HAVE_OPENBLAS
// What a user without hymoe writes: per expert, cblas_sgemm for gate, up and down, an elementwise SwiGLU and the
// row scale, on the f32 weights.
void blas_mlp(int64_t m, int64_t D, int64_t H, const float* x, const float* wg, const float* wu, const float* wd,
              const float* scale, float* out, std::vector<float>& g, std::vector<float>& u) {
  g.resize(static_cast<size_t>(m * H));
  u.resize(static_cast<size_t>(m * H));
  const int mi = static_cast<int>(m), Di = static_cast<int>(D), Hi = static_cast<int>(H);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mi, Hi, Di, 1.0f, x, Di, wg, Di, 0.0f, g.data(), Hi);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mi, Hi, Di, 1.0f, x, Di, wu, Di, 0.0f, u.data(), Hi);
  for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mi, Di, Hi, 1.0f, g.data(), Hi, wd, Hi, 0.0f, out, Di);
  if (scale)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t d = 0; d < D; ++d) out[r * D + d] *= scale[r];
}

ExpertStep blas_step(const ShapeWeights& w) {
  ExpertStep s;
  const int64_t D = w.shape.dim, H = w.shape.hidden;
  s.routed = [&w, D, H](const Dispatch& d, const float* x, const float* scale, float* out) {
    const std::vector<float> xs = gather_rows(x, D, d);  // a user's gather into expert order
    std::vector<float> g, u;
    for (int64_t e = 0; e < w.shape.experts; ++e) {
      const int64_t r0 = d.offsets[static_cast<size_t>(e)], m = d.offsets[static_cast<size_t>(e + 1)] - r0;
      if (m > 0) blas_mlp(m, D, H, xs.data() + r0 * D, w.mat(e, 0), w.mat(e, 1), w.mat(e, 2), scale + r0, out + r0 * D, g, u);
    }
  };
  if (w.shared_hidden > 0)
    s.shared = [&w, D](int64_t T, const float* x, float* out) {
      std::vector<float> g, u;
      const int64_t SH = w.shared_hidden;
      blas_mlp(T, D, SH, x, w.shared.data(), w.shared.data() + SH * D, w.shared.data() + 2 * SH * D, nullptr, out, g, u);
    };
  return s;
}
#endif

// ---- the command ---------------------------------------------------------------------------------------------------

struct BenchOptions {
  std::vector<std::string> shapes;
  std::vector<int64_t> tokens{1, 8, 32, 128, 512};
  std::vector<std::string> dtypes{"f32", "bf16"};
  std::vector<std::string> routings{"uniform"};
  std::string weights = "cold";
  int threads = 0;
  int repeats = 0;
  bool json = false;
  bool baseline = true;
  std::string shapes_dir = HYMOE_BENCH_SHAPES_DIR;
  std::string model_dir;  // --model: a released checkpoint's layer instead of synthetic shapes
  int64_t layer = -1;
  int ep = 0;  // --ep N: the expert-parallel layer over MPI, under mpirun -np N
  bool train = false;  // --train (with --ep): a training step
};

int64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return int64_t{1} << 40;
}

std::vector<std::string> all_shape_names(const std::string& dir) {
  std::vector<std::string> names;
  if (!std::filesystem::is_directory(dir)) fail("--shapes-dir=", dir, " is not a directory");
  for (const auto& f : std::filesystem::directory_iterator(dir))
    if (f.path().extension() == ".json") names.push_back(f.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

void print_header() {
  fmt::print("{:<17} {:>5} {:<5} {:<7} {:>9} {:>9} {:>8} {:>7} {:>7} {:>7} {:>7} {:>13} {:>9} {:>6} {:>9} {:>6}\n",
             "shape", "T", "dtype", "routing", "layer ms", "tok/s", "GFLOP/s", "GB/s", "%peak", "%kern", "%bw",
             "%bound", "expert ms", "disp%", "blas ms", "speed");
}

// Runs every configuration of one shape, printing a table row (and a JSON line) for each.
void bench_shape(const BenchOptions& o, const BenchShape& s, const Limits& lim, const ReadBuffer& evictor,
                 std::vector<nlohmann::json>& out) {
  const int64_t D = s.dim, H = s.hidden, E = s.experts, K = s.top_k;
  const int64_t per_mlp = 3 * D * H;
  // f32 weights + their packed copy, or f32 + a bf16 copy + its packed copy: 8 bytes a weight either way.
  const double need = static_cast<double>(E + s.shared) * static_cast<double>(per_mlp) * 8;
  if (need > 0.5 * static_cast<double>(mem_available_bytes())) {  // leave the rest to the machine's other users
    // With --json, stdout carries only measurement objects, so the notice goes to stderr.
    fmt::print(o.json ? stderr : stdout,
               "{:<17} skipped: needs about {:.1f} GiB of weights, this machine has {:.1f} GiB available\n", s.name,
               need / (1 << 30), static_cast<double>(mem_available_bytes()) / (1 << 30));
    return;
  }
  ShapeWeights w;
  w.shape = s;
  w.shared_hidden = s.shared * H;
  w.routed.resize(static_cast<size_t>(E * per_mlp));
  fill_uniform(w.routed.data(), E * per_mlp, 1.0f / std::sqrt(static_cast<float>(D)), 1);
  w.shared.resize(static_cast<size_t>(3 * D * w.shared_hidden));
  fill_uniform(w.shared.data(), static_cast<int64_t>(w.shared.size()), 1.0f / std::sqrt(static_cast<float>(D)), 2);

  MoEConfig cfg;
  cfg.dim = D;
  cfg.hidden_dim = H;
  cfg.num_experts = E;
  cfg.top_k = K;
  cfg.activation = "silu";
  cfg.router_type = "softmax_topk";
  const auto router = make_router(cfg);
  for (auto& [name, t] : router->named_tensors())
    if (name == "gate.weight") fill_uniform(t->data(), t->numel(), 1.0f / std::sqrt(static_cast<float>(D)), 3);
  const double zipf_s = tune_zipf(s);

  for (const std::string& dtype : o.dtypes) {
    // bf16 follows --bf16-compute; bf16w and bf16n force the widening and the native kernels; q8_0 quantizes the
    // f32 weights into hymoe's q8 blocks (32 weights, an f32 scale) when packing.
    const DType dt = dtype.starts_with("bf16") ? DType::kBF16 : DType::kF32;
    kernels::GroupedFfnOptions ffn_options;
    if (dtype == "bf16w") ffn_options.bf16 = Bf16Compute::kWiden;
    if (dtype == "bf16n") ffn_options.bf16 = Bf16Compute::kNative;
    ffn_options.quantize_q8 = dtype == "q8_0";
    std::optional<GgufWeights> gguf;
    if (const uint32_t type = gguf_dtype_type(dtype)) {
      gguf.emplace();
      gguf->first_type = gguf_type_for_rows(type, D);
      gguf->down_type = gguf_type_for_rows(type, H);
      if (!o.json && (gguf->first_type != type || gguf->down_type != type))
        fmt::print("{:<17} {}: K = {} is not a multiple of {}'s block; those matrices are {}, as llama-quantize "
                   "stores them\n",
                   s.name, dtype, gguf->first_type != type ? D : H, ggml_type_name(type),
                   ggml_type_name(gguf->first_type != type ? gguf->first_type : gguf->down_type));
      gguf->routed = encode_mlps(w.routed.data(), E, D, H, gguf->first_type, gguf->down_type);
      if (w.shared_hidden > 0)
        gguf->shared = encode_mlps(w.shared.data(), 1, D, w.shared_hidden, gguf->first_type,
                                   gguf_type_for_rows(type, w.shared_hidden));
    }
    // fp8 and mxfp4 quantize the f32 weights as DeepSeek-V3 and gpt-oss checkpoints store them (bench_quantize.h);
    // the kernels keep them in their compact panels.
    const bool block_quantized = dtype == "fp8" || dtype == "mxfp4";
    // (The views only tell the choice their dtype; it reads no weights.)
    const auto probe_views = mlp_views(gguf ? static_cast<const void*>(gguf->routed.data()) : w.routed.data(), dt, 1, D,
                                       H, gguf ? &*gguf : nullptr);
    const kernels::WeightFormat format =
        kernels::active_isa() == kernels::Isa::kScalar ? kernels::WeightFormat::kF32
        : dtype == "fp8"   ? kernels::quantized_compute_format(kernels::WeightFormat::kFp8Block128, kernels::active_isa(), ffn_options)
        : dtype == "mxfp4" ? kernels::quantized_compute_format(kernels::WeightFormat::kMxfp4Block32, kernels::active_isa(), ffn_options)
            : kernels::choose_weight_format(probe_views, kernels::active_isa(), ffn_options);
    // The GGUF types and mxfp4 follow --quant-compute: their int8 formats are bound by the int8-dot peak.
    const bool int8_dot = format == kernels::WeightFormat::kQ8Block32 || kernels::is_gguf_int8_format(format);
    const PeakKind peak_kind = format == kernels::WeightFormat::kBf16Dot || format == kernels::WeightFormat::kFp8Block128Dot
                                   ? PeakKind::kBf16Dot
                               : int8_dot                                ? PeakKind::kInt8Dot
                                                                         : PeakKind::kFma;
    // Bytes a packed weight occupies: 4 (f32), 2 (bf16), 36/32 (q8: 32 int8 and a 4-byte scale per block); the
    // panel bytes of a GGUF format (gate/up and down weighted 2:1), of fp8 (128 codes and a 4-byte multiplier per
    // column and 128 k) and of mxfp4 (16 bytes of codes and a scale byte per 32) (docs/kernels.md, "Formats").
    auto panel_bytes_per_weight = [](kernels::WeightFormat f) {
      return static_cast<double>(kernels::weight_unit_bytes(f, 16)) / (kernels::k_unit(f) * 16.0);
    };
    const double elem = gguf && kernels::gguf_format_type(format) != 0
                            ? (2 * panel_bytes_per_weight(format) +
                               panel_bytes_per_weight(
                                   kernels::choose_down_format(probe_views, kernels::active_isa(), ffn_options))) / 3
                        : ffn_options.quantize_q8 ? 36.0 / 32
                        : block_quantized         ? panel_bytes_per_weight(format)
                        : dt == DType::kBF16      ? 2.0
                                                  : 4.0;
    QuantizedExperts routed_q, shared_q;
    if (block_quantized) {
      routed_q = quantize_experts(w.routed.data(), E, D, H, dtype == "fp8");
      if (w.shared_hidden > 0) shared_q = quantize_experts(w.shared.data(), 1, D, w.shared_hidden, dtype == "fp8");
    }
    if (dt == DType::kBF16) {
      w.routed_bf16 = to_bf16(w.routed);
      w.shared_bf16 = to_bf16(w.shared);
    }
    const void* routed_base = gguf                    ? static_cast<const void*>(gguf->routed.data())
                              : dt == DType::kBF16    ? static_cast<const void*>(w.routed_bf16.data())
                                                      : w.routed.data();
    const void* shared_base = gguf                    ? static_cast<const void*>(gguf->shared.data())
                              : dt == DType::kBF16    ? static_cast<const void*>(w.shared_bf16.data())
                                                      : w.shared.data();
    const auto routed_views =
        block_quantized ? routed_q.views : mlp_views(routed_base, dt, E, D, H, gguf ? &*gguf : nullptr);
    const auto routed_ffn =
        kernels::make_grouped_ffn({E, D, H, kernels::Activation::kSwiGLU}, routed_views, kernels::active_isa(), ffn_options);
    std::unique_ptr<kernels::GroupedFfn> shared_ffn;
    if (w.shared_hidden > 0) {
      GgufWeights shared_types;
      if (gguf) shared_types = {gguf->first_type, gguf_type_for_rows(gguf_dtype_type(dtype), w.shared_hidden), {}, {}};
      const auto sv = block_quantized ? shared_q.views
                                      : mlp_views(shared_base, dt, 1, D, w.shared_hidden, gguf ? &shared_types : nullptr);
      shared_ffn = kernels::make_grouped_ffn({1, D, w.shared_hidden, kernels::Activation::kSwiGLU}, sv,
                                             kernels::active_isa(), ffn_options);
    }
    // The packed kernels own their weights now: drop the bf16 source (the f32 one feeds the baseline).
    w.routed_bf16 = {};
    w.shared_bf16 = {};
    gguf.reset();
    routed_q = {};
    shared_q = {};
    const ExpertHalf fast{routed_ffn.get(), shared_ffn.get(), nullptr};

    for (int64_t T : o.tokens) {
      const int repeats = o.repeats > 0 ? o.repeats : (T <= 32 ? 9 : 5);
      Tensor x(Shape{T, D});
      fill_uniform(x.data(), T * D, 1.0f, static_cast<uint64_t>(T) + 7);
      Tensor y(Shape{T, D});
      // What is compared (the routings, hymoe and the baseline) runs interleaved, repeat by repeat, so a change in
      // the machine's load during the run hits every variant alike: on a shared machine that is what makes their
      // ratios trustworthy.
      struct Variant {
        std::string routing;
        bool baseline = false;
        // Cold weights: a fresh routing each repeat, so (with every shape's experts far beyond the LLC) the
        // touched experts come from memory; hot: one routing repeated.
        std::vector<std::vector<int32_t>> routings;
        std::vector<double> layer, expert, bytes;
        std::vector<size_t> peak_at, read_at;  // per timed repeat: the index of the probe pass just before it
      };
      std::vector<Variant> variants;
      for (const std::string& routing : o.routings) {
        const bool zipf = routing == "zipf";
        Variant v;
        v.routing = routing;
        for (int r = 0; r < repeats + 1; ++r)
          v.routings.push_back(make_indices(s, T, zipf, zipf_s, o.weights == "hot" ? 1 : static_cast<uint64_t>(r + 1)));
        variants.push_back(v);
#ifdef HYMOE_HAVE_OPENBLAS
        if (o.baseline) {
          v.baseline = true;
          variants.push_back(std::move(v));
        }
#endif
      }
#ifdef HYMOE_HAVE_OPENBLAS
      const ExpertStep blas = blas_step(w);
      openblas_set_num_threads(num_threads());
#endif
      // The machine's limits are probed again before every repeat (an FMA pass, and the eviction pass as the read
      // probe), and each row is against the best of these and the start-up probes: on a shared machine a single
      // probe often catches a slowed moment (up to 2x: docs/performance.md, "The machines"), and a limit measured
      // low flatters the layer.
      // Each timed repeat also keeps the probe passes that bracket it, for the paired fractions (below).
      std::vector<double> peak_probe, read_probe, kernel_probe;
      for (int r = 0; r < repeats + 1; ++r)  // repeat 0 warms up
        for (Variant& v : variants) {
          if (v.baseline && r > 3) continue;  // the baseline is slow: at most 3 timed repeats
          if (r > 0 && &v == &variants.front()) {
            peak_probe.push_back(probe_peak_once(2'000'000, peak_kind));
            kernel_probe.push_back(probe_kernel_once(kKernelProbeCalls));
          }
          read_probe.push_back(o.weights == "cold" ? evictor.read_gbps(4) : lim.read_gbps);
          const std::vector<int32_t>& indices = v.routings[static_cast<size_t>(r)];
#ifdef HYMOE_HAVE_OPENBLAS
          const LayerTimes lt = run_layer(*router, x, indices, K, v.baseline ? ExpertHalf{nullptr, nullptr, &blas} : fast, y);
#else
          const LayerTimes lt = run_layer(*router, x, indices, K, fast, y);
#endif
          if (r == 0) continue;
          std::vector<char> touched(static_cast<size_t>(E), 0);
          for (int32_t e : indices) touched[static_cast<size_t>(e)] = 1;
          const int64_t distinct = std::count(touched.begin(), touched.end(), 1);
          v.layer.push_back(lt.layer_ms);
          v.expert.push_back(lt.expert_ms);
          v.peak_at.push_back(peak_probe.size() - 1);
          v.read_at.push_back(read_probe.size() - 1);
          v.bytes.push_back(static_cast<double>(distinct * per_mlp + 3 * D * w.shared_hidden) * elem +
                            static_cast<double>(E * D * 4));
        }
      // The passes after the last repeat close its bracket.
      peak_probe.push_back(probe_peak_once(2'000'000, peak_kind));
      kernel_probe.push_back(probe_kernel_once(kKernelProbeCalls));
      read_probe.push_back(o.weights == "cold" ? evictor.read_gbps(4) : lim.read_gbps);
      for (const Variant& v : variants) {
        if (v.baseline) continue;
        const std::string& routing = v.routing;
        std::vector<double> base;
        for (const Variant& b : variants)
          if (b.baseline && b.routing == routing) base = b.layer;
        const std::vector<double>& layer = v.layer;
        const std::vector<double>& expert = v.expert;
        const std::vector<double>& bytes = v.bytes;
        const double layer_ms = median(layer), expert_ms = median(expert), weight_bytes = median(bytes);
        const double flops = 2.0 * static_cast<double>(T) * (static_cast<double>(E * D) + static_cast<double>(K * per_mlp) +
                                                              static_cast<double>(3 * D * w.shared_hidden));
        const double gflops = flops / (layer_ms * 1e6), gbps = weight_bytes / (layer_ms * 1e6);
        // A limit is the best the machine showed (as STREAM reports its best pass): a probe pass that a neighbour
        // slowed down would otherwise flatter the layer's fraction.
        const double start_peak = peak_kind == PeakKind::kFma       ? lim.peak_gflops
                                  : peak_kind == PeakKind::kBf16Dot ? lim.bf16_dot_gflops
                                                                    : lim.int8_dot_gops;
        const double peak_gflops = std::max(start_peak, *std::max_element(peak_probe.begin(), peak_probe.end()));
        const double read_gbps = std::max(lim.read_gbps, *std::max_element(read_probe.begin(), read_probe.end()));
        const double kernel_gflops =
            std::max(lim.kernel_gflops, *std::max_element(kernel_probe.begin(), kernel_probe.end()));
        const double frac_peak = gflops / peak_gflops, frac_bw = weight_bytes / (read_gbps * 1e6) / layer_ms;
        const double frac_kernel = gflops / kernel_gflops;
        // Paired: each repeat against the better of the two probe passes that bracket it, then the median of
        // those ratios. On a shared machine whose speed drifts (the FMA probe here swings 2x with the neighbours'
        // load), this cancels the drift that the best-pass fractions above charge to the layer; both are reported.
        std::vector<double> paired_peak, paired_bw, paired_kernel;
        for (size_t r = 0; r < layer.size(); ++r) {
          const size_t p = v.peak_at[r], q = v.read_at[r];
          paired_peak.push_back(flops / (layer[r] * 1e6) / std::max(peak_probe[p], peak_probe[p + 1]));
          paired_kernel.push_back(flops / (layer[r] * 1e6) / std::max(kernel_probe[p], kernel_probe[p + 1]));
          paired_bw.push_back(bytes[r] / (layer[r] * 1e6) / std::max(read_probe[q], read_probe[q + 1]));
        }
        const double frac_peak_paired = median(paired_peak), frac_bw_paired = median(paired_bw);
        const double frac_kernel_paired = median(paired_kernel);
        // The limit that binds: whichever of the format's compute peak and the read bandwidth gives the longer
        // lower bound on the layer's time (decode: bandwidth; prefill: compute), and the layer's fraction of it.
        const bool compute_bound = frac_peak > frac_bw;
        const std::string bound_by = compute_bound ? peak_name(peak_kind) : "bw";
        const double frac_bound = compute_bound ? frac_peak : frac_bw;
        const double frac_bound_paired = compute_bound ? frac_peak_paired : frac_bw_paired;
        const double baseline_ms = base.empty() ? std::nan("") : median(base);
        // A GGUF, mxfp4 or fp8 row says which computation ran: q4_k/i8 (ggml's int8 activations), fp8/bf16
        // (activations rounded to bf16, vdpbf16ps) or q4_k/ex (exact).
        const std::string row_dtype = gguf_dtype_type(dtype) == 0 && dtype != "mxfp4" && dtype != "fp8" ? dtype
                                      : kernels::is_gguf_int8_format(format)                          ? dtype + "/i8"
                                      : format == kernels::WeightFormat::kFp8Block128Dot              ? dtype + "/bf16"
                                                                                                       : dtype + "/ex";
        nlohmann::json j = {{"shape", s.name}, {"tokens", T}, {"dtype", dtype}, {"threads", num_threads()},
                            {"routing", routing}, {"weights", o.weights}, {"isa", std::string(kernels::isa_name(kernels::active_isa()))},
                            {"kernel", routed_ffn->name()}, {"repeats", repeats}, {"layer_ms", layer_ms},
                            {"expert_ms", expert_ms}, {"flops", flops}, {"weight_bytes", weight_bytes},
                            {"peak_gflops", peak_gflops}, {"read_gbps", read_gbps}, {"gflops", gflops},
                            {"weight_gbps", gbps}, {"frac_peak", frac_peak}, {"frac_bandwidth", frac_bw},
                            {"frac_peak_paired", frac_peak_paired}, {"frac_bandwidth_paired", frac_bw_paired},
                            {"kernel_gflops", kernel_gflops}, {"frac_kernel", frac_kernel},
                            {"frac_kernel_paired", frac_kernel_paired},
                            {"dispatch_frac", 1.0 - expert_ms / layer_ms}, {"peak_kind", peak_name(peak_kind)},
                            {"bound_by", bound_by}, {"frac_bound", frac_bound},
                            {"frac_bound_paired", frac_bound_paired}};
        if (!base.empty()) {
          j["baseline_ms"] = baseline_ms;
          j["speedup"] = baseline_ms / layer_ms;
        } else {
          j["baseline_ms"] = nullptr;
        }
        if (o.json) fmt::print("{}\n", j.dump());
        else
          fmt::print("{:<17} {:>5} {:<5} {:<7} {:>9.2f} {:>9.0f} {:>8.1f} {:>7.1f} {:>7} {:>7} {:>7} {:>13} {:>9.2f} {:>5.1f}% {:>9} {:>6}\n",
                     s.name, T, row_dtype, routing, layer_ms, static_cast<double>(T) / (layer_ms / 1e3), gflops, gbps,
                     fmt::format("{:.0f}/{:.0f}", 100 * frac_peak, 100 * frac_peak_paired),
                     fmt::format("{:.0f}/{:.0f}", 100 * frac_kernel, 100 * frac_kernel_paired),
                     fmt::format("{:.0f}/{:.0f}", 100 * frac_bw, 100 * frac_bw_paired),
                     fmt::format("{} {:.0f}/{:.0f}", bound_by, 100 * frac_bound, 100 * frac_bound_paired), expert_ms,
                     100 * (1.0 - expert_ms / layer_ms),
                     base.empty() ? std::string("-") : fmt::format("{:.2f}", baseline_ms),
                     base.empty() ? std::string("-") : fmt::format("{:.2f}x", baseline_ms / layer_ms));
        std::fflush(stdout);
        out.push_back(j);
      }
    }
  }
}

// The per-token buffers of every shape and token count (input, output, the layer's activations, and one routing
// kept per repeat and variant), refused before anything is measured when the machine cannot hold them. A shape's
// weights are checked later, where a shape too large for the machine is skipped rather than refused.
void require_memory_for_tokens(const BenchOptions& o, const std::vector<BenchShape>& shapes) {
  for (const BenchShape& s : shapes)
    for (int64_t T : o.tokens) {
      MoEConfig cfg;
      cfg.dim = s.dim;
      cfg.hidden_dim = s.hidden;
      cfg.num_experts = s.experts;
      cfg.top_k = s.top_k;
      const int repeats = o.repeats > 0 ? o.repeats : 9;
      const double routings = static_cast<double>(repeats + 1) * 2.0 * static_cast<double>(o.routings.size()) *
                              static_cast<double>(T) * static_cast<double>(s.top_k) * sizeof(int32_t);
      require_physical_memory(estimate_moe_memory(cfg, T, Mode::kEval).activation_bytes + routings,
                              detail::concat("--tokens=", T, " on shape ", s.name, " (dim ", s.dim, ", top_k ", s.top_k,
                                             ", ", repeats, " repeats)"));
    }
}

int run_bench(const BenchOptions& o) {
  if (o.threads < 0) fail("--threads=", o.threads, " must be >= 1 (0: the default, ", default_num_threads(), ")");
  if (o.threads > 0) set_num_threads(o.threads);
  for (int64_t T : o.tokens)
    if (T < 1) fail("--tokens=", T, " must be >= 1");
  for (const auto& d : o.dtypes)
    if (d != "f32" && d != "bf16" && d != "bf16w" && d != "bf16n" && d != "q8_0" && d != "fp8" && d != "mxfp4" &&
        !gguf_dtype_type(d))
      fail("--dtype=", d, " must be f32, bf16, bf16w, bf16n, q8_0, ", gguf_dtype_names(), ", fp8 or mxfp4");
  for (const auto& r : o.routings)
    if (r != "uniform" && r != "zipf") fail("--routing=", r, " must be uniform or zipf");
  if (o.weights != "hot" && o.weights != "cold") fail("--weights=", o.weights, " must be hot or cold");
  const std::vector<std::string> names = o.shapes.empty() ? all_shape_names(o.shapes_dir) : o.shapes;
  std::vector<BenchShape> shapes;
  for (const auto& n : names) {
    const std::filesystem::path f = std::filesystem::path(o.shapes_dir) / (n + ".json");
    if (!std::filesystem::exists(f)) {
      const auto known = all_shape_names(o.shapes_dir);
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      fail("--shape=", n, " is not in ", o.shapes_dir, " (known: ", list, ")");
    }
    shapes.push_back(read_bench_shape(f.string()));
  }
  require_memory_for_tokens(o, shapes);
  const Limits lim = measure_limits();
  if (!o.json)
    fmt::print("hymoe bench: {} threads, isa {}, start-up probes: FMA peak {:.1f} GFLOP/s, micro-kernel hot in L1 "
               "{:.1f} GFLOP/s, bf16 dot peak {:.1f} GFLOP/s, int8 dot peak {:.1f} Gop/s, read bandwidth {:.1f} GB/s; "
               "{} weights; medians of repeated runs; %peak (of the row's format's compute peak: FMA, bf16 dot or int8 "
               "dot), %kern (of the f32 micro-kernel probe) and %bw as best/paired: against the best probe pass of the "
               "start-up and of the row's repeats / median over repeats of each against the better probe pass "
               "bracketing it; %bound: the fraction of whichever limit binds (the larger of %peak and %bw)\n",
               num_threads(), kernels::isa_name(kernels::active_isa()), lim.peak_gflops, lim.kernel_gflops,
               lim.bf16_dot_gflops, lim.int8_dot_gops, lim.read_gbps, o.weights);
  if (!o.json) print_header();
  std::vector<nlohmann::json> rows;
  const ReadBuffer evictor = make_cache_evictor();
  for (const auto& s : shapes) bench_shape(o, s, lim, evictor, rows);
  return 0;
}

}  // namespace

Action add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Benchmark the MoE layer on model shapes against measured machine limits");
  cmd->add_option("--shape", o->shapes, "shape name(s) from the shapes directory (default: all)");
  cmd->add_option("--tokens", o->tokens, "token counts")->capture_default_str();
  cmd->add_option("--dtype", o->dtypes,
                  "weight formats: f32, bf16 (as --bf16-compute), bf16w (widened), bf16n (native vdpbf16ps), q8_0 "
                  "(hymoe's int8 blocks of 32, quantized from f32, activations quantized too); GGUF blocks encoded "
                  "from f32, run as --quant-compute says (rows q4_k/i8 or q4_k/ex): " + gguf_dtype_names() +
                  "; fp8 (DeepSeek-V3's "
                  "e4m3 with 128x128 block scales, run as --quant-compute says: fp8/bf16 on the bf16 dot product where "
                  "the CPU has AVX512_BF16, or fp8/ex) and mxfp4 (gpt-oss's E2M1 with E8M0 scales per 32, run "
                  "as --quant-compute says: mxfp4/i8 or mxfp4/ex), both quantized from f32")
      ->capture_default_str();
  cmd->add_option("--routing", o->routings, "uniform and/or zipf (one expert takes a third of the tokens)")
      ->capture_default_str();
  cmd->add_option("--weights", o->weights, "cold (a fresh routing per repeat) or hot (one routing)")->capture_default_str();
  cmd->add_option("--threads", o->threads, "threads (default: HYMOE_THREADS or the physical cores)");
  cmd->add_option("--repeats", o->repeats, "timed repeats per configuration (default 9 for T <= 32, else 5)")
      ->check(CLI::Range(1, 10000));
  cmd->add_flag("--json", o->json, "one JSON object per line per measurement instead of the table");
  cmd->add_flag("!--no-baseline", o->baseline, "skip the OpenBLAS-per-expert baseline");
  cmd->add_option("--shapes-dir", o->shapes_dir, "directory of shape JSON files")->capture_default_str();
  cmd->add_option("--model", o->model_dir,
                 "time a Hugging Face model directory's or a GGUF file's MoE layer (load time, memory, forward)");
  cmd->add_option("--layer", o->layer, "with --model: the MoE layer (GGUF: block)");
  cmd->add_option("--ep", o->ep,
                  "expert parallelism over MPI on N ranks: run as mpirun -np N hymoe bench --ep N (float32; reports "
                  "the all-to-all time and bytes beside the local experts' time)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("--train", o->train,
                "with --ep: time a training step (train-mode forward and backward) instead of an inference forward");
  return [o] {
    if (o->train && o->ep == 0) fail("bench: --train goes with --ep (the expert-parallel layer's training step)");
    if (o->ep > 0) {
      if (!o->model_dir.empty()) fail("bench: --ep takes model shapes (--shape), not --model");
      if (o->threads > 0) set_num_threads(o->threads);
      std::vector<BenchShape> shapes;
      for (const auto& n : o->shapes.empty() ? all_shape_names(o->shapes_dir) : o->shapes)
        shapes.push_back(read_bench_shape((std::filesystem::path(o->shapes_dir) / (n + ".json")).string()));
      for (int64_t T : o->tokens)
        if (T < 1) fail("--tokens=", T, " must be >= 1");
      return run_ep_bench(shapes, o->tokens, o->repeats, o->ep, o->json, o->train);
    }
    if (o->model_dir.empty()) return run_bench(*o);
    if (o->layer < 0) fail("bench: --model needs --layer N (N >= 0)");
    return run_model_bench(o->model_dir, o->layer, o->tokens, o->repeats, o->json);
  };
}

int print_bench_summary(const std::string& shape, const std::vector<int64_t>& tokens) {
  BenchOptions o;
  o.shapes = {shape};
  o.tokens = tokens;
  o.dtypes = {"f32"};
  o.repeats = 3;
  return run_bench(o);
}

}  // namespace hymoe::tool
