// Dispatch: turns a routing decision into the ragged batch the kernels consume, and combines the expert outputs
// back into token order. Counting sort, stable in (token, slot) order, so the batch and every sum over it are the
// same bits for any thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "hymoe/moe.h"

namespace hymoe {

struct Dispatch {
  std::vector<int64_t> offsets;    // (E+1) exclusive scan of kept assignments per expert
  std::vector<int64_t> row_token;  // (R) token of each row of the sorted batch
  std::vector<int64_t> row_slot;   // (R) top-k slot of each row
  std::vector<int64_t> position;   // (T*K) row of assignment (t, k), or -1 when capacity dropped it
  std::vector<int64_t> next;       // (E) scratch of the builders: each expert's next free row
  int64_t rows() const { return offsets.back(); }
};

// Assignments that capacity dropped are left out of the batch: they would contribute zero anyway.
Dispatch build_dispatch(const Routing& routing);

// The batch of explicit expert ids (T, K) row-major, in place: assignment (t, k) is left out (position -1) when its
// id is negative or skip[id] != 0 (skip (E), or nullptr). Ids must be < num_experts (HYMOE_CHECK: callers validate).
// `d` keeps its vectors' capacity, so a caller reusing it allocates nothing once it has seen its largest batch.
void build_dispatch_from_ids(const int64_t* ids, int64_t num_tokens, int64_t top_k, int64_t num_experts,
                             const uint8_t* skip, Dispatch& d);

// out (R) = weights[row_token * top_k + row_slot]: each row's routing weight, weights (T, K) row-major.
void gather_row_weights(const Dispatch& dispatch, const float* weights, int64_t top_k, float* out);

// x_sorted (R, D) = x[row_token].
std::vector<float> gather_rows(const float* x, int64_t dim, const Dispatch& dispatch);

// y[t] = sum over slots k (in slot order) of expert_out[position[t, k]]; y is overwritten.
void combine_rows(const float* expert_out, int64_t dim, const Dispatch& dispatch, int64_t num_tokens, int64_t top_k,
                  float* y);

}  // namespace hymoe
