#include "test_util.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace hymoe::test {

int run_command(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return -1;
  std::array<char, 4096> buf{};
  std::string out;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string temp_dir(const std::string& tag) {
  std::string pattern = (std::filesystem::temp_directory_path() / ("hymoe_test_" + tag + "_XXXXXX")).string();
  if (!mkdtemp(pattern.data())) std::abort();
  return pattern;
}

ScopedTempDir::~ScopedTempDir() {
  std::error_code ignored;  // a destructor must not throw; a leftover directory is the worst case
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace hymoe::test
