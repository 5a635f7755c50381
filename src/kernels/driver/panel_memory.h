// Memory for a layer's packed weight panels: one mapping, cut into equal regions of whole 4 KiB pages (one per
// group, e.g. per expert), asked for transparent huge pages. A decode step streams a few experts' panels, 20-70 MB
// at one token, once each: with 4 KiB pages that is a TLB miss and a page walk (its page-table lines evicted with
// everything else between steps) every 4 KiB of the stream; a 2 MiB page takes one for 512 of them
// (docs/performance.md, "The packed panels in huge pages"). Where the kernel gives no huge pages (transparent
// huge pages set to never, or no 2 MiB page free) the memory works the same on 4 KiB pages. Knows nothing of
// formats or experts.
#pragma once

#include <cstdint>

namespace hymoe::kernels {

class PanelMemory {
 public:
  PanelMemory() = default;
  // `regions` regions of at least `region_bytes` each, zero-filled; throws std::bad_alloc where the mapping fails.
  PanelMemory(int64_t regions, int64_t region_bytes);
  ~PanelMemory();
  PanelMemory(PanelMemory&& other) noexcept;
  PanelMemory& operator=(PanelMemory&& other) noexcept;
  PanelMemory(const PanelMemory&) = delete;
  PanelMemory& operator=(const PanelMemory&) = delete;

  uint8_t* region(int64_t i) const { return base_ + i * region_bytes_; }
  int64_t region_bytes() const { return region_bytes_; }  // the size asked for, rounded up to whole 4 KiB pages
  int64_t regions() const { return regions_; }
  // Gives region i's pages back to the system; the region reads as zeros until written again.
  void release(int64_t i);

 private:
  uint8_t* base_ = nullptr;
  int64_t regions_ = 0, region_bytes_ = 0;
  int64_t mapped_bytes_ = 0;
};

}  // namespace hymoe::kernels
