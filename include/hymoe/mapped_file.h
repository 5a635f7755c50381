// A file image for the binary readers: a read-only memory map of a regular file, or bytes handed over in memory
// (tests, fuzzing). Readers keep a shared_ptr to it so views into the image stay valid as long as any copy of
// the reader lives.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace hymoe {

class MappedFile {
 public:
  // Throws hymoe::Error naming the path when it cannot be opened, is not a regular file or cannot be mapped.
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  static std::shared_ptr<const MappedFile> from_bytes(std::vector<std::byte> bytes);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> view() const;

 private:
  MappedFile() = default;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::vector<std::byte> owned_;
};

}  // namespace hymoe
