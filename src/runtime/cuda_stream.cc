// enqueue_host_function over the CUDA runtime (linked statically: libcuda is opened when first used, so a machine
// without a GPU driver runs everything else and gets a named error here).
#include "runtime/cuda_stream.h"

#include <cuda_runtime_api.h>

#include "hymoe/error.h"

namespace hymoe::runtime {

bool cuda_streams_available() { return true; }

void enqueue_host_function(uintptr_t stream, void (*fn)(void*), void* data) {
  const cudaError_t err = cudaLaunchHostFunc(reinterpret_cast<cudaStream_t>(stream), fn, data);
  if (err != cudaSuccess)
    fail("ExpertEngine: cudaLaunchHostFunc on stream 0x", std::hex, stream, " failed: ", cudaGetErrorName(err), " (",
         cudaGetErrorString(err), ")");
}

}  // namespace hymoe::runtime
