// Array conversions of hymoe._core (arrays.h). Depends on the core layer only.
#include "arrays.h"

#include <cstring>
#include <string>

namespace hymoe::python {
namespace {

std::string dtype_name(const py::dtype& d) { return d.attr("name").cast<std::string>(); }

}  // namespace

Tensor to_tensor_f32(const py::array& array, const char* name) {
  const char kind = array.dtype().kind();
  if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b')
    throw py::type_error(std::string(name) + " must hold numbers, got dtype " +
                         dtype_name(array.dtype()));
  // forcecast converts other dtypes and layouts; a float32 C-contiguous array passes through untouched.
  const auto f32 = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(array);
  if (!f32) throw py::error_already_set();
  Shape shape(f32.shape(), f32.shape() + f32.ndim());
  const int64_t n = shape_numel(shape);
  std::vector<float> values(static_cast<size_t>(n));
  if (n) std::memcpy(values.data(), f32.data(), static_cast<size_t>(n) * sizeof(float));
  return Tensor(std::move(shape), std::move(values));
}

py::buffer_info contiguous_view(const py::array& array, const py::dtype& want, const char* name, bool writable) {
  if (!array.dtype().is(want))
    throw py::type_error(std::string(name) + " must have dtype " + dtype_name(want) + ", got " +
                         dtype_name(array.dtype()));
  if (!(array.flags() & py::array::c_style))
    throw py::value_error(std::string(name) + " must be C-contiguous (row-major, no strides); pass a contiguous copy");
  if (writable && !array.writeable()) throw py::value_error(std::string(name) + " must be writable");
  return array.request(writable);
}

py::array mask_to_numpy(std::vector<uint8_t>&& mask, std::vector<py::ssize_t> shape) {
  auto owner = std::make_unique<std::vector<uint8_t>>(std::move(mask));
  uint8_t* data = owner->data();
  py::capsule base(owner.get(), [](void* p) { delete static_cast<std::vector<uint8_t>*>(p); });
  owner.release();
  return py::array(py::dtype("bool"), std::move(shape), {}, data, base);
}

py::array_t<float> tensor_to_numpy(Tensor&& tensor) {
  std::vector<py::ssize_t> shape(tensor.shape().begin(), tensor.shape().end());
  auto owner = std::make_unique<Tensor>(std::move(tensor));
  float* data = owner->data();
  py::capsule base(owner.get(), [](void* p) { delete static_cast<Tensor*>(p); });
  owner.release();
  return py::array_t<float>(std::move(shape), data, base);
}

}  // namespace hymoe::python
