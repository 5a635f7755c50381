#include "kernels/driver/panel_memory.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>
#include <utility>

#include "hymoe/error.h"

namespace hymoe::kernels {
namespace {

constexpr int64_t kPageBytes = 4096;
constexpr int64_t kHugePageBytes = int64_t{2} << 20;

int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

}  // namespace

PanelMemory::PanelMemory(int64_t regions, int64_t region_bytes) {
  HYMOE_CHECK(regions > 0 && region_bytes > 0, "panel memory of ", regions, " regions of ", region_bytes, " bytes");
  regions_ = regions;
  region_bytes_ = round_up(region_bytes, kPageBytes);
  mapped_bytes_ = regions_ * region_bytes_;
  // Mapped with a huge page's worth to spare, then trimmed to a mapping that starts on a 2 MiB boundary: the
  // kernel backs a huge page only where an aligned 2 MiB lies wholly inside the mapping.
  const size_t reserve = static_cast<size_t>(mapped_bytes_ + kHugePageBytes);
  void* p = mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start) munmap(p, aligned - start);
  const uintptr_t end = aligned + static_cast<uintptr_t>(mapped_bytes_);
  if (start + reserve > end) munmap(reinterpret_cast<void*>(end), start + reserve - end);
  base_ = reinterpret_cast<uint8_t*>(aligned);
  // Advice only: where transparent huge pages are off, this fails or does nothing and the 4 KiB pages serve.
  madvise(base_, static_cast<size_t>(mapped_bytes_), MADV_HUGEPAGE);
}

PanelMemory::~PanelMemory() {
  if (base_) munmap(base_, static_cast<size_t>(mapped_bytes_));
}

PanelMemory::PanelMemory(PanelMemory&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), regions_(std::exchange(other.regions_, 0)),
      region_bytes_(std::exchange(other.region_bytes_, 0)), mapped_bytes_(std::exchange(other.mapped_bytes_, 0)) {}

PanelMemory& PanelMemory::operator=(PanelMemory&& other) noexcept {
  if (this != &other) {
    if (base_) munmap(base_, static_cast<size_t>(mapped_bytes_));
    base_ = std::exchange(other.base_, nullptr);
    regions_ = std::exchange(other.regions_, 0);
    region_bytes_ = std::exchange(other.region_bytes_, 0);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
  }
  return *this;
}

void PanelMemory::release(int64_t i) {
  HYMOE_CHECK(i >= 0 && i < regions_, "panel memory region ", i, " of ", regions_);
  madvise(region(i), static_cast<size_t>(region_bytes_), MADV_DONTNEED);
}

}  // namespace hymoe::kernels
