// The executor thread. A waiter spins briefly before sleeping and the executor does the same between jobs: on a
// virtual machine a condition-variable wake-up costs tens of microseconds, which a decode step of one token (a few
// milliseconds) notices; the spin is bounded so an idle process sleeps.
#include "runtime/executor.h"

#include <chrono>
#include <thread>

#include "hymoe/error.h"
#include "runtime/cuda_stream.h"

namespace hymoe::runtime {
namespace {

// How long a waiter polls before it blocks, and the executor before it sleeps (microseconds).
constexpr auto kSpin = std::chrono::microseconds(200);

template <typename Ready>
bool spin_until(Ready ready) {
  const auto end = std::chrono::steady_clock::now() + kSpin;
  do {
    if (ready()) return true;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  } while (std::chrono::steady_clock::now() < end);
  return ready();
}

}  // namespace

void Job::wait() {
  if (!spin_until([&] { return !pending(); })) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return !pending(); });
  }
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::swap(error, error_);
  }
  if (error) std::rethrow_exception(error);
}

Executor& Executor::instance() {
  static Executor* e = new Executor;  // never destroyed: engines may be destroyed during static destruction
  return *e;
}

Executor::Executor() { std::thread([this] { loop(); }).detach(); }

void Executor::submit(Job& job) {
  HYMOE_CHECK(!job.pending(), "a job is submitted twice");
  job.pending_.store(true, std::memory_order_release);
  job.next_ = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    (tail_ ? tail_->next_ : head_) = &job;
    tail_ = &job;
  }
  wake_.notify_one();
}

void Executor::loop() {
  for (;;) {
    Job* job = nullptr;
    auto pop = [&] {  // with mutex_ held
      job = head_;
      head_ = head_->next_;
      if (!head_) tail_ = nullptr;
    };
    const bool taken = spin_until([&] {
      std::lock_guard<std::mutex> lock(mutex_);
      if (head_) pop();
      return job != nullptr;
    });
    if (!taken) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return head_ != nullptr; });
      pop();
    }
    std::exception_ptr error;
    try {
      job->run();
    } catch (...) {
      error = std::current_exception();
    }
    // Notified under the lock: once a waiter can take the lock, the job may be destroyed, so nothing touches it after.
    std::lock_guard<std::mutex> lock(job->mutex_);
    job->error_ = error;
    job->pending_.store(false, std::memory_order_release);
    job->done_.notify_all();
  }
}

namespace {
std::atomic<HostFunctionEnqueuer> g_enqueuer{nullptr};
}  // namespace

void set_host_function_enqueuer(HostFunctionEnqueuer enqueuer) { g_enqueuer.store(enqueuer); }

void enqueue_on_stream(uintptr_t stream, void (*fn)(void*), void* data) {
  if (const HostFunctionEnqueuer e = g_enqueuer.load()) return e(stream, fn, data);
  enqueue_host_function(stream, fn, data);
}

}  // namespace hymoe::runtime
