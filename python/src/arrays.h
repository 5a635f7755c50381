// How arrays cross between Python and C++ in hymoe._core. Python passes numpy arrays (torch CPU tensors arrive as
// numpy views of the same memory: hymoe/_arrays.py); C++ results leave as numpy arrays that own the C++ buffer
// (moved, never copied), which the Python side wraps as torch tensors without a copy when the input was torch.
// docs/python.md states the rules.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "hymoe/tensor.h"

namespace hymoe::python {

namespace py = pybind11;

// A numeric array of any rank as a float32 Tensor of the same shape (the library's owning value type, so this is
// the one copy; float32 C-contiguous input is read in place, other dtypes convert as `.to(torch.float32)` does).
// Raises TypeError naming `name` for a non-numeric array.
Tensor to_tensor_f32(const py::array& array, const char* name);

// A C-contiguous array of dtype `want` viewed in place (no copy): its buffer, or TypeError / ValueError naming
// `name` with the dtype, layout or writability that is wrong.
py::buffer_info contiguous_view(const py::array& array, const py::dtype& want, const char* name, bool writable);

// `values` moved into a numpy array of `shape` (row-major) that owns them: no copy.
template <typename T>
py::array_t<T> to_numpy(std::vector<T>&& values, std::vector<py::ssize_t> shape) {
  auto owner = std::make_unique<std::vector<T>>(std::move(values));
  T* data = owner->data();
  py::capsule base(owner.get(), [](void* p) { delete static_cast<std::vector<T>*>(p); });
  owner.release();
  return py::array_t<T>(std::move(shape), data, base);
}

// A 0/1 byte mask moved into a numpy bool array of `shape` (bool is one byte holding 0 or 1): no copy.
py::array mask_to_numpy(std::vector<uint8_t>&& mask, std::vector<py::ssize_t> shape);

// A Tensor's values moved into a float32 numpy array of its shape: no copy.
py::array_t<float> tensor_to_numpy(Tensor&& tensor);

}  // namespace hymoe::python
