// The runtime's half of hymoe._core (python/src/bindings.h): the expert engine (include/hymoe/runtime.h) that
// hymoe.kt's KTMoEWrapper runs on. Operands come in as numpy arrays viewed in place (bf16 as uint16 bits: torch
// tensors are viewed, never copied, by hymoe/kt.py); an in-flight call keeps its arrays alive until wait(). The GIL
// is released while a call is waited for, so other Python threads (the GPU half of a layer) run meanwhile.
// Depends on the library's public headers only.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "arrays.h"
#include "bindings.h"
#include "hymoe/error.h"
#include "hymoe/model.h"
#include "hymoe/runtime.h"
#include "hymoe/threads.h"

namespace hymoe::python {
namespace {

// The numpy dtype of an operand, as the engine's DType: float32, uint16 or int16 (bf16 bits), int64, int32,
// bool/uint8.
DType operand_dtype(const py::array& a, const char* name, std::initializer_list<DType> allowed) {
  // Through the dtype's Python attributes: pybind11's struct access to descriptors predates numpy 2's layout.
  const std::string kind_text = py::str(a.dtype().attr("kind"));
  const char kind = kind_text.empty() ? '?' : kind_text[0];
  const auto size = a.dtype().attr("itemsize").cast<py::ssize_t>();
  DType d;
  if (kind == 'f' && size == 4) d = DType::kF32;
  else if ((kind == 'u' || kind == 'i') && size == 2) d = DType::kBF16;  // torch's bf16 viewed as int16
  else if (kind == 'i' && size == 8) d = DType::kI64;
  else if (kind == 'i' && size == 4) d = DType::kI32;
  else if ((kind == 'b' || kind == 'u') && size == 1) d = DType::kU8;
  else fail(name, " has numpy dtype ", std::string(py::str(a.dtype())), ", which the engine does not take");
  for (DType ok : allowed)
    if (ok == d) return d;
  fail(name, " has numpy dtype ", std::string(py::str(a.dtype())), " (", dtype_name(d), "), not one the engine takes here");
}

const void* in_place(const py::array& a, const char* name, bool writable) {
  if (!(a.flags() & py::array::c_style)) fail(name, " must be C-contiguous");
  if (writable && !a.writeable()) fail(name, " must be writable");
  return a.data();
}

void check_shape(const py::array& a, const char* name, std::vector<py::ssize_t> want) {
  std::vector<py::ssize_t> got(a.shape(), a.shape() + a.ndim());
  if (got != want) {
    auto text = [](const std::vector<py::ssize_t>& v) {
      std::string s = "(";
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(v[i]);
      }
      return s + ")";
    };
    fail(name, " has shape ", text(got), "; expected ", text(want));
  }
}

// An engine and the operands of its call in flight (released by wait()).
struct PyEngine {
  ExpertEngine engine;
  std::vector<py::object> operands;    // the in-flight call's arrays
  // Calls enqueued on streams may run after later ones are enqueued: their arrays are kept for the last few.
  std::deque<std::vector<py::object>> stream_operands;
  std::vector<py::object> weight_refs;  // caller tensors the engine reads again (keep_resident_host_copy=False)

  EngineCall make_call(const py::array& x, const py::array& ids, const py::array& weights, const py::array& y,
                       const std::optional<py::array>& mask) {
    if (x.ndim() != 2) fail("hidden_states must be (tokens, hidden_size=", engine.dim(), ")");
    const py::ssize_t T = x.shape(0);
    if (ids.ndim() != 2) fail("topk_ids must be (tokens, top_k)");
    const py::ssize_t K = ids.shape(1);
    check_shape(x, "hidden_states", {T, engine.dim()});
    check_shape(ids, "topk_ids", {T, K});
    check_shape(weights, "topk_weights", {T, K});
    check_shape(y, "output", {T, engine.dim()});
    EngineCall c;
    c.num_tokens = T;
    c.top_k = K;
    c.x_dtype = operand_dtype(x, "hidden_states", {DType::kF32, DType::kBF16});
    c.x = in_place(x, "hidden_states", false);
    c.ids_dtype = operand_dtype(ids, "topk_ids", {DType::kI64, DType::kI32});
    c.ids = in_place(ids, "topk_ids", false);
    operand_dtype(weights, "topk_weights", {DType::kF32});
    c.weights = static_cast<const float*>(in_place(weights, "topk_weights", false));
    c.y_dtype = operand_dtype(y, "output", {DType::kF32, DType::kBF16});
    c.y = const_cast<void*>(in_place(y, "output", true));
    operands = {x, ids, weights, y};
    if (mask) {
      operand_dtype(*mask, "gpu_experts_mask", {DType::kU8});
      check_shape(*mask, "gpu_experts_mask", {engine.num_experts()});
      c.resident = static_cast<const uint8_t*>(in_place(*mask, "gpu_experts_mask", false));
      operands.push_back(*mask);
    }
    return c;
  }

  void wait() {
    {
      py::gil_scoped_release release;
      try {
        engine.wait();
      } catch (...) {
        py::gil_scoped_acquire acquire;
        operands.clear();
        throw;
      }
    }
    operands.clear();
  }
};

EngineWeightFormat format_of(const std::string& name) {
  if (name == "stored") return EngineWeightFormat::kStored;
  if (name == "int8") return EngineWeightFormat::kInt8;
  if (name == "int4") return EngineWeightFormat::kInt4;
  fail("format '", name, "' is not one of stored, int8, int4");
}

ExpertEngineOptions options_of(bool keep, int64_t max_tokens, const std::vector<int64_t>& capture_sizes,
                               const std::string& format, const std::optional<py::array>& p2l) {
  ExpertEngineOptions o;
  o.keep_resident_host_copy = keep;
  o.max_tokens = max_tokens;
  o.capture_sizes = capture_sizes;
  o.format = format_of(format);
  if (p2l) {
    operand_dtype(*p2l, "physical_to_logical_map_cpu", {DType::kI64});
    if (p2l->ndim() != 1) fail("physical_to_logical_map_cpu must be one-dimensional (num_experts,)");
    const auto* p = static_cast<const int64_t*>(in_place(*p2l, "physical_to_logical_map_cpu", false));
    o.physical_to_logical.assign(p, p + p2l->shape(0));
  }
  return o;
}

}  // namespace

void register_runtime(py::module_& m) {
  py::class_<PyEngine>(m, "ExpertEngine")
      .def_static(
          "from_model",
          [](const std::string& path, int64_t layer, bool keep, int64_t max_tokens, std::vector<int64_t> capture,
             const std::string& format, std::optional<py::array> p2l, bool shared_expert) {
            ExpertEngineOptions o = options_of(keep, max_tokens, capture, format, p2l);
            o.shared_expert = shared_expert;
            py::gil_scoped_release release;
            const Model model = Model::open(path);
            return std::make_unique<PyEngine>(PyEngine{ExpertEngine::from_model(model, layer, o), {}, {}, {}});
          },
          py::arg("path"), py::arg("layer"), py::arg("keep_resident_host_copy") = true, py::arg("max_tokens") = 0,
          py::arg("capture_sizes") = std::vector<int64_t>{}, py::arg("format") = "stored",
          py::arg("physical_to_logical") = py::none(), py::arg("shared_expert") = false)
      .def_static(
          "from_tensors",
          [](const py::array& gate, const py::array& up, const py::array& down, bool keep, int64_t max_tokens,
             std::vector<int64_t> capture, const std::string& format, std::optional<py::array> p2l,
             double swiglu_limit, double swiglu_alpha) {
            if (gate.ndim() != 3 || up.ndim() != 3 || down.ndim() != 3)
              fail("gate_proj, up_proj and down_proj must be 3-dimensional: (E, I, H), (E, I, H) and (E, H, I)");
            ExpertTensors t;
            t.num_experts = gate.shape(0);
            t.hidden = gate.shape(1);
            t.dim = gate.shape(2);
            check_shape(up, "up_proj", {t.num_experts, t.hidden, t.dim});
            check_shape(down, "down_proj", {t.num_experts, t.dim, t.hidden});
            t.dtype = operand_dtype(gate, "gate_proj", {DType::kF32, DType::kBF16});
            if (operand_dtype(up, "up_proj", {DType::kF32, DType::kBF16}) != t.dtype ||
                operand_dtype(down, "down_proj", {DType::kF32, DType::kBF16}) != t.dtype)
              fail("gate_proj, up_proj and down_proj must have one dtype");
            t.gate = in_place(gate, "gate_proj", false);
            t.up = in_place(up, "up_proj", false);
            t.down = in_place(down, "down_proj", false);
            if (swiglu_limit > 0) {
              t.activation = ExpertActivation::kClampedSwiGLU;
              t.swiglu_limit = swiglu_limit;
              t.swiglu_alpha = swiglu_alpha;
            }
            const ExpertEngineOptions o = options_of(keep, max_tokens, capture, format, p2l);
            std::unique_ptr<PyEngine> e;
            {
              py::gil_scoped_release release;
              e = std::make_unique<PyEngine>(PyEngine{ExpertEngine::from_tensors(t, o), {}, {}, {}});
            }
            if (!keep) e->weight_refs = {gate, up, down};
            return e;
          },
          py::arg("gate"), py::arg("up"), py::arg("down"), py::arg("keep_resident_host_copy") = true,
          py::arg("max_tokens") = 0, py::arg("capture_sizes") = std::vector<int64_t>{}, py::arg("format") = "stored",
          py::arg("physical_to_logical") = py::none(), py::arg("swiglu_limit") = 0.0, py::arg("swiglu_alpha") = 1.702)
      .def_property_readonly("num_experts", [](const PyEngine& e) { return e.engine.num_experts(); })
      .def_property_readonly("dim", [](const PyEngine& e) { return e.engine.dim(); })
      .def_property_readonly("hidden", [](const PyEngine& e) { return e.engine.hidden(); })
      .def_property_readonly("kernel_name", [](const PyEngine& e) { return e.engine.kernel_name(); })
      .def_property_readonly("host_weight_bytes", [](const PyEngine& e) { return e.engine.host_weight_bytes(); })
      .def_property_readonly("in_flight", [](const PyEngine& e) { return e.engine.in_flight(); })
      .def("set_resident",
           [](PyEngine& e, const py::array& mask) {
             operand_dtype(mask, "mask", {DType::kU8});
             check_shape(mask, "mask", {e.engine.num_experts()});
             const auto* p = static_cast<const uint8_t*>(in_place(mask, "mask", false));
             e.engine.set_resident({p, static_cast<size_t>(e.engine.num_experts())});
           })
      .def_property_readonly("resident",
                             [](const PyEngine& e) {
                               const auto r = e.engine.resident();
                               return mask_to_numpy(std::vector<uint8_t>(r.begin(), r.end()),
                                                    {static_cast<py::ssize_t>(r.size())});
                             })
      .def("submit",
           [](PyEngine& e, const py::array& x, const py::array& ids, const py::array& weights, const py::array& y,
              std::optional<py::array> mask) {
             const EngineCall c = e.make_call(x, ids, weights, y, mask);
             try {
               e.engine.submit(c);
             } catch (...) {
               e.operands.clear();
               throw;
             }
           },
           py::arg("x"), py::arg("ids"), py::arg("weights"), py::arg("y"), py::arg("mask") = py::none())
      // The same call on raw addresses (torch's data_ptr()), for hymoe.kt's per-call path: the caller has checked
      // shapes, dtypes and contiguity and keeps the tensors alive until wait(); costs no numpy views.
      .def("submit_raw",
           [](PyEngine& e, int64_t tokens, int64_t top_k, uintptr_t x, bool x_bf16, uintptr_t ids, bool ids_i32,
              uintptr_t weights, uintptr_t y, bool y_bf16, uintptr_t mask) {
             EngineCall c;
             c.num_tokens = tokens;
             c.top_k = top_k;
             c.x = reinterpret_cast<const void*>(x);
             c.x_dtype = x_bf16 ? DType::kBF16 : DType::kF32;
             c.ids = reinterpret_cast<const void*>(ids);
             c.ids_dtype = ids_i32 ? DType::kI32 : DType::kI64;
             c.weights = reinterpret_cast<const float*>(weights);
             c.y = reinterpret_cast<void*>(y);
             c.y_dtype = y_bf16 ? DType::kBF16 : DType::kF32;
             c.resident = reinterpret_cast<const uint8_t*>(mask);
             e.engine.submit(c);
           })
      .def("submit_on_stream",
           [](PyEngine& e, const py::array& x, const py::array& ids, const py::array& weights, const py::array& y,
              std::optional<py::array> mask, uintptr_t stream) {
             const EngineCall c = e.make_call(x, ids, weights, y, mask);
             try {
               submit_on_stream(e.engine, c, stream);
             } catch (...) {
               e.operands.clear();
               throw;
             }
             e.stream_operands.push_back(std::move(e.operands));
             if (e.stream_operands.size() > 8) e.stream_operands.pop_front();
             e.operands.clear();
           },
           py::arg("x"), py::arg("ids"), py::arg("weights"), py::arg("y"), py::arg("mask"), py::arg("stream"))
      .def("wait_on_stream", [](PyEngine& e, uintptr_t stream) { wait_on_stream(e.engine, stream); })
      .def("wait", &PyEngine::wait)
      .def("counts",
           [](const PyEngine& e) {
             const auto c = e.engine.counts();
             return to_numpy(std::vector<int64_t>(c.begin(), c.end()), {static_cast<py::ssize_t>(c.size())});
           })
      .def("reset_counts", [](PyEngine& e) { e.engine.reset_counts(); })
      .def("reserve", [](PyEngine& e, int64_t tokens, int64_t top_k) { e.engine.reserve(tokens, top_k); });
  m.def("runtime_cuda_support", &engine_cuda_support);
  m.def("runtime_set_num_threads", [](int threads) { set_num_threads(threads); });
  m.def("runtime_num_threads", &num_threads);
}

}  // namespace hymoe::python
