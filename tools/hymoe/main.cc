// hymoe: the command-line front end. Parses the command line, runs one subcommand, reports errors.
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "commands.h"
#include "hymoe/compute.h"
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
  // How bf16 and quantized weights are multiplied, for every subcommand that computes (forward, bench, demo,
  // train): the same settings as HYMOE_BF16_COMPUTE and HYMOE_QUANT_COMPUTE, which they override.
  std::string bf16_compute, quant_compute;
  app.add_option("--bf16-compute", bf16_compute,
                 "bf16 weights: auto (native where it is the faster path on this CPU, docs/semantics.md), widen "
                 "(each weight widened to f32, f32 FMA: the f32 results) or native (activations rounded to bf16, "
                 "vdpbf16ps; needs AVX512_BF16) (default: HYMOE_BF16_COMPUTE or auto)");
  app.add_option("--quant-compute", quant_compute,
                 "GGUF block, MXFP4 and FP8 weights: auto (= int8), exact (exact weights, f32 activations: matches "
                 "`y`) or int8 (GGUF and MXFP4: activations quantized per block as llama.cpp's CPU backend does, "
                 "integer dot products; FP8: activations rounded to bf16, vdpbf16ps, where the CPU has AVX512_BF16, "
                 "else exact) (default: HYMOE_QUANT_COMPUTE or auto)");
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
  // Integer flags keep their exact value or are refused by name (integer_text_validator), in every subcommand.
  std::vector<CLI::App*> apps = app.get_subcommands({});
  apps.push_back(&app);
  for (CLI::App* sub : apps)
    for (CLI::Option* opt : sub->get_options()) {
      const std::string type = opt->get_type_name();
      if (type == "INT" || type == "UINT") opt->check(hymoe::tool::integer_text_validator(type == "UINT"));
    }
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
  // The subcommand that ran, for the messages below: a library's own text (std::bad_alloc, vector::_M_fill_insert)
  // names neither the command nor what to change, so it is never the message, only a detail of one.
  std::string running = "hymoe";
  try {
    if (threads > 0) hymoe::set_num_threads(threads);
    if (!bf16_compute.empty()) hymoe::set_bf16_compute(hymoe::bf16_compute_from_name(bf16_compute, "--bf16-compute"));
    if (!quant_compute.empty())
      hymoe::set_quant_compute(hymoe::quant_compute_from_name(quant_compute, "--quant-compute"));
    for (auto& [sub, action] : commands)
      if (sub->parsed()) {
        running = "hymoe " + sub->get_name();
        return action();
      }
  } catch (const hymoe::Error& e) {
    std::fprintf(stderr, "hymoe: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "hymoe: error: %s: out of memory: the sizes given (configuration, tokens, steps) need more memory "
                 "than this machine could provide\n",
                 running.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hymoe: error: %s: internal error, please report it with the command line (detail: %s)\n",
                 running.c_str(), e.what());
    return 1;
  }
  return 2;
}
