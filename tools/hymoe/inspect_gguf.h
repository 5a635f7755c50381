// `hymoe inspect` for GGUF files (inspect_gguf.cc); cmd_inspect.cc dispatches here by is_gguf_model_path (model.h),
// the rule forward --model and bench --model use too.
#pragma once

#include <string>

namespace hymoe::tool {

// Prints the file's model summary (architecture, blocks, experts, routing, bytes), metadata and tensors.
void inspect_gguf(const std::string& path);

}  // namespace hymoe::tool
