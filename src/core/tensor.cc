// Tensor: shape arithmetic with overflow checks, so a hostile shape from a file cannot wrap around.
#include "hymoe/tensor.h"

#include <limits>

#include "hymoe/error.h"

namespace hymoe {

std::string shape_to_string(const Shape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() == 1) out += ",";
  return out + ")";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) fail("negative dimension in shape ", shape_to_string(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) fail("shape ", shape_to_string(shape), " is too large");
    n *= d;
  }
  return n;
}

Tensor::Tensor(Shape shape, float fill)
    : shape_(std::move(shape)), values_(static_cast<size_t>(shape_numel(shape_)), fill) {}

Tensor::Tensor(Shape shape, std::vector<float> values) : shape_(std::move(shape)), values_(std::move(values)) {
  if (static_cast<int64_t>(values_.size()) != shape_numel(shape_))
    fail("tensor of shape ", shape_to_string(shape_), " needs ", shape_numel(shape_), " values, got ", values_.size());
}

int64_t Tensor::dim(int i) const {
  const int r = rank();
  const int j = i < 0 ? i + r : i;
  HYMOE_CHECK(j >= 0 && j < r, "dim ", i, " of a rank-", r, " tensor");
  return shape_[static_cast<size_t>(j)];
}

Tensor Tensor::reshaped(Shape shape) const {
  if (shape_numel(shape) != numel())
    fail("cannot reshape ", shape_to_string(shape_), " to ", shape_to_string(shape));
  return Tensor(std::move(shape), values_);
}

}  // namespace hymoe
