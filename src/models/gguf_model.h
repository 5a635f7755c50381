// The GGUF family (gguf_model.cc), chosen by the file rather than by a model_type.
#pragma once

#include <memory>
#include <string>

#include "hymoe/model.h"

namespace hymoe {

// A GGUF file's family (llama.cpp's semantics for its general.architecture) and its tensors, sharing one mapping.
struct GgufModelParts {
  std::unique_ptr<ModelFamily> family;
  std::unique_ptr<TensorSource> source;
};
GgufModelParts open_gguf_model(const std::string& path);

}  // namespace hymoe
