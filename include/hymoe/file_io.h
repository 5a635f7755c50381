// Whole-file reads and atomic writes shared by every reader and writer of hymoe's files, so each reports a
// missing or unreadable file the same way and no writer leaves a partial file behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hymoe {

// Text inputs (count files, traces, PLAN.json) larger than this are refused: a regular file before a byte is read,
// a stream as soon as it passes the limit.
inline constexpr uint64_t kMaxTextFileBytes = uint64_t{1} << 30;
// The limit for small JSON documents (MoE configs, bench shape files): a real one is well under a kilobyte.
inline constexpr uint64_t kMaxConfigFileBytes = uint64_t{16} << 20;

// An input opened once for reading; everything after the open works on the descriptor, never on the name again.
// A regular file has a size and can be read at any offset (a reader may make several passes). A FIFO, a pipe
// (`<(...)`, /dev/stdin) or a character or block device is a stream: read once, front to back, until its end, and
// held to the caller's limit as it is read. A directory or socket is refused by name before a byte is read.
// Opening never blocks (a FIFO without a writer would); reading a stream waits for its writer, as `cat` does.
class InputFile {
 public:
  // Throws hymoe::Error naming `path` when it is missing, unreadable, a directory or a socket.
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  bool is_stream() const { return stream_; }
  uint64_t size_bytes() const { return size_bytes_; }  // regular files; 0 for a stream

  // The whole input. A regular file larger than `max_bytes` is refused before a byte is read; a stream is read
  // until it ends and refused as soon as it passes `max_bytes`. Call once for a stream.
  std::string read_all(uint64_t max_bytes) const;
  std::vector<std::byte> read_all_bytes(uint64_t max_bytes) const;
  // Regular files only: up to `n` bytes from `offset` (fewer at the end), without moving the descriptor.
  size_t read_at(uint64_t offset, char* buffer, size_t n) const;

 private:
  std::string path_;
  int fd_ = -1;
  bool stream_ = false;
  uint64_t size_bytes_ = 0;
};

// The limit for inputs that are memory-mapped when they are regular files (safetensors, GGUF) and read into
// memory when they are streams: half of this machine's physical memory.
uint64_t max_streamed_input_bytes();

// The whole input `path` as a string (InputFile::read_all). Throws hymoe::Error naming the path when it cannot
// be opened, cannot be read, or holds more than `max_bytes`.
std::string read_text_file(const std::string& path, uint64_t max_bytes = kMaxTextFileBytes);

// Writes `bytes` to `path` through a short temporary file and a rename (no partial output on failure), with the
// checks of hymoe::OutputFiles (defined in output_files.cc): a directory or socket is refused, a character device or
// FIFO written directly. A command with inputs or several outputs uses OutputFiles itself.
void write_file_atomically(const std::string& path, std::span<const std::byte> bytes);

}  // namespace hymoe
