// Validators for the numeric flags shared by the subcommands: ranges CLI11 does not check on its own.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>

#include "commands.h"

namespace hymoe::tool {

CLI::Validator finite_number_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size()) return "must be a number, got '" + text + "'";
        if (!std::isfinite(value)) return "must be a finite number, got " + text;
        return {};
      },
      "FINITE", "FINITE");
}

CLI::Validator integer_at_least_validator(int64_t minimum) {
  const std::string description = "INT>=" + std::to_string(minimum);
  return CLI::Validator(
      [minimum](std::string& text) -> std::string {
        const std::string expected = "must be an integer >= " + std::to_string(minimum) + ", got '" + text + "'";
        if (text.empty()) return expected;
        char* end = nullptr;
        errno = 0;
        if (text[0] == '-') {
          const long long value = std::strtoll(text.c_str(), &end, 10);
          if (end != text.c_str() + text.size() || errno == ERANGE || value < minimum) return expected;
        } else {
          // Unsigned: a value the option's type cannot hold is refused by CLI11's conversion, naming the flag.
          std::strtoull(text.c_str(), &end, 10);
          if (end != text.c_str() + text.size()) return expected;
          if (errno == ERANGE) return "must be an integer >= " + std::to_string(minimum) + ", got '" + text + "' (too large)";
          if (minimum > 0 && std::strtoull(text.c_str(), nullptr, 10) < static_cast<unsigned long long>(minimum))
            return expected;
        }
        return {};
      },
      description, description);
}

CLI::Validator integer_text_validator(bool is_unsigned) {
  const std::string range = is_unsigned ? "[0, 18446744073709551615]" : "[-9223372036854775808, 9223372036854775807]";
  return CLI::Validator(
      [is_unsigned, range](std::string& text) -> std::string {
        // Decimal digits only, after one sign for a signed flag: CLI11 would also read 0x10 as hex, and 010 as
        // octal (8), so a leading zero before more digits is refused too.
        const size_t start = !is_unsigned && !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
        const std::string_view digits = std::string_view(text).substr(start);
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos)
          return "must be a decimal integer, got '" + text + "'";
        if (digits.size() > 1 && digits[0] == '0')
          return "must be a decimal integer without leading zeros (010 would be read as octal), got '" + text + "'";
        errno = 0;
        if (is_unsigned) std::strtoull(text.c_str(), nullptr, 10);
        else std::strtoll(text.c_str(), nullptr, 10);
        if (errno == ERANGE) return "must be an integer in " + range + ", got '" + text + "'";
        return {};
      },
      "", "");
}

}  // namespace hymoe::tool
