// `hymoe inspect`: what a safetensors file holds (names, dtypes, shapes, bytes, metadata); GGUF files go to
// inspect_gguf.cc.
#include <fmt/format.h>

#include "commands.h"
#include "hymoe/safetensors.h"
#include "inspect_gguf.h"

namespace hymoe::tool {
namespace {

int run_inspect(const std::vector<std::string>& paths) {
  for (const auto& path : paths) {
    if (is_gguf_file(path)) {
      inspect_gguf(path);
      continue;
    }
    const SafetensorsFile file = SafetensorsFile::open(path);
    uint64_t total = 0;
    size_t width = 4;
    for (const auto& t : file.tensors()) width = std::max(width, t.name.size());
    fmt::print("{}: {} tensors\n", path, file.tensors().size());
    fmt::print("  {:<{}}  {:<5}  {:<22}  {:>12}\n", "name", width, "dtype", "shape", "bytes");
    for (const auto& t : file.tensors()) {
      fmt::print("  {:<{}}  {:<5}  {:<22}  {:>12}\n", t.name, width, dtype_name(t.dtype), shape_to_string(t.shape),
                 t.bytes());
      total += t.bytes();
    }
    fmt::print("  total {} bytes of tensor data\n", total);
    for (const auto& [k, v] : file.metadata()) fmt::print("  metadata {} = {}\n", k, v);
  }
  return 0;
}

}  // namespace

Action add_inspect_command(CLI::App& app) {
  auto paths = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("inspect", "List the tensors of safetensors files; for GGUF files also the model (blocks, experts, routing)");
  cmd->add_option("files", *paths, "safetensors or GGUF files")->required()->check(CLI::ExistingFile);
  return [paths] { return run_inspect(*paths); };
}

}  // namespace hymoe::tool
