// The MoE layer's half of hymoe._core (python/src/bindings.h): the C++ MoE layer (include/hymoe/moe.h) and the
// Hugging Face layer loader (include/hymoe/model.h), what hymoe.torch builds KempnerForge's MoEMLP on. Arrays come
// in as numpy arrays (arrays.h: float32 C-contiguous ones are read in place, once copied into the layer's input);
// results leave as numpy arrays owning their C++ buffers, and the layer's weights as numpy views of its C++
// tensors, so torch parameters alias them with no copy.
// The GIL is released while C++ runs; each layer serializes its own calls with a mutex (a layer keeps the state of
// its last forward for the backward, so two threads cannot share one call sequence anyway).
// Depends on the library's public headers only.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "arrays.h"
#include "bindings.h"
#include "hymoe/error.h"
#include "hymoe/model.h"
#include "hymoe/moe.h"
#include "layer_api.h"

namespace hymoe::python {
namespace {

using OutArray = py::array_t<float>;

// A numpy view of `t`, keeping `owner` (the Python object holding the C++ tensor) alive.
OutArray view_of(Tensor& t, py::handle owner) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  return OutArray(shape, t.data(), owner);
}

std::vector<int64_t> counts_of(const std::vector<int64_t>& tokens_per_expert, const char* who) {
  for (size_t e = 0; e < tokens_per_expert.size(); ++e)
    if (tokens_per_expert[e] < 0) fail(who, ": tokens_per_expert[", e, "]=", tokens_per_expert[e], " is negative");
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
  int64_t forwards = 0;        // forwards run so far; a forward's id is the count after it
  int64_t saved_forward = 0;   // id of the train forward whose state the layer holds (0: none)
  double last_call_ms = 0.0;   // time the last forward or backward spent in C++ (python -m hymoe.bench)
};

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// What one forward gives back besides y.
struct ForwardResult {
  Tensor y, counts;  // counts: empty unless asked for
  float aux = 0.0f, z = 0.0f;
  int64_t id = 0;
};

// Runs the layer on `xt` (already copied out of Python's memory) with the GIL released. `with_counts` copies the
// expert counts out too; the capsule's caller reads them from the layer when asked instead.
ForwardResult forward_without_gil(Layer& self, const Tensor& xt, bool train, int64_t step, int64_t max_steps,
                                  bool with_counts) {
  ForwardResult r;
  py::gil_scoped_release release;
  std::lock_guard lock(self.mutex);
  r.y = self.layer.forward(xt, train ? Mode::kTrain : Mode::kEval, step, max_steps);
  r.aux = self.layer.aux_loss();
  r.z = self.layer.z_loss();
  if (with_counts) r.counts = self.layer.expert_counts();
  r.id = ++self.forwards;
  self.saved_forward = train ? r.id : 0;
  return r;
}

// (forward_id, y, aux_loss, z_loss, counts) of the layer on `xt`.
py::tuple run_forward(Layer& self, const Tensor& xt, bool train, int64_t step, int64_t max_steps,
                      Clock::time_point start) {
  ForwardResult r = forward_without_gil(self, xt, train, step, max_steps, true);
  py::tuple out =
      py::make_tuple(r.id, tensor_to_numpy(std::move(r.y)), r.aux, r.z, tensor_to_numpy(std::move(r.counts)));
  self.last_call_ms = ms_since(start);
  return out;
}

// The layer's input: a copy of the C-contiguous float32 values of `shape` at `x` (the caller keeps them alive).
Tensor input_at(const float* x, const Shape& shape) {
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < 0) fail("forward: x has a negative extent ", shape[i], " in dimension ", i);
  const int64_t n = shape_numel(shape);
  if (n > 0 && x == nullptr) fail("forward: x has ", n, " values at address 0");
  return Tensor(shape, std::vector<float>(x, x + n));
}

py::tuple layer_forward(Layer& self, const py::array& x, bool train, int64_t step, int64_t max_steps) {
  const auto start = Clock::now();
  return run_forward(self, to_tensor_f32(x, "x"), train, step, max_steps, start);
}

// The same with x given as the address of a C-contiguous float32 array of `shape`: what hymoe.torch passes for a
// float32 CPU tensor after checking its dtype, device and layout, because asking torch for the address costs far
// less per call than a numpy view of the tensor. The caller keeps the tensor alive for the call; it is copied into
// the layer's input before the GIL is released, so no other Python thread can free or resize it meanwhile.
py::tuple layer_forward_at(Layer& self, uintptr_t address, const Shape& shape, bool train, int64_t step,
                           int64_t max_steps) {
  const auto start = Clock::now();
  return run_forward(self, input_at(reinterpret_cast<const float*>(address), shape), train, step, max_steps, start);
}

// hymoe._core._layer_api (layer_api.h): the same forward for hymoe._torch_core, which holds torch tensors.
// The layer reaches it as a capsule (kLayerHandleCapsule) whose context keeps the Python layer object alive.
py::object layer_handle(py::object self_obj) {
  Layer& self = self_obj.cast<Layer&>();
  PyObject* capsule = PyCapsule_New(&self, kLayerHandleCapsule, [](PyObject* c) {
    Py_XDECREF(static_cast<PyObject*>(PyCapsule_GetContext(c)));
  });
  if (capsule == nullptr) throw py::error_already_set();
  PyCapsule_SetContext(capsule, self_obj.inc_ref().ptr());
  return py::reinterpret_steal<py::object>(capsule);
}

void api_forward(void* layer, const float* x, const int64_t* shape, int ndim, bool train, int64_t step,
                 int64_t max_steps, LayerForwardOutput* out) {
  const auto start = Clock::now();
  Layer& self = *static_cast<Layer*>(layer);
  try {
    ForwardResult r = forward_without_gil(self, input_at(x, Shape(shape, shape + ndim)), train, step, max_steps, false);
    out->forward_id = r.id;
    out->aux_loss = r.aux;
    out->z_loss = r.z;
    auto owner = std::make_unique<Tensor>(std::move(r.y));
    out->y = owner->data();
    out->y_owner = owner.release();
  } catch (const Error& e) {
    out->error = e.what();
    out->error_is_bad_input = true;
  } catch (const std::exception& e) {
    out->error = e.what();
  }
  self.last_call_ms = ms_since(start);
}

const LayerApi kLayerApi{api_forward, [](void* owner) { delete static_cast<Tensor*>(owner); }};

// The routed expert a parameter name belongs to ("experts.<e>.…"), or -1.
int64_t routed_expert_of(const std::string& name) {
  static const std::string kPrefix = "experts.";
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
  return std::stoll(name.substr(kPrefix.size()));
}

// Gradients of sum(y * grad_y) + aux_weight * aux_loss + z_weight * z_loss for forward `forward_id`:
// (grad_x, [grad of each parameter in parameter_names() order, or None]). None for the weights of a routed expert
// that got no token, as PyTorch's autograd leaves them, which also spares copying all the idle experts' zeros.
py::tuple layer_backward(Layer& self, int64_t forward_id, const py::array& grad_y, float aux_weight, float z_weight) {
  const auto start = Clock::now();
  const Tensor gy = to_tensor_f32(grad_y, "grad_y");
  Tensor grad_x;
  std::vector<std::optional<Tensor>> grads;
  {
    py::gil_scoped_release release;
    std::lock_guard lock(self.mutex);
    if (forward_id != self.saved_forward || forward_id == 0)
      fail("backward: the layer holds the saved state of forward ", self.saved_forward,
           " (0: none; eval forwards save nothing), not of forward ", forward_id,
           "; run backward before the layer's next train forward (or recompute that forward, as activation "
           "checkpointing does)");
    grad_x = self.layer.backward(gy, aux_weight, z_weight);
    const Tensor& counts = self.layer.expert_counts();  // of the forward just differentiated
    for (const auto& [name, g] : self.layer.named_gradients()) {
      const int64_t e = routed_expert_of(name);
      if (e >= 0 && counts[e] == 0.0f) {
        grads.emplace_back(std::nullopt);
      } else {
        grads.emplace_back(*g);  // a copy: the next backward overwrites the layer's gradients
      }
    }
  }
  py::list out;
  for (std::optional<Tensor>& g : grads) {
    if (g) {
      out.append(tensor_to_numpy(std::move(*g)));
    } else {
      out.append(py::none());
    }
  }
  py::tuple result = py::make_tuple(tensor_to_numpy(std::move(grad_x)), out);
  self.last_call_ms = ms_since(start);
  return result;
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor*>>& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

// Milliseconds of each of `repeats` calls run back to back in C++ (forward, or forward+backward when `train`):
// the layer's own time, without Python.
std::vector<double> time_forward(Layer& self, const py::array& x, bool train, int64_t repeats) {
  const Tensor xt = to_tensor_f32(x, "x");
  py::gil_scoped_release release;
  std::lock_guard lock(self.mutex);
  std::vector<double> ms;
  for (int64_t i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    const Tensor y = self.layer.forward(xt, train ? Mode::kTrain : Mode::kEval);
    if (train) self.layer.backward(y);
    ms.push_back(ms_since(start));
  }
  self.saved_forward = 0;  // the timed forwards replaced whatever state a Python forward had saved
  return ms;
}

// (gate or None, up, down) in nn.Linear (out, in) layout.
using ExpertArrays = std::tuple<std::optional<py::array>, py::array, py::array>;

ExpertMlp expert_of(const ExpertArrays& arrays, MlpActivation activation) {
  const auto& [gate, up, down] = arrays;
  ExpertMlp m;
  m.activation = activation;
  if (activation == MlpActivation::kSwiGLU) {
    if (!gate) fail("grouped_expert_forward: a SwiGLU expert needs gate_proj");
    m.gate_proj = to_tensor_f32(*gate, "gate_proj");
  }
  m.up_proj = to_tensor_f32(up, "up_proj");
  m.down_proj = to_tensor_f32(down, "down_proj");
  return m;
}

// One MoE layer of a Hugging Face model directory (inference).
struct HfLayer {
  explicit HfLayer(ModelMoELayer l) : layer(std::move(l)) {}
  ModelMoELayer layer;
  std::mutex mutex;
};

}  // namespace

void register_moe(py::module_& m) {
  m.attr("_layer_api") = py::capsule(static_cast<const void*>(&kLayerApi), kLayerApiCapsule);
  // A router alone (expert parallelism routes each rank's tokens here, then exchanges them): the layer's router
  // code, so a token's weights have the fused layer's bits whatever tokens sit beside it.
  struct RouterHolder {
    MoEConfig config;
    std::unique_ptr<Router> router;
  };
  struct RoutingSaved {
    Routing routing;
    Tensor x;
  };
  py::class_<RoutingSaved>(m, "RoutingSaved", "What a Router train forward keeps for its backward.");
  py::class_<RouterHolder>(m, "Router", "The router of a build_moe configuration (include/hymoe/moe.h).")
      .def(py::init([](const std::string& config_json) {
             MoEConfig c = parse_moe_config(config_json, "Router");
             c.validate();
             auto h = std::make_unique<RouterHolder>();
             h->router = make_router(c);
             h->config = c;
             return h;
           }),
           py::arg("config_json"))
      .def("tensor_names", [](RouterHolder& self) { return names_of(self.router->named_tensors()); })
      .def("parameter_names", [](RouterHolder& self) { return names_of(self.router->named_parameters()); })
      .def(
          "tensor",
          [](py::object self_obj, const std::string& name) {
            RouterHolder& self = self_obj.cast<RouterHolder&>();
            for (auto& [n, t] : self.router->named_tensors())
              if (n == name) return view_of(*t, self_obj);
            fail("Router: no tensor '", name, "'");
          },
          py::arg("name"), "A writable numpy view of the router's tensor.")
      .def("set_step", [](RouterHolder& self, int64_t step, int64_t max_steps) { self.router->set_step(step, max_steps); })
      .def(
          "route",
          [](RouterHolder& self, const py::array& x_array, bool train, bool keep) {
            const Tensor x = to_tensor_f32(x_array, "x");
            if (x.rank() != 2 || x.dim(1) != self.config.dim)
              fail("Router: x must be (tokens, ", self.config.dim, "), got ", shape_to_string(x.shape()));
            auto saved = std::make_unique<RoutingSaved>();
            {
              py::gil_scoped_release release;
              if (x.dim(0) > 0) saved->routing = self.router->route(x, train ? Mode::kTrain : Mode::kEval);
            }
            const Routing& r = saved->routing;
            const int64_t T = x.dim(0), K = self.config.top_k;
            std::vector<int64_t> indices(r.indices.begin(), r.indices.end());
            std::vector<float> weights = r.router_weights;
            py::object counts = r.expert_counts.numel() ? tensor_to_numpy(Tensor(r.expert_counts))
                                                        : tensor_to_numpy(Tensor(Shape{self.config.num_experts}));
            py::object out_saved = py::none();
            const float aux = r.aux_loss, z = r.z_loss;
            if (keep) {
              saved->x = x;
              out_saved = py::cast(std::move(saved));
            }
            return py::make_tuple(
                to_numpy(std::move(weights), {static_cast<py::ssize_t>(T), static_cast<py::ssize_t>(K)}),
                to_numpy(std::move(indices), {static_cast<py::ssize_t>(T), static_cast<py::ssize_t>(K)}), aux,
                z, counts, out_saved);
          },
          py::arg("x"), py::arg("train"), py::arg("keep"),
          "(router weights (T, K), indices (T, K), aux_loss, z_loss, expert counts (E), saved or None).")
      .def(
          "backward",
          [](RouterHolder& self, const RoutingSaved& saved, const py::array& grad_weights, float aux_weight,
             float z_weight) {
            const Tensor gw = to_tensor_f32(grad_weights, "grad_weights");
            const int64_t T = saved.x.numel() ? saved.x.dim(0) : 0;
            if (gw.numel() != T * self.config.top_k)
              fail("Router.backward: grad_weights has ", gw.numel(), " values, expected ", T * self.config.top_k);
            Tensor grad_x(Shape{T, self.config.dim});
            std::vector<std::pair<std::string, Tensor>> grads;
            if (T > 0) {
              py::gil_scoped_release release;
              RouterBackwardArgs a;
              a.x = &saved.x;
              a.routing = &saved.routing;
              a.grad_weights = gw.data();
              a.aux_loss_weight = aux_weight;
              a.z_loss_weight = z_weight;
              a.grad_x = grad_x.data();
              grads = self.router->backward(a);
            } else {
              for (auto& [n, t] : self.router->named_parameters()) grads.emplace_back(n, Tensor(t->shape()));
            }
            py::dict out;
            for (auto& [n, g] : grads) out[py::str(n)] = tensor_to_numpy(std::move(g));
            return py::make_tuple(tensor_to_numpy(std::move(grad_x)), out);
          },
          py::arg("saved"), py::arg("grad_weights"), py::arg("aux_loss_weight"), py::arg("z_loss_weight"),
          "(grad_x (T, dim), {parameter name: gradient}) of a train route kept with keep=True.");
  py::class_<Layer>(m, "MoELayer", "hymoe's C++ MoE layer (include/hymoe/moe.h); hymoe.torch wraps it.")
      .def(py::init([](const std::string& config_json) {
             return std::make_unique<Layer>(parse_moe_config(config_json, "build_moe"));
           }),
           py::arg("config_json"), "A layer from build_moe's arguments as a JSON object; weights are zero.")
      .def("tensor_names", [](Layer& self) { return names_of(self.layer.named_tensors()); },
           "Every parameter and buffer under its PyTorch state_dict name.")
      .def("parameter_names", [](Layer& self) { return names_of(self.layer.named_parameters()); },
           "The trainable subset, in the order backward returns gradients.")
      .def(
          "tensor",
          [](py::object self_obj, const std::string& name) {
            Layer& self = self_obj.cast<Layer&>();
            std::lock_guard lock(self.mutex);
            for (auto& [n, t] : self.layer.named_tensors())
              if (n == name) return view_of(*t, self_obj);
            fail("tensor: the layer has no tensor '", name, "'");
          },
          py::arg("name"),
          "A float32 numpy view of the C++ tensor (no copy). After writing through it call mark_weights_changed().")
      .def(
          "mark_weights_changed",
          [](Layer& self) {
            std::lock_guard lock(self.mutex);
            self.layer.named_tensors();  // non-const access is the layer's signal to re-pack
          },
          "Re-prepare the kernels' packed weights on the next forward.")
      .def("forward", &layer_forward, py::arg("x"), py::arg("train"), py::arg("step") = 0, py::arg("max_steps") = 1,
           "x (B, L, dim) -> (forward_id, y, aux_loss, z_loss, expert_counts).")
      .def("forward_at", &layer_forward_at, py::arg("address"), py::arg("shape"), py::arg("train"),
           py::arg("step") = 0, py::arg("max_steps") = 1,
           "forward of the C-contiguous float32 array of `shape` at `address` (hymoe.torch's float32 CPU tensors; "
           "the caller keeps it alive).")
      .def("backward", &layer_backward, py::arg("forward_id"), py::arg("grad_y"), py::arg("aux_loss_weight") = 0.0f,
           py::arg("z_loss_weight") = 0.0f, "-> (grad_x, [grad of each parameter in parameter_names() order]).")
      .def(
          "expert_counts",
          [](Layer& self) {
            std::lock_guard lock(self.mutex);
            return tensor_to_numpy(Tensor(self.layer.expert_counts()));
          },
          "The last forward's tokens per expert (a copy): what hymoe._torch_core's forward leaves to be read.")
      .def("_handle", &layer_handle, "The layer for hymoe._torch_core (layer_api.h).")
      .def("saved_for_backward_bytes",
           [](Layer& self) {
             std::lock_guard lock(self.mutex);
             return self.layer.saved_for_backward_bytes();
           })
      .def_property_readonly("last_call_ms", [](const Layer& self) { return self.last_call_ms; },
                             "Milliseconds the last forward or backward spent in the binding (copies included).")
      .def("time_forward", &time_forward, py::arg("x"), py::arg("train"), py::arg("repeats"),
           "Milliseconds per call of `repeats` back-to-back forwards (forward+backward when train), run in C++.");

  m.def(
      "moe_grouped_expert_forward",
      [](const py::array& x_sorted, const std::vector<int64_t>& tokens_per_expert,
         const std::vector<ExpertArrays>& experts, const std::string& activation) {
        const MlpActivation act = activation_of(activation, "grouped_expert_forward");
        const Tensor x = to_tensor_f32(x_sorted, "x_sorted");
        std::vector<ExpertMlp> mlps;
        for (const ExpertArrays& e : experts) mlps.push_back(expert_of(e, act));
        const std::vector<int64_t> counts = counts_of(tokens_per_expert, "grouped_expert_forward");
        Tensor y;
        {
          py::gil_scoped_release release;
          y = grouped_expert_forward(x, counts, mlps);
        }
        return tensor_to_numpy(std::move(y));
      },
      py::arg("x_sorted"), py::arg("tokens_per_expert"), py::arg("experts"), py::arg("activation"));
  m.def(
      "moe_grouped_expert_forward_packed",
      [](const py::array& x_sorted, const std::vector<int64_t>& tokens_per_expert, const py::array& up_w,
         const py::array& down_w, const std::optional<py::array>& gate_w, const std::string& activation) {
        const MlpActivation act =
            gate_w ? MlpActivation::kSwiGLU : activation_of(activation, "grouped_expert_forward_packed");
        const Tensor x = to_tensor_f32(x_sorted, "x_sorted");
        const Tensor up = to_tensor_f32(up_w, "up_w"), down = to_tensor_f32(down_w, "down_w");
        const Tensor gate = gate_w ? to_tensor_f32(*gate_w, "gate_w") : Tensor();
        const std::vector<int64_t> counts = counts_of(tokens_per_expert, "grouped_expert_forward_packed");
        Tensor y;
        {
          py::gil_scoped_release release;
          y = grouped_expert_forward_packed(x, counts, up, down, gate_w ? &gate : nullptr, act);
        }
        return tensor_to_numpy(std::move(y));
      },
      py::arg("x_sorted"), py::arg("tokens_per_expert"), py::arg("up_w"), py::arg("down_w"), py::arg("gate_w"),
      py::arg("activation"));
  // GroupedExperts with the weights it was built from: copies (to_tensor_f32), kept while it lives because a
  // kernel may read them in place.
  struct GroupedExpertsHolder {
    std::vector<ExpertMlp> mlps;
    Tensor up, down, gate;
    std::optional<GroupedExperts> experts;
  };
  py::class_<GroupedExpertsHolder>(m, "GroupedExperts",
                                   "Experts packed once for many grouped calls (include/hymoe/moe.h), from copies "
                                   "of the weights: build a new one after the weights change.")
      .def(py::init([](const std::vector<ExpertArrays>& experts, const std::string& activation) {
             const MlpActivation act = activation_of(activation, "GroupedExperts");
             auto h = std::make_unique<GroupedExpertsHolder>();
             for (const ExpertArrays& e : experts) h->mlps.push_back(expert_of(e, act));
             py::gil_scoped_release release;
             h->experts.emplace(h->mlps);
             return h;
           }),
           py::arg("experts"), py::arg("activation"))
      .def_static(
          "packed",
          [](const py::array& up_w, const py::array& down_w, const std::optional<py::array>& gate_w,
             const std::string& activation) {
            const MlpActivation act = gate_w ? MlpActivation::kSwiGLU : activation_of(activation, "GroupedExperts");
            auto h = std::make_unique<GroupedExpertsHolder>();
            h->up = to_tensor_f32(up_w, "up_w");
            h->down = to_tensor_f32(down_w, "down_w");
            if (gate_w) h->gate = to_tensor_f32(*gate_w, "gate_w");
            py::gil_scoped_release release;
            h->experts.emplace(h->up, h->down, gate_w ? &h->gate : nullptr, act);
            return h;
          },
          py::arg("up_w"), py::arg("down_w"), py::arg("gate_w"), py::arg("activation"))
      .def(
          "forward",
          [](const GroupedExpertsHolder& self, const py::array& x_sorted, const std::vector<int64_t>& counts,
             bool train, const std::optional<py::array>& scale) -> py::object {
            const Tensor x = to_tensor_f32(x_sorted, "x_sorted");
            const Tensor row_scale = scale ? to_tensor_f32(*scale, "scale") : Tensor();
            if (scale && row_scale.numel() != (x.rank() >= 1 ? x.dim(0) : 0))
              fail("GroupedExperts.forward: ", row_scale.numel(), " row scales for ", x.rank() >= 1 ? x.dim(0) : 0,
                   " rows");
            Tensor y;
            std::unique_ptr<GroupedExperts::Saved> saved = train ? std::make_unique<GroupedExperts::Saved>() : nullptr;
            {
              py::gil_scoped_release release;
              y = self.experts->forward(x, counts, saved.get(), scale ? row_scale.data() : nullptr);
            }
            py::object out = tensor_to_numpy(std::move(y));
            if (!train) return out;
            return py::make_tuple(out, py::cast(std::move(saved)));
          },
          py::arg("x_sorted"), py::arg("tokens_per_expert"), py::arg("train") = false, py::arg("scale") = py::none(),
          "y, or (y, saved) with train=True: what backward takes. scale (rows): each row's output multiplied by its "
          "scale in the kernel, as MoELayer applies routing weights.")
      .def(
          "backward",
          [](const GroupedExpertsHolder& self, const GroupedExperts::Saved& saved, const py::array& grad_y) {
            const Tensor g = to_tensor_f32(grad_y, "grad_y");
            GroupedExperts::Gradients grads;
            {
              py::gil_scoped_release release;
              grads = self.experts->backward(saved, g);
            }
            py::list weights;
            for (Tensor& w : grads.weights) weights.append(tensor_to_numpy(std::move(w)));
            py::object grad_scale = py::none();
            if (!saved.scale.empty()) {
              const auto n = static_cast<py::ssize_t>(grads.grad_scale.size());
              grad_scale = to_numpy(std::move(grads.grad_scale), {n});
            }
            return py::make_tuple(tensor_to_numpy(std::move(grads.grad_x)), weights, grad_scale);
          },
          py::arg("saved"), py::arg("grad_y"),
          "(grad_x, [gradient of each weight, in the order the experts were built from], gradient of each row's "
          "scale or None for an unscaled forward).");
  py::class_<GroupedExperts::Saved>(m, "GroupedExpertsSaved", "What a GroupedExperts train forward keeps.");
  m.def(
      "moe_group_order",
      [](const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& destinations, int64_t num_groups) {
        if (destinations.ndim() != 1)
          fail("group_order: destinations must be 1-D, got ", destinations.ndim(), " dimensions");
        const std::span<const int64_t> dest(destinations.data(), static_cast<size_t>(destinations.shape(0)));
        GroupOrder g;
        {
          py::gil_scoped_release release;
          g = group_order(dest, num_groups);
        }
        return py::make_tuple(py::array_t<int64_t>(static_cast<py::ssize_t>(g.order.size()), g.order.data()),
                              g.counts);
      },
      py::arg("destinations"), py::arg("num_groups"),
      "(order, counts): assignments grouped by destination, stable within one (include/hymoe/moe.h).");
  // The row moves around expert parallelism's exchanges (include/hymoe/moe.h): float32 rows read in place, one
  // new array out.
  using Rows = py::array_t<float, py::array::c_style | py::array::forcecast>;
  using Ids = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
  const auto rows_shape = [](const Rows& a, const char* what) {
    if (a.ndim() != 2) fail(what, " must be 2-D (rows, width), got ", a.ndim(), " dimensions");
    return std::pair<int64_t, int64_t>(a.shape(0), a.shape(1));
  };
  const auto ids_span = [](const Ids& a, const char* what) {
    if (a.ndim() != 1) fail(what, " must be 1-D, got ", a.ndim(), " dimensions");
    return std::span<const int64_t>(a.data(), static_cast<size_t>(a.shape(0)));
  };
  m.def(
      "moe_permute_rows",
      [=](const Rows& x, const Ids& index, int64_t divisor) {
        const auto [n, width] = rows_shape(x, "permute_rows: x");
        const auto idx = ids_span(index, "permute_rows: index");
        py::array_t<float> out({static_cast<py::ssize_t>(idx.size()), static_cast<py::ssize_t>(width)});
        float* dst = out.mutable_data();
        {
          py::gil_scoped_release release;
          permute_rows(x.data(), n, width, idx, divisor, dst);
        }
        return out;
      },
      py::arg("x"), py::arg("index"), py::arg("divisor") = 1, "out[r] = x[index[r] // divisor].");
  m.def(
      "moe_unpermute_rows",
      [=](const Rows& x, const Ids& index) {
        const auto [n, width] = rows_shape(x, "unpermute_rows: x");
        const auto idx = ids_span(index, "unpermute_rows: index");
        if (static_cast<int64_t>(idx.size()) != n) fail("unpermute_rows: ", idx.size(), " indices for ", n, " rows");
        py::array_t<float> out({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(width)});
        float* dst = out.mutable_data();
        {
          py::gil_scoped_release release;
          unpermute_rows(x.data(), width, idx, dst);
        }
        return out;
      },
      py::arg("x"), py::arg("index"), "out[index[r]] = x[r] (index a permutation).");
  const auto weights_of = [](const std::optional<Rows>& w, size_t pairs) -> const float* {
    if (!w) return nullptr;
    if (static_cast<size_t>(w->size()) != pairs) fail("combine_slot_rows: ", w->size(), " weights for ", pairs, " pairs");
    return w->data();
  };
  m.def(
      "moe_combine_slot_rows",
      [=](const Rows& rows, const Ids& position, const std::optional<Rows>& weights, int64_t num_tokens, int64_t top_k) {
        const auto [n, width] = rows_shape(rows, "combine_slot_rows: rows");
        const auto pos = ids_span(position, "combine_slot_rows: position");
        const float* w = weights_of(weights, pos.size());
        py::array_t<float> out({static_cast<py::ssize_t>(num_tokens), static_cast<py::ssize_t>(width)});
        float* dst = out.mutable_data();
        {
          py::gil_scoped_release release;
          combine_slot_rows(rows.data(), n, width, pos, w, num_tokens, top_k, dst);
        }
        return out;
      },
      py::arg("rows"), py::arg("position"), py::arg("weights"), py::arg("num_tokens"), py::arg("top_k"),
      "y[t] = sum over slots k in order of weights[t, k] * rows[position[t, k]] (-1: none).");
  m.def(
      "moe_combine_slot_rows_backward",
      [=](const Rows& rows, const Ids& position, const std::optional<Rows>& weights, const Rows& grad_y, int64_t top_k) {
        const auto [n, width] = rows_shape(rows, "combine_slot_rows_backward: rows");
        const auto [tokens, grad_width] = rows_shape(grad_y, "combine_slot_rows_backward: grad_y");
        if (grad_width != width) fail("combine_slot_rows_backward: grad_y is ", grad_width, " wide, rows ", width);
        const auto pos = ids_span(position, "combine_slot_rows_backward: position");
        const float* w = weights_of(weights, pos.size());
        py::array_t<float> grad_rows({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(width)});
        py::array_t<float> grad_weights(static_cast<py::ssize_t>(pos.size()));
        float* gr = grad_rows.mutable_data();
        float* gw = grad_weights.mutable_data();
        {
          py::gil_scoped_release release;
          combine_slot_rows_backward(rows.data(), n, width, pos, w, grad_y.data(), tokens, top_k, gr, gw);
        }
        return py::make_tuple(grad_rows, grad_weights);
      },
      py::arg("rows"), py::arg("position"), py::arg("weights"), py::arg("grad_y"), py::arg("top_k"),
      "(grad_rows, grad_weights) of moe_combine_slot_rows.");
  m.def(
      "moe_scale_by_expert_load",
      [](const py::array& expert_out, const std::vector<int64_t>& tokens_per_expert, int64_t num_experts) {
        const Tensor out = to_tensor_f32(expert_out, "expert_out");
        const std::vector<int64_t> counts = counts_of(tokens_per_expert, "scale_by_expert_load");
        Tensor y;
        {
          py::gil_scoped_release release;
          y = scale_by_expert_load(out, counts, num_experts);
        }
        return tensor_to_numpy(std::move(y));
      },
      py::arg("expert_out"), py::arg("tokens_per_expert"), py::arg("num_experts"));

  py::class_<HfLayer>(m, "ModelMoELayer", "One MoE layer of a Hugging Face model directory (inference).")
      .def_property_readonly("family", [](HfLayer& s) { return s.layer.spec().family; })
      .def_property_readonly("dim", [](HfLayer& s) { return s.layer.spec().dim; })
      .def_property_readonly("hidden", [](HfLayer& s) { return s.layer.spec().hidden; })
      .def_property_readonly("num_experts", [](HfLayer& s) { return s.layer.spec().num_experts; })
      .def_property_readonly("top_k", [](HfLayer& s) { return s.layer.spec().top_k; })
      .def_property_readonly("layer", [](HfLayer& s) { return s.layer.spec().layer; })
      .def(
          "forward",
          [](HfLayer& self, const py::array& x) {
            const Tensor xt = to_tensor_f32(x, "x");
            Tensor y, counts;
            {
              py::gil_scoped_release release;
              std::lock_guard lock(self.mutex);
              y = self.layer.forward(xt);
              counts = self.layer.expert_counts();
            }
            return py::make_tuple(tensor_to_numpy(std::move(y)), tensor_to_numpy(std::move(counts)));
          },
          py::arg("x"), "x (B, L, dim) -> (y, expert_counts).");
  m.def(
      "moe_load_model_layer",
      [](const std::string& dir, int64_t layer) {
        std::optional<ModelMoELayer> loaded;
        {
          py::gil_scoped_release release;
          loaded.emplace(load_model_layer(dir, layer));
        }
        return std::make_unique<HfLayer>(std::move(*loaded));
      },
      py::arg("model_dir"), py::arg("layer"), "MoE layer `layer` of a Hugging Face model directory.");
}

}  // namespace hymoe::python
