// `hymoe inspect` for GGUF files (inspect_gguf.cc); cmd_inspect.cc dispatches here on the file's magic.
#pragma once

#include <string>

namespace hymoe::tool {

// Whether `path` starts with the GGUF magic.
bool is_gguf_file(const std::string& path);
// Prints the file's model summary (architecture, blocks, experts, routing, bytes), metadata and tensors.
void inspect_gguf(const std::string& path);

}  // namespace hymoe::tool
