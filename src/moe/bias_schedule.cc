// Bias-update-rate schedules. cosine_decay is left unclamped past max_steps (the rate rises again), exactly as
// the reference does; docs/semantics.md explains why we keep that.
#include "moe/bias_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "hymoe/error.h"

namespace hymoe {

BiasSchedule parse_bias_schedule(const std::string& name) {
  if (name == "constant") return BiasSchedule::kConstant;
  if (name == "cosine_decay") return BiasSchedule::kCosineDecay;
  if (name == "linear_warmup") return BiasSchedule::kLinearWarmup;
  fail("config: bias_schedule=", quote_for_message(name), " is not one of constant, cosine_decay, linear_warmup");
}

double bias_update_rate(BiasSchedule schedule, int64_t step, int64_t max_steps) {
  constexpr double kBaseRate = 0.001;
  const double p = static_cast<double>(step) / static_cast<double>(std::max<int64_t>(max_steps, 1));
  switch (schedule) {
    case BiasSchedule::kConstant: return kBaseRate;
    case BiasSchedule::kCosineDecay: return kBaseRate * 0.5 * (1.0 + std::cos(std::numbers::pi * p));
    case BiasSchedule::kLinearWarmup: return kBaseRate * std::min(1.0, 10.0 * p);
  }
  return kBaseRate;
}

}  // namespace hymoe
