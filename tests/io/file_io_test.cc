// Input files: only regular files are read (a directory, device or FIFO is refused by name, without blocking or
// reading), and text inputs over their size limit are refused before they are read.
#include "hymoe/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

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

TEST(ReadTextFile, RefusesWhatIsNotARegularFile) {
  const test::TempDir dir("read");
  EXPECT_EQ(error_of([&] { read_text_file(dir.path()); }), dir.path() + ": is a directory, not a regular file");
  EXPECT_EQ(error_of([] { read_text_file("/dev/zero"); }), "/dev/zero: is a character device, not a regular file");
  // A FIFO with no writer: opening it for reading would block forever without O_NONBLOCK.
  ASSERT_EQ(mkfifo((dir.path("fifo")).c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { read_text_file(dir.path("fifo")); }), dir.path("fifo") + ": is a FIFO (named pipe), not a regular file");
  EXPECT_NE(error_of([&] { read_text_file(dir.path("missing")); }).find("missing: cannot open: No such file"),
            std::string::npos);
}

TEST(ReadTextFile, RefusesFilesOverTheLimitBeforeReading) {
  const test::TempDir dir("read");
  std::ofstream(dir.path("big.json")) << std::string(100, ' ');
  EXPECT_EQ(read_text_file(dir.path("big.json"), 100).size(), 100u);
  EXPECT_EQ(error_of([&] { read_text_file(dir.path("big.json"), 99); }),
            dir.path("big.json") + ": is 100 bytes, over the limit of 99 bytes for this kind of input");
}

TEST(SafetensorsOpen, RefusesAFifoADeviceAndADirectoryWithoutBlocking) {
  const test::TempDir dir("stfifo");
  ASSERT_EQ(mkfifo((dir.path("w.safetensors")).c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { SafetensorsFile::open(dir.path("w.safetensors")); }),
            dir.path("w.safetensors") + ": is a FIFO (named pipe), not a regular file");
  EXPECT_EQ(error_of([] { SafetensorsFile::open("/dev/zero"); }), "/dev/zero: is a character device, not a regular file");
  EXPECT_NE(error_of([&] { SafetensorsFile::open(dir.path()); }).find("is a directory"), std::string::npos);
}

}  // namespace
}  // namespace hymoe
