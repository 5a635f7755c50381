// Expert parallelism over MPI for C++ users (docs/distributed.md): one MoE layer's routed experts sharded across
// the ranks of a communicator, tokens moved to their experts and back with MPI_Alltoallv, forward and backward.
// Built where CMake finds MPI (the hymoe_mpi library, option HYMOE_MPI); Python users get the same layer on
// torch.distributed (hymoe.torch.apply_expert_parallel).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hymoe/moe.h"
#include "hymoe/placement/replicas.h"
#include "hymoe/tensor.h"

namespace hymoe {

// What one forward's or backward's exchanges did on this rank.
struct ExchangeStats {
  int64_t calls = 0;
  int64_t bytes_to_others = 0;  // rows, routing weights, slot ids and counts sent to other ranks (own rank's not counted)
  double seconds = 0.0;         // in the MPI calls, waiting for the slowest rank included
};

// A MoE layer whose routed experts are split over `comm`. Without replicas rank r keeps experts
// [r * E / P, (r + 1) * E / P) (E divisible by P); with a replica plan it keeps the experts of its S slots. Every
// rank keeps the router and the shared expert. Each rank routes its own tokens, sends each kept (token, slot)
// pair's row and routing weight to the rank holding the expert (with replicas: the slot serving the pair, replica
// t % count of token t's pair, t counted on its rank), runs its experts on what it received (hymoe's grouped
// kernels, the weight applied as MoELayer applies it), sends the rows back, and sums a token's slots in slot order
// before adding the shared expert, as MoELayer's forward does. Without capacity limits or the gradient scale, a
// token's output therefore has the bits of the single-process MoELayer's, for any number of ranks, any split of
// the batch and any replica placement.
//
// Training (Mode::kTrain, no replicas): backward() is the exchange reversed, with KempnerForge's rules under expert
// parallelism: the router's losses, counts, balancing-state update and capacity are of the rank's own tokens; the
// gradient scale of a local expert is (rows the rank received / local experts) / (rows the expert received), the
// rows counted before capacity drops. Every rank calls forward and backward the same number of times.
class ExpertParallelMoE {
 public:
  // From the whole layer, built alike on every rank (same config and weights); the layer can be freed after.
  // Collective over comm. Throws hymoe::Error when E is not divisible by the number of ranks.
  ExpertParallelMoE(MoELayer& layer, MPI_Comm comm);
  // Replicated hot experts (inference only): layer `plan_layer` of `plan` (placement::plan_replicas for
  // plan.num_ranks == the communicator's size and plan.num_experts == E) says which expert each slot holds.
  ExpertParallelMoE(MoELayer& layer, MPI_Comm comm, const placement::ReplicaPlacement& plan, int64_t plan_layer);
  ~ExpertParallelMoE();
  ExpertParallelMoE(ExpertParallelMoE&&) noexcept;
  ExpertParallelMoE& operator=(ExpertParallelMoE&&) noexcept;

  // x (B, L, dim) or (T, dim), this rank's tokens (any number, none included) -> y of x's shape. Collective.
  // Mode::kTrain keeps what backward needs and routes in train mode (a sigmoid router updates its balancing
  // state from this rank's counts; schedule progress step / max_steps, as MoELayer::forward). A layer placed
  // with replicas refuses it.
  Tensor forward(const Tensor& x, Mode mode = Mode::kEval, int64_t step = 0, int64_t max_steps = 1);
  // After a train-mode forward: the gradients of sum(y * grad_y) + aux_loss_weight * aux_loss + z_loss_weight *
  // z_loss of this rank's tokens, as MoELayer::backward. Returns grad_x of x's shape; named_gradients() then holds
  // this rank's router and shared-expert gradients (of its own tokens: data parallelism sums them) and its local
  // experts' (of every row they received: complete). Collective.
  Tensor backward(const Tensor& grad_y, float aux_loss_weight = 0.0f, float z_loss_weight = 0.0f);

  // The tensors this rank holds, under the layer's names: "router.*", the local experts as "experts.<e>.*" with
  // their global ids e (packed layers: "up_w", "down_w", "gate_w" holding the local slots, (S, ., .)) and
  // "shared_expert.*". Non-const access marks the weights changed (re-packed on the next forward), as in MoELayer.
  std::vector<std::pair<std::string, Tensor*>> named_parameters();
  // (name, gradient) in named_parameters() order: zeros until the first backward, then overwritten by each.
  std::vector<std::pair<std::string, const Tensor*>> named_gradients() const;

  // Moves a replica-placed layer to layer `plan_layer` of `plan` (placement::rebalance_replicas keeps every slot it
  // can): a slot whose expert changed copies it from a slot of this rank that held it, else receives it from the
  // lowest rank that held it (MPI point-to-point, in one order on every rank). Outputs keep their bits. Collective;
  // returns the slots this rank received from other ranks.
  int64_t rebalance(const placement::ReplicaPlacement& plan, int64_t plan_layer);

  // The first local expert (-1 with replicas: the slots need not be contiguous), the local slot count, and the
  // expert each slot holds.
  int64_t local_expert_start() const;
  int64_t num_local_experts() const;
  const std::vector<int64_t>& held_experts() const;
  // The last forward's routing results, of this rank's tokens.
  float aux_loss() const;
  float z_loss() const;
  const Tensor& expert_counts() const;  // (E)
  // The last forward's or backward's exchanges, and its seconds in the local experts' kernels.
  const ExchangeStats& last_exchange() const;
  double last_expert_seconds() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hymoe
