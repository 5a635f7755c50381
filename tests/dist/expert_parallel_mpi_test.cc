// ExpertParallelMoE under mpirun: every rank builds the same layer from one seed, runs the single-process
// MoELayer on the whole batch (the reference), then the expert-parallel forward on its own rows; rank 0 gathers
// the rows and requires the reference's bits. Cases: softmax and sigmoid routers, a shared expert, packed and
// GELU / ReLU experts, uneven splits with a rank that has no tokens, a router that never picks some ranks'
// experts, and capacity (per rank, checked against the layer run on each rank's own rows). Exit status 0 only if
// every rank passed.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "hymoe/dist.h"
#include "hymoe/error.h"
#include "hymoe/moe.h"
#include "hymoe/rng.h"

namespace {

using namespace hymoe;

int g_failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    ++g_failures;
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  }
}

// Rows per rank: uneven; with 3 or more ranks the last has none.
std::vector<int64_t> split(int64_t tokens, int ranks) {
  std::vector<int64_t> weights;
  if (ranks == 1) return {tokens};
  for (int r = 0; r < ranks; ++r) weights.push_back(ranks == 2 ? 2 - r : ranks - 1 - r);
  int64_t total = 0;
  for (int64_t w : weights) total += w;
  std::vector<int64_t> counts;
  int64_t given = 0;
  for (int64_t w : weights) given += counts.emplace_back(tokens * w / total);
  counts[0] += tokens - given;
  return counts;
}

struct Case {
  const char* name;
  MoEConfig config;
  int64_t tokens;
  bool idle_upper_half = false;  // sigmoid bias -100 on the upper half of the experts
};

void run_case(const Case& c, int rank, int ranks) {
  MoELayer layer(c.config);
  Rng rng(2024);
  layer.init_random(rng);
  if (c.idle_upper_half)
    for (auto& [name, t] : layer.named_tensors())
      if (name == "router.expert_bias")
        for (int64_t e = c.config.num_experts / 2; e < c.config.num_experts; ++e) (*t)[e] = -100.0f;
  const int64_t D = c.config.dim, T = c.tokens;
  Tensor x(Shape{1, T, D});
  Rng xr(7);
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(xr.normal());
  const std::vector<int64_t> counts = split(T, ranks);
  int64_t lo = 0;
  for (int r = 0; r < rank; ++r) lo += counts[r];
  const int64_t mine = counts[rank];
  Tensor x_mine(Shape{1, mine, D}, std::vector<float>(x.data() + lo * D, x.data() + (lo + mine) * D));
  // Capacity counts a rank's own tokens, so its reference is the layer on those rows alone.
  const bool per_rank = c.config.capacity_factor > 0;
  const Tensor reference = per_rank ? (mine ? layer.forward(x_mine, Mode::kEval) : Tensor(Shape{1, 0, D}))
                                    : layer.forward(x, Mode::kEval);
  ExpertParallelMoE ep(layer, MPI_COMM_WORLD);
  const Tensor y = ep.forward(x_mine);
  const Tensor again = ep.forward(x_mine);  // a second call: the same bits
  const std::string tag = std::string(c.name) + " on " + std::to_string(ranks) + " ranks, rank " + std::to_string(rank);
  expect(y.shape() == x_mine.shape(), tag + ": output shape");
  expect(std::memcmp(y.data(), again.data(), sizeof(float) * static_cast<size_t>(y.numel())) == 0,
         tag + ": a second forward changed the bits");
  expect(ep.num_local_experts() == c.config.num_experts / ranks && ep.local_expert_start() == rank * ep.num_local_experts(),
         tag + ": local experts");
  const float* want = per_rank ? reference.data() : reference.data() + lo * D;
  int64_t differ = 0;
  for (int64_t i = 0; i < mine * D; ++i) differ += y[i] != want[i];
  expect(differ == 0, tag + ": " + std::to_string(differ) + " of " + std::to_string(mine * D) +
                          " values differ from the single-process layer's bits");
  if (c.idle_upper_half && ranks > 1 && rank >= ranks / 2)
    expect(ep.last_exchange().calls == 5, tag + ": a rank that receives nothing still takes part in every exchange");
}

MoEConfig config(int64_t dim, int64_t hidden, int64_t experts, int64_t k, const char* activation = "silu",
                 const char* router = "softmax_topk", int64_t shared = 0, bool packed = false, double capacity = 0) {
  MoEConfig c;
  c.dim = dim;
  c.hidden_dim = hidden;
  c.num_experts = experts;
  c.top_k = k;
  c.activation = activation;
  c.router_type = router;
  c.shared_experts = shared;
  c.packed_experts = packed;
  c.capacity_factor = capacity;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const Case cases[] = {
      {"softmax, shared expert", config(24, 40, 8, 2, "silu", "softmax_topk", 1), 37},
      {"sigmoid, top-3", config(16, 24, 4, 3, "silu", "sigmoid_topk"), 29},
      {"packed SwiGLU", config(16, 20, 8, 2, "silu", "softmax_topk", 0, true), 23},
      {"packed GELU, top-1", config(16, 20, 4, 1, "gelu", "softmax_topk", 0, true), 11},
      {"ReLU", config(8, 12, 4, 2, "relu"), 13},
      {"one token", config(16, 16, 4, 2, "silu", "softmax_topk", 1), 1},
      {"capacity", config(16, 16, 4, 2, "silu", "softmax_topk", 0, false, 0.3), 31},
      {"idle experts", config(16, 16, 4, 1, "silu", "sigmoid_topk"), 17, true},
  };
  for (const Case& c : cases) {
    try {
      run_case(c, rank, ranks);
    } catch (const std::exception& e) {
      expect(false, std::string(c.name) + ": " + e.what());
    }
  }
  // A layer whose experts do not divide over the ranks is refused, naming both numbers.
  if (ranks > 1) {
    MoELayer odd(config(8, 8, 3 * ranks + 1, 1));
    try {
      ExpertParallelMoE bad(odd, MPI_COMM_WORLD);
      expect(false, "num_experts not divisible by the ranks was accepted");
    } catch (const Error& e) {
      expect(std::string(e.what()).find("must be divisible by the number of ranks") != std::string::npos, e.what());
    }
  }
  int failures = g_failures, total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%s: %d failure(s) on %d rank(s)\n", total ? "FAILED" : "passed", total, ranks);
  MPI_Finalize();
  return total ? 1 : 0;
}
