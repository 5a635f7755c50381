// Whole-file reads and atomic writes shared by every reader and writer of hymoe's files, so each reports a
// missing or unreadable file the same way and no writer leaves a partial file behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace hymoe {

// Text inputs (count files, traces, PLAN.json) larger than this are refused before a byte is read.
inline constexpr uint64_t kMaxTextFileBytes = uint64_t{1} << 30;
// The limit for small JSON documents (MoE configs, bench shape files): a real one is well under a kilobyte.
inline constexpr uint64_t kMaxConfigFileBytes = uint64_t{16} << 20;

// An input file opened for reading that is known to be a regular file: a directory, FIFO, socket or device is
// refused by name before anything is read, and opening never blocks (a FIFO without a writer would).
class InputFile {
 public:
  // Throws hymoe::Error naming `path` when it is missing, unreadable or not a regular file.
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int fd() const { return fd_; }
  uint64_t size_bytes() const { return size_bytes_; }

 private:
  int fd_ = -1;
  uint64_t size_bytes_ = 0;
};

// The whole regular file `path` as a string. Throws hymoe::Error naming the path when it cannot be opened, is not
// a regular file, or is larger than `max_bytes`.
std::string read_text_file(const std::string& path, uint64_t max_bytes = kMaxTextFileBytes);

// Writes `bytes` to `path` through a temporary file and a rename (no partial output on failure).
void write_file_atomically(const std::string& path, std::span<const std::byte> bytes);

}  // namespace hymoe
