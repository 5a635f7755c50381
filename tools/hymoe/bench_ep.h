// hymoe bench --ep N: the expert-parallel layer over MPI (include/hymoe/dist.h), run under mpirun -np N.
#pragma once

#include <cstdint>
#include <vector>

#include "bench_shape.h"

namespace hymoe::tool {

// Per shape and token count (the batch split evenly over the ranks): the slowest rank's forward time, the
// slowest rank's time in the all-to-all calls and in its local experts, and the bytes that crossed between
// processes; medians over `repeats`. With `train`, a training step instead: the forward in train mode and the
// backward, each timed, the exchanges and local experts of both summed. Rank 0 prints. Fails unless the process
// runs under mpirun with `ranks` ranks, or where hymoe was built without MPI.
int run_ep_bench(const std::vector<BenchShape>& shapes, const std::vector<int64_t>& tokens, int repeats, int ranks,
                 bool json, bool train);

}  // namespace hymoe::tool
