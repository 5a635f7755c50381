// Input files: a regular file is read by its size, a FIFO, pipe or device as a stream that waits for its writer
// and is refused as soon as it passes its limit; a directory is refused by name without blocking or reading.
#include "hymoe/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "hymoe/error.h"
#include "hymoe/safetensors.h"
#include "test_util.h"

namespace hymoe {
namespace {

using test::error_of;

TEST(ReadTextFile, ReadsARegularFile) {
  const test::TempDir dir("read");
  std::ofstream(dir.path("a.txt"), std::ios::binary) << std::string("x\0y\n", 4);
  EXPECT_EQ(read_text_file(dir.path("a.txt")), std::string("x\0y\n", 4));
  std::ofstream(dir.path("empty.txt")).close();
  EXPECT_EQ(read_text_file(dir.path("empty.txt")), "");
}

TEST(ReadTextFile, RefusesWhatCannotBeRead) {
  const test::TempDir dir("read");
  EXPECT_EQ(error_of([&] { read_text_file(dir.path()); }), dir.path() + ": is a directory, which cannot be read as a file");
  EXPECT_NE(error_of([&] { read_text_file(dir.path("missing")); }).find("missing: cannot open: No such file"),
            std::string::npos);
}

// Writes `bytes` into the FIFO `path` from another thread, after `delay`: opening for writing blocks until the
// reader has opened it, so the reader meets a FIFO without a writer first (which reads as ended unless it waits).
std::thread fifo_writer(const std::string& path, std::string bytes, std::chrono::milliseconds delay) {
  return std::thread([path, bytes = std::move(bytes), delay] {
    std::this_thread::sleep_for(delay);
    std::ofstream out(path, std::ios::binary);
    for (size_t i = 0; i < bytes.size(); i += 7) {  // several writes, so the reader sees the stream in pieces
      out.write(bytes.data() + i, static_cast<std::streamsize>(std::min<size_t>(7, bytes.size() - i)));
      out.flush();
    }
  });
}

TEST(ReadTextFile, ReadsAFifoAndDevicesAsStreams) {
  const test::TempDir dir("read");
  ASSERT_EQ(mkfifo(dir.path("fifo").c_str(), 0600), 0);
  const std::string text = std::string("{\"dim\": 8,\0 \"x\": [1, 2, 3]}\n") + std::string(3000, ' ');
  std::thread writer = fifo_writer(dir.path("fifo"), text, std::chrono::milliseconds(200));
  EXPECT_EQ(read_text_file(dir.path("fifo")), text);
  writer.join();
  EXPECT_EQ(read_text_file("/dev/null"), "");
}

TEST(ReadTextFile, AStreamPastItsLimitIsRefusedNamingTheLimit) {
  const test::TempDir dir("read");
  // /dev/zero never ends: the limit ends it.
  EXPECT_EQ(error_of([] { read_text_file("/dev/zero", 100000); }),
            "/dev/zero: holds more than the limit of 100000 bytes for this kind of input (read as a stream)");
  ASSERT_EQ(mkfifo(dir.path("fifo").c_str(), 0600), 0);
  std::thread writer = fifo_writer(dir.path("fifo"), std::string(1001, 'a'), std::chrono::milliseconds(0));
  EXPECT_EQ(error_of([&] { read_text_file(dir.path("fifo"), 1000); }),
            dir.path("fifo") + ": holds more than the limit of 1000 bytes for this kind of input (read as a stream)");
  writer.join();
  ASSERT_EQ(mkfifo(dir.path("fifo2").c_str(), 0600), 0);
  writer = fifo_writer(dir.path("fifo2"), std::string(1000, 'a'), std::chrono::milliseconds(0));
  EXPECT_EQ(read_text_file(dir.path("fifo2"), 1000).size(), 1000u);  // exactly the limit is within it
  writer.join();
}

TEST(ReadTextFile, RefusesFilesOverTheLimitBeforeReading) {
  const test::TempDir dir("read");
  std::ofstream(dir.path("big.json")) << std::string(100, ' ');
  EXPECT_EQ(read_text_file(dir.path("big.json"), 100).size(), 100u);
  EXPECT_EQ(error_of([&] { read_text_file(dir.path("big.json"), 99); }),
            dir.path("big.json") + ": is 100 bytes, over the limit of 99 bytes for this kind of input");
}

TEST(SafetensorsOpen, ReadsAFifoIntoMemoryAndRefusesADirectory) {
  const test::TempDir dir("stfifo");
  SafetensorsWriter w;
  w.add("x", Tensor(Shape{2, 3}, {1, 2, 3, 4, 5, 6}));
  const std::vector<std::byte> image = w.serialize();
  ASSERT_EQ(mkfifo((dir.path("w.safetensors")).c_str(), 0600), 0);
  std::thread writer = fifo_writer(dir.path("w.safetensors"),
                                   std::string(reinterpret_cast<const char*>(image.data()), image.size()),
                                   std::chrono::milliseconds(100));
  const SafetensorsFile file = SafetensorsFile::open(dir.path("w.safetensors"));
  writer.join();
  const Tensor x = file.read_f32("x");
  EXPECT_EQ(std::vector<float>(x.values().begin(), x.values().end()), std::vector<float>({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(error_of([&] { SafetensorsFile::open(dir.path()); }), dir.path() + ": is a directory, which cannot be read as a file");
  // An empty stream is a truncated file, named.
  EXPECT_NE(error_of([] { SafetensorsFile::open("/dev/null"); }).find("/dev/null: truncated: 0 bytes"), std::string::npos);
}

}  // namespace
}  // namespace hymoe
