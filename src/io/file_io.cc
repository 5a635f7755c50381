// Inputs opened once and read whole, at offsets, or as streams (see file_io.h).
#include "hymoe/file_io.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "hymoe/error.h"

namespace hymoe {

namespace {

constexpr size_t kStreamChunkBytes = size_t{1} << 16;

}  // namespace

InputFile::InputFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever. Reads of a stream poll
  // first (read_all), so the flag never turns a wait into a premature end.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) fail(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    fail(path, ": cannot stat: ", std::strerror(err));
  }
  if (S_ISDIR(st.st_mode) || S_ISSOCK(st.st_mode)) {
    ::close(fd_);
    fail(path, ": is ", S_ISDIR(st.st_mode) ? "a directory" : "a socket", ", which cannot be read as a file");
  }
  stream_ = !S_ISREG(st.st_mode);
  size_bytes_ = stream_ ? 0 : static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() { ::close(fd_); }

size_t InputFile::read_at(uint64_t offset, char* buffer, size_t n) const {
  HYMOE_CHECK(!stream_, path_);
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, buffer + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(path_, ": read failed: ", std::strerror(errno));
    if (got == 0) break;  // the end (or the file shrank while being read: what is there is what it holds)
    done += static_cast<size_t>(got);
  }
  return done;
}

namespace {

// The whole input (into a std::string or a byte vector): see read_all.
template <typename Buffer>
Buffer read_whole(const InputFile& in, uint64_t max_bytes) {
  Buffer out;
  if (!in.is_stream()) {
    if (in.size_bytes() > max_bytes)
      fail(in.path(), ": is ", in.size_bytes(), " bytes, over the limit of ", max_bytes, " bytes for this kind of input");
    out.resize(static_cast<size_t>(in.size_bytes()));
    out.resize(in.read_at(0, reinterpret_cast<char*>(out.data()), out.size()));
    return out;
  }
  // A FIFO opened without blocking reads as ended until its writer comes; poll waits for the writer's first bytes
  // or its close (Linux reports no hang-up on a FIFO that has had no writer since it was opened).
  while (true) {
    pollfd p{in.fd(), POLLIN, 0};
    if (::poll(&p, 1, -1) < 0) {
      if (errno == EINTR) continue;
      fail(in.path(), ": cannot wait for input: ", std::strerror(errno));
    }
    const size_t had = out.size();
    out.resize(had + kStreamChunkBytes);
    const ssize_t got = ::read(in.fd(), reinterpret_cast<char*>(out.data()) + had, kStreamChunkBytes);
    const int err = errno;
    out.resize(had + static_cast<size_t>(std::max<ssize_t>(got, 0)));
    if (got < 0 && (err == EINTR || err == EAGAIN)) continue;
    if (got < 0) fail(in.path(), ": read failed: ", std::strerror(err));
    if (got == 0) return out;
    if (out.size() > max_bytes)
      fail(in.path(), ": holds more than the limit of ", max_bytes, " bytes for this kind of input (read as a stream)");
  }
}

}  // namespace

std::string InputFile::read_all(uint64_t max_bytes) const { return read_whole<std::string>(*this, max_bytes); }

std::vector<std::byte> InputFile::read_all_bytes(uint64_t max_bytes) const {
  return read_whole<std::vector<std::byte>>(*this, max_bytes);
}

uint64_t max_streamed_input_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_bytes <= 0) return kMaxTextFileBytes;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_bytes) / 2;
}

std::string read_text_file(const std::string& path, uint64_t max_bytes) { return InputFile(path).read_all(max_bytes); }

}  // namespace hymoe
