// group_order: the stable counting sort expert parallelism groups (token, slot) pairs with, against a plain
// stable sort on awkward sizes (empty, one, primes, groups with no member). The row moves around the exchanges
// (permute_rows, unpermute_rows, combine_slot_rows and its backward) against plain loops, on more rows than one
// thread's share, with pairs that have no row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

std::vector<float> random_rows(int64_t n, Rng& rng) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(rng.normal());
  return v;
}

TEST(RowMoves, PermuteAndUnpermuteArePlainCopies) {
  Rng rng(3);
  for (const int64_t tokens : {0, 1, 13, 131})
    for (const int64_t k : {1, 3}) {
      const int64_t W = 7, n = tokens * k;
      const std::vector<float> x = random_rows(tokens * W, rng);
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      for (int64_t i = n - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[rng.below(static_cast<uint64_t>(i + 1))]);
      std::vector<float> sent(static_cast<size_t>(n * W));
      permute_rows(x.data(), tokens, W, order, k, sent.data());
      for (int64_t r = 0; r < n; ++r)
        for (int64_t d = 0; d < W; ++d)
          ASSERT_EQ(sent[static_cast<size_t>(r * W + d)], x[static_cast<size_t>(order[static_cast<size_t>(r)] / k * W + d)]);
      // A permutation undone: back in pair order.
      std::vector<float> expanded(static_cast<size_t>(n * W)), back(static_cast<size_t>(n * W));
      permute_rows(sent.data(), n, W, order, 1, expanded.data());
      unpermute_rows(expanded.data(), W, order, back.data());
      EXPECT_EQ(back, sent);
    }
  std::vector<float> out(8);
  EXPECT_THROW(permute_rows(out.data(), 2, 4, std::vector<int64_t>{0, 6}, 3, out.data()), Error);  // row 2 of 2
  try {
    unpermute_rows(out.data(), 4, std::vector<int64_t>{1, 1}, out.data());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 1 appears twice"), std::string::npos) << e.what();
  }
}

TEST(RowMoves, CombineAndItsBackward) {
  Rng rng(4);
  for (const int64_t tokens : {1, 2, 67, 200})
    for (const int64_t k : {1, 2, 6}) {
      const int64_t W = 5, R = tokens * k + 3;  // three rows no pair names
      const std::vector<float> rows = random_rows(R * W, rng), w = random_rows(tokens * k, rng);
      const std::vector<float> g = random_rows(tokens * W, rng);
      std::vector<int64_t> position(static_cast<size_t>(tokens * k));
      std::iota(position.begin(), position.end(), 2);
      for (size_t i = 0; i < position.size(); i += 4) position[i] = -1;  // pairs without a row (dropped)
      std::vector<float> y(static_cast<size_t>(tokens * W)), plain_y(y.size()), unweighted(y.size());
      combine_slot_rows(rows.data(), R, W, position, w.data(), tokens, k, y.data());
      combine_slot_rows(rows.data(), R, W, position, nullptr, tokens, k, unweighted.data());
      std::vector<float> grad_rows(static_cast<size_t>(R * W), 99.0f), grad_w(w.size(), 99.0f);
      combine_slot_rows_backward(rows.data(), R, W, position, w.data(), g.data(), tokens, k, grad_rows.data(),
                                 grad_w.data());
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t d = 0; d < W; ++d) {
          float sum = 0.0f, plain = 0.0f;
          for (int64_t s = 0; s < k; ++s) {
            const int64_t p = position[static_cast<size_t>(t * k + s)];
            if (p < 0) continue;
            const float product = rows[static_cast<size_t>(p * W + d)] * w[static_cast<size_t>(t * k + s)];
            sum += product;
            plain += rows[static_cast<size_t>(p * W + d)];
          }
          ASSERT_EQ(y[static_cast<size_t>(t * W + d)], sum) << t << "," << d;
          ASSERT_EQ(unweighted[static_cast<size_t>(t * W + d)], plain) << t << "," << d;
        }
      std::vector<uint8_t> named(static_cast<size_t>(R), 0);
      for (int64_t i = 0; i < tokens * k; ++i) {
        const int64_t p = position[static_cast<size_t>(i)], t = i / k;
        if (p < 0) {
          EXPECT_EQ(grad_w[static_cast<size_t>(i)], 0.0f);
          continue;
        }
        named[static_cast<size_t>(p)] = 1;
        double dot = 0;
        for (int64_t d = 0; d < W; ++d) {
          dot += double(rows[static_cast<size_t>(p * W + d)]) * g[static_cast<size_t>(t * W + d)];
          ASSERT_EQ(grad_rows[static_cast<size_t>(p * W + d)], w[static_cast<size_t>(i)] * g[static_cast<size_t>(t * W + d)]);
        }
        EXPECT_EQ(grad_w[static_cast<size_t>(i)], static_cast<float>(dot));
      }
      for (int64_t r = 0; r < R; ++r)
        if (!named[static_cast<size_t>(r)])
          for (int64_t d = 0; d < W; ++d) ASSERT_EQ(grad_rows[static_cast<size_t>(r * W + d)], 0.0f) << "row " << r;
    }
  std::vector<float> buf(16);
  EXPECT_THROW(combine_slot_rows(buf.data(), 2, 2, std::vector<int64_t>{0, 2}, nullptr, 2, 1, buf.data()), Error);
  EXPECT_THROW(combine_slot_rows(buf.data(), 2, 2, std::vector<int64_t>{0}, nullptr, 2, 1, buf.data()), Error);
  EXPECT_THROW(combine_slot_rows_backward(buf.data(), 2, 2, std::vector<int64_t>{1, 1}, nullptr, buf.data(), 2, 1,
                                          buf.data(), buf.data()),
               Error);
}

}  // namespace
}  // namespace hymoe
