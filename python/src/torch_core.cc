// hymoe._torch_core: the MoE layer's forward taking and returning torch tensors, for hymoe.torch's float32 path.
// Built only where the interpreter's PyTorch has its C++ headers (python/CMakeLists.txt); hymoe.torch uses the
// numpy-based path of hymoe._core otherwise, and says which in hymoe.torch.FAST_FORWARD.
//
// Why a second module: after a forward at one token the layer has streamed hundreds of MB of weights through the
// caches, so every Python-level step of the call that follows runs on cold caches and costs 5-40 us (docs/python.md
// measures it). Reading x's dtype, device, layout and address through torch's Python getters and wrapping y with
// torch.from_numpy cost about twice what this module's C++ reads of the same tensor and one THPVariable_Wrap do.
// The function is plain CPython (METH_FASTCALL) for the same reason: no argument-conversion machinery to fault in.
#include <Python.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>

#include "layer_api.h"

namespace {

using hymoe::python::LayerApi;
using hymoe::python::LayerForwardOutput;

const LayerApi* g_api = nullptr;

// x as the layer reads it in place: a float32 CPU tensor of rank 3, strided and C-contiguous, with no lazy
// negation; anything else goes the general way (hymoe.torch converts it or raises the documented error).
bool readable_in_place(const at::Tensor& x) {
  return x.layout() == at::kStrided && x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 3 &&
         x.is_contiguous() && !x.is_neg();
}

// forward(layer handle, x, train, step, max_steps) -> (forward_id, y, aux_loss, z_loss), or None when x is not a tensor
// the layer reads in place. expert_counts stay in the layer (MoELayer.expert_counts()).
PyObject* forward(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5) {
    PyErr_Format(PyExc_TypeError, "hymoe._torch_core.forward takes 5 arguments (%zd given)", nargs);
    return nullptr;
  }
  void* layer = PyCapsule_IsValid(args[0], hymoe::python::kLayerHandleCapsule)
                    ? PyCapsule_GetPointer(args[0], hymoe::python::kLayerHandleCapsule)
                    : nullptr;
  if (layer == nullptr) {
    PyErr_SetString(PyExc_TypeError, "hymoe._torch_core.forward: the first argument is not MoELayer._handle()");
    return nullptr;
  }
  if (!THPVariable_Check(args[1])) Py_RETURN_NONE;
  const at::Tensor& x = THPVariable_Unpack(args[1]);
  if (!readable_in_place(x)) Py_RETURN_NONE;
  const int train = PyObject_IsTrue(args[2]);
  const int64_t step = PyLong_AsLongLong(args[3]), max_steps = PyLong_AsLongLong(args[4]);
  if (train < 0 || PyErr_Occurred()) return nullptr;

  LayerForwardOutput out;
  const auto sizes = x.sizes();
  g_api->forward(layer, x.data_ptr<float>(), sizes.data(), static_cast<int>(sizes.size()), train != 0, step,
                 max_steps, &out);
  if (!out.error.empty()) {
    PyErr_SetString(out.error_is_bad_input ? PyExc_ValueError : PyExc_RuntimeError, out.error.c_str());
    return nullptr;
  }
  void* owner = out.y_owner;
  const LayerApi* api = g_api;
  at::Tensor y = at::from_blob(
      out.y, sizes, [owner, api](void*) { api->release_output(owner); }, at::TensorOptions().dtype(at::kFloat));
  PyObject* y_object = THPVariable_Wrap(std::move(y));
  if (y_object == nullptr) return nullptr;
  return Py_BuildValue("(LNdd)", static_cast<long long>(out.forward_id), y_object,
                       static_cast<double>(out.aux_loss), static_cast<double>(out.z_loss));
}

PyMethodDef kMethods[] = {
    {"forward", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&forward)), METH_FASTCALL,
     "forward(layer_handle, x, train, step, max_steps) -> (forward_id, y, aux_loss, z_loss) or None"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_torch_core",
                       "hymoe's MoE forward on torch tensors (private: hymoe.torch uses it)", -1, kMethods,
                       nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__torch_core() {
  // torch first: THPVariable_Check needs torch's tensor type registered.
  PyObject* torch = PyImport_ImportModule("torch");
  if (torch == nullptr) return nullptr;
  Py_DECREF(torch);
  g_api = static_cast<const LayerApi*>(PyCapsule_Import(hymoe::python::kLayerApiCapsule, 0));
  if (g_api == nullptr) return nullptr;
  return PyModule_Create(&kModule);
}
