// Helpers of the model-layer tests: where the shared HF cases are, and copies of them that a test may edit.
#pragma once

#include <filesystem>
#include <string>

#include "test_util.h"

namespace hymoe::test {

// A Hugging Face case: the shared ones (conformance/hf) or those scripts/make_hf_family_cases.py writes (hf-extra).
inline std::string hf_case_dir(const std::string& name) {
  const std::string shared = data_dir() + "/conformance/hf/" + name;
  return std::filesystem::exists(shared) ? shared : data_dir() + "/conformance/hf-extra/" + name;
}

// Copies the case's config.json and weights.safetensors into `dir` (writable); returns dir.
inline std::string copy_hf_case(const std::string& name, const std::string& dir) {
  for (const char* f : {"config.json", "weights.safetensors"}) {
    std::filesystem::copy_file(hf_case_dir(name) + "/" + f, dir + "/" + f);
    std::filesystem::permissions(dir + "/" + f, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  }
  return dir;
}

}  // namespace hymoe::test
