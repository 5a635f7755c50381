// hymoe::Error's helpers: the out-of-line failure path of HYMOE_CHECK (kept cold so the check itself inlines to a
// compare and a branch) and the quoting of user strings for messages.
#include "hymoe/error.h"

namespace hymoe {

std::string quote_for_message(std::string_view text, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::string_view shown = text.substr(0, max_bytes);
  std::string out = "'";
  for (const char ch : shown) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '\'': out += "\\'"; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c >= 0x20 && c < 0x7f) {
          out += ch;
        } else {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 0xf];
        }
    }
  }
  out += '\'';
  if (shown.size() < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace hymoe

namespace hymoe::detail {

void fail_check(const char* file, int line, const char* condition, const std::string& message) {
  std::string text = concat("internal error at ", file, ":", line, ": check `", condition, "` failed");
  if (!message.empty()) text += ": " + message;
  throw Error(text);
}

}  // namespace hymoe::detail
