// Helpers shared by the tests: data paths, tolerance-based comparison, running the hymoe command.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "hymoe/error.h"
#include "hymoe/tensor.h"

namespace hymoe::test {

inline std::string data_dir() { return HYMOE_TEST_DATA_DIR; }
inline std::string tool_path() { return HYMOE_TOOL_PATH; }

// |got - exp| <= atol + rtol*|exp| elementwise, with a message naming the first failure.
inline ::testing::AssertionResult all_close(const Tensor& got, const Tensor& exp, double rtol, double atol) {
  if (got.shape() != exp.shape())
    return ::testing::AssertionFailure() << "shape " << shape_to_string(got.shape()) << " != expected "
                                         << shape_to_string(exp.shape());
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got[i], e = exp[i];
    if (!(std::abs(g - e) <= atol + rtol * std::abs(e)))
      return ::testing::AssertionFailure() << "element " << i << ": got " << g << ", expected " << e << " (rtol "
                                           << rtol << ", atol " << atol << ")";
  }
  return ::testing::AssertionSuccess();
}

// Runs a shell command line, returning its exit status; stdout+stderr land in *output.
int run_command(const std::string& command, std::string* output);

// The message of the hymoe::Error that f() throws, or "" when it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A fresh, empty temporary directory (removed at process exit is not guaranteed; under the build's tmp).
std::string temp_dir(const std::string& tag);

// A temp_dir removed with everything in it when the object goes out of scope, whether the test passed or not.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& tag) : path_(temp_dir(tag)) {}
  ~ScopedTempDir();
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace hymoe::test
