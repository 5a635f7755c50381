// Reusable memory for the per-call temporaries of the kernels and of the MoE forward: sorted and packed
// activation rows, hidden rows, per-thread result tiles. Allocating them afresh costs a page fault per 4 KiB on
// every call (glibc maps blocks of 32 MiB and more anew each time), which at 512 tokens of Qwen3-30B-A3B was most
// of the layer's dispatch overhead (docs/performance.md). Knows nothing of GEMMs or experts.
//
// A Workspace hands out buffers stack-wise inside Scopes: closing a scope frees what was taken in it. When the
// outermost scope closes and the workspace had to grow into several chunks, they merge into one, so a steady
// workload allocates nothing after its first call. A Workspace is used by one call at a time; borrow_workspace()
// lends one from a process-wide pool, so sequential layers share the same memory and concurrent callers get
// distinct workspaces.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace hymoe::kernels {

class Workspace {
 public:
  Workspace() = default;
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  class Scope {
   public:
    explicit Scope(Workspace& ws);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Workspace& ws_;
    size_t chunk_;
    int64_t used_;
  };

  // n uninitialized floats, 64-byte aligned, valid until the innermost open Scope closes. Needs an open Scope.
  float* floats(int64_t n);
  int64_t reserved_bytes() const;

 private:
  struct Chunk {
    float* data = nullptr;
    int64_t capacity = 0, used = 0;  // in floats
  };
  void merge_chunks();
  std::vector<Chunk> chunks_;
  size_t current_ = 0;  // the chunk floats() takes from next
  int depth_ = 0;       // open scopes
};

// A workspace lent from the process-wide pool; it goes back when the lease is destroyed.
class WorkspaceLease {
 public:
  WorkspaceLease();
  ~WorkspaceLease();
  WorkspaceLease(const WorkspaceLease&) = delete;
  WorkspaceLease& operator=(const WorkspaceLease&) = delete;
  Workspace& operator*() const { return *ws_; }
  Workspace* operator->() const { return ws_.get(); }

 private:
  std::unique_ptr<Workspace> ws_;
};

// Frees the memory of every workspace currently in the pool (not of those lent out).
void release_pooled_workspaces();

}  // namespace hymoe::kernels
