// group_order: the stable counting sort expert parallelism groups (token, slot) pairs with, against a plain
// stable sort on awkward sizes (empty, one, primes, groups with no member).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "hymoe/error.h"
#include "hymoe/moe.h"
#include "hymoe/rng.h"

namespace hymoe {
namespace {

TEST(GroupOrder, IsTheStableSortByDestination) {
  Rng rng(17);
  for (const int64_t n : {0, 1, 2, 7, 31, 97, 1009})
    for (const int64_t groups : {1, 2, 3, 5, 64}) {
      std::vector<int64_t> dest(static_cast<size_t>(n));
      // Only even destinations when there are several groups, so odd groups are empty.
      for (auto& d : dest) d = static_cast<int64_t>(rng.below(static_cast<uint64_t>(groups))) / 2 * 2;
      std::vector<int64_t> want(static_cast<size_t>(n));
      std::iota(want.begin(), want.end(), 0);
      std::stable_sort(want.begin(), want.end(), [&](int64_t a, int64_t b) { return dest[a] < dest[b]; });
      const GroupOrder got = group_order(dest, groups);
      EXPECT_EQ(got.order, want) << "n=" << n << " groups=" << groups;
      ASSERT_EQ(got.counts.size(), static_cast<size_t>(groups));
      for (int64_t g = 0; g < groups; ++g)
        EXPECT_EQ(got.counts[static_cast<size_t>(g)], std::count(dest.begin(), dest.end(), g));
    }
}

TEST(GroupOrder, NamesADestinationOutOfRange) {
  const std::vector<int64_t> dest = {0, 2, 3};
  try {
    group_order(dest, 3);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("destination 3 of assignment 2 is outside [0, 3)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(group_order(std::vector<int64_t>{-1}, 2), Error);
  EXPECT_THROW(group_order(std::vector<int64_t>{}, 0), Error);
}

}  // namespace
}  // namespace hymoe
