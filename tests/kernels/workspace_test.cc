// The workspace arena: stack-wise scopes, alignment, reuse without allocating once grown, and the lending pool.
#include "kernels/driver/workspace.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "hymoe/error.h"

namespace hymoe::kernels {
namespace {

bool aligned64(const float* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(WorkspaceTest, NeedsAnOpenScope) {
  Workspace ws;
  EXPECT_THROW(ws.floats(4), Error);
}

TEST(WorkspaceTest, BuffersAreAlignedDisjointAndWritable) {
  Workspace ws;
  const Workspace::Scope scope(ws);
  std::vector<float*> got;
  for (int64_t n : {1, 3, 17, 1000, 0}) {
    float* p = ws.floats(n);
    ASSERT_TRUE(aligned64(p)) << n;
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(n);
    got.push_back(p);
  }
  // Each buffer keeps its values: none overlaps another.
  EXPECT_EQ(got[0][0], 1.0f);
  EXPECT_EQ(got[1][2], 3.0f);
  EXPECT_EQ(got[2][16], 17.0f);
  EXPECT_EQ(got[3][999], 1000.0f);
}

TEST(WorkspaceTest, ClosingAScopeFreesWhatItTook) {
  Workspace ws;
  const Workspace::Scope outer(ws);
  float* a = ws.floats(10);
  float* inner_first = nullptr;
  {
    const Workspace::Scope inner(ws);
    inner_first = ws.floats(100);
    ws.floats(50);
  }
  // The inner scope's memory is handed out again; the outer buffer is untouched.
  EXPECT_EQ(ws.floats(100), inner_first);
  EXPECT_NE(a, inner_first);
}

TEST(WorkspaceTest, GrowsThenReusesOneChunkWithoutAllocating) {
  Workspace ws;
  auto call = [&] {  // a forward-like call: several temporaries, the later ones larger than the first chunk
    const Workspace::Scope scope(ws);
    std::vector<float*> p;
    for (int64_t n : {1000, 5000, 20000, 3}) p.push_back(ws.floats(n));
    return p;
  };
  call();  // grows over several chunks, merged into one when the scope closes
  const int64_t reserved = ws.reserved_bytes();
  EXPECT_GE(reserved, int64_t{(1008 + 5008 + 20000 + 16) * 4});
  const auto second = call();
  const auto third = call();
  EXPECT_EQ(second, third);                  // the same memory, call after call
  EXPECT_EQ(ws.reserved_bytes(), reserved);  // and no growth
  for (size_t i = 1; i < second.size(); ++i) EXPECT_GT(second[i], second[i - 1]);  // one chunk, stack order
}

TEST(WorkspaceTest, LeasesAreDistinctWhileHeldAndReusedAfter) {
  Workspace* first = nullptr;
  {
    const WorkspaceLease a;
    const WorkspaceLease b;
    EXPECT_NE(&*a, &*b);
    first = &*a;
  }
  // Both went back to the pool; a new lease gets one of them rather than a fresh workspace.
  const WorkspaceLease c;
  const WorkspaceLease d;
  EXPECT_TRUE(&*c == first || &*d == first);
}

}  // namespace
}  // namespace hymoe::kernels
