// The test binary's allocation counter (allocation_counter.cc): operator new calls and bytes while counting is on.
#pragma once

#include <atomic>
#include <cstdint>

namespace hymoe::test {

extern std::atomic<bool> g_count_allocations;
extern std::atomic<int64_t> g_allocations;
extern std::atomic<int64_t> g_allocated_bytes;

}  // namespace hymoe::test
