// Output transactions: check every output against the inputs and the file system before the work, stage each to a
// short temporary beside its target, rename them all at the end (see hymoe/output_files.h).
#include "hymoe/output_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <utility>

#include "hymoe/error.h"
#include "hymoe/file_io.h"

namespace hymoe {
namespace {

// Short on purpose: beside a legal 255-byte name, "<name>.tmp.XXXXXX" would not be a legal name.
constexpr const char* kTemporaryName = ".hymoe.tmp.XXXXXX";

std::string describe(const std::string& flag, const std::string& path) {
  return flag.empty() ? path : flag + " " + path;
}

// What a file that is not regular is, for the message refusing it.
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// (directory, last component) of a path as given; "." for a bare name.
std::pair<std::string, std::string> split_path(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// Writes all of `bytes` to `fd`; false with errno set on failure.
bool write_all(int fd, std::span<const std::byte> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

mode_t default_file_mode() {
  const mode_t mask = umask(0);
  umask(mask);
  return 0666 & ~mask;
}

}  // namespace

OutputFiles::~OutputFiles() { remove_temporaries(); }

void OutputFiles::add_input(std::string flag, std::string path) {
  if (!path.empty()) inputs_.push_back({std::move(flag), std::move(path)});
}

void OutputFiles::add_output(std::string flag, std::string path) {
  HYMOE_CHECK(!checked_, "outputs are declared before check()");
  HYMOE_CHECK(find_output(flag) == nullptr, "output flag ", flag, " declared twice");
  Output o;
  o.flag = std::move(flag);
  o.path = std::move(path);
  outputs_.push_back(std::move(o));
}

const OutputFiles::Output* OutputFiles::find_output(const std::string& flag) const {
  for (const Output& o : outputs_)
    if (o.flag == flag) return &o;
  return nullptr;
}

OutputFiles::Output& OutputFiles::output(const std::string& flag) {
  const Output* o = find_output(flag);
  HYMOE_CHECK(o != nullptr, "output flag ", flag, " was never declared");
  return const_cast<Output&>(*o);
}

bool OutputFiles::wanted(const std::string& flag) const {
  const Output* o = find_output(flag);
  return o != nullptr && !o->path.empty();
}

void OutputFiles::check() {
  for (Output& o : outputs_) {
    if (o.path.empty()) continue;
    const std::string what = describe(o.flag, o.path);
    struct stat st {};
    if (::stat(o.path.c_str(), &st) == 0) {
      if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
        o.direct = true;
        o.target = o.path;
        if (::access(o.path.c_str(), W_OK) != 0) fail(what, ": cannot write to it: ", std::strerror(errno));
        continue;
      }
      if (!S_ISREG(st.st_mode))
        fail(what, ": is ", kind_of(st.st_mode), ", not a file that can be written; give a file name");
      char resolved[PATH_MAX];
      if (!::realpath(o.path.c_str(), resolved)) fail(what, ": cannot resolve: ", std::strerror(errno));
      o.target = resolved;
      o.exists = true;
      o.dev = st.st_dev, o.ino = st.st_ino, o.mode = st.st_mode & 07777;
      if (::access(o.path.c_str(), W_OK) != 0) fail(what, ": exists and cannot be written: ", std::strerror(errno));
    } else if (errno == ENOENT || errno == ENOTDIR) {
      struct stat link {};
      if (::lstat(o.path.c_str(), &link) == 0 && S_ISLNK(link.st_mode))
        fail(what, ": is a symbolic link to a file that does not exist; give the file's own name");
      o.target = o.path;
      o.mode = default_file_mode();
    } else {
      fail(what, ": ", std::strerror(errno));
    }
    std::tie(o.directory, o.name) = split_path(o.target);
    if (o.name.empty() || o.name == "." || o.name == "..") fail(what, ": names a directory; give a file name");
    struct stat dir {};
    if (::stat(o.directory.c_str(), &dir) != 0)
      fail(what, ": its directory ", o.directory, " cannot be used: ", std::strerror(errno));
    if (!S_ISDIR(dir.st_mode)) fail(what, ": ", o.directory, " is not a directory");
    if (::access(o.directory.c_str(), W_OK | X_OK) != 0)
      fail(what, ": cannot write in its directory ", o.directory, ": ", std::strerror(errno));
    o.dir_dev = dir.st_dev, o.dir_ino = dir.st_ino;
  }

  // Only regular files are ever replaced, so only they can destroy an input; a device (say the terminal behind
  // both /dev/stdin and /dev/stdout) may well be an input and an output at once.
  for (const Input& in : inputs_) {
    struct stat st {};
    if (::stat(in.path.c_str(), &st) != 0) continue;  // its reader reports it
    for (const Output& o : outputs_)
      if (o.exists && o.dev == st.st_dev && o.ino == st.st_ino)
        fail(describe(o.flag, o.path), " is the same file as ", describe(in.flag, in.path),
             "; refusing to replace an input");
  }
  for (size_t i = 0; i < outputs_.size(); ++i)
    for (size_t j = i + 1; j < outputs_.size(); ++j) {
      const Output &a = outputs_[i], &b = outputs_[j];
      if (a.path.empty() || b.path.empty() || a.direct || b.direct) continue;
      const bool same = a.exists ? b.exists && a.dev == b.dev && a.ino == b.ino
                                 : !b.exists && a.dir_dev == b.dir_dev && a.dir_ino == b.dir_ino && a.name == b.name;
      if (same) fail(describe(a.flag, a.path), " and ", describe(b.flag, b.path), " name the same file; give two names");
    }
  checked_ = true;
}

void OutputFiles::stage(const std::string& flag, std::span<const std::byte> bytes) {
  HYMOE_CHECK(checked_, "check() comes before stage()");
  Output& o = output(flag);
  if (o.path.empty()) return;
  if (o.direct) {
    o.held.assign(bytes.begin(), bytes.end());
    o.staged = true;
    return;
  }
  if (!o.temporary.empty()) ::unlink(o.temporary.c_str()), o.temporary.clear();
  std::string tmp = (o.directory == "/" ? "" : o.directory) + "/" + kTemporaryName;
  const int fd = ::mkstemp(tmp.data());
  const std::string what = describe(o.flag, o.path);
  if (fd < 0) fail(what, ": cannot create a temporary file in ", o.directory, ": ", std::strerror(errno));
  // mkstemp creates 0600; the replacement keeps the replaced file's permissions, a new file gets the umask's.
  const bool ok = write_all(fd, bytes) && ::fchmod(fd, o.mode) == 0 && ::fsync(fd) == 0;
  const int err = errno;
  if (::close(fd) != 0 || !ok) {
    ::unlink(tmp.c_str());
    fail(what, ": cannot write: ", std::strerror(ok ? errno : err));
  }
  o.temporary = std::move(tmp);
  o.staged = true;
}

void OutputFiles::stage(const std::string& flag, std::string_view text) { stage(flag, std::as_bytes(std::span(text))); }

void OutputFiles::commit() {
  HYMOE_CHECK(checked_ && !committed_, "commit() once, after check()");
  for (const Output& o : outputs_) HYMOE_CHECK(o.path.empty() || o.staged, "output ", o.flag, " was never staged");
  for (Output& o : outputs_) {
    if (!o.direct || o.path.empty()) continue;
    const int fd = ::open(o.target.c_str(), O_WRONLY | O_CLOEXEC);
    const bool ok = fd >= 0 && write_all(fd, o.held);
    const int err = errno;
    if (fd >= 0) ::close(fd);
    if (!ok) {
      remove_temporaries();
      fail(describe(o.flag, o.path), ": cannot write: ", std::strerror(err));
    }
  }
  // The targets were checked before the work; something may have taken a name since. Never rename over it.
  for (const Output& o : outputs_) {
    struct stat st {};
    if (o.temporary.empty() || ::lstat(o.target.c_str(), &st) != 0 || S_ISREG(st.st_mode)) continue;
    remove_temporaries();
    fail(describe(o.flag, o.path), ": became ", kind_of(st.st_mode), " while the command ran; not replacing it");
  }
  for (Output& o : outputs_) {
    if (o.temporary.empty()) continue;
    if (std::rename(o.temporary.c_str(), o.target.c_str()) != 0) {
      const int err = errno;
      remove_temporaries();
      fail(describe(o.flag, o.path), ": cannot rename the temporary file onto it: ", std::strerror(err));
    }
    o.temporary.clear();
  }
  committed_ = true;
}

void OutputFiles::remove_temporaries() noexcept {
  for (Output& o : outputs_) {
    if (!o.temporary.empty()) ::unlink(o.temporary.c_str());
    o.temporary.clear();
  }
}

void write_file_atomically(const std::string& path, std::span<const std::byte> bytes) {
  if (path.empty()) fail("cannot write a file with an empty name");
  OutputFiles out;
  out.add_output("", path);
  out.check();
  out.stage("", bytes);
  out.commit();
}

}  // namespace hymoe
