// Python bindings of the MoE layer (include/hymoe/moe.h) and of the Hugging Face layer loader
// (include/hymoe/model.h): what hymoe.torch builds KempnerForge's MoEMLP on. Arrays cross as float32 C-contiguous
// CPU arrays (numpy, or torch through DLPack); results come back as numpy arrays that own their C++ buffers, and
// the layer's weights as numpy views of the C++ tensors, so torch parameters can alias them with no copy.
// The GIL is released while C++ runs; each layer serializes its own calls with a mutex (a layer keeps the state of
// its last forward for the backward, so two threads cannot share one call sequence anyway).
// Depends on the library's public headers only.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "hymoe/error.h"
#include "hymoe/model.h"
#include "hymoe/moe.h"

namespace nb = nanobind;

namespace hymoe::python {
namespace {

// What Python hands in: float32, C-contiguous, on the CPU (nanobind refuses anything else with a TypeError that
// names the expected kind).
using InArray = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using OutArray = nb::ndarray<nb::numpy, float>;

Shape shape_of(const InArray& a) {
  Shape s(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) s[i] = static_cast<int64_t>(a.shape(i));
  return s;
}

// hymoe::Tensor owns its values, so an input is copied once into one.
Tensor to_tensor(const InArray& a) {
  Tensor t(shape_of(a));
  if (t.numel() > 0) std::memcpy(t.data(), a.data(), static_cast<size_t>(t.numel()) * sizeof(float));
  return t;
}

// A numpy array owning `t` (moved to the heap; freed when the array is).
OutArray to_numpy(Tensor&& t) {
  auto* heap = new Tensor(std::move(t));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(heap->shape().begin(), heap->shape().end());
  return OutArray(heap->data(), shape.size(), shape.data(), owner);
}

// A numpy view of `t`, keeping `owner` (the Python object holding the C++ tensor) alive.
OutArray view_of(Tensor& t, nb::handle owner) {
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  return OutArray(t.data(), shape.size(), shape.data(), owner);
}

std::vector<int64_t> counts_of(const std::vector<int64_t>& tokens_per_expert, const char* who) {
  for (size_t e = 0; e < tokens_per_expert.size(); ++e)
    if (tokens_per_expert[e] < 0)
      fail(who, ": tokens_per_expert[", e, "]=", tokens_per_expert[e], " is negative");
  return tokens_per_expert;
}

MlpActivation activation_of(const std::string& name, const char* who) {
  if (name == "silu" || name == "swiglu") return MlpActivation::kSwiGLU;
  if (name == "gelu") return MlpActivation::kGelu;
  if (name == "relu") return MlpActivation::kRelu;
  fail(who, ": activation '", name, "' is not one of silu, gelu, relu");
}

// A MoELayer with the bookkeeping the autograd Function needs: which forward the layer's saved state belongs to.
struct Layer {
  explicit Layer(const MoEConfig& config) : layer(config) {}
  MoELayer layer;
  std::mutex mutex;
  int64_t forwards = 0;             // forwards run so far; a forward's id is the count after it
  int64_t saved_forward = 0;        // id of the train forward whose state the layer holds (0: none)
};

std::tuple<int64_t, OutArray, float, float, OutArray> layer_forward(Layer& self, const InArray& x, bool train,
                                                                    int64_t step, int64_t max_steps) {
  Tensor y, counts;
  float aux = 0.0f, z = 0.0f;
  int64_t id = 0;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(self.mutex);
    const Tensor xt = to_tensor(x);
    y = self.layer.forward(xt, train ? Mode::kTrain : Mode::kEval, step, max_steps);
    aux = self.layer.aux_loss();
    z = self.layer.z_loss();
    counts = self.layer.expert_counts();
    id = ++self.forwards;
    self.saved_forward = train ? id : 0;
  }
  return {id, to_numpy(std::move(y)), aux, z, to_numpy(std::move(counts))};
}

// Gradients of sum(y * grad_y) + aux_weight * aux_loss + z_weight * z_loss for forward `forward_id`: (grad_x,
// [grad of each parameter in parameter_names() order]).
std::tuple<OutArray, std::vector<OutArray>> layer_backward(Layer& self, int64_t forward_id, const InArray& grad_y,
                                                           float aux_weight, float z_weight) {
  Tensor grad_x;
  std::vector<Tensor> grads;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(self.mutex);
    if (forward_id != self.saved_forward || forward_id == 0)
      fail("backward: the layer holds the saved state of forward ", self.saved_forward, " (0: none; eval forwards ",
           "save nothing), not of forward ", forward_id,
           "; run backward before the layer's next forward (or recompute that forward, as activation checkpointing "
           "does)");
    grad_x = self.layer.backward(to_tensor(grad_y), aux_weight, z_weight);
    for (const auto& [name, g] : self.layer.named_gradients()) grads.push_back(*g);  // the next backward overwrites
  }
  std::vector<OutArray> out;
  out.reserve(grads.size());
  for (Tensor& g : grads) out.push_back(to_numpy(std::move(g)));
  return {to_numpy(std::move(grad_x)), std::move(out)};
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor*>>& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

Tensor* find_tensor(Layer& self, const std::string& name) {
  for (auto& [n, t] : self.layer.named_tensors())
    if (n == name) return t;
  fail("tensor: the layer has no tensor '", name, "'");
}

// Milliseconds of each of `repeats` forwards run back to back in C++: the layer's own time, without Python.
std::vector<double> time_forward(Layer& self, const InArray& x, bool train, int64_t repeats) {
  nb::gil_scoped_release release;
  std::lock_guard lock(self.mutex);
  const Tensor xt = to_tensor(x);
  std::vector<double> ms;
  for (int64_t i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const Tensor y = self.layer.forward(xt, train ? Mode::kTrain : Mode::kEval);
    if (train) self.layer.backward(y);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  self.saved_forward = 0;  // the timed forwards replaced whatever state a Python forward had saved
  return ms;
}

ExpertMlp expert_of(const std::optional<InArray>& gate, const InArray& up, const InArray& down,
                    MlpActivation activation) {
  ExpertMlp m;
  m.activation = activation;
  if (activation == MlpActivation::kSwiGLU) {
    if (!gate) fail("grouped_expert_forward: a SwiGLU expert needs gate_proj");
    m.gate_proj = to_tensor(*gate);
  }
  m.up_proj = to_tensor(up);
  m.down_proj = to_tensor(down);
  return m;
}

// The HF model layer (inference): forward and the last routing's expert counts.
struct HfLayer {
  explicit HfLayer(ModelMoELayer l) : layer(std::move(l)) {}
  ModelMoELayer layer;
  std::mutex mutex;
};

}  // namespace

void register_moe(nb::module_& m) {
  nb::class_<Layer>(m, "MoELayer",
                    "hymoe's C++ MoE layer (include/hymoe/moe.h); hymoe.torch wraps it as a torch.nn.Module.")
      .def(nb::new_([](const std::string& config_json) {
             return new Layer(parse_moe_config(config_json, "build_moe"));
           }),
           nb::arg("config_json"), "A layer from build_moe's arguments as a JSON object; weights are zero.")
      .def("tensor_names", [](Layer& self) { return names_of(self.layer.named_tensors()); },
           "Every parameter and buffer under its PyTorch state_dict name.")
      .def("parameter_names", [](Layer& self) { return names_of(self.layer.named_parameters()); },
           "The trainable subset, in the order backward returns gradients.")
      .def(
          "tensor",
          [](nb::handle self_handle, const std::string& name) {
            Layer& self = nb::cast<Layer&>(self_handle);
            std::lock_guard lock(self.mutex);
            return view_of(*find_tensor(self, name), self_handle);
          },
          nb::arg("name"),
          "A float32 numpy view of the C++ tensor (no copy). Writing through it changes the layer: call "
          "mark_weights_changed() afterwards so the kernels re-prepare their packed copies.")
      .def(
          "mark_weights_changed",
          [](Layer& self) {
            std::lock_guard lock(self.mutex);
            self.layer.named_tensors();  // non-const access is the layer's signal to re-pack
          },
          "Re-prepare the kernels' packed weights on the next forward.")
      .def("forward", &layer_forward, nb::arg("x"), nb::arg("train"), nb::arg("step") = 0, nb::arg("max_steps") = 1,
           "x (B, L, dim) float32 -> (forward_id, y, aux_loss, z_loss, expert_counts).")
      .def("backward", &layer_backward, nb::arg("forward_id"), nb::arg("grad_y"), nb::arg("aux_loss_weight") = 0.0f,
           nb::arg("z_loss_weight") = 0.0f, "-> (grad_x, [grad of each parameter in parameter_names() order]).")
      .def("saved_for_backward_bytes",
           [](Layer& self) {
             std::lock_guard lock(self.mutex);
             return self.layer.saved_for_backward_bytes();
           })
      .def("time_forward", &time_forward, nb::arg("x"), nb::arg("train"), nb::arg("repeats"),
           "Milliseconds per call of `repeats` back-to-back forwards (forward+backward when train), run in C++.");

  m.def(
      "grouped_expert_forward",
      [](const InArray& x_sorted, const std::vector<int64_t>& tokens_per_expert,
         const std::vector<std::tuple<std::optional<InArray>, InArray, InArray>>& experts,
         const std::string& activation) {
        const MlpActivation act = activation_of(activation, "grouped_expert_forward");
        Tensor y;
        {
          nb::gil_scoped_release release;
          std::vector<ExpertMlp> mlps;
          for (const auto& [gate, up, down] : experts) mlps.push_back(expert_of(gate, up, down, act));
          y = grouped_expert_forward(to_tensor(x_sorted), counts_of(tokens_per_expert, "grouped_expert_forward"),
                                     mlps);
        }
        return to_numpy(std::move(y));
      },
      nb::arg("x_sorted"), nb::arg("tokens_per_expert"), nb::arg("experts"), nb::arg("activation"));
  m.def(
      "grouped_expert_forward_packed",
      [](const InArray& x_sorted, const std::vector<int64_t>& tokens_per_expert, const InArray& up_w,
         const InArray& down_w, const std::optional<InArray>& gate_w, const std::string& activation) {
        const MlpActivation act = gate_w ? MlpActivation::kSwiGLU : activation_of(activation, "grouped_expert_forward_packed");
        Tensor y;
        {
          nb::gil_scoped_release release;
          const Tensor gate = gate_w ? to_tensor(*gate_w) : Tensor();
          y = grouped_expert_forward_packed(to_tensor(x_sorted),
                                            counts_of(tokens_per_expert, "grouped_expert_forward_packed"),
                                            to_tensor(up_w), to_tensor(down_w), gate_w ? &gate : nullptr, act);
        }
        return to_numpy(std::move(y));
      },
      nb::arg("x_sorted"), nb::arg("tokens_per_expert"), nb::arg("up_w"), nb::arg("down_w"), nb::arg("gate_w").none(),
      nb::arg("activation"));
  m.def(
      "scale_by_expert_load",
      [](const InArray& expert_out, const std::vector<int64_t>& tokens_per_expert, int64_t num_experts) {
        Tensor y;
        {
          nb::gil_scoped_release release;
          y = scale_by_expert_load(to_tensor(expert_out), counts_of(tokens_per_expert, "scale_by_expert_load"),
                                   num_experts);
        }
        return to_numpy(std::move(y));
      },
      nb::arg("expert_out"), nb::arg("tokens_per_expert"), nb::arg("num_experts"));

  nb::class_<HfLayer>(m, "ModelMoELayer", "One MoE layer of a Hugging Face model directory (inference).")
      .def_prop_ro("family", [](HfLayer& s) { return s.layer.spec().family; })
      .def_prop_ro("dim", [](HfLayer& s) { return s.layer.spec().dim; })
      .def_prop_ro("hidden", [](HfLayer& s) { return s.layer.spec().hidden; })
      .def_prop_ro("num_experts", [](HfLayer& s) { return s.layer.spec().num_experts; })
      .def_prop_ro("top_k", [](HfLayer& s) { return s.layer.spec().top_k; })
      .def_prop_ro("layer", [](HfLayer& s) { return s.layer.spec().layer; })
      .def(
          "forward",
          [](HfLayer& self, const InArray& x) {
            Tensor y, counts;
            {
              nb::gil_scoped_release release;
              std::lock_guard lock(self.mutex);
              y = self.layer.forward(to_tensor(x));
              counts = self.layer.expert_counts();
            }
            return std::make_tuple(to_numpy(std::move(y)), to_numpy(std::move(counts)));
          },
          nb::arg("x"), "x (B, L, dim) float32 -> (y, expert_counts).");
  m.def(
      "load_model_layer",
      [](const std::string& dir, int64_t layer) {
        std::optional<ModelMoELayer> loaded;
        {
          nb::gil_scoped_release release;
          loaded.emplace(load_model_layer(dir, layer));
        }
        return new HfLayer(std::move(*loaded));
      },
      nb::arg("model_dir"), nb::arg("layer"), "MoE layer `layer` of a Hugging Face model directory.");
}

}  // namespace hymoe::python
