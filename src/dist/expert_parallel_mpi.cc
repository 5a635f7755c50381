// ExpertParallelMoE (include/hymoe/dist.h): route here, exchange with MPI_Alltoallv, compute the local experts,
// exchange back, combine in slot order; the backward sends the output gradients the same way and brings back each
// row's input gradient and routing-weight gradient. The permutations are group_order's stable counting sorts, so
// every rank sees its rows in one order whatever the others do.
#include "hymoe/dist.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "hymoe/error.h"
#include "kernels/driver/thread_pool.h"

namespace hymoe {

namespace {

using Clock = std::chrono::steady_clock;

// fn(i) for i in [0, n) on hymoe's pool, in chunks of rows: each row's work is its own, so any split gives the same
// bits.
template <typename Fn>
void for_rows(int64_t n, Fn fn) {
  constexpr int64_t kRows = 64;
  kernels::parallel_for((n + kRows - 1) / kRows, [&](int64_t task, int) {
    for (int64_t i = task * kRows; i < std::min(n, (task + 1) * kRows); ++i) fn(i);
  });
}

void check_mpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail("expert parallelism: ", what, " failed: ", std::string(text, static_cast<size_t>(length)));
}

int as_count(int64_t n, const char* what) {
  if (n > std::numeric_limits<int>::max())
    fail("expert parallelism: ", what, " of ", n, " elements exceeds MPI's int counts");
  return static_cast<int>(n);
}

// MPI_Alltoallv of `per_row` elements per row: send_rows[r] rows to rank r, recv_rows[r] from it.
template <typename T>
void exchange_rows(const T* send, const std::vector<int64_t>& send_rows, T* recv, const std::vector<int64_t>& recv_rows,
                   int64_t per_row, MPI_Datatype type, MPI_Comm comm, ExchangeStats& stats, int rank) {
  const size_t P = send_rows.size();
  std::vector<int> sc(P), sd(P), rc(P), rd(P);
  int64_t so = 0, ro = 0;
  for (size_t r = 0; r < P; ++r) {
    sc[r] = as_count(send_rows[r] * per_row, "a send");
    sd[r] = as_count(so, "a send offset");
    rc[r] = as_count(recv_rows[r] * per_row, "a receive");
    rd[r] = as_count(ro, "a receive offset");
    so += send_rows[r] * per_row;
    ro += recv_rows[r] * per_row;
    if (static_cast<int>(r) != rank) stats.bytes_to_others += send_rows[r] * per_row * static_cast<int64_t>(sizeof(T));
  }
  const auto start = Clock::now();
  check_mpi(MPI_Alltoallv(send, sc.data(), sd.data(), type, recv, rc.data(), rd.data(), type, comm), "MPI_Alltoallv");
  stats.seconds += std::chrono::duration<double>(Clock::now() - start).count();
  ++stats.calls;
}

// MPI_Alltoall of `per_rank` int64 to every rank.
std::vector<int64_t> exchange_counts(const std::vector<int64_t>& send, int64_t per_rank, int ranks, MPI_Comm comm,
                                     ExchangeStats& stats) {
  std::vector<int64_t> recv(send.size());
  const auto start = Clock::now();
  check_mpi(MPI_Alltoall(send.data(), as_count(per_rank, "a count exchange"), MPI_INT64_T, recv.data(),
                         static_cast<int>(per_rank), MPI_INT64_T, comm),
            "MPI_Alltoall");
  stats.seconds += std::chrono::duration<double>(Clock::now() - start).count();
  ++stats.calls;
  stats.bytes_to_others += (ranks - 1) * per_rank * static_cast<int64_t>(sizeof(int64_t));
  return recv;
}

Tensor tensor_named(MoELayer& layer, const std::string& name) {
  for (auto& [n, t] : layer.named_tensors())
    if (n == name) return *t;
  fail("expert parallelism: the layer has no tensor '", name, "'");
}

MlpActivation activation_of(const MoEConfig& c) {
  return c.activation == "silu" ? MlpActivation::kSwiGLU : c.activation == "gelu" ? MlpActivation::kGelu
                                                                                  : MlpActivation::kRelu;
}

void add_rows(float* dst, const float* src, int64_t n) {
  for (int64_t d = 0; d < n; ++d) dst[d] += src[d];
}

}  // namespace

struct ExpertParallelMoE::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  MoEConfig config;
  MlpActivation activation = MlpActivation::kSwiGLU;
  int64_t start = 0, local = 0;      // start -1 with replicas
  std::vector<int64_t> held;         // (local) the expert in each slot
  std::unique_ptr<Router> router;
  std::vector<ExpertMlp> mlps;       // the local slots' experts (unpacked layers)
  Tensor up_w, down_w, gate_w;       // the local slots of packed layers, (local, ., .)
  std::optional<ExpertMlp> shared_mlp;
  std::optional<GroupedExperts> experts, shared;
  bool dirty = true;                 // weights changed since the kernels packed them
  // With replicas: each expert's slots, ascending (placement::LayerReplicas::logical_to_physical).
  std::vector<std::vector<int64_t>> replica_slots;
  ExchangeStats stats;
  double expert_seconds = 0.0;
  Routing routing;                   // the last forward's, of this rank's tokens
  // What a train-mode forward keeps for backward.
  struct Saved {
    bool valid = false;
    Shape x_shape;
    Tensor x;                        // (T, D)
    std::vector<int64_t> sent_pair;  // (S) the (token, slot) pair of each sent row, in send order
    std::vector<int64_t> send_rows;  // rows sent to each rank
    std::vector<int64_t> recv_rows;  // rows received from each rank
    GroupOrder by_expert;            // received rows by local slot
    std::vector<float> load_scale;   // (local) the gradient scale of each local expert (1 without)
    GroupedExperts::Saved expert, shared;
    std::vector<int64_t> row_of_pair;  // (T K) the pair's row among the sent ones, -1 if dropped
  } saved;
  // The gradients, kept from backward to backward: the router's (named), the local experts' and the shared
  // expert's (GroupedExperts' buffers, in named_parameters() order).
  bool grads_ready = false;
  std::vector<std::pair<std::string, Tensor>> router_grads;
  GroupedExperts::Gradients expert_grads, shared_grads;
  void ensure_grads();
  // The exchanges' per-call buffers (the backward's too), kept (only grown) from call to call: a large batch's rows
  // in fresh buffers faulted in a page every 4 KiB on every call, about a quarter of DeepSeek-V2-Lite's forward at
  // 512 tokens.
  struct Buffers {
    std::vector<float> send_x, send_w, recv_x, recv_w, scale, y_sorted, back, returned;
    std::vector<int64_t> send_slot, recv_slot;
  } buffers;

  bool replicated() const { return !replica_slots.empty(); }
  void open(MoELayer& layer, MPI_Comm c) {  // what both constructors do first
    check_mpi(MPI_Comm_dup(c, &comm), "MPI_Comm_dup");
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    config = layer.config();
    activation = activation_of(config);
  }
  void take_weights(MoELayer& layer);
  void pack();
  std::vector<std::pair<std::string, Tensor*>> parameters();
  // The weights of slot s as per_slot() float blocks (gate for SwiGLU, up, down), for a re-balance.
  int64_t per_slot() const { return (activation == MlpActivation::kSwiGLU ? 3 : 2) * config.dim * config.hidden_dim; }
  std::vector<float*> slot_blocks(int64_t s);  // its blocks, in that order
  void read_slot(int64_t s, float* out);
  void write_slot(int64_t s, const float* in);
};

// The router, the held slots' experts and the shared expert from the whole layer.
void ExpertParallelMoE::Impl::take_weights(MoELayer& layer) {
  const MoEConfig& c = config;
  router = make_router(c);
  for (auto& [name, t] : router->named_tensors()) *t = tensor_named(layer, "router." + name);
  const bool gated = activation == MlpActivation::kSwiGLU;
  auto mlp_from = [&](const std::string& prefix) {
    ExpertMlp e;
    e.activation = activation;
    if (gated) e.gate_proj = tensor_named(layer, prefix + "gate_proj.weight");
    e.up_proj = tensor_named(layer, prefix + "up_proj.weight");
    e.down_proj = tensor_named(layer, prefix + "down_proj.weight");
    return e;
  };
  if (c.packed_experts) {
    auto slots = [&](const std::string& name) {
      const Tensor all = tensor_named(layer, name);
      const int64_t per = all.numel() / c.num_experts;
      Shape shape = all.shape();
      shape[0] = local;
      Tensor out(shape);
      for (int64_t s = 0; s < local; ++s)
        std::memcpy(out.data() + s * per, all.data() + held[static_cast<size_t>(s)] * per,
                    sizeof(float) * static_cast<size_t>(per));
      return out;
    };
    up_w = slots("up_w");
    down_w = slots("down_w");
    if (gated) gate_w = slots("gate_w");
  } else {
    for (int64_t e : held) mlps.push_back(mlp_from("experts." + std::to_string(e) + "."));
  }
  if (c.shared_experts > 0) shared_mlp = mlp_from("shared_expert.");
}

void ExpertParallelMoE::Impl::pack() {
  if (!dirty) return;
  if (config.packed_experts)
    experts.emplace(up_w, down_w, activation == MlpActivation::kSwiGLU ? &gate_w : nullptr, activation);
  else
    experts.emplace(std::span<const ExpertMlp>(mlps));
  if (shared_mlp) shared.emplace(std::span<const ExpertMlp>(&*shared_mlp, 1));
  dirty = false;
}

std::vector<std::pair<std::string, Tensor*>> ExpertParallelMoE::Impl::parameters() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (auto& [name, t] : router->named_parameters()) out.emplace_back("router." + name, t);
  if (config.packed_experts) {
    out.emplace_back("up_w", &up_w);
    out.emplace_back("down_w", &down_w);
    if (activation == MlpActivation::kSwiGLU) out.emplace_back("gate_w", &gate_w);
  } else {
    for (size_t s = 0; s < mlps.size(); ++s)
      for (auto& [name, t] : mlps[s].named_tensors()) out.emplace_back("experts." + std::to_string(held[s]) + "." + name, t);
  }
  if (shared_mlp)
    for (auto& [name, t] : shared_mlp->named_tensors()) out.emplace_back("shared_expert." + name, t);
  return out;
}

std::vector<float*> ExpertParallelMoE::Impl::slot_blocks(int64_t s) {
  const int64_t block = config.dim * config.hidden_dim;
  std::vector<float*> blocks;
  if (config.packed_experts) {
    if (activation == MlpActivation::kSwiGLU) blocks.push_back(gate_w.data() + s * block);
    blocks.push_back(up_w.data() + s * block);
    blocks.push_back(down_w.data() + s * block);
  } else {
    for (auto& [name, t] : mlps[static_cast<size_t>(s)].named_tensors()) blocks.push_back(t->data());
  }
  return blocks;
}

void ExpertParallelMoE::Impl::read_slot(int64_t s, float* out) {
  const size_t block = static_cast<size_t>(config.dim * config.hidden_dim);
  const std::vector<float*> blocks = slot_blocks(s);
  for (size_t i = 0; i < blocks.size(); ++i) std::copy(blocks[i], blocks[i] + block, out + i * block);
}

void ExpertParallelMoE::Impl::write_slot(int64_t s, const float* in) {
  const size_t block = static_cast<size_t>(config.dim * config.hidden_dim);
  const std::vector<float*> blocks = slot_blocks(s);
  for (size_t i = 0; i < blocks.size(); ++i) std::copy(in + i * block, in + (i + 1) * block, blocks[i]);
}

namespace {

// Layer `plan_layer` of `plan`, checked against the communicator and the layer: (the slots of this rank, each
// expert's slots).
std::pair<std::vector<int64_t>, std::vector<std::vector<int64_t>>> plan_slots(const placement::ReplicaPlacement& plan,
                                                                              int64_t plan_layer, int ranks, int rank,
                                                                              int64_t num_experts) {
  if (plan.num_ranks != ranks)
    fail("expert parallelism: the replica plan is for ", plan.num_ranks, " ranks, the communicator has ", ranks);
  if (plan.num_experts != num_experts)
    fail("expert parallelism: the replica plan places ", plan.num_experts, " experts, the layer has ", num_experts);
  if (plan_layer < 0 || plan_layer >= static_cast<int64_t>(plan.layers.size()))
    fail("expert parallelism: layer ", plan_layer, " of a replica plan of ", plan.layers.size(), " layers");
  const placement::LayerReplicas& l = plan.layers[static_cast<size_t>(plan_layer)];
  const int64_t S = plan.slots_per_rank;
  if (S < 1 || static_cast<int64_t>(l.physical_to_logical.size()) != ranks * S ||
      static_cast<int64_t>(l.logical_to_physical.size()) != num_experts)
    fail("expert parallelism: layer ", plan_layer, " of the replica plan has ", l.physical_to_logical.size(),
         " slots and ", l.logical_to_physical.size(), " experts; expected ", ranks, " x ", S, " slots and ",
         num_experts, " experts");
  for (int64_t e = 0; e < num_experts; ++e) {
    const auto& slots = l.logical_to_physical[static_cast<size_t>(e)];
    if (slots.empty()) fail("expert parallelism: the replica plan gives expert ", e, " no slot");
    for (int64_t p : slots)
      if (p < 0 || p >= ranks * S || l.physical_to_logical[static_cast<size_t>(p)] != e)
        fail("expert parallelism: the replica plan lists slot ", p, " for expert ", e,
             ", which does not hold it");
  }
  std::vector<int64_t> mine(l.physical_to_logical.begin() + rank * S, l.physical_to_logical.begin() + (rank + 1) * S);
  for (int64_t e : mine)
    if (e < 0 || e >= num_experts)
      fail("expert parallelism: the replica plan gives rank ", rank, " a slot holding expert ", e, ", outside [0, ",
           num_experts, ")");
  return {std::move(mine), l.logical_to_physical};
}

}  // namespace

ExpertParallelMoE::ExpertParallelMoE(MoELayer& layer, MPI_Comm comm) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.open(layer, comm);
  const MoEConfig& c = m.config;
  if (c.num_experts % m.size != 0)
    fail("expert parallelism: num_experts (", c.num_experts, ") must be divisible by the number of ranks (", m.size,
         ")");
  m.local = c.num_experts / m.size;
  m.start = m.rank * m.local;
  for (int64_t e = m.start; e < m.start + m.local; ++e) m.held.push_back(e);
  m.take_weights(layer);
}

ExpertParallelMoE::ExpertParallelMoE(MoELayer& layer, MPI_Comm comm, const placement::ReplicaPlacement& plan,
                                     int64_t plan_layer)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.open(layer, comm);
  auto [held, slots] = plan_slots(plan, plan_layer, m.size, m.rank, m.config.num_experts);
  m.held = std::move(held);
  m.replica_slots = std::move(slots);
  m.local = plan.slots_per_rank;
  m.start = -1;
  m.take_weights(layer);
}

ExpertParallelMoE::~ExpertParallelMoE() {
  if (impl_ && impl_->comm != MPI_COMM_NULL) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&impl_->comm);
  }
}
ExpertParallelMoE::ExpertParallelMoE(ExpertParallelMoE&&) noexcept = default;
ExpertParallelMoE& ExpertParallelMoE::operator=(ExpertParallelMoE&&) noexcept = default;

int64_t ExpertParallelMoE::local_expert_start() const { return impl_->start; }
int64_t ExpertParallelMoE::num_local_experts() const { return impl_->local; }
const std::vector<int64_t>& ExpertParallelMoE::held_experts() const { return impl_->held; }
float ExpertParallelMoE::aux_loss() const { return impl_->routing.aux_loss; }
float ExpertParallelMoE::z_loss() const { return impl_->routing.z_loss; }
const Tensor& ExpertParallelMoE::expert_counts() const { return impl_->routing.expert_counts; }
const ExchangeStats& ExpertParallelMoE::last_exchange() const { return impl_->stats; }
double ExpertParallelMoE::last_expert_seconds() const { return impl_->expert_seconds; }

std::vector<std::pair<std::string, Tensor*>> ExpertParallelMoE::named_parameters() {
  impl_->dirty = true;
  return impl_->parameters();
}

// Zeros of every parameter's shape, on first use and after a re-balance.
void ExpertParallelMoE::Impl::ensure_grads() {
  if (grads_ready) return;
  router_grads.clear();
  expert_grads = {};
  shared_grads = {};
  for (auto& [name, t] : parameters()) {
    if (name.starts_with("router."))
      router_grads.emplace_back(name, Tensor(t->shape()));
    else if (name.starts_with("shared_expert."))
      shared_grads.weights.emplace_back(t->shape());
    else
      expert_grads.weights.emplace_back(t->shape());
  }
  expert_grads.zero.assign(static_cast<size_t>(local), 1);
  shared_grads.zero.assign(shared_mlp ? 1 : 0, 1);
  grads_ready = true;
}

std::vector<std::pair<std::string, const Tensor*>> ExpertParallelMoE::named_gradients() const {
  Impl& m = *impl_;
  m.ensure_grads();
  std::vector<std::pair<std::string, const Tensor*>> out;
  size_t router = 0, expert = 0, shared = 0;
  for (auto& [name, t] : m.parameters()) {
    const Tensor* g = name.starts_with("router.")          ? &m.router_grads[router++].second
                      : name.starts_with("shared_expert.") ? &m.shared_grads.weights[shared++]
                                                           : &m.expert_grads.weights[expert++];
    out.emplace_back(name, g);
  }
  return out;
}

Tensor ExpertParallelMoE::forward(const Tensor& x_in, Mode mode, int64_t step, int64_t max_steps) {
  Impl& m = *impl_;
  const int64_t D = m.config.dim, K = m.config.top_k, E = m.config.num_experts, P = m.size, L = m.local;
  if (!((x_in.rank() == 3 || x_in.rank() == 2) && x_in.dim(x_in.rank() - 1) == D))
    fail("expert parallelism: x must be (B, L, ", D, ") or (T, ", D, "), got ", shape_to_string(x_in.shape()));
  const bool train = mode == Mode::kTrain;
  if (train && m.replicated())
    fail("expert parallelism: a layer placed with replicas is for inference (each replica would get part of its "
         "expert's gradient); run its forward in Mode::kEval");
  const int64_t T = x_in.numel() / D;
  const Tensor x = x_in.reshaped(Shape{T, D});
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!std::isfinite(x[i])) fail("expert parallelism: x holds a non-finite value at element ", i);
  m.pack();
  m.stats = {};
  m.expert_seconds = 0.0;
  m.saved = {};
  // Route this rank's tokens. The kept (token, slot) pairs, by owning rank, in pair order, each with its slot on
  // that rank.
  m.router->set_step(step, max_steps);
  Routing routing;
  if (T > 0) {
    routing = m.router->route(x, mode);
    apply_capacity(m.config, routing);  // of this rank's tokens, as KempnerForge's EP caps them
  } else {
    routing.top_k = K;
    routing.num_experts = E;
    routing.expert_counts = Tensor(Shape{E});
  }
  std::vector<int64_t> pair_of, destination, slot_of;
  for (int64_t i = 0; i < T * K; ++i) {
    if (routing.dropped[static_cast<size_t>(i)]) continue;
    const int64_t e = routing.indices[static_cast<size_t>(i)];
    const int64_t slot = m.replicated() ? [&] {
      const auto& slots = m.replica_slots[static_cast<size_t>(e)];
      return slots[static_cast<size_t>((i / K) % static_cast<int64_t>(slots.size()))];
    }()
                                        : e;
    pair_of.push_back(i);
    destination.push_back(slot / L);
    slot_of.push_back(slot % L);
  }
  const GroupOrder by_rank = group_order(destination, P);
  const int64_t S = static_cast<int64_t>(pair_of.size());
  std::vector<int64_t> sent_pair(static_cast<size_t>(S));
  // The per-call buffers are the layer's, kept from call to call (Impl::Buffers).
  Impl::Buffers& b = m.buffers;
  std::vector<float>& send_x = b.send_x;
  std::vector<float>& send_w = b.send_w;
  std::vector<int64_t>& send_slot = b.send_slot;
  send_x.resize(static_cast<size_t>(S * D));
  send_w.resize(static_cast<size_t>(S));
  send_slot.resize(static_cast<size_t>(S));
  for (int64_t r = 0; r < S; ++r) {
    const size_t j = static_cast<size_t>(by_rank.order[static_cast<size_t>(r)]);
    sent_pair[static_cast<size_t>(r)] = pair_of[j];
    send_w[static_cast<size_t>(r)] = routing.weights[static_cast<size_t>(pair_of[j])];
    send_slot[static_cast<size_t>(r)] = slot_of[j];
  }
  permute_rows(x.data(), T, D, sent_pair, K, send_x.data());  // each pair's token row
  // Counts, then rows, weights and slots.
  std::vector<int64_t> recv_rows = exchange_counts(by_rank.counts, 1, m.size, m.comm, m.stats);
  int64_t R = 0;
  for (int64_t n : recv_rows) R += n;
  std::vector<float>& recv_x = b.recv_x;
  std::vector<float>& recv_w = b.recv_w;
  std::vector<int64_t>& recv_slot = b.recv_slot;
  recv_x.resize(static_cast<size_t>(R * D));
  recv_w.resize(static_cast<size_t>(R));
  recv_slot.resize(static_cast<size_t>(R));
  exchange_rows(send_x.data(), by_rank.counts, recv_x.data(), recv_rows, D, MPI_FLOAT, m.comm, m.stats, m.rank);
  exchange_rows(send_w.data(), by_rank.counts, recv_w.data(), recv_rows, 1, MPI_FLOAT, m.comm, m.stats, m.rank);
  exchange_rows(send_slot.data(), by_rank.counts, recv_slot.data(), recv_rows, 1, MPI_INT64_T, m.comm, m.stats,
                m.rank);
  for (int64_t r = 0; r < R; ++r) {
    const int64_t s = recv_slot[static_cast<size_t>(r)];
    if (s < 0 || s >= L) fail("expert parallelism: rank ", m.rank, " received a row for slot ", s, " of ", L);
  }
  // The gradient scale under expert parallelism (KempnerForge's rule): the local experts' (token, slot) counts
  // before capacity drops, summed over the ranks the tokens came from.
  std::vector<float> load_scale(static_cast<size_t>(L), 1.0f);
  if (train && m.config.gradient_scale) {
    std::vector<int64_t> mine(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) mine[static_cast<size_t>(e)] = static_cast<int64_t>(routing.expert_counts[e]);
    const std::vector<int64_t> got = exchange_counts(mine, L, m.size, m.comm, m.stats);
    std::vector<int64_t> rows(static_cast<size_t>(L), 0);
    int64_t total = 0;
    for (int64_t q = 0; q < P; ++q)
      for (int64_t s = 0; s < L; ++s) {
        rows[static_cast<size_t>(s)] += got[static_cast<size_t>(q * L + s)];
        total += got[static_cast<size_t>(q * L + s)];
      }
    // As MoELayer computes it (expert_load_scale), so that one rank gives its bits.
    const float avg = static_cast<float>(static_cast<double>(total) / static_cast<double>(L));
    for (int64_t s = 0; s < L; ++s)
      load_scale[static_cast<size_t>(s)] = avg / std::max(static_cast<float>(rows[static_cast<size_t>(s)]), 1.0f);
  }
  // The local experts on the received rows grouped by slot, each row scaled by its routing weight (times the
  // gradient scale) inside the kernel, as MoELayer does.
  GroupOrder by_expert = group_order(recv_slot, L);
  std::vector<float>& scale = b.scale;
  scale.resize(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) {
    const size_t src = static_cast<size_t>(by_expert.order[static_cast<size_t>(r)]);
    scale[static_cast<size_t>(r)] = recv_w[src] * load_scale[static_cast<size_t>(recv_slot[src])];
  }
  std::vector<float>& y_sorted = b.y_sorted;
  y_sorted.resize(static_cast<size_t>(R * D));
  std::chrono::duration<double> compute{};
  if (train) {  // the rows copied in grouped order: the saved state keeps them for the backward
    Tensor x_sorted(Shape{R, D});
    permute_rows(recv_x.data(), R, D, by_expert.order, 1, x_sorted.data());
    const auto compute_start = Clock::now();
    const Tensor y = m.experts->forward(x_sorted, by_expert.counts, &m.saved.expert, scale.data());
    compute = Clock::now() - compute_start;
    std::copy(y.data(), y.data() + R * D, y_sorted.data());
  } else {  // read where they were received
    const auto compute_start = Clock::now();
    m.experts->forward(recv_x.data(), R, by_expert.order, by_expert.counts, y_sorted.data(), scale.data());
    compute = Clock::now() - compute_start;
  }
  m.expert_seconds = compute.count();
  std::vector<float>& back = b.back;
  back.resize(static_cast<size_t>(R * D));
  unpermute_rows(y_sorted.data(), D, by_expert.order, back.data());
  // Back to the ranks the rows came from, in the order they were sent.
  std::vector<float>& returned = b.returned;
  returned.resize(static_cast<size_t>(S * D));
  exchange_rows(back.data(), recv_rows, returned.data(), by_rank.counts, D, MPI_FLOAT, m.comm, m.stats, m.rank);
  // Each kept pair's row in pair order, then every token's sum over its slots in slot order (MoELayer's combine).
  std::vector<int64_t> row_of_pair(static_cast<size_t>(T * K), -1);
  for (int64_t r = 0; r < S; ++r) row_of_pair[static_cast<size_t>(sent_pair[static_cast<size_t>(r)])] = r;
  Tensor y(Shape{T, D});
  combine_slot_rows(returned.data(), S, D, row_of_pair, nullptr, T, K, y.data());
  if (m.shared && T > 0) {
    const Tensor shared = m.shared->forward(x, std::vector<int64_t>{T}, train ? &m.saved.shared : nullptr);
    for_rows(T, [&](int64_t t) { add_rows(y.data() + t * D, shared.data() + t * D, D); });
  }
  if (train) {
    Impl::Saved& s = m.saved;
    s.valid = true;
    s.x_shape = x_in.shape();
    s.x = x;
    s.sent_pair = std::move(sent_pair);
    s.send_rows = by_rank.counts;
    s.recv_rows = std::move(recv_rows);
    s.by_expert = std::move(by_expert);
    s.load_scale = std::move(load_scale);
    s.row_of_pair = std::move(row_of_pair);
  }
  m.routing = std::move(routing);
  return y.reshaped(x_in.shape());
}

Tensor ExpertParallelMoE::backward(const Tensor& grad_y, float aux_loss_weight, float z_loss_weight) {
  Impl& m = *impl_;
  Impl::Saved& s = m.saved;
  if (!s.valid)
    fail("expert parallelism: backward needs a train-mode forward first (none ran, or the last one was in eval "
         "mode)");
  if (grad_y.shape() != s.x_shape)
    fail("expert parallelism: grad_y has shape ", shape_to_string(grad_y.shape()), ", the forward's output had ",
         shape_to_string(s.x_shape));
  for (int64_t i = 0; i < grad_y.numel(); ++i)
    if (!std::isfinite(grad_y[i])) fail("expert parallelism: grad_y holds a non-finite value at element ", i);
  if (!std::isfinite(aux_loss_weight) || !std::isfinite(z_loss_weight))
    fail("expert parallelism: aux_loss_weight=", aux_loss_weight, " and z_loss_weight=", z_loss_weight,
         " must be finite");
  const int64_t D = m.config.dim, K = m.config.top_k;
  const int64_t T = s.x.dim(0), S = static_cast<int64_t>(s.sent_pair.size());
  const Tensor g2 = grad_y.reshaped(Shape{T, D});
  m.stats = {};
  // Each sent pair's output gradient is its token's: to the expert's rank in the forward's order.
  // The forward's exchange buffers again: nothing of them is needed after the forward.
  Impl::Buffers& b = m.buffers;
  std::vector<float>& send_g = b.send_x;
  send_g.resize(static_cast<size_t>(S * D));
  permute_rows(g2.data(), T, D, s.sent_pair, K, send_g.data());
  int64_t R = 0;
  for (int64_t n : s.recv_rows) R += n;
  std::vector<float>& recv_g = b.recv_x;
  recv_g.resize(static_cast<size_t>(R * D));
  exchange_rows(send_g.data(), s.send_rows, recv_g.data(), s.recv_rows, D, MPI_FLOAT, m.comm, m.stats, m.rank);
  Tensor g_sorted(Shape{R, D});
  permute_rows(recv_g.data(), R, D, s.by_expert.order, 1, g_sorted.data());
  m.ensure_grads();
  const auto compute_start = Clock::now();
  m.experts->backward(s.expert, g_sorted, m.expert_grads);
  const GroupedExperts::Gradients& eg = m.expert_grads;
  m.expert_seconds = std::chrono::duration<double>(Clock::now() - compute_start).count();
  // Back, one row of D + 1 per received row: its input gradient and its routing weight's (row scale = weight x
  // gradient scale, so d / d weight = d / d row scale x gradient scale).
  const int64_t W = D + 1;
  std::vector<float>& back = b.back;
  back.resize(static_cast<size_t>(R * W));
  int64_t row = 0;
  for (int64_t slot = 0; slot < m.local; ++slot)
    for (int64_t n = 0; n < s.by_expert.counts[static_cast<size_t>(slot)]; ++n, ++row) {
      float* dst = back.data() + s.by_expert.order[static_cast<size_t>(row)] * W;
      std::memcpy(dst, eg.grad_x.data() + row * D, sizeof(float) * static_cast<size_t>(D));
      dst[D] = eg.grad_scale[static_cast<size_t>(row)] * s.load_scale[static_cast<size_t>(slot)];
    }
  std::vector<float>& returned = b.returned;
  returned.resize(static_cast<size_t>(S * W));
  exchange_rows(back.data(), s.recv_rows, returned.data(), s.send_rows, W, MPI_FLOAT, m.comm, m.stats, m.rank);
  // MoELayer::backward's order: the routed rows summed in slot order, the shared expert, then the router.
  std::vector<float> grad_weights(static_cast<size_t>(T * K), 0.0f);  // 0 for a dropped pair
  for (int64_t r = 0; r < S; ++r)
    grad_weights[static_cast<size_t>(s.sent_pair[static_cast<size_t>(r)])] = returned[static_cast<size_t>(r * W + D)];
  Tensor grad_x(Shape{T, D});
  for_rows(T, [&](int64_t t) {
    for (int64_t k = 0; k < K; ++k) {
      const int64_t r = s.row_of_pair[static_cast<size_t>(t * K + k)];
      if (r >= 0) add_rows(grad_x.data() + t * D, returned.data() + r * W, D);
    }
  });
  std::vector<std::pair<std::string, Tensor>> router_grads;
  if (T > 0) {
    if (m.shared) {
      m.shared->backward(s.shared, g2, m.shared_grads);
      add_rows(grad_x.data(), m.shared_grads.grad_x.data(), T * D);
    }
    RouterBackwardArgs ra;
    ra.x = &s.x;
    ra.routing = &m.routing;
    ra.grad_weights = grad_weights.data();
    ra.aux_loss_weight = aux_loss_weight;
    ra.z_loss_weight = z_loss_weight;
    ra.grad_x = grad_x.data();
    router_grads = m.router->backward(ra);
  } else {  // no tokens: no shared-expert or router gradient
    for (Tensor& w : m.shared_grads.weights) std::fill(w.values().begin(), w.values().end(), 0.0f);
  }
  // The router's gradients by name (zeros for any it does not return, and on a rank without tokens).
  for (auto& [name, value] : m.router_grads) {
    Tensor got(value.shape());
    for (auto& [n, g] : router_grads)
      if ("router." + n == name) {
        HYMOE_CHECK(g.shape() == got.shape(), "router gradient ", n);
        got = std::move(g);
      }
    value = std::move(got);
  }
  return grad_x.reshaped(s.x_shape);
}

int64_t ExpertParallelMoE::rebalance(const placement::ReplicaPlacement& plan, int64_t plan_layer) {
  Impl& m = *impl_;
  if (!m.replicated())
    fail("expert parallelism: rebalance needs a layer placed with replicas (the replica-plan constructor)");
  if (plan.slots_per_rank != m.local)
    fail("expert parallelism: the new plan has ", plan.slots_per_rank, " slots per rank, the placed layer ", m.local);
  auto [held, slots] = plan_slots(plan, plan_layer, m.size, m.rank, m.config.num_experts);
  const int64_t Sl = m.local, P = m.size, B = m.per_slot();
  // Every rank's current slots (each rank knows only its own).
  std::vector<int64_t> old(static_cast<size_t>(P * Sl));
  check_mpi(MPI_Allgather(m.held.data(), static_cast<int>(Sl), MPI_INT64_T, old.data(), static_cast<int>(Sl),
                          MPI_INT64_T, m.comm),
            "MPI_Allgather");
  const auto holds = [&](int64_t r, int64_t e) -> int64_t {  // r's slot holding e, or -1
    for (int64_t i = 0; i < Sl; ++i)
      if (old[static_cast<size_t>(r * Sl + i)] == e) return i;
    return -1;
  };
  std::vector<std::vector<float>> fresh(static_cast<size_t>(Sl));
  for (int64_t i = 0; i < Sl; ++i) {
    const int64_t from = holds(m.rank, held[static_cast<size_t>(i)]);
    if (from < 0) continue;
    fresh[static_cast<size_t>(i)].resize(static_cast<size_t>(B));
    m.read_slot(from, fresh[static_cast<size_t>(i)].data());
  }
  // The transfers, in the same order on every rank: each pair of ranks meets them in one order, so none waits on
  // a transfer the other has not reached.
  int64_t received = 0;
  std::vector<float> buffer(static_cast<size_t>(B));
  const int count = as_count(B, "an expert's weights");
  for (int64_t r = 0; r < P; ++r)
    for (int64_t i = 0; i < Sl; ++i) {
      const int64_t e = plan.layers[static_cast<size_t>(plan_layer)].physical_to_logical[static_cast<size_t>(r * Sl + i)];
      if (holds(r, e) >= 0) continue;
      int64_t source = 0;
      while (source < P && holds(source, e) < 0) ++source;
      if (source == P) fail("expert parallelism: no rank holds expert ", e, ", which the new plan places on rank ", r);
      if (m.rank == source) {
        m.read_slot(holds(source, e), buffer.data());
        check_mpi(MPI_Send(buffer.data(), count, MPI_FLOAT, static_cast<int>(r), 0, m.comm), "MPI_Send");
      } else if (m.rank == r) {
        fresh[static_cast<size_t>(i)].resize(static_cast<size_t>(B));
        check_mpi(MPI_Recv(fresh[static_cast<size_t>(i)].data(), count, MPI_FLOAT, static_cast<int>(source), 0,
                           m.comm, MPI_STATUS_IGNORE),
                  "MPI_Recv");
        ++received;
      }
    }
  for (int64_t i = 0; i < Sl; ++i) m.write_slot(i, fresh[static_cast<size_t>(i)].data());
  m.held = std::move(held);
  m.replica_slots = std::move(slots);
  m.dirty = true;
  m.grads_ready = false;  // the expert names follow the slots
  return received;
}

}  // namespace hymoe
