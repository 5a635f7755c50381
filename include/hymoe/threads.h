// Threads the kernels use. One persistent pool serves every parallel kernel; results are the same bits for any
// thread count (work is split into fixed tiles whose arithmetic does not depend on which thread runs them).
#pragma once

namespace hymoe {

// The default: HYMOE_THREADS if set (a positive integer), else the number of physical cores.
int default_num_threads();
// Threads the kernels use from now on (>= 1; the calling thread counts as one). Not to be called while a kernel
// runs on another thread.
void set_num_threads(int threads);
int num_threads();

}  // namespace hymoe
