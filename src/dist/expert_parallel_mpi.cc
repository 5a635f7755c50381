// ExpertParallelMoE (include/hymoe/dist.h): route here, exchange with MPI_Alltoallv, compute the local experts,
// exchange back, combine in slot order. The permutations are group_order's stable counting sorts, so every rank
// sees its rows in one order whatever the others do.
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

int rank_of(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}

int size_of(MPI_Comm comm) {
  int s = 0;
  MPI_Comm_size(comm, &s);
  return s;
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

Tensor tensor_named(MoELayer& layer, const std::string& name) {
  for (auto& [n, t] : layer.named_tensors())
    if (n == name) return *t;
  fail("expert parallelism: the layer has no tensor '", name, "'");
}

}  // namespace

struct ExpertParallelMoE::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  MoEConfig config;
  int64_t start = 0, local = 0;
  std::unique_ptr<Router> router;
  std::vector<ExpertMlp> mlps;  // local experts (unpacked layers) and the shared expert's copy, last
  Tensor up_w, down_w, gate_w;  // local slices of packed layers
  std::optional<GroupedExperts> experts, shared;
  ExchangeStats stats;
  double expert_seconds = 0.0;
};

ExpertParallelMoE::ExpertParallelMoE(MoELayer& layer, MPI_Comm comm) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  check_mpi(MPI_Comm_dup(comm, &m.comm), "MPI_Comm_dup");
  m.rank = rank_of(m.comm);
  m.size = size_of(m.comm);
  m.config = layer.config();
  const MoEConfig& c = m.config;
  if (c.num_experts % m.size != 0)
    fail("expert parallelism: num_experts (", c.num_experts, ") must be divisible by the number of ranks (", m.size,
         ")");
  m.local = c.num_experts / m.size;
  m.start = m.rank * m.local;
  m.router = make_router(c);
  for (auto& [name, t] : m.router->named_tensors()) *t = tensor_named(layer, "router." + name);
  const MlpActivation act = c.activation == "silu" ? MlpActivation::kSwiGLU
                            : c.activation == "gelu" ? MlpActivation::kGelu
                                                     : MlpActivation::kRelu;
  const bool gated = act == MlpActivation::kSwiGLU;
  auto mlp_from = [&](const std::string& prefix) {
    ExpertMlp e;
    e.activation = act;
    if (gated) e.gate_proj = tensor_named(layer, prefix + "gate_proj.weight");
    e.up_proj = tensor_named(layer, prefix + "up_proj.weight");
    e.down_proj = tensor_named(layer, prefix + "down_proj.weight");
    return e;
  };
  if (c.packed_experts) {
    auto slice = [&](const std::string& name) {
      const Tensor all = tensor_named(layer, name);
      const int64_t per = all.numel() / c.num_experts;
      Shape shape = all.shape();
      shape[0] = m.local;
      return Tensor(shape, std::vector<float>(all.data() + m.start * per, all.data() + (m.start + m.local) * per));
    };
    m.up_w = slice("up_w");
    m.down_w = slice("down_w");
    if (gated) m.gate_w = slice("gate_w");
    m.experts.emplace(m.up_w, m.down_w, gated ? &m.gate_w : nullptr, act);
  } else {
    for (int64_t e = m.start; e < m.start + m.local; ++e) m.mlps.push_back(mlp_from("experts." + std::to_string(e) + "."));
    m.experts.emplace(std::span<const ExpertMlp>(m.mlps));
  }
  if (c.shared_experts > 0) {
    m.mlps.push_back(mlp_from("shared_expert."));
    m.shared.emplace(std::span<const ExpertMlp>(&m.mlps.back(), 1));
  }
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
const ExchangeStats& ExpertParallelMoE::last_exchange() const { return impl_->stats; }
double ExpertParallelMoE::last_expert_seconds() const { return impl_->expert_seconds; }

Tensor ExpertParallelMoE::forward(const Tensor& x_in) {
  Impl& m = *impl_;
  const int64_t D = m.config.dim, K = m.config.top_k, P = m.size;
  if (!((x_in.rank() == 3 || x_in.rank() == 2) && x_in.dim(x_in.rank() - 1) == D))
    fail("expert parallelism: x must be (B, L, ", D, ") or (T, ", D, "), got ", shape_to_string(x_in.shape()));
  const int64_t T = x_in.numel() / D;
  const Tensor x = x_in.reshaped(Shape{T, D});
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!std::isfinite(x[i])) fail("expert parallelism: x holds a non-finite value at element ", i);
  m.stats = {};
  m.expert_seconds = 0.0;
  // Route this rank's tokens. The kept (token, slot) pairs, by owning rank, in pair order.
  Routing routing = T > 0 ? m.router->route(x, Mode::kEval) : Routing{};
  if (T > 0) apply_capacity(m.config, routing);  // of this rank's tokens, as KempnerForge's EP caps them
  std::vector<int64_t> pair_of, destination;
  for (int64_t i = 0; i < T * K; ++i) {
    if (routing.dropped[static_cast<size_t>(i)]) continue;
    pair_of.push_back(i);
    destination.push_back(routing.indices[static_cast<size_t>(i)] / m.local);
  }
  const GroupOrder by_rank = group_order(destination, P);
  const int64_t S = static_cast<int64_t>(pair_of.size());
  std::vector<float> send_x(static_cast<size_t>(S * D)), send_w(static_cast<size_t>(S));
  std::vector<int64_t> send_e(static_cast<size_t>(S));
  for_rows(S, [&](int64_t r) {
    const int64_t pair = pair_of[static_cast<size_t>(by_rank.order[static_cast<size_t>(r)])];
    std::memcpy(send_x.data() + r * D, x.data() + (pair / K) * D, sizeof(float) * static_cast<size_t>(D));
    send_w[static_cast<size_t>(r)] = routing.weights[static_cast<size_t>(pair)];
    send_e[static_cast<size_t>(r)] = routing.indices[static_cast<size_t>(pair)];
  });
  // Counts, then rows, weights and expert ids.
  std::vector<int64_t> recv_rows(static_cast<size_t>(P));
  {
    const auto start = Clock::now();
    check_mpi(MPI_Alltoall(by_rank.counts.data(), 1, MPI_INT64_T, recv_rows.data(), 1, MPI_INT64_T, m.comm),
              "MPI_Alltoall");
    m.stats.seconds += std::chrono::duration<double>(Clock::now() - start).count();
    ++m.stats.calls;
    m.stats.bytes_to_others += (P - 1) * static_cast<int64_t>(sizeof(int64_t));
  }
  int64_t R = 0;
  for (int64_t n : recv_rows) R += n;
  std::vector<float> recv_x(static_cast<size_t>(R * D)), recv_w(static_cast<size_t>(R));
  std::vector<int64_t> recv_e(static_cast<size_t>(R));
  exchange_rows(send_x.data(), by_rank.counts, recv_x.data(), recv_rows, D, MPI_FLOAT, m.comm, m.stats, m.rank);
  exchange_rows(send_w.data(), by_rank.counts, recv_w.data(), recv_rows, 1, MPI_FLOAT, m.comm, m.stats, m.rank);
  exchange_rows(send_e.data(), by_rank.counts, recv_e.data(), recv_rows, 1, MPI_INT64_T, m.comm, m.stats, m.rank);
  // The local experts on the received rows grouped by expert, each row scaled by its routing weight.
  std::vector<int64_t> local_id(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) {
    const int64_t e = recv_e[static_cast<size_t>(r)] - m.start;
    if (e < 0 || e >= m.local) fail("expert parallelism: rank ", m.rank, " received a row of expert ", e + m.start);
    local_id[static_cast<size_t>(r)] = e;
  }
  const GroupOrder by_expert = group_order(local_id, m.local);
  Tensor x_sorted(Shape{R, D});
  std::vector<float> scale(static_cast<size_t>(R));
  for_rows(R, [&](int64_t r) {
    const int64_t src = by_expert.order[static_cast<size_t>(r)];
    std::memcpy(x_sorted.data() + r * D, recv_x.data() + src * D, sizeof(float) * static_cast<size_t>(D));
    scale[static_cast<size_t>(r)] = recv_w[static_cast<size_t>(src)];
  });
  const auto compute_start = Clock::now();
  const Tensor y_sorted = m.experts->forward(x_sorted, by_expert.counts, nullptr, scale.data());
  m.expert_seconds = std::chrono::duration<double>(Clock::now() - compute_start).count();
  std::vector<float> back(static_cast<size_t>(R * D));
  for_rows(R, [&](int64_t r) {
    std::memcpy(back.data() + by_expert.order[static_cast<size_t>(r)] * D, y_sorted.data() + r * D,
                sizeof(float) * static_cast<size_t>(D));
  });
  // Back to the ranks the rows came from, in the order they were sent.
  std::vector<float> returned(static_cast<size_t>(S * D));
  exchange_rows(back.data(), recv_rows, returned.data(), by_rank.counts, D, MPI_FLOAT, m.comm, m.stats, m.rank);
  // Each kept pair's row in pair order, then every token's sum over its slots in slot order (MoELayer's combine).
  std::vector<int64_t> row_of_pair(static_cast<size_t>(T * K), -1);
  for (int64_t r = 0; r < S; ++r)
    row_of_pair[static_cast<size_t>(pair_of[static_cast<size_t>(by_rank.order[static_cast<size_t>(r)])])] = r;
  Tensor y(Shape{T, D});
  const Tensor shared = m.shared && T > 0 ? m.shared->forward(x, std::vector<int64_t>{T}) : Tensor();
  for_rows(T, [&](int64_t t) {
    float* yt = y.data() + t * D;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t r = row_of_pair[static_cast<size_t>(t * K + k)];
      if (r < 0) continue;
      for (int64_t d = 0; d < D; ++d) yt[d] += returned[static_cast<size_t>(r * D + d)];
    }
    if (shared.numel())
      for (int64_t d = 0; d < D; ++d) yt[d] += shared[t * D + d];
  });
  return y.reshaped(x_in.shape());
}

}  // namespace hymoe
