// The hymoe command's subcommands. Each registers itself on the CLI11 app and returns the action to run once the
// command line is parsed; main() turns a hymoe::Error into a message and exit status 1.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hymoe::tool {

using Action = std::function<int()>;

Action add_demo_command(CLI::App& app);
Action add_forward_command(CLI::App& app);
Action add_inspect_command(CLI::App& app);
Action add_bench_command(CLI::App& app);
Action add_train_command(CLI::App& app);
Action add_plan_command(CLI::App& app);
Action add_stats_command(CLI::App& app);
Action add_replay_command(CLI::App& app);

// A number flag that must be finite: CLI11's own number checks accept "inf" and "nan", which would reach the
// arithmetic (a learning rate of inf turns every weight into NaN).
CLI::Validator finite_number_validator();
inline const CLI::Validator kFiniteNumber = finite_number_validator();
// An integer flag with a lower bound, checked on the text: "-1" for an unsigned option (a seed) would otherwise
// wrap to 2^64 - 1, and CLI11's own number checks print their range as a 300-digit double.
CLI::Validator integer_at_least_validator(int64_t minimum);
inline const CLI::Validator kNonNegativeInteger = integer_at_least_validator(0);
inline const CLI::Validator kPositiveInteger = integer_at_least_validator(1);

// Every integer flag's text, checked before CLI11 converts it: CLI11's conversion saturates a value beyond the
// type (2^63 becomes 2^63 - 1, silently), reads 0x10 as hex and 010 as octal. main() attaches it to every INT/UINT
// option.
CLI::Validator integer_text_validator(bool is_unsigned);

// The bench table for one shape (f32, uniform routing, 3 repeats), for the demo.
int print_bench_summary(const std::string& shape, const std::vector<int64_t>& tokens);

}  // namespace hymoe::tool
