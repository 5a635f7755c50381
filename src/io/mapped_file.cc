// MappedFile: mmap of a regular file (read-only, private) or an owned in-memory copy (of bytes, or of a stream).
#include "hymoe/mapped_file.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "hymoe/error.h"
#include "hymoe/file_io.h"

namespace hymoe {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) { return open(InputFile(path)); }

std::shared_ptr<const MappedFile> MappedFile::open(const InputFile& in) {
  if (in.is_stream()) {  // a pipe cannot be mapped: its bytes are read into memory, within the limit
    return from_bytes(in.read_all_bytes(max_streamed_input_bytes()));
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  if (in.size_bytes() > 0) {
    void* map = mmap(nullptr, static_cast<size_t>(in.size_bytes()), PROT_READ, MAP_PRIVATE, in.fd(), 0);
    if (map == MAP_FAILED) fail(in.path(), ": cannot map: ", std::strerror(errno));
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
