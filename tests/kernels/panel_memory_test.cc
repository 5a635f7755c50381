// The packed panels' memory: regions of whole pages on a huge-page boundary, zero-filled, given back one at a time.
#include "kernels/driver/panel_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "hymoe/error.h"

namespace hymoe::kernels {
namespace {

bool all_bytes(const uint8_t* p, int64_t n, uint8_t value) {
  for (int64_t i = 0; i < n; ++i)
    if (p[i] != value) return false;
  return true;
}

TEST(PanelMemoryTest, RegionsAreWholePagesFromAHugePageBoundary) {
  const PanelMemory m(3, 5000);
  EXPECT_EQ(m.regions(), 3);
  EXPECT_EQ(m.region_bytes(), 8192);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m.region(0)) % (uintptr_t{2} << 20), 0u);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(m.region(i), m.region(0) + i * 8192);
    EXPECT_TRUE(all_bytes(m.region(i), m.region_bytes(), 0)) << i;
  }
}

TEST(PanelMemoryTest, ReleaseZeroesItsRegionAloneAndItCanBeFilledAgain) {
  PanelMemory m(3, 3 * 4096 + 1);
  for (int64_t i = 0; i < 3; ++i) std::memset(m.region(i), 0xA0 + static_cast<int>(i), static_cast<size_t>(m.region_bytes()));
  m.release(1);
  EXPECT_TRUE(all_bytes(m.region(0), m.region_bytes(), 0xA0));
  EXPECT_TRUE(all_bytes(m.region(1), m.region_bytes(), 0));
  EXPECT_TRUE(all_bytes(m.region(2), m.region_bytes(), 0xA2));
  std::memset(m.region(1), 0x5C, static_cast<size_t>(m.region_bytes()));
  EXPECT_TRUE(all_bytes(m.region(1), m.region_bytes(), 0x5C));
}

TEST(PanelMemoryTest, MovesOwnershipAndRefusesBadArguments) {
  PanelMemory a(2, 100);
  uint8_t* const base = a.region(0);
  PanelMemory b(std::move(a));
  EXPECT_EQ(b.region(0), base);
  EXPECT_EQ(a.regions(), 0);
  EXPECT_THROW(b.release(2), Error);
  EXPECT_THROW(b.release(-1), Error);
  EXPECT_THROW(PanelMemory(0, 100), Error);
  EXPECT_THROW(PanelMemory(2, 0), Error);
}

}  // namespace
}  // namespace hymoe::kernels
