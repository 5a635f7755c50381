// The activation recorder fed with hymoe's own router outputs: a two-layer stack of MoE layers records exactly
// the per-expert assignment counts each layer reports. (placement does not depend on moe; the caller — a runtime
// or this test — hands Routing::indices over as plain data.)
#include <gtest/gtest.h>

#include "hymoe/moe.h"
#include "hymoe/placement/trace.h"
#include "hymoe/rng.h"

namespace hymoe {
namespace {

TEST(RecorderFromMoe, CountsEqualEachLayersExpertCounts) {
  MoEConfig c;
  c.dim = 8;
  c.hidden_dim = 12;
  c.num_experts = 6;
  c.top_k = 2;
  c.capacity_factor = 0.75;  // drops must not change what the recorder counts: routing, not compute
  Rng rng(31);
  std::vector<MoELayer> layers;
  for (int l = 0; l < 2; ++l) {
    layers.emplace_back(c);
    layers.back().init_random(rng);
  }
  placement::ActivationRecorder recorder(2, c.num_experts);
  recorder.set_enabled(true);
  recorder.set_trace_enabled(true);
  std::vector<double> expected(2 * c.num_experts, 0.0);
  for (int batch = 0; batch < 3; ++batch) {
    Tensor h = random_normal(rng, Shape{1, 7, c.dim}, 1.0);
    for (int l = 0; l < 2; ++l) {
      h = layers[static_cast<size_t>(l)].forward(h, Mode::kEval);
      const Routing& r = layers[static_cast<size_t>(l)].last_routing();
      recorder.record(l, r.indices, r.top_k, r.router_weights);
      for (int64_t e = 0; e < c.num_experts; ++e) expected[static_cast<size_t>(l * c.num_experts + e)] += r.expert_counts[e];
    }
  }
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t e = 0; e < c.num_experts; ++e)
      EXPECT_EQ(recorder.counts().at(l, e), expected[static_cast<size_t>(l * c.num_experts + e)]) << l << "," << e;
  EXPECT_EQ(recorder.counts().total(), 2.0 * 3 * 7 * c.top_k);
  EXPECT_EQ(recorder.invalid_ids(), 0);
}

}  // namespace
}  // namespace hymoe
