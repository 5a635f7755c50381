// The hymoe command's subcommands. Each registers itself on the CLI11 app and returns the action to run once the
// command line is parsed; main() turns a hymoe::Error into a message and exit status 1.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace hymoe::tool {

using Action = std::function<int()>;

Action add_demo_command(CLI::App& app);
Action add_forward_command(CLI::App& app);
Action add_inspect_command(CLI::App& app);
Action add_train_command(CLI::App& app);
Action add_plan_command(CLI::App& app);
Action add_stats_command(CLI::App& app);
Action add_replay_command(CLI::App& app);

}  // namespace hymoe::tool
