// Whole-file reads and atomic writes (temporary file beside the target, then rename).
#include "hymoe/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "hymoe/error.h"

namespace hymoe {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace hymoe
