// Persistent thread pool: workers poll briefly, then sleep on a condition variable between jobs, and claim tasks
// from an atomic counter during one. Sized by hymoe::set_num_threads (default: physical cores or HYMOE_THREADS).
#include "kernels/driver/thread_pool.h"

#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hymoe/error.h"
#include "hymoe/threads.h"

namespace hymoe::kernels {
namespace {

thread_local bool t_inside_task = false;

// How long a thread that has run out of work polls for more before it sleeps on a condition variable. Waking a
// sleeping thread takes about 20 us on the virtual machines measured (docs/performance.md), which is as long as a
// whole phase of a decode step: the second core would join each parallel_for late, and the caller, once asleep,
// would wake late from its end. A decode step's parallel_fors follow each other within a few microseconds, so
// polling a little longer than that gap keeps both threads on the job; between steps the threads sleep after it.
// HYMOE_POOL_SPIN_US overrides (0: sleep at once); read when the pool is made, on the thread that first uses it.
int read_spin_micros() {
  const char* e = std::getenv("HYMOE_POOL_SPIN_US");
  if (!e || !*e) return 50;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  if (*end != '\0' || v < 0 || v > 1000000) fail("HYMOE_POOL_SPIN_US=", e, " must be an integer in [0, 1000000]");
  return static_cast<int>(v);
}

// Polls done() (with pause) for up to `us` microseconds; true when it held. Between rounds of polls it yields the
// core, so a thread of the process that is waiting to run (a Python thread, PyTorch's own) gets it instead of
// waiting out the poll: without the yield, a thread ticking beside five of hymoe's forwards on 2 cores ran 34-45
// times, against 56-99 with the pool asleep (python/tests/torch: test_gil_is_released_during_forward).
template <typename Done>
bool spin_until(int us, Done&& done) {
  if (done()) return true;
  if (us <= 0) return false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  for (;;) {
    for (int j = 0; j < 16; ++j) {
      if (done()) return true;
      _mm_pause();
    }
    if (std::chrono::steady_clock::now() >= until) return done();
    std::this_thread::yield();
  }
}

// One parallel_for call. Workers that wake late hold it by shared_ptr, find no task left and leave without
// touching fn; the caller waits only for tasks to finish, never for a worker to wake up (on a shared machine a
// sleeping worker can take a scheduler tick to run).
struct Job {
  const std::function<void(int64_t, int)>* fn = nullptr;
  int64_t num_tasks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> remaining{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::condition_variable done;
  std::exception_ptr error;

  void work(int thread) {
    const bool outer = t_inside_task;
    t_inside_task = true;
    for (int64_t t; (t = next.fetch_add(1, std::memory_order_relaxed)) < num_tasks;) {
      if (!failed.load(std::memory_order_relaxed)) {
        try {
          (*fn)(t, thread);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mutex);
          if (!error) error = std::current_exception();
          failed = true;
        }
      }
      if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex);
        done.notify_all();
      }
    }
    t_inside_task = outer;
  }
};

class Pool {
 public:
  explicit Pool(int threads) : spin_us_(read_spin_micros()) { resize(threads); }
  ~Pool() { stop_workers(); }

  int size() const { return size_; }

  void resize(int threads) {
    stop_workers();
    size_ = threads;
    stopping_ = false;
    // A new worker must not mistake the last finished job for a new one.
    const uint64_t current = generation_.load();
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i, current] { worker_loop(i, current); });
  }

  void run(int64_t num_tasks, const std::function<void(int64_t, int)>& fn) {
    if (num_tasks <= 0) return;
    if (size_ == 1 || num_tasks == 1 || t_inside_task) {
      const bool outer = t_inside_task;
      t_inside_task = true;
      for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
      t_inside_task = outer;
      return;
    }
    std::lock_guard<std::mutex> serial(run_mutex_);  // one job at a time from different callers
    auto job = std::make_shared<Job>();
    job->fn = &fn;
    job->num_tasks = num_tasks;
    job->remaining = num_tasks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = job;
      ++generation_;
    }
    wake_.notify_all();
    job->work(0);
    if (!spin_until(spin_us_, [&] { return job->remaining.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(job->mutex);
      job->done.wait(lock, [&] { return job->remaining.load() == 0; });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (job_ == job) job_.reset();
    }
    if (job->error) std::rethrow_exception(job->error);
  }

 private:
  void worker_loop(int thread, uint64_t seen) {
    for (;;) {
      std::shared_ptr<Job> job;
      spin_until(spin_us_, [&] { return generation_.load(std::memory_order_acquire) != seen || stopping_.load(std::memory_order_acquire); });
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_.load();
        job = job_;
      }
      if (job) job->work(thread);
    }
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  const int spin_us_;
  int size_ = 1;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_, mutex_;
  std::condition_variable wake_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> generation_{0};
  std::shared_ptr<Job> job_;
};

Pool& pool() {
  static Pool p(default_num_threads());
  return p;
}

}  // namespace

int physical_cores() {
  std::set<std::pair<std::string, std::string>> cores;
  for (int cpu = 0;; ++cpu) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream core(dir + "core_id"), package(dir + "physical_package_id");
    std::string c, p;
    if (!(core >> c)) break;
    package >> p;
    cores.emplace(p, c);
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

void parallel_for(int64_t num_tasks, const std::function<void(int64_t, int)>& fn) { pool().run(num_tasks, fn); }

}  // namespace hymoe::kernels

namespace hymoe {

int default_num_threads() {
  if (const char* env = std::getenv("HYMOE_THREADS"); env && *env) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (*end != '\0' || v < 1 || v > 1024) fail("HYMOE_THREADS=", env, " must be an integer in [1, 1024]");
    return static_cast<int>(v);
  }
  return kernels::physical_cores();
}

void set_num_threads(int threads) {
  if (threads < 1 || threads > 1024) fail("set_num_threads: threads=", threads, " must be in [1, 1024]");
  kernels::pool().resize(threads);
}

int num_threads() { return kernels::pool().size(); }

}  // namespace hymoe
