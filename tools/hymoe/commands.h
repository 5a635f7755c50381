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

// The bench table for one shape (f32, uniform routing, 3 repeats), for the demo.
int print_bench_summary(const std::string& shape, const std::vector<int64_t>& tokens);

}  // namespace hymoe::tool
