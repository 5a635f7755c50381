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

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "of an unknown kind";
}

}  // namespace

InputFile::InputFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever. It changes nothing for
  // the regular files that pass the check below.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) fail(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    fail(path, ": cannot stat: ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    fail(path, ": is ", file_kind(st.st_mode), ", not a regular file");
  }
  size_bytes_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() { ::close(fd_); }

std::string read_text_file(const std::string& path, uint64_t max_bytes) {
  const InputFile file(path);
  if (file.size_bytes() > max_bytes)
    fail(path, ": is ", file.size_bytes(), " bytes, over the limit of ", max_bytes, " bytes for this kind of input");
  std::string text(static_cast<size_t>(file.size_bytes()), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(file.fd(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path, ": read failed: ", std::strerror(errno));
    if (n == 0) break;  // the file shrank while being read: what is there is what it holds
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

void write_file_atomically(const std::string& path, std::span<const std::byte> bytes) {
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) fail(path, ": cannot create a temporary file beside it: ", std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail(path, ": write failed: ", std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  // mkstemp creates 0600; give the file the permissions an ordinary file would get.
  const mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  if (::close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(path, ": cannot write: ", std::strerror(err));
  }
}

}  // namespace hymoe
