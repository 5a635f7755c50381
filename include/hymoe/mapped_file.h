// A file image for the binary readers: a read-only memory map of a regular file, the bytes of a stream (a pipe or
// device, read into memory within max_streamed_input_bytes()), or bytes handed over in memory (tests, fuzzing). Readers keep a shared_ptr to it so views into the image stay valid as long as any copy of
// the reader lives.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace hymoe {

class InputFile;

class MappedFile {
 public:
  // Throws hymoe::Error naming the path when it cannot be opened or read (a directory, a socket), cannot be mapped,
  // or is a stream longer than the limit.
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  static std::shared_ptr<const MappedFile> open(const InputFile& file);
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
