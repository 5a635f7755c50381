// The process-wide executor behind ExpertEngine::submit: one thread that runs submitted jobs in order, each of which
// drives hymoe's thread pool (the executor thread is the pool's caller, so a call uses the configured number of
// threads and the submitting thread stays free). Knows nothing of experts.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>

namespace hymoe::runtime {

// A unit of work with its completion state. Owned by its submitter, who must not destroy it while it is pending;
// the executor keeps no allocation per job (an intrusive queue).
class Job {
 public:
  virtual ~Job() = default;
  // Returns when run() has finished; rethrows what it threw (once).
  void wait();
  bool pending() const { return pending_.load(std::memory_order_acquire); }

 protected:
  virtual void run() = 0;

 private:
  friend class Executor;
  Job* next_ = nullptr;
  std::atomic<bool> pending_{false};
  std::mutex mutex_;
  std::condition_variable done_;
  std::exception_ptr error_;
};

class Executor {
 public:
  static Executor& instance();
  // Queues `job` (not pending); returns at once.
  void submit(Job& job);

 private:
  Executor();
  void loop();
  std::mutex mutex_;
  std::condition_variable wake_;
  Job* head_ = nullptr;
  Job* tail_ = nullptr;
};

}  // namespace hymoe::runtime
