#include "test_util.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <system_error>
#include <vector>

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

namespace {

std::string make_temp_dir(const std::string& tag) {
  std::string pattern = (std::filesystem::temp_directory_path() / ("hymoe_test_" + tag + "_XXXXXX")).string();
  if (!mkdtemp(pattern.data())) std::abort();
  return pattern;
}

// Directories handed out by temp_dir(), removed when the test program exits (a static's destructor runs after
// main returns, also after failed tests).
struct ExitCleanup {
  std::vector<std::unique_ptr<TempDir>> dirs;
};

}  // namespace

TempDir::TempDir(const std::string& tag) : path_(make_temp_dir(tag)) {}

TempDir::~TempDir() {
  std::error_code ignored;  // a destructor cannot report; a leftover directory is not worth aborting for
  std::filesystem::remove_all(path_, ignored);
}

std::string temp_dir(const std::string& tag) {
  static ExitCleanup cleanup;
  cleanup.dirs.push_back(std::make_unique<TempDir>(tag));
  return cleanup.dirs.back()->path();
}

}  // namespace hymoe::test
