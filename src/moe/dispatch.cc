// Dispatch and combine. The combine is a gather (each token reads its own rows), not a scatter-add, so it needs no
// atomics and has one fixed summation order.
#include "moe/dispatch.h"

#include <algorithm>
#include <cstring>

#include "hymoe/error.h"
#include "kernels/driver/thread_pool.h"

namespace hymoe {

namespace {

// The counting sort behind both builders: expert_of(i) is assignment i's expert, or -1 to leave it out. Rows are
// stable in (token, slot) order. `next` is scratch of E entries; no vector shrinks, so a reused `d` keeps its memory.
template <typename ExpertOf>
void fill_dispatch(int64_t T, int64_t K, int64_t E, ExpertOf expert_of, Dispatch& d) {
  d.offsets.assign(static_cast<size_t>(E + 1), 0);
  for (int64_t i = 0; i < T * K; ++i)
    if (const int64_t e = expert_of(i); e >= 0) ++d.offsets[static_cast<size_t>(e + 1)];
  for (int64_t e = 0; e < E; ++e) d.offsets[static_cast<size_t>(e + 1)] += d.offsets[static_cast<size_t>(e)];
  const int64_t R = d.offsets.back();
  d.row_token.resize(static_cast<size_t>(R));
  d.row_slot.resize(static_cast<size_t>(R));
  d.position.assign(static_cast<size_t>(T * K), -1);
  d.next.assign(d.offsets.begin(), d.offsets.end() - 1);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t i = t * K + k;
      const int64_t e = expert_of(i);
      if (e < 0) continue;
      const int64_t row = d.next[static_cast<size_t>(e)]++;
      d.row_token[static_cast<size_t>(row)] = t;
      d.row_slot[static_cast<size_t>(row)] = k;
      d.position[static_cast<size_t>(i)] = row;
    }
}

}  // namespace

Dispatch build_dispatch(const Routing& routing) {
  Dispatch d;
  fill_dispatch(routing.num_tokens, routing.top_k, routing.num_experts, [&](int64_t i) -> int64_t {
    return routing.dropped[static_cast<size_t>(i)] ? -1 : routing.indices[static_cast<size_t>(i)];
  }, d);
  return d;
}

void build_dispatch_from_ids(const int64_t* ids, int64_t num_tokens, int64_t top_k, int64_t num_experts,
                             const uint8_t* skip, Dispatch& d) {
  fill_dispatch(num_tokens, top_k, num_experts, [&](int64_t i) -> int64_t {
    const int64_t e = ids[i];
    HYMOE_CHECK(e < num_experts, "expert id ", e, " of ", num_experts);
    return e < 0 || (skip && skip[e]) ? -1 : e;
  }, d);
}

GroupOrder group_order(std::span<const int64_t> destinations, int64_t num_groups) {
  if (num_groups < 1) fail("group_order: num_groups is ", num_groups, "; it must be at least 1");
  GroupOrder g;
  g.counts.assign(static_cast<size_t>(num_groups), 0);
  for (size_t i = 0; i < destinations.size(); ++i) {
    const int64_t dest = destinations[i];
    if (dest < 0 || dest >= num_groups)
      fail("group_order: destination ", dest, " of assignment ", i, " is outside [0, ", num_groups, ")");
    ++g.counts[static_cast<size_t>(dest)];
  }
  std::vector<int64_t> next(static_cast<size_t>(num_groups), 0);
  for (int64_t d = 1; d < num_groups; ++d)
    next[static_cast<size_t>(d)] = next[static_cast<size_t>(d - 1)] + g.counts[static_cast<size_t>(d - 1)];
  g.order.resize(destinations.size());
  for (size_t i = 0; i < destinations.size(); ++i)
    g.order[static_cast<size_t>(next[static_cast<size_t>(destinations[i])]++)] = static_cast<int64_t>(i);
  return g;
}

void gather_row_weights(const Dispatch& d, const float* weights, int64_t top_k, float* out) {
  for (int64_t r = 0; r < d.rows(); ++r)
    out[r] = weights[d.row_token[static_cast<size_t>(r)] * top_k + d.row_slot[static_cast<size_t>(r)]];
}

namespace {
// Row ranges for the pool: copies and sums of whole rows, so any split gives the same bits.
constexpr int64_t kRowsPerTask = 64;
int64_t tasks_for(int64_t rows) { return (rows + kRowsPerTask - 1) / kRowsPerTask; }
}  // namespace

std::vector<float> gather_rows(const float* x, int64_t dim, const Dispatch& dispatch) {
  std::vector<float> out(static_cast<size_t>(dispatch.rows() * dim));
  kernels::parallel_for(tasks_for(dispatch.rows()), [&](int64_t task, int) {
    for (int64_t r = task * kRowsPerTask; r < std::min(dispatch.rows(), (task + 1) * kRowsPerTask); ++r)
      std::memcpy(out.data() + r * dim, x + dispatch.row_token[static_cast<size_t>(r)] * dim,
                  sizeof(float) * static_cast<size_t>(dim));
  });
  return out;
}

void combine_rows(const float* expert_out, int64_t dim, const Dispatch& dispatch, int64_t num_tokens, int64_t top_k,
                  float* y) {
  // Tokens in tasks of kTokensPerTask, each reading its top_k rows: in tasks of kRowsPerTask tokens a 32-token step
  // combined on one thread (Qwen3-30B-A3B: 0.23 ms of a 12.5 ms layer; docs/performance.md).
  constexpr int64_t kTokensPerTask = 4;
  kernels::parallel_for((num_tokens + kTokensPerTask - 1) / kTokensPerTask, [&](int64_t task, int) {
    for (int64_t t = task * kTokensPerTask; t < std::min(num_tokens, (task + 1) * kTokensPerTask); ++t) {
      float* yt = y + t * dim;
      std::fill(yt, yt + dim, 0.0f);
      for (int64_t k = 0; k < top_k; ++k) {
        const int64_t row = dispatch.position[static_cast<size_t>(t * top_k + k)];
        if (row < 0) continue;
        const float* src = expert_out + row * dim;
        for (int64_t d = 0; d < dim; ++d) yt[d] += src[d];
      }
    }
  });
}

namespace {

void check_index(int64_t value, int64_t limit, size_t i, const char* what) {
  if (value < 0 || value >= limit)
    fail(what, ": index ", value, " at ", i, " is outside [0, ", limit, ")");
}

}  // namespace

void permute_rows(const float* x, int64_t x_rows, int64_t width, std::span<const int64_t> index, int64_t divisor,
                  float* out) {
  if (divisor < 1) fail("permute_rows: divisor is ", divisor, "; it must be at least 1");
  for (size_t i = 0; i < index.size(); ++i) check_index(index[i] / divisor, x_rows, i, "permute_rows");
  const int64_t n = static_cast<int64_t>(index.size());
  kernels::parallel_for(tasks_for(n), [&](int64_t task, int) {
    for (int64_t r = task * kRowsPerTask; r < std::min(n, (task + 1) * kRowsPerTask); ++r)
      std::memcpy(out + r * width, x + index[static_cast<size_t>(r)] / divisor * width,
                  sizeof(float) * static_cast<size_t>(width));
  });
}

void unpermute_rows(const float* x, int64_t width, std::span<const int64_t> index, float* out) {
  const int64_t n = static_cast<int64_t>(index.size());
  std::vector<uint8_t> seen(index.size(), 0);
  for (size_t i = 0; i < index.size(); ++i) {
    check_index(index[i], n, i, "unpermute_rows");
    if (seen[static_cast<size_t>(index[i])]++) fail("unpermute_rows: index ", index[i], " appears twice (at ", i, ")");
  }
  kernels::parallel_for(tasks_for(n), [&](int64_t task, int) {
    for (int64_t r = task * kRowsPerTask; r < std::min(n, (task + 1) * kRowsPerTask); ++r)
      std::memcpy(out + index[static_cast<size_t>(r)] * width, x + r * width, sizeof(float) * static_cast<size_t>(width));
  });
}

namespace {
void check_positions(std::span<const int64_t> position, int64_t num_rows, int64_t num_tokens, int64_t top_k,
                     const char* what) {
  if (static_cast<int64_t>(position.size()) != num_tokens * top_k)
    fail(what, ": ", position.size(), " positions for ", num_tokens, " tokens x top_k ", top_k);
  for (size_t i = 0; i < position.size(); ++i)
    if (position[i] != -1) check_index(position[i], num_rows, i, what);
}
}  // namespace

void combine_slot_rows(const float* rows, int64_t num_rows, int64_t width, std::span<const int64_t> position,
                       const float* weights, int64_t num_tokens, int64_t top_k, float* y) {
  check_positions(position, num_rows, num_tokens, top_k, "combine_slot_rows");
  kernels::parallel_for(tasks_for(num_tokens), [&](int64_t task, int) {
    for (int64_t t = task * kRowsPerTask; t < std::min(num_tokens, (task + 1) * kRowsPerTask); ++t) {
      float* yt = y + t * width;
      std::fill(yt, yt + width, 0.0f);
      for (int64_t k = 0; k < top_k; ++k) {
        const int64_t row = position[static_cast<size_t>(t * top_k + k)];
        if (row < 0) continue;
        const float* src = rows + row * width;
        if (!weights) {
          for (int64_t d = 0; d < width; ++d) yt[d] += src[d];
          continue;
        }
        // The product rounded, then added (-ffp-contract=off): the bits of torch's (rows * w), summed slot by slot.
        const float w = weights[t * top_k + k];
        for (int64_t d = 0; d < width; ++d) yt[d] += src[d] * w;
      }
    }
  });
}

void combine_slot_rows_backward(const float* rows, int64_t num_rows, int64_t width, std::span<const int64_t> position,
                                const float* weights, const float* grad_y, int64_t num_tokens, int64_t top_k,
                                float* grad_rows, float* grad_weights) {
  check_positions(position, num_rows, num_tokens, top_k, "combine_slot_rows_backward");
  std::vector<uint8_t> named(static_cast<size_t>(num_rows), 0);
  for (size_t i = 0; i < position.size(); ++i)
    if (position[i] >= 0 && named[static_cast<size_t>(position[i])]++)
      fail("combine_slot_rows_backward: row ", position[i], " is named twice (again at ", i, ")");
  for (int64_t r = 0; r < num_rows; ++r)
    if (!named[static_cast<size_t>(r)]) std::fill(grad_rows + r * width, grad_rows + (r + 1) * width, 0.0f);
  kernels::parallel_for(tasks_for(num_tokens), [&](int64_t task, int) {
    for (int64_t t = task * kRowsPerTask; t < std::min(num_tokens, (task + 1) * kRowsPerTask); ++t) {
      const float* g = grad_y + t * width;
      for (int64_t k = 0; k < top_k; ++k) {
        const size_t i = static_cast<size_t>(t * top_k + k);
        const int64_t row = position[i];
        if (row < 0) {
          grad_weights[i] = 0.0f;
          continue;
        }
        const float* src = rows + row * width;
        float* dst = grad_rows + row * width;
        const float w = weights ? weights[i] : 1.0f;
        double dot = 0.0;
        for (int64_t d = 0; d < width; ++d) {
          dst[d] = w * g[d];
          dot += static_cast<double>(src[d]) * static_cast<double>(g[d]);
        }
        grad_weights[i] = static_cast<float>(dot);
      }
    }
  });
}

}  // namespace hymoe
