// `hymoe inspect` for GGUF files (inspect_gguf.cc); cmd_inspect.cc dispatches here by the file's first bytes or a
// .gguf name, the rule of is_gguf_model_path (model.h), which forward --model and bench --model use.
#pragma once

#include "hymoe/gguf.h"

namespace hymoe::tool {

// Prints the file's model summary (architecture, blocks, experts, routing, bytes), metadata and tensors.
void inspect_gguf(const GgufFile& file);

}  // namespace hymoe::tool
