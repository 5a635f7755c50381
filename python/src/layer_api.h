// The C-level interface that hymoe._core offers hymoe._torch_core (python/src/torch_core.cc) through the capsule
// hymoe._core._layer_api: the MoE layer's forward on a raw float32 buffer, with no Python object made. _torch_core
// links PyTorch and turns torch tensors into buffers and back without Python-level calls; _core stays free of
// PyTorch, so hymoe.placement and numpy users never load it. Both modules come from one build, so the struct
// needs no versioning beyond the capsule's name.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>

namespace hymoe::python {

struct LayerForwardOutput {
  int64_t forward_id = 0;
  float aux_loss = 0.0f, z_loss = 0.0f;
  float* y = nullptr;        // (x's shape), row-major, owned by y_owner
  void* y_owner = nullptr;   // release with LayerApi::release_output
  std::string error;         // non-empty: the forward failed; y_owner is null
  bool error_is_bad_input = false;  // a hymoe::Error (ValueError in Python); otherwise RuntimeError
};

// hymoe._core.MoELayer._handle() gives a capsule of this name holding the C++ layer and a reference to its
// Python object, made once per module: reading it per call is one C call, not a pybind11 type lookup.
inline constexpr const char* kLayerHandleCapsule = "hymoe._core.MoELayer";

struct LayerApi {
  // Forward of the C-contiguous float32 array x of `shape` (rank `ndim`); called with the GIL held, copies x
  // into the layer before releasing it for the computation, holds it again on return.
  void (*forward)(void* layer, const float* x, const int64_t* shape, int ndim, bool train, int64_t step,
                  int64_t max_steps, LayerForwardOutput* out);
  void (*release_output)(void* y_owner);  // safe without the GIL
};

inline constexpr const char* kLayerApiCapsule = "hymoe._core._layer_api";

}  // namespace hymoe::python
