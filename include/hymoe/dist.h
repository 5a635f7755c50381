// Expert parallelism over MPI for C++ users (docs/distributed.md): one MoE layer's routed experts sharded across
// the ranks of a communicator, tokens moved to their experts and back with MPI_Alltoallv. Built where CMake finds
// MPI (the hymoe_mpi library, option HYMOE_MPI); Python users get the same layer on torch.distributed
// (hymoe.torch.apply_expert_parallel).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>

#include "hymoe/moe.h"
#include "hymoe/tensor.h"

namespace hymoe {

// What one forward's exchanges did on this rank.
struct ExchangeStats {
  int64_t calls = 0;
  int64_t bytes_to_others = 0;  // rows, routing weights and slot ids sent to other ranks (own rank's not counted)
  double seconds = 0.0;         // in the MPI calls, waiting for the slowest rank included
};

// Inference forward of a MoE layer whose routed experts are split over `comm`: rank r keeps experts
// [r * E / P, (r + 1) * E / P) (E divisible by P), and every rank keeps the router and the shared expert. Each rank
// routes its own tokens, sends each (token, slot) pair's row and routing weight to the rank owning the expert,
// runs its experts on what it received (hymoe's grouped kernels, the weight applied as MoELayer applies it), sends
// the rows back, and sums a token's slots in slot order before adding the shared expert, as MoELayer's forward
// does. Without capacity limits a token's output therefore has the bits of the single-process MoELayer's, for any
// number of ranks and any split of the batch; with one, capacity counts each rank's own tokens (KempnerForge's
// rule under expert parallelism).
class ExpertParallelMoE {
 public:
  // From the whole layer, built alike on every rank (same config and weights); the layer can be freed after.
  // Collective over comm. Throws hymoe::Error when E is not divisible by the number of ranks.
  ExpertParallelMoE(MoELayer& layer, MPI_Comm comm);
  ~ExpertParallelMoE();
  ExpertParallelMoE(ExpertParallelMoE&&) noexcept;
  ExpertParallelMoE& operator=(ExpertParallelMoE&&) noexcept;

  // x (B, L, dim) or (T, dim), this rank's tokens (any number, none included) -> y of x's shape. Collective: every
  // rank of the communicator calls it the same number of times.
  Tensor forward(const Tensor& x);

  int64_t local_expert_start() const;
  int64_t num_local_experts() const;
  // The last forward's exchanges, and its seconds in the local experts' kernels.
  const ExchangeStats& last_exchange() const;
  double last_expert_seconds() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hymoe
