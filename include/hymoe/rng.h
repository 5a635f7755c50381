// A small, fully specified random generator (SplitMix64 seeding a xoshiro256**), so seeded demo weights, synthetic
// inputs and test data are the same bits on every platform and standard library (std::normal_distribution is not).
#pragma once

#include <cstdint>

#include "hymoe/tensor.h"

namespace hymoe {

class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next_u64();
  double uniform();                    // [0, 1)
  double normal();                     // standard normal (Box-Muller)
  uint64_t below(uint64_t bound);      // uniform integer in [0, bound), bound > 0

 private:
  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// A tensor of the given shape with independent N(0, stddev^2) entries.
Tensor random_normal(Rng& rng, Shape shape, double stddev);
// A tensor of the given shape with independent U(lo, hi) entries.
Tensor random_uniform(Rng& rng, Shape shape, double lo, double hi);

}  // namespace hymoe
