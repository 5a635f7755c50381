// Tensor: a dense, row-major, owning float32 array with a shape. This is the value type at the library's
// boundary (inputs, outputs, weights as loaded); kernels work on raw pointers and strides, never on Tensor.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace hymoe {

using Shape = std::vector<int64_t>;

// "(2, 3, 4)" — how shapes appear in error messages.
std::string shape_to_string(const Shape& shape);
// Product of the dimensions; 1 for a 0-d shape. Throws on negative dimensions or overflow.
int64_t shape_numel(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape, float fill = 0.0f);
  Tensor(Shape shape, std::vector<float> values);
  static Tensor scalar(float value) { return Tensor(Shape{}, std::vector<float>{value}); }

  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const;  // negative i counts from the end
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return static_cast<int64_t>(values_.size()); }
  bool empty() const { return values_.empty(); }

  float* data() { return values_.data(); }
  const float* data() const { return values_.data(); }
  std::span<float> values() { return values_; }
  std::span<const float> values() const { return values_; }
  float& operator[](int64_t i) { return values_[static_cast<size_t>(i)]; }
  float operator[](int64_t i) const { return values_[static_cast<size_t>(i)]; }

  // Same data, new shape with the same number of elements.
  Tensor reshaped(Shape shape) const;

 private:
  Shape shape_;
  std::vector<float> values_;
};

}  // namespace hymoe
