// The files one command writes, handled as one transaction: declared with the command's inputs before any work,
// checked then (so an output that would replace an input, or could not be written, is refused before anything is
// read or computed), and committed together after the work (so a failure leaves every output as it was).
// Depends only on core (hymoe::Error).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hymoe {

class OutputFiles {
 public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  // Removes every staged temporary that was not committed, so a command that fails leaves nothing behind.
  ~OutputFiles();

  // `flag` names the file in messages ("--output", "--stats"); a path that is empty (an optional file not given)
  // is skipped. Flags of outputs must be distinct; they are the handle for stage().
  void add_input(std::string flag, std::string path);
  void add_output(std::string flag, std::string path);

  // Refuses, with a hymoe::Error naming the flags and paths:
  //  - an output that is the same file as an input or as another output (same device and inode when it exists,
  //    same directory and name when it does not: spelling, symbolic and hard links do not matter);
  //  - an output whose directory does not exist or is not writable, or that exists and is not writable;
  //  - an output that exists and is neither a regular file, a character device nor a FIFO (a directory, a socket,
  //    a block device), or is a symbolic link to nothing.
  // A regular file named through a symbolic link is replaced where it lies (the link stays); a character device or
  // FIFO (/dev/null, /dev/stdout on a pipe) is written directly and never renamed over.
  void check();

  // The contents of the output declared as `flag`, written to a short temporary name in its directory (or held,
  // for a device or FIFO); a no-op for an output given no path. Needs check() first.
  void stage(const std::string& flag, std::span<const std::byte> bytes);
  void stage(const std::string& flag, std::string_view text);
  // True when the output declared as `flag` was given a path.
  bool wanted(const std::string& flag) const;

  // Writes the device outputs, then renames every temporary onto its target. Every output given a path must have
  // been staged. All temporaries are written before the first rename, so a failure to write any output (a full
  // disk) leaves every target untouched; a rename within one directory does not run out of space.
  void commit();

 private:
  struct Input {
    std::string flag, path;
  };
  struct Output {
    std::string flag, path;
    std::string target;     // the name renamed over (the path with symbolic links resolved) or written directly
    std::string directory;  // where the temporary lives: the target's directory
    bool direct = false;    // a character device or FIFO: written in place
    std::string name;       // the target's last component
    bool exists = false;
    dev_t dev = 0, dir_dev = 0;  // identity of the existing file, and of its directory
    ino_t ino = 0, dir_ino = 0;
    mode_t mode = 0;        // of the existing regular file, kept by its replacement
    std::string temporary;  // staged contents, until commit
    std::vector<std::byte> held;  // staged contents of a direct output
    bool staged = false;
  };
  Output& output(const std::string& flag);
  const Output* find_output(const std::string& flag) const;
  void remove_temporaries() noexcept;

  std::vector<Input> inputs_;
  std::vector<Output> outputs_;
  bool checked_ = false, committed_ = false;
};

}  // namespace hymoe
