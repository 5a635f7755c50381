#include "kernels/driver/workspace.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <new>

#include "hymoe/error.h"

namespace hymoe::kernels {
namespace {

constexpr int64_t kAlignFloats = 16;  // 64 bytes: a cache line, and a whole AVX-512 vector

float* allocate_floats(int64_t n) {
  void* p = std::aligned_alloc(kAlignFloats * sizeof(float), static_cast<size_t>(n) * sizeof(float));
  if (!p) throw std::bad_alloc();
  return static_cast<float*>(p);
}

struct Pool {
  std::mutex mutex;
  std::vector<std::unique_ptr<Workspace>> idle;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: leases may end during static destruction
  return *p;
}

}  // namespace

Workspace::~Workspace() {
  for (Chunk& c : chunks_) std::free(c.data);
}

Workspace::Scope::Scope(Workspace& ws) : ws_(ws), chunk_(ws.current_), used_(ws.chunks_.empty() ? 0 : ws.chunks_[ws.current_].used) {
  ++ws_.depth_;
}

Workspace::Scope::~Scope() {
  for (size_t i = chunk_ + 1; i < ws_.chunks_.size(); ++i) ws_.chunks_[i].used = 0;
  if (chunk_ < ws_.chunks_.size()) ws_.chunks_[chunk_].used = used_;
  ws_.current_ = chunk_;
  if (--ws_.depth_ == 0 && ws_.chunks_.size() > 1) ws_.merge_chunks();
}

float* Workspace::floats(int64_t n) {
  HYMOE_CHECK(depth_ > 0, "Workspace::floats needs an open Scope");
  HYMOE_CHECK(n >= 0);
  n = (std::max<int64_t>(n, 1) + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  for (; current_ < chunks_.size(); ++current_) {
    Chunk& c = chunks_[current_];
    if (c.capacity - c.used >= n) {
      float* p = c.data + c.used;
      c.used += n;
      return p;
    }
    if (current_ + 1 < chunks_.size()) chunks_[current_ + 1].used = 0;
  }
  // Grow geometrically so a workload that keeps growing allocates O(log) times.
  int64_t total = 0;
  for (const Chunk& c : chunks_) total += c.capacity;
  Chunk c;
  c.capacity = std::max(n, total);
  c.data = allocate_floats(c.capacity);
  c.used = n;
  chunks_.push_back(c);
  current_ = chunks_.size() - 1;
  return c.data;
}

int64_t Workspace::reserved_bytes() const {
  int64_t total = 0;
  for (const Chunk& c : chunks_) total += c.capacity;
  return total * static_cast<int64_t>(sizeof(float));
}

void Workspace::merge_chunks() {
  int64_t total = 0;
  for (Chunk& c : chunks_) {
    total += c.capacity;
    std::free(c.data);
  }
  chunks_.assign(1, Chunk{});
  chunks_[0].data = allocate_floats(total);
  chunks_[0].capacity = total;
  current_ = 0;
}

WorkspaceLease::WorkspaceLease() {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  if (p.idle.empty()) {
    ws_ = std::make_unique<Workspace>();
  } else {
    ws_ = std::move(p.idle.back());
    p.idle.pop_back();
  }
}

WorkspaceLease::~WorkspaceLease() {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  p.idle.push_back(std::move(ws_));
}

void release_pooled_workspaces() {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  p.idle.clear();
}

}  // namespace hymoe::kernels
