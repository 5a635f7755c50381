// The one thing the engine needs of CUDA: a host function enqueued on a stream (cudaLaunchHostFunc), so a call
// starts after the stream's copies into its pinned inputs and the stream's later copies of y wait for it. Built from
// cuda_stream.cc where the CUDA toolkit is found, else from no_cuda_stream.cc; nothing else in hymoe includes CUDA.
#pragma once

#include <cstdint>

namespace hymoe::runtime {

bool cuda_streams_available();

// What enqueues host functions instead of CUDA, when set: tests drive the stream path on a CPU with a queue of their
// own, which must run the functions in enqueue order, as a stream does. nullptr restores CUDA.
using HostFunctionEnqueuer = void (*)(uintptr_t stream, void (*fn)(void*), void* data);
void set_host_function_enqueuer(HostFunctionEnqueuer enqueuer);
// The enqueuer set, else enqueue_host_function: what the engine calls.
void enqueue_on_stream(uintptr_t stream, void (*fn)(void*), void* data);
// fn(data) runs on a CUDA driver thread once the stream's earlier work is done. Throws when built without CUDA or
// when the runtime refuses (no driver, no device, a bad stream), naming the CUDA error.
void enqueue_host_function(uintptr_t stream, void (*fn)(void*), void* data);

}  // namespace hymoe::runtime
