// MappedFile: mmap of a regular file (read-only, private) or an owned in-memory copy.
#include "hymoe/mapped_file.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "hymoe/error.h"
#include "hymoe/file_io.h"

namespace hymoe {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  // InputFile opens without blocking and refuses directories, devices and FIFOs by kind (a FIFO without a writer
  // would otherwise block in open()).
  const InputFile in(path);
  std::shared_ptr<MappedFile> file(new MappedFile());
  if (in.size_bytes() > 0) {
    void* map = mmap(nullptr, static_cast<size_t>(in.size_bytes()), PROT_READ, MAP_PRIVATE, in.fd(), 0);
    if (map == MAP_FAILED) fail(path, ": cannot map: ", std::strerror(errno));
    file->map_ = map;
    file->map_size_ = static_cast<size_t>(in.size_bytes());
  }
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
