// TensorSource over safetensors files: one file, a directory of *.safetensors, or a directory whose
// model.safetensors.index.json maps every tensor to its shard. Each file is memory-mapped and its header
// validated once (SafetensorsFile); a tensor's bytes are only touched when a caller reads them.
#include <algorithm>
#include <filesystem>
#include <map>

#include "hymoe/error.h"
#include "hymoe/model.h"
#include "hymoe/safetensors.h"

namespace hymoe {
namespace {

namespace fs = std::filesystem;

class SafetensorsSource final : public TensorSource {
 public:
  explicit SafetensorsSource(const std::string& path) : label_(path) {
    const fs::path p(path);
    if (fs::is_regular_file(p)) {
      add_file(p, nullptr);
    } else if (fs::is_directory(p)) {
      const fs::path index = p / "model.safetensors.index.json";
      if (fs::exists(index)) {
        open_indexed(p, index);
      } else {
        std::vector<fs::path> files;
        for (const auto& e : fs::directory_iterator(p))
          if (e.is_regular_file() && e.path().extension() == ".safetensors") files.push_back(e.path());
        std::sort(files.begin(), files.end());
        if (files.empty()) fail(path, ": no model.safetensors.index.json and no *.safetensors file");
        for (const auto& f : files) add_file(f, nullptr);
      }
    } else {
      fail(path, ": no such file or directory");
    }
  }

  const std::string& label() const override { return label_; }
  bool contains(const std::string& name) const override { return where_.count(name) != 0; }

  TensorRef tensor(const std::string& name) const override {
    auto it = where_.find(name);
    if (it == where_.end())
      fail(label_, ": tensor '", name, "' is not in the checkpoint",
           indexed_ ? " (model.safetensors.index.json's weight_map does not list it)" : "");
    const SafetensorsFile& f = files_[it->second];
    const TensorInfo& info = f.info(name);
    return TensorRef{name, info.dtype, info.shape, f.bytes(name), f.label(), std::nullopt};
  }

  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [name, i] : where_) out.push_back(name);
    return out;
  }

 private:
  // Opens one file; with `only`, registers just the tensors the index assigns to it.
  void add_file(const fs::path& file, const std::vector<std::string>* only) {
    files_.push_back(SafetensorsFile::open(file.string()));
    const size_t i = files_.size() - 1;
    const SafetensorsFile& f = files_[i];
    if (only) {
      for (const auto& name : *only) {
        if (!f.contains(name))
          fail(label_, ": model.safetensors.index.json places tensor '", name, "' in ", file.filename().string(),
               ", which does not hold it");
        where_[name] = i;
      }
      return;
    }
    for (const auto& t : f.tensors())
      if (!where_.emplace(t.name, i).second)
        fail(label_, ": tensor '", t.name, "' is stored twice (", files_[where_[t.name]].label(), " and ", f.label(), ")");
  }

  void open_indexed(const fs::path& dir, const fs::path& index_path) {
    indexed_ = true;
    const HfConfig index = HfConfig::load(index_path.string());
    std::map<std::string, std::vector<std::string>> by_shard;
    for (auto& [name, shard] : index.string_map("weight_map")) {
      if (shard.empty() || fs::path(shard).has_parent_path())
        fail(index_path.string(), ": weight_map entry '", name, "' names shard '", shard, "', not a file name");
      by_shard[shard].push_back(name);
    }
    for (const auto& [shard, names] : by_shard) {
      const fs::path file = dir / shard;
      if (!fs::exists(file))
        fail(label_, ": shard '", shard, "' named by model.safetensors.index.json is missing (", names.size(),
             " tensors, e.g. '", names.front(), "')");
      add_file(file, &names);
    }
  }

  std::string label_;
  bool indexed_ = false;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> where_;
};

}  // namespace

std::unique_ptr<TensorSource> open_safetensors_source(const std::string& path) {
  return std::make_unique<SafetensorsSource>(path);
}

}  // namespace hymoe
