// All-reduce in pieces (runtime/comm/piece_plan.h): the plan itself, and that a buffer of several
// pieces reduces exactly like one piece would, on both paths (this binary also runs with
// RINGTORCH_SHM=0).
#include "runtime/comm/piece_plan.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <ringtorch/process_group.h>

#include "support/thread_ranks.h"

namespace ringtorch {
namespace {

TEST(PiecePlan, CoversTheBufferInOrderWithWholeElements) {
  const auto pieces = plan_pieces(10, 4, 12);  // 3 floats a piece
  ASSERT_EQ(pieces.size(), 4u);
  size_t next = 0;
  for (const PieceSpan& piece : pieces) {
    EXPECT_EQ(piece.first, next);
    EXPECT_LE(piece.count, 3u);
    next += piece.count;
  }
  EXPECT_EQ(next, 10u);
  EXPECT_EQ(pieces.back().count, 1u);
}

TEST(PiecePlan, SmallAndEmptyBuffersAreOnePiece) {
  EXPECT_EQ(plan_pieces(5, 8, kAllreducePieceBytes).size(), 1u);
  const auto empty = plan_pieces(0, 4, kAllreducePieceBytes);
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_EQ(empty[0].count, 0u);
  // A piece smaller than one element still holds one element.
  EXPECT_EQ(plan_pieces(3, 8, 4).size(), 3u);
}

TEST(PiecePlan, SixtyFourMebibytesOfFloatsAreFourPieces) {
  const auto pieces = plan_pieces(size_t{16} << 20, 4, kAllreducePieceBytes);
  ASSERT_EQ(pieces.size(), 4u);
  for (const PieceSpan& piece : pieces) EXPECT_EQ(piece.count * 4, kAllreducePieceBytes);
}

// 2.5 pieces of floats (pieces forced: a CPU-only group uses whole buffers unless told), summed
// and averaged by 3 ranks: every element is what one reduction of the whole buffer gives (small
// integers, so the float sums are exact).
TEST(PiecePlan, AnAllreduceOfSeveralPiecesEqualsTheWholeReduction) {
  const int64_t n = static_cast<int64_t>(kAllreducePieceBytes / 4) * 5 / 2;
  const at::Tensor index = at::arange(n, at::kLong).remainder(1000).to(at::kFloat);
  ProcessGroupOptions options;
  options.allreduce_piece_bytes = kAllreducePieceBytes;
  testing::on_thread_ranks(
      3,
      [&](ProcessGroup& g) {
        at::Tensor sum = index + g.rank();
        g.allreduce(sum, ReduceOp::kSum);
        EXPECT_TRUE(at::equal(sum, index * 3 + 3)) << "rank " << g.rank();
        at::Tensor avg = index * 3 + g.rank() * 3;
        g.allreduce(avg, ReduceOp::kAvg);
        EXPECT_TRUE(at::equal(avg, index * 3 + 3)) << "rank " << g.rank();
      },
      std::chrono::milliseconds(60000), options);
}

// The ranks of a group agree on pieces when it is created: without a GPU anywhere, none.
TEST(PiecePlan, AGroupWithoutGpusReducesWholeBuffers) {
  if (at::hasCUDA()) GTEST_SKIP() << "this machine has a GPU: the group uses pieces";
  testing::on_thread_ranks(2, [&](ProcessGroup& g) {
    auto work = g.allreduce_async(at::ones({(int64_t{40} << 20) / 4}));
    work->wait();
    EXPECT_EQ(work->description().find("pieces"), std::string::npos) << work->description();
  });
  ProcessGroupOptions options;
  options.allreduce_piece_bytes = kAllreducePieceBytes;
  testing::on_thread_ranks(
      2,
      [&](ProcessGroup& g) {
        auto work = g.allreduce_async(at::ones({(int64_t{40} << 20) / 4}));
        work->wait();
        EXPECT_NE(work->description().find("3 pieces"), std::string::npos) << work->description();
      },
      std::chrono::milliseconds(30000), options);
}

}  // namespace
}  // namespace ringtorch
