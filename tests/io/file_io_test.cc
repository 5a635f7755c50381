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
  const test::ScopedTempDir dir("read");
  std::ofstream(dir / "a.txt", std::ios::binary) << std::string("x\0y\n", 4);
  EXPECT_EQ(read_text_file(dir / "a.txt"), std::string("x\0y\n", 4));
  std::ofstream(dir / "empty.txt").close();
  EXPECT_EQ(read_text_file(dir / "empty.txt"), "");
}

TEST(ReadTextFile, RefusesWhatIsNotARegularFile) {
  const test::ScopedTempDir dir("read");
  EXPECT_EQ(error_of([&] { read_text_file(dir.path()); }), dir.path() + ": is a directory, not a regular file");
  EXPECT_EQ(error_of([] { read_text_file("/dev/zero"); }), "/dev/zero: is a character device, not a regular file");
  // A FIFO with no writer: opening it for reading would block forever without O_NONBLOCK.
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { read_text_file(dir / "fifo"); }), dir / "fifo" + ": is a FIFO (named pipe), not a regular file");
  EXPECT_NE(error_of([&] { read_text_file(dir / "missing"); }).find("missing: cannot open: No such file"),
            std::string::npos);
}

TEST(ReadTextFile, RefusesFilesOverTheLimitBeforeReading) {
  const test::ScopedTempDir dir("read");
  std::ofstream(dir / "big.json") << std::string(100, ' ');
  EXPECT_EQ(read_text_file(dir / "big.json", 100).size(), 100u);
  EXPECT_EQ(error_of([&] { read_text_file(dir / "big.json", 99); }),
            dir / "big.json" + ": is 100 bytes, over the limit of 99 bytes for this kind of input");
}

TEST(SafetensorsOpen, RefusesAFifoADeviceAndADirectoryWithoutBlocking) {
  const test::ScopedTempDir dir("stfifo");
  ASSERT_EQ(mkfifo((dir / "w.safetensors").c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { SafetensorsFile::open(dir / "w.safetensors"); }),
            dir / "w.safetensors" + ": is a FIFO (named pipe), not a regular file");
  EXPECT_EQ(error_of([] { SafetensorsFile::open("/dev/zero"); }), "/dev/zero: is a character device, not a regular file");
  EXPECT_NE(error_of([&] { SafetensorsFile::open(dir.path()); }).find("is a directory"), std::string::npos);
}

}  // namespace
}  // namespace hymoe
