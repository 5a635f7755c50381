// MappedFile: mmap of a regular file (read-only, private) or an owned in-memory copy.
#include "hymoe/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hymoe/error.h"

namespace hymoe {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, ": cannot stat: ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, ": not a regular file");
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  if (st.st_size > 0) {
    void* map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      fail(path, ": cannot map: ", std::strerror(err));
    }
    file->map_ = map;
    file->map_size_ = static_cast<size_t>(st.st_size);
  }
  ::close(fd);
  return file;
}

std::shared_ptr<const MappedFile> MappedFile::from_bytes(std::vector<std::byte> bytes) {
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->owned_ = std::move(bytes);
  return file;
}

MappedFile::~MappedFile() {
  if (map_) munmap(map_, map_size_);
}

std::span<const std::byte> MappedFile::view() const {
  if (map_) return {static_cast<const std::byte*>(map_), map_size_};
  return owned_;
}

}  // namespace hymoe
