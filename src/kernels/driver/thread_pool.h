// The persistent worker pool behind hymoe::set_num_threads. Kernels hand it a number of independent tasks; the
// calling thread works too, tasks are claimed dynamically, and a task's result must not depend on the thread
// that runs it (that is what keeps results bitwise identical across thread counts). Knows nothing of GEMMs.
#pragma once

#include <cstdint>
#include <functional>

namespace hymoe::kernels {

// Runs fn(task, thread) for task in [0, num_tasks) on up to num_threads() threads; thread is in
// [0, num_threads()) and identifies per-thread scratch. Returns when every task is done. A call made from inside
// a task runs serially on the calling thread (thread index 0 is then not unique: nested callers must not rely on
// per-thread scratch).
void parallel_for(int64_t num_tasks, const std::function<void(int64_t task, int thread)>& fn);

// Physical cores (distinct core ids in /sys), falling back to std::thread::hardware_concurrency().
int physical_cores();

}  // namespace hymoe::kernels
