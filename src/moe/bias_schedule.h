// Bias-update-rate schedules of the sigmoid router (DeepSeek-V3 auxiliary-loss-free balancing).
#pragma once

#include <cstdint>
#include <string>

namespace hymoe {

enum class BiasSchedule { kConstant, kCosineDecay, kLinearWarmup };

// Throws for names other than "constant", "cosine_decay", "linear_warmup" (the original silently fell back to
// constant; a typo should not silently change training).
BiasSchedule parse_bias_schedule(const std::string& name);

// The update rate at progress p = step / max(max_steps, 1), base rate 0.001. Computed in double like Python.
double bias_update_rate(BiasSchedule schedule, int64_t step, int64_t max_steps);

}  // namespace hymoe
