// `hymoe inspect`: what a safetensors file holds (names, dtypes, shapes, bytes, metadata); GGUF files go to
// inspect_gguf.cc.
#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include <filesystem>

#include "hymoe/error.h"
#include "hymoe/file_io.h"
#include "hymoe/mapped_file.h"
#include "hymoe/model.h"
#include "hymoe/safetensors.h"
#include "inspect_gguf.h"
#include "model_commands.h"

namespace hymoe::tool {
namespace {

// A name or metadata string from the file as it may reach the terminal: as it is when it is plain printable ASCII,
// else quoted with every other byte escaped (a name cannot carry terminal control sequences).
std::string shown(const std::string& text) {
  const bool plain = std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  return plain ? text : quote_for_message(text, 1024);
}

int run_inspect(const std::vector<std::string>& paths) {
  for (const auto& path : paths) {
    if (std::filesystem::is_directory(path)) {  // a model directory: describe its MoE layers
      run_model_inspect(path);
      continue;
    }
    // Opened once and chosen by the first bytes (or the name), so a pipe (`inspect <(cat model.gguf)`) is read once.
    const std::shared_ptr<const MappedFile> image = MappedFile::open(InputFile(path));
    if (is_gguf_image(path, image->view())) {
      inspect_gguf(GgufFile::open(image, path));
      continue;
    }
    const SafetensorsFile file = SafetensorsFile::open(image, path);
    uint64_t total = 0;
    size_t width = 4;
    for (const auto& t : file.tensors()) width = std::max(width, shown(t.name).size());
    fmt::print("{}: {} tensors\n", path, file.tensors().size());
    fmt::print("  {:<{}}  {:<5}  {:<22}  {:>12}\n", "name", width, "dtype", "shape", "bytes");
    for (const auto& t : file.tensors()) {
      fmt::print("  {:<{}}  {:<5}  {:<22}  {:>12}\n", shown(t.name), width, dtype_name(t.dtype), shape_to_string(t.shape),
                 t.bytes());
      total += t.bytes();
    }
    fmt::print("  total {} bytes of tensor data\n", total);
    for (const auto& [k, v] : file.metadata()) fmt::print("  metadata {} = {}\n", shown(k), shown(v));
  }
  return 0;
}

}  // namespace

Action add_inspect_command(CLI::App& app) {
  auto paths = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("inspect", "List the tensors of safetensors files, describe a Hugging Face model directory, or a GGUF file's model (blocks, experts, routing)");
  cmd->add_option("files", *paths, "safetensors or GGUF files, or Hugging Face model directories")->required()->check(CLI::ExistingPath);
  return [paths] { return run_inspect(*paths); };
}

}  // namespace hymoe::tool
