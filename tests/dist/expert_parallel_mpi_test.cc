// ExpertParallelMoE under mpirun: every rank builds the same layer from one seed, runs the single-process
// MoELayer on the whole batch (the reference), then the expert-parallel forward on its own rows, and requires the
// reference's bits. Cases: softmax and sigmoid routers, a shared expert, packed and GELU / ReLU experts, uneven
// splits with a rank that has no tokens, a router that never picks some ranks' experts, and capacity (per rank,
// checked against the layer run on each rank's own rows). Training: forward and backward against the layer run
// on the rank's own rows (outputs, losses, counts, router state, input, router and shared-expert gradients) and on
// the whole batch (the local experts' gradients), all bit for bit; the gradient scale against its per-rank rule.
// Replicas: placed and re-balanced, the reference's bits throughout. Exit status 0 only if every rank passed.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "hymoe/dist.h"
#include "hymoe/error.h"
#include "hymoe/moe.h"
#include "hymoe/placement/replicas.h"
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

// The rows [lo, lo + n) of a (1, T, D) tensor.
Tensor rows_of(const Tensor& t, int64_t lo, int64_t n) {
  const int64_t D = t.dim(t.rank() - 1);
  return Tensor(Shape{1, n, D}, std::vector<float>(t.data() + lo * D, t.data() + (lo + n) * D));
}

int64_t count_differences(const float* a, const float* b, int64_t n) {
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) differ += a[i] != b[i];
  return differ;
}

void expect_bits(const float* got, const float* want, int64_t n, const std::string& what) {
  const int64_t differ = count_differences(got, want, n);
  expect(differ == 0, what + ": " + std::to_string(differ) + " of " + std::to_string(n) + " values differ");
}

const Tensor* find(const std::vector<std::pair<std::string, const Tensor*>>& named, const std::string& name) {
  for (auto& [n, t] : named)
    if (n == name) return t;
  return nullptr;
}

MoELayer seeded_layer(const MoEConfig& config) {
  MoELayer layer(config);
  Rng rng(2024);
  layer.init_random(rng);
  return layer;
}

// y of the rank's tokens under the gradient scale's per-rank rule, computed expert row by expert row from the
// whole batch's routing: expert e's rows scaled by weight x (rows of e's rank / local experts) / rows of e.
Tensor expected_gradient_scaled(MoELayer& whole, const Tensor& x, int64_t lo, int64_t mine, int ranks) {
  const MoEConfig& c = whole.config();
  const int64_t D = c.dim, K = c.top_k, E = c.num_experts, L = E / ranks;
  const Routing& r = whole.last_routing();
  std::vector<ExpertMlp> experts(static_cast<size_t>(E));
  for (auto& [name, t] : whole.named_tensors())
    for (int64_t e = 0; e < E; ++e) {
      const std::string prefix = "experts." + std::to_string(e) + ".";
      if (!name.starts_with(prefix)) continue;
      ExpertMlp& m = experts[static_cast<size_t>(e)];
      m.activation = MlpActivation::kSwiGLU;
      const std::string field = name.substr(prefix.size());
      (field == "gate_proj.weight" ? m.gate_proj : field == "up_proj.weight" ? m.up_proj : m.down_proj) = *t;
    }
  const GroupedExperts grouped(experts);
  Tensor y(Shape{1, mine, D});
  for (int64_t t = 0; t < mine; ++t) {
    const Tensor row(Shape{1, D}, std::vector<float>(x.data() + (lo + t) * D, x.data() + (lo + t + 1) * D));
    for (int64_t k = 0; k < K; ++k) {
      const size_t a = static_cast<size_t>((lo + t) * K + k);
      const int64_t e = r.indices[a], q = e / L;
      float rank_rows = 0;
      for (int64_t j = q * L; j < (q + 1) * L; ++j) rank_rows += r.expert_counts[j];
      const float avg = static_cast<float>(static_cast<double>(rank_rows) / static_cast<double>(L));
      const float scale = r.weights[a] * (avg / std::max(r.expert_counts[e], 1.0f));
      std::vector<int64_t> counts(static_cast<size_t>(E), 0);
      counts[static_cast<size_t>(e)] = 1;
      const Tensor out = grouped.forward(row, counts, nullptr, &scale);
      for (int64_t d = 0; d < D; ++d) y[t * D + d] += out[d];
    }
  }
  return y;
}

struct TrainCase {
  const char* name;
  MoEConfig config;
  int64_t tokens;
};

// One train step on every rank's own tokens: EP forward + backward against MoELayer on the rank's rows (what is
// of the rank's tokens) and on the whole batch (what is of every row an expert received).
void run_train_case(const TrainCase& c, int rank, int ranks) {
  const MoEConfig& cfg = c.config;
  const int64_t D = cfg.dim, T = c.tokens;
  const float aux_weight = 0.01f, z_weight = 0.001f;
  Tensor x(Shape{1, T, D}), g(Shape{1, T, D});
  Rng xr(11);
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(xr.normal());
  for (int64_t i = 0; i < g.numel(); ++i) g[i] = static_cast<float>(xr.normal());
  const std::vector<int64_t> counts = split(T, ranks);
  int64_t lo = 0;
  for (int r = 0; r < rank; ++r) lo += counts[r];
  const int64_t mine = counts[rank];
  const Tensor x_mine = rows_of(x, lo, mine), g_mine = rows_of(g, lo, mine);
  const std::string tag = std::string("train, ") + c.name + " on " + std::to_string(ranks) + " ranks, rank " +
                          std::to_string(rank);

  MoELayer whole = seeded_layer(cfg);
  const Tensor y_whole = whole.forward(x, Mode::kTrain);
  whole.backward(g, aux_weight, z_weight);
  MoELayer own = seeded_layer(cfg);  // the layer on this rank's rows alone
  Tensor y_own, gx_own;
  if (mine > 0) {
    y_own = own.forward(x_mine, Mode::kTrain);
    gx_own = own.backward(g_mine, aux_weight, z_weight);
  }
  MoELayer source = seeded_layer(cfg);
  ExpertParallelMoE ep(source, MPI_COMM_WORLD);
  const Tensor y = ep.forward(x_mine, Mode::kTrain);
  const Tensor gx = ep.backward(g_mine, aux_weight, z_weight);
  expect(y.shape() == x_mine.shape() && gx.shape() == x_mine.shape(), tag + ": output and gradient shapes");
  const bool scaled = cfg.gradient_scale;
  if (mine > 0) {
    if (!scaled || ranks == 1) {
      expect_bits(y.data(), y_own.data(), y.numel(), tag + ": y against the layer on the rank's rows");
      expect_bits(gx.data(), gx_own.data(), gx.numel(), tag + ": grad_x against the layer on the rank's rows");
    } else {
      const Tensor want = expected_gradient_scaled(whole, x, lo, mine, ranks);
      // The shared expert is added last, as the layer does: none in these cases.
      expect_bits(y.data(), want.data(), y.numel(), tag + ": y under the gradient scale's per-rank rule");
      expect(count_differences(y.data(), y_own.data(), y.numel()) > 0,
             tag + ": the per-rank gradient scale changed nothing (the case does not test it)");
    }
    expect(ep.aux_loss() == own.aux_loss() && ep.z_loss() == own.z_loss(), tag + ": aux and z losses");
    expect_bits(ep.expert_counts().data(), own.expert_counts().data(), cfg.num_experts, tag + ": expert counts");
    for (auto& [name, t] : own.router().named_tensors())
      for (auto& [n2, t2] : ep.named_parameters())
        if (n2 == "router." + name) expect_bits(t2->data(), t->data(), t->numel(), tag + ": router state " + name);
  }
  const auto grads = ep.named_gradients();
  const auto own_grads = own.named_gradients(), whole_grads = whole.named_gradients();
  int64_t expert_tensors = 0;
  for (auto& [name, t] : grads) {
    const bool per_rank = name.starts_with("router.") || name.starts_with("shared_expert.");
    if (per_rank) {
      const Tensor* want = find(own_grads, name);
      expect(want != nullptr && want->shape() == t->shape(), tag + ": gradient " + name + " shape");
      if (!want || want->shape() != t->shape()) continue;
      if (mine > 0 && (!scaled || ranks == 1)) expect_bits(t->data(), want->data(), t->numel(), tag + ": gradient " + name);
      if (mine == 0) {
        const std::vector<float> zeros(static_cast<size_t>(t->numel()), 0.0f);
        expect_bits(t->data(), zeros.data(), t->numel(), tag + ": gradient " + name + " of a rank without tokens");
      }
      continue;
    }
    ++expert_tensors;
    if (cfg.capacity_factor > 0 || (scaled && ranks > 1)) continue;  // both are per-rank rules
    const Tensor* want = find(whole_grads, name);
    if (cfg.packed_experts) {  // the local slice of the whole layer's (E, ., .) gradient
      expect(want != nullptr && want->numel() == t->numel() * ranks, tag + ": gradient " + name + " shape");
      if (want) expect_bits(t->data(), want->data() + rank * t->numel(), t->numel(), tag + ": gradient " + name);
    } else {
      expect(want != nullptr && want->shape() == t->shape(), tag + ": gradient " + name + " shape");
      if (want) expect_bits(t->data(), want->data(), t->numel(), tag + ": gradient " + name);
    }
  }
  const int64_t per_expert = cfg.activation == "silu" ? 3 : 2;
  expect(expert_tensors == (cfg.packed_experts ? per_expert : per_expert * cfg.num_experts / ranks),
         tag + ": " + std::to_string(expert_tensors) + " local expert gradients");
  // An optimizer-like update through named_parameters(): the next forward runs the new weights. Against the layer
  // on the rank's rows, whose router state (a sigmoid router's bias and EMA) was updated from the same counts.
  if (!scaled) {
    for (auto& [name, t] : ep.named_parameters())
      for (float& v : t->values()) v *= 0.75f;
    for (auto& [name, t] : own.named_parameters())
      for (float& v : t->values()) v *= 0.75f;
    const Tensor y2 = ep.forward(x_mine);
    if (mine > 0) {
      const Tensor want = own.forward(x_mine, Mode::kEval);
      expect_bits(y2.data(), want.data(), y2.numel(), tag + ": y after an update through named_parameters");
    }
  }
  // backward needs a train-mode forward.
  ep.forward(x_mine);
  try {
    ep.backward(g_mine);
    expect(false, tag + ": backward after an eval forward was accepted");
  } catch (const Error& e) {
    expect(std::string(e.what()).find("needs a train-mode forward") != std::string::npos, e.what());
  }
}

// Replicas: a skewed plan with one spare slot per rank, then a re-balance for the reverse skew; the outputs keep
// the single-process layer's bits, the weights move between ranks, and training is refused.
void run_replica_case(const MoEConfig& cfg, int rank, int ranks) {
  const int64_t E = cfg.num_experts, D = cfg.dim, T = 41;
  const std::string tag = std::string("replicas") + (cfg.packed_experts ? ", packed" : "") + " on " +
                          std::to_string(ranks) + " ranks, rank " + std::to_string(rank);
  Tensor x(Shape{1, T, D});
  Rng xr(3);
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(xr.normal());
  MoELayer whole = seeded_layer(cfg);
  const Tensor reference = whole.forward(x, Mode::kEval);
  const std::vector<int64_t> counts = split(T, ranks);
  int64_t lo = 0;
  for (int r = 0; r < rank; ++r) lo += counts[r];
  const Tensor x_mine = rows_of(x, lo, counts[rank]);
  placement::CountTable hot(1, E), cold(1, E);
  for (int64_t e = 0; e < E; ++e) {
    hot.at(0, e) = static_cast<double>(1 + (e == 0 ? 40 : e));
    cold.at(0, e) = static_cast<double>(1 + (e == E - 1 ? 40 : E - 1 - e));
  }
  const int64_t slots = E / ranks + 1;
  const placement::ReplicaPlacement plan = placement::plan_replicas(hot, ranks, slots);
  ExpertParallelMoE ep(whole, MPI_COMM_WORLD, plan, 0);
  expect(ep.num_local_experts() == slots && ep.local_expert_start() == -1, tag + ": slots");
  const std::vector<int64_t> want_held(plan.layers[0].physical_to_logical.begin() + rank * slots,
                                       plan.layers[0].physical_to_logical.begin() + (rank + 1) * slots);
  expect(ep.held_experts() == want_held, tag + ": the plan's experts held");
  const Tensor y = ep.forward(x_mine);
  expect_bits(y.data(), reference.data() + lo * D, y.numel(), tag + ": y against the single-process layer");
  std::vector<int64_t> moved;
  const placement::ReplicaPlacement next = placement::rebalance_replicas(plan, cold, &moved);
  const int64_t received = ep.rebalance(next, 0);
  int64_t all_received = 0;
  MPI_Allreduce(&received, &all_received, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  int64_t changed_remotely = 0;  // slots whose new expert their rank did not hold
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t i = 0; i < slots; ++i) {
      const int64_t e = next.layers[0].physical_to_logical[static_cast<size_t>(r * slots + i)];
      bool had = false;
      for (int64_t j = 0; j < slots; ++j) had |= plan.layers[0].physical_to_logical[static_cast<size_t>(r * slots + j)] == e;
      changed_remotely += !had;
    }
  expect(all_received == changed_remotely, tag + ": " + std::to_string(all_received) + " slots received, " +
                                               std::to_string(changed_remotely) + " changed rank");
  expect(moved[0] > 0, tag + ": the re-balance moved nothing (the case does not test it)");
  const Tensor y2 = ep.forward(x_mine);
  expect_bits(y2.data(), reference.data() + lo * D, y2.numel(), tag + ": y after the re-balance");
  try {
    ep.forward(x_mine, Mode::kTrain);
    expect(false, tag + ": a train-mode forward with replicas was accepted");
  } catch (const Error& e) {
    expect(std::string(e.what()).find("for inference") != std::string::npos, e.what());
  }
  // A plan for another number of ranks is refused, naming both.
  const placement::ReplicaPlacement other = placement::plan_replicas(hot, ranks + 1, E);
  try {
    ExpertParallelMoE bad(whole, MPI_COMM_WORLD, other, 0);
    expect(false, tag + ": a plan for another rank count was accepted");
  } catch (const Error& e) {
    expect(std::string(e.what()).find("is for " + std::to_string(ranks + 1) + " ranks") != std::string::npos, e.what());
  }
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
  MoEConfig sigmoid_aux = config(16, 24, 4, 3, "silu", "sigmoid_topk");
  sigmoid_aux.sequence_aux_loss_weight = 0.01;
  MoEConfig scaled = config(16, 20, 8, 2);
  scaled.gradient_scale = true;
  const TrainCase train_cases[] = {
      {"softmax, shared expert", config(24, 40, 8, 2, "silu", "softmax_topk", 1), 37},
      {"sigmoid, top-3, sequence aux loss", sigmoid_aux, 29},
      {"packed SwiGLU", config(16, 20, 8, 2, "silu", "softmax_topk", 0, true), 23},
      {"packed GELU, top-1", config(16, 20, 4, 1, "gelu", "softmax_topk", 0, true), 11},
      {"ReLU, shared expert", config(8, 12, 4, 2, "relu", "softmax_topk", 1), 13},
      {"capacity", config(16, 16, 4, 2, "silu", "softmax_topk", 0, false, 0.3), 31},
      {"gradient scale", scaled, 27},
  };
  for (const TrainCase& c : train_cases) {
    try {
      run_train_case(c, rank, ranks);
    } catch (const std::exception& e) {
      expect(false, std::string("train, ") + c.name + ": " + e.what());
    }
  }
  for (const MoEConfig& c : {config(16, 20, 8, 2, "silu", "softmax_topk", 1), config(16, 20, 4, 2, "gelu", "softmax_topk", 0, true)}) {
    try {
      run_replica_case(c, rank, ranks);
    } catch (const std::exception& e) {
      expect(false, std::string("replicas: ") + e.what());
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
