// Whole-file reads and atomic writes shared by every reader and writer of hymoe's files, so each reports a
// missing or unreadable file the same way and no writer leaves a partial file behind.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace hymoe {

// The file's bytes as a string; throws hymoe::Error naming the path when it cannot be opened.
std::string read_text_file(const std::string& path);

// Writes `bytes` to `path` through a short temporary file and a rename (no partial output on failure), with the
// checks of hymoe::OutputFiles (defined in output_files.cc): a directory or socket is refused, a character device or
// FIFO written directly. A command with inputs or several outputs uses OutputFiles itself.
void write_file_atomically(const std::string& path, std::span<const std::byte> bytes);

}  // namespace hymoe
