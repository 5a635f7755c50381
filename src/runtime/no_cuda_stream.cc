// enqueue_host_function in a build without the CUDA toolkit: CPU callers need nothing of it.
#include "hymoe/error.h"
#include "runtime/cuda_stream.h"

namespace hymoe::runtime {

bool cuda_streams_available() { return false; }

void enqueue_host_function(uintptr_t, void (*)(void*), void*) {
  fail("ExpertEngine: this hymoe was built without the CUDA toolkit, so calls cannot be ordered on CUDA streams; "
       "pass CPU tensors, or rebuild where CUDA is installed");
}

}  // namespace hymoe::runtime
