// hymoe: the command-line front end. Parses the command line, runs one subcommand, reports errors.
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "hymoe/error.h"
#include "hymoe/threads.h"

int main(int argc, char** argv) {
  CLI::App app{"hymoe: Mixture-of-Experts layers on the CPU (forward, inspection, placement, benchmarks)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "hymoe 0.1.0");
  app.fallthrough();  // subcommands inherit this: `hymoe forward ... --threads 2` reaches the option below
  int threads = 0;
  app.add_option("--threads", threads, "kernel threads for any subcommand (default: HYMOE_THREADS or physical cores)")
      ->check(CLI::Range(1, 1024));
  std::vector<std::pair<CLI::App*, hymoe::tool::Action>> commands;
  auto add = [&](auto adder) {
    const size_t before = app.get_subcommands({}).size();
    hymoe::tool::Action action = adder(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(action));
  };
  add(hymoe::tool::add_demo_command);
  add(hymoe::tool::add_forward_command);
  add(hymoe::tool::add_inspect_command);
  add(hymoe::tool::add_bench_command);
  add(hymoe::tool::add_train_command);
  add(hymoe::tool::add_plan_command);
  add(hymoe::tool::add_stats_command);
  add(hymoe::tool::add_replay_command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 says only "A subcommand is required" for `hymoe frobnicate`: name the word it did not know.
    const std::vector<std::string> rest = app.remaining();
    if (!rest.empty() && !rest.front().starts_with("-") && app.get_subcommands().empty()) {
      std::string known;
      for (const auto& [sub, action] : commands) known += (known.empty() ? "" : ", ") + sub->get_name();
      std::fprintf(stderr, "hymoe: error: unknown command %s (the commands are %s; see hymoe --help)\n",
                   hymoe::quote_for_message(rest.front()).c_str(), known.c_str());
      return e.get_exit_code();
    }
    return app.exit(e);
  }
  try {
    if (threads > 0) hymoe::set_num_threads(threads);
    for (auto& [sub, action] : commands)
      if (sub->parsed()) return action();
  } catch (const hymoe::Error& e) {
    std::fprintf(stderr, "hymoe: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hymoe: error: %s\n", e.what());
    return 1;
  }
  return 2;
}
