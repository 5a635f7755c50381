// Out-of-line failure path of HYMOE_CHECK, kept cold so the check itself inlines to a compare and a branch.
#include "hymoe/error.h"

namespace hymoe::detail {

void fail_check(const char* file, int line, const char* condition, const std::string& message) {
  std::string text = concat("internal error at ", file, ":", line, ": check `", condition, "` failed");
  if (!message.empty()) text += ": " + message;
  throw Error(text);
}

}  // namespace hymoe::detail
