// hymoe bench --ep N (bench_ep.h).
#include "bench_ep.h"

#include "hymoe/error.h"

#ifdef HYMOE_HAVE_MPI
#include <fmt/core.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "hymoe/dist.h"
#include "hymoe/moe.h"
#include "hymoe/rng.h"
#include "hymoe/threads.h"
#endif

namespace hymoe::tool {

#ifndef HYMOE_HAVE_MPI

int run_ep_bench(const std::vector<BenchShape>&, const std::vector<int64_t>&, int, int ranks, bool, bool) {
  fail("bench --ep ", ranks, ": this hymoe was built without MPI (install libopenmpi-dev, rebuild; docs/distributed.md)");
}

#else

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// MPI initialized for the command's life; finalized when it returns or throws.
struct MpiSession {
  MpiSession() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) MPI_Init(nullptr, nullptr);
  }
  ~MpiSession() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
};

}  // namespace

int run_ep_bench(const std::vector<BenchShape>& shapes, const std::vector<int64_t>& tokens, int repeats, int ranks,
                 bool json, bool train) {
  MpiSession session;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != ranks)
    fail("bench --ep ", ranks, ": this process is one of ", size, " MPI ranks; run it as mpirun -np ", ranks,
         " hymoe bench --ep ", ranks, " ...");
  const int reps = repeats > 0 ? repeats : 7;
  if (rank == 0 && !json && !train)
    fmt::print("hymoe bench --ep {}: {} ranks x {} threads, float32, medians of {}; the slowest rank's forward, its "
               "time in all-to-all calls (waiting for others included) and in its local experts; bytes between "
               "processes, all ranks\n| shape | T | forward ms | all-to-all ms | local experts ms | bytes between "
               "processes |\n|---|---|---|---|---|---|\n",
               ranks, ranks, num_threads(), reps);
  if (rank == 0 && !json && train)
    fmt::print("hymoe bench --ep {} --train: {} ranks x {} threads, float32, medians of {}; a training step: the "
               "slowest rank's train-mode forward and backward, its time in all-to-all calls (waiting for others "
               "included) and in its local experts over both; bytes between processes over both, all ranks\n"
               "| shape | T | forward ms | backward ms | all-to-all ms | local experts ms | bytes between processes "
               "|\n|---|---|---|---|---|---|---|\n",
               ranks, ranks, num_threads(), reps);
  for (const BenchShape& s : shapes) {
    MoEConfig c;
    c.dim = s.dim;
    c.hidden_dim = s.hidden;
    c.num_experts = s.experts;
    c.top_k = s.top_k;
    c.shared_experts = s.shared > 0 ? 1 : 0;
    if (c.num_experts % ranks) {
      if (rank == 0) fmt::print("| {} | skipped: {} experts do not divide over {} ranks |\n", s.name, c.num_experts, ranks);
      continue;
    }
    std::optional<ExpertParallelMoE> ep;
    {
      MoELayer layer(c);
      Rng rng(1);
      layer.init_random(rng);
      ep.emplace(layer, MPI_COMM_WORLD);
    }  // the whole layer is freed: each rank keeps its slice
    for (const int64_t T : tokens) {
      const int64_t lo = rank * T / ranks, hi = (rank + 1) * T / ranks;
      Tensor x(Shape{hi - lo, c.dim});
      Rng xr(static_cast<uint64_t>(T));
      for (int64_t i = 0; i < lo * c.dim; ++i) xr.normal();  // this rank's rows of one global batch
      for (int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(xr.normal());
      Tensor grad_y(x.shape());
      for (int64_t i = 0; i < grad_y.numel(); ++i) grad_y[i] = static_cast<float>(xr.normal());
      std::vector<double> total, back, a2a, experts, bytes;
      for (int i = 0; i <= reps; ++i) {  // the first is a warm-up
        MPI_Barrier(MPI_COMM_WORLD);
        const auto start = std::chrono::steady_clock::now();
        ep->forward(x, train ? Mode::kTrain : Mode::kEval);
        const auto forward_end = std::chrono::steady_clock::now();
        double exchange = ep->last_exchange().seconds, local = ep->last_expert_seconds();
        double sent = static_cast<double>(ep->last_exchange().bytes_to_others);
        double backward_seconds = 0;
        if (train) {
          MPI_Barrier(MPI_COMM_WORLD);
          const auto backward_start = std::chrono::steady_clock::now();
          ep->backward(grad_y);
          backward_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - backward_start).count();
          exchange += ep->last_exchange().seconds;
          local += ep->last_expert_seconds();
          sent += static_cast<double>(ep->last_exchange().bytes_to_others);
        }
        const double mine[4] = {std::chrono::duration<double>(forward_end - start).count(), backward_seconds, exchange,
                                local};
        double slowest[4];
        MPI_Allreduce(mine, slowest, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        double all_sent = 0;
        MPI_Allreduce(&sent, &all_sent, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (i == 0) continue;
        total.push_back(slowest[0] * 1e3);
        back.push_back(slowest[1] * 1e3);
        a2a.push_back(slowest[2] * 1e3);
        experts.push_back(slowest[3] * 1e3);
        bytes.push_back(all_sent);
      }
      if (rank != 0) continue;
      if (json) {
        nlohmann::json j{{"shape", s.name}, {"tokens", T}, {"ranks", ranks}, {"threads", num_threads()},
                         {"forward_ms", median(total)}, {"all_to_all_ms", median(a2a)},
                         {"local_experts_ms", median(experts)}, {"bytes_between", median(bytes)}};
        if (train) {
          j["mode"] = "train";
          j["backward_ms"] = median(back);
        }
        fmt::print("{}\n", j.dump());
      } else if (train) {
        fmt::print("| {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.0f} |\n", s.name, T, median(total), median(back),
                   median(a2a), median(experts), median(bytes));
      } else {
        fmt::print("| {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.0f} |\n", s.name, T, median(total), median(a2a),
                   median(experts), median(bytes));
      }
    }
  }
  return 0;
}

#endif

}  // namespace hymoe::tool
