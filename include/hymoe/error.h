// Errors: every failure the library reports is a hymoe::Error carrying a message that names the file, field,
// shape or value at fault. The library never prints and never exits; the command-line tool turns an Error into
// a message and a non-zero exit status.
#pragma once

#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace hymoe {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
[[noreturn]] void fail_check(const char* file, int line, const char* condition, const std::string& message);
}  // namespace detail

// How many bytes of a user-supplied string a message shows (see quote_for_message).
inline constexpr size_t kMaxQuotedBytes = 64;

// `text` as it may appear in a message: in single quotes (as the messages quote names), at most `max_bytes` of it, every byte outside printable
// ASCII (control characters, DEL, non-ASCII) and every quote or backslash escaped, and a longer text cut with its
// full length said. Every tensor name, JSON key, field value or other string that came from a file or the command
// line goes through this before it reaches a message, so no input can write terminal control sequences or make a
// message megabytes long.
std::string quote_for_message(std::string_view text, size_t max_bytes = kMaxQuotedBytes);

// Throws hymoe::Error with the concatenation of the arguments (streamed with operator<<).
template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(detail::concat(args...));
}

}  // namespace hymoe

// Internal invariant, always checked (also in release builds): a failure names the source location. Use it for
// conditions that only a bug in hymoe can break; user input gets a hymoe::fail with a message for the user.
#define HYMOE_CHECK(cond, ...)                                                                    \
  do {                                                                                            \
    if (!(cond)) ::hymoe::detail::fail_check(__FILE__, __LINE__, #cond, ::hymoe::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
