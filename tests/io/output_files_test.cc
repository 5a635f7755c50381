// OutputFiles: an output that is an input by any spelling is refused, devices and FIFOs are written in place and
// survive, anything else that is not a regular file is refused, several outputs are committed all or none, and a
// 255-byte name works.
#include "hymoe/output_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hymoe/error.h"
#include "hymoe/file_io.h"
#include "test_util.h"

namespace hymoe {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::TempDir;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Checks the output `out` against the input `in` (both already on disk) and returns the refusal message.
std::string refusal(const std::string& in, const std::string& out) {
  OutputFiles files;
  files.add_input("--weights", in);
  files.add_output("--output", out);
  return error_of([&] { files.check(); });
}

TEST(OutputFiles, CommitsEveryOutputAndLeavesNoTemporary) {
  const TempDir dir("out_commit");
  spit(dir.path("b.svg"), "old");
  OutputFiles files;
  files.add_output("--output", dir.path("a.json"));
  files.add_output("--svg", dir.path("b.svg"));
  files.add_output("--csv", "");  // not given: skipped
  files.check();
  EXPECT_TRUE(files.wanted("--svg"));
  EXPECT_FALSE(files.wanted("--csv"));
  files.stage("--output", std::string_view("{}"));
  files.stage("--svg", std::string_view("<svg/>"));
  files.stage("--csv", std::string_view("ignored"));
  EXPECT_EQ(slurp(dir.path("b.svg")), "old") << "nothing is replaced before commit";
  files.commit();
  EXPECT_EQ(slurp(dir.path("a.json")), "{}");
  EXPECT_EQ(slurp(dir.path("b.svg")), "<svg/>");
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"a.json", "b.svg"}));
}

TEST(OutputFiles, RefusesAnOutputThatIsAnInputHoweverSpelled) {
  const TempDir dir("out_same");
  const std::string in = dir.path("w.safetensors");
  spit(in, "weights");
  fs::create_hard_link(in, dir.path("hard.safetensors"));
  fs::create_symlink(in, dir.path("soft.safetensors"));
  fs::create_directory(dir.path("sub"));
  for (const std::string& out : {in, dir.path("./w.safetensors"), dir.path("sub/../w.safetensors"),
                                 dir.path("hard.safetensors"), dir.path("soft.safetensors")}) {
    const std::string message = refusal(in, out);
    EXPECT_NE(message.find("--output " + out + " is the same file as --weights " + in), std::string::npos)
        << out << ": " << message;
  }
  // A relative spelling from the working directory.
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path());
  const std::string relative = refusal("w.safetensors", "./w.safetensors");
  fs::current_path(cwd);
  EXPECT_NE(relative.find("--output ./w.safetensors is the same file as --weights w.safetensors"), std::string::npos)
      << relative;
  EXPECT_EQ(slurp(in), "weights");
  // A different file of the same content is not the input.
  spit(dir.path("copy.safetensors"), "weights");
  EXPECT_EQ(refusal(in, dir.path("copy.safetensors")), "");
}

TEST(OutputFiles, RefusesTwoOutputsNamingOneFile) {
  const TempDir dir("out_twice");
  for (bool exists : {false, true}) {
    if (exists) spit(dir.path("p.json"), "old");
    OutputFiles files;
    files.add_output("--output", dir.path("p.json"));
    files.add_output("--svg", dir.path("./p.json"));
    const std::string message = error_of([&] { files.check(); });
    EXPECT_NE(message.find("--output " + dir.path("p.json") + " and --svg " + dir.path("./p.json") +
                           " name the same file"),
              std::string::npos)
        << message;
  }
}

TEST(OutputFiles, WritesACharacterDeviceInPlace) {
  OutputFiles files;
  files.add_input("--weights", "/dev/null");  // a device is never replaced, so it may also be read
  files.add_output("--output", "/dev/null");
  files.check();
  files.stage("--output", std::string_view("discarded"));
  files.commit();
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null must still be a character device";
  EXPECT_NO_THROW(write_file_atomically("/dev/null", std::as_bytes(std::span(std::string_view("x")))));
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(OutputFiles, WritesAFifoInPlace) {
  const TempDir dir("out_fifo");
  const std::string fifo = dir.path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // The reader's end, opened without blocking, so the writer's open does not wait; the message fits the pipe's
  // buffer, and a FIFO replaced by a regular file would leave this end empty instead of hanging the test.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  OutputFiles files;
  files.add_output("--output", fifo);
  files.check();
  files.stage("--output", std::string_view("through the pipe"));
  files.commit();
  char buf[64] = {};
  const ssize_t n = ::read(reader, buf, sizeof(buf));
  ::close(reader);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(std::max<ssize_t>(n, 0))), "through the pipe");
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO must not be replaced by a regular file";
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"pipe"});
}

TEST(OutputFiles, RefusesDirectoriesSocketsAndDanglingLinks) {
  const TempDir dir("out_kinds");
  fs::create_directory(dir.path("d"));
  const std::string socket_path = dir.path("s");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(socket_path.size(), sizeof(addr.sun_path));
  std::strcpy(addr.sun_path, socket_path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  fs::create_symlink(dir.path("nothing"), dir.path("dangling"));
  const std::pair<std::string, std::string> cases[] = {
      {dir.path("d"), "is a directory"},
      {dir.path("d") + "/", "is a directory"},
      {socket_path, "is a socket"},
      {dir.path("dangling"), "is a symbolic link to a file that does not exist"},
      {dir.path("missing/out.json"), "its directory " + dir.path("missing") + " cannot be used"},
  };
  for (const auto& [path, fragment] : cases) {
    OutputFiles files;
    files.add_output("--output", path);
    const std::string message = error_of([&] { files.check(); });
    EXPECT_NE(message.find("--output " + path + ": " + fragment), std::string::npos) << message;
  }
  ::close(fd);
  struct stat st {};
  ASSERT_EQ(::lstat(socket_path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_TRUE(fs::is_directory(dir.path("d")));
  EXPECT_THROW(write_file_atomically(dir.path("d"), {}), Error);
}

TEST(OutputFiles, FailureToStageOneOutputLeavesEveryTargetAsItWas) {
  const TempDir dir("out_none");
  fs::create_directory(dir.path("second"));
  spit(dir.path("a.json"), "old a");
  {
    OutputFiles files;
    files.add_output("--output", dir.path("a.json"));
    files.add_output("--svg", dir.path("second/b.svg"));
    files.check();
    fs::remove_all(dir.path("second"));  // the directory goes away while the command works
    files.stage("--output", std::string_view("new a"));
    EXPECT_THROW(files.stage("--svg", std::string_view("new b")), Error);
  }  // the command fails: its OutputFiles goes out of scope uncommitted
  EXPECT_EQ(slurp(dir.path("a.json")), "old a");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"a.json"}) << "a temporary was left behind";
}

TEST(OutputFiles, ANameOf255BytesWorks) {
  const TempDir dir("out_long");
  const std::string name(255, 'n');
  OutputFiles files;
  files.add_output("--output", dir.path(name));
  files.check();
  files.stage("--output", std::string_view("long"));
  files.commit();
  EXPECT_EQ(slurp(dir.path(name)), "long");
  const std::string other = std::string(250, 'm') + ".json";
  write_file_atomically(dir.path(other), std::as_bytes(std::span(std::string_view("{}"))));
  EXPECT_EQ(slurp(dir.path(other)), "{}");
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{other, name}));
}

TEST(OutputFiles, ReplacesALinkedFileWhereItLiesKeepingItsPermissions) {
  const TempDir dir("out_link");
  fs::create_directory(dir.path("real"));
  spit(dir.path("real/plan.json"), "old");
  ASSERT_EQ(::chmod(dir.path("real/plan.json").c_str(), 0640), 0);
  fs::create_symlink(dir.path("real/plan.json"), dir.path("link.json"));
  write_file_atomically(dir.path("link.json"), std::as_bytes(std::span(std::string_view("new"))));
  EXPECT_TRUE(fs::is_symlink(dir.path("link.json")));
  EXPECT_EQ(slurp(dir.path("real/plan.json")), "new");
  struct stat st {};
  ASSERT_EQ(::stat(dir.path("real/plan.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(names_in(dir.path("real")), std::vector<std::string>{"plan.json"});
}

}  // namespace
}  // namespace hymoe
