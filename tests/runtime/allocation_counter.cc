// Counts the test binary's heap allocations while a test asks (the engine's steady-state test): a replacement of
// the global operator new, forwarding to malloc. Counting is off unless a test turns it on, so other tests only
// pay an atomic load.
#include "runtime/allocation_counter.h"

#include <cstddef>
#include <cstdlib>
#include <new>

namespace hymoe::test {

std::atomic<bool> g_count_allocations{false};
std::atomic<int64_t> g_allocations{0};
std::atomic<int64_t> g_allocated_bytes{0};

}  // namespace hymoe::test

namespace {

void note(std::size_t n) {
  if (hymoe::test::g_count_allocations.load(std::memory_order_relaxed)) {
    hymoe::test::g_allocations.fetch_add(1, std::memory_order_relaxed);
    hymoe::test::g_allocated_bytes.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
  }
}

void* allocate(std::size_t n, std::size_t align) {
  note(n);
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align)
                                              : std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t n) { return allocate(n, 0); }
void* operator new[](std::size_t n) { return allocate(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return allocate(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return allocate(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
