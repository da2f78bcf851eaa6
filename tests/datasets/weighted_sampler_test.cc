// split_global_batch and WeightedDistributedSampler: the split's rounding and bounds, and that
// an epoch's steps deal every index once across ranks whatever the split, also when it changes
// mid-epoch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include <ringtorch/batch_split.h>
#include <ringtorch/error.h>
#include <ringtorch/weighted_sampler.h>

namespace ringtorch {
namespace {

using Split = std::vector<int64_t>;

TEST(SplitGlobalBatch, LargestRemainderAtLeastOneEachZeroForZero) {
  EXPECT_EQ(split_global_batch(64, {3, 1}), (Split{48, 16}));
  EXPECT_EQ(split_global_batch(64, {5, 2, 1}), (Split{40, 16, 8}));
  EXPECT_EQ(split_global_batch(10, {1, 1, 1}), (Split{4, 3, 3}));  // the tie goes to the lower rank
  EXPECT_EQ(split_global_batch(100, {0.5, 0.3, 0.2}), (Split{50, 30, 20}));
  EXPECT_EQ(split_global_batch(7, {2, 0, 1}), (Split{5, 0, 2}));  // 4.67, 0, 2.33
  EXPECT_EQ(split_global_batch(4, {97, 1, 1, 1}), (Split{1, 1, 1, 1}));
  EXPECT_EQ(split_global_batch(64, {1000, 1}), (Split{63, 1}));  // 63.94 and 0.06: one at least
  for (int64_t b : {3, 17, 64, 1000}) {
    const Split s = split_global_batch(b, {0.1, 0.7, 0.2});
    int64_t sum = 0;
    for (int64_t x : s) sum += x;
    EXPECT_EQ(sum, b);
  }
}

TEST(SplitGlobalBatch, BadInputIsNamed) {
  const struct {
    int64_t batch;
    std::vector<double> weights;
    std::string expected;
  } bad[] = {
      {64, {}, "no weights"},
      {64, {0, 0}, "every rank's weight is 0"},
      {64, {1, -1}, "the weight of rank 1 is -1"},
      {64, {1, NAN}, "the weight of rank 1 is nan"},
      {2, {1, 1, 1}, "a global batch of 2 cannot give each of the 3 ranks"},
  };
  for (const auto& b : bad) {
    try {
      split_global_batch(b.batch, b.weights);
      ADD_FAILURE() << "accepted " << b.expected;
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(b.expected), std::string::npos) << e.what();
    }
  }
}

TEST(ParseWeights, ColonSeparatedNumbers) {
  EXPECT_EQ(parse_weights("3:1"), (std::vector<double>{3, 1}));
  EXPECT_EQ(parse_weights("0.5:0.25:0.25"), (std::vector<double>{0.5, 0.25, 0.25}));
  EXPECT_THROW(parse_weights("3:"), InvalidArgumentError);
  EXPECT_THROW(parse_weights("3:-1"), InvalidArgumentError);
  EXPECT_THROW(parse_weights("fast:slow"), InvalidArgumentError);
}

// Every rank's indices of an epoch, step by step, with `split_at(step)` as the split.
std::vector<std::vector<int64_t>> deal(int64_t size, int64_t batch, int world, SamplerOptions options, int64_t epoch,
                                       const std::function<Split(int64_t)>& split_at) {
  std::vector<std::vector<int64_t>> per_rank(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    WeightedDistributedSampler sampler(size, batch, r, world, options);
    sampler.set_epoch(epoch);
    for (int64_t step = 0; step < sampler.steps_per_epoch(); ++step) {
      sampler.set_split(split_at(step));
      const auto mine = sampler.step_indices(step);
      EXPECT_EQ(static_cast<int64_t>(mine.size()), split_at(step)[static_cast<size_t>(r)]);
      per_rank[static_cast<size_t>(r)].insert(per_rank[static_cast<size_t>(r)].end(), mine.begin(), mine.end());
    }
  }
  return per_rank;
}

TEST(WeightedDistributedSampler, EveryIndexOnceAcrossRanksWhateverTheSplit) {
  SamplerOptions drop;
  drop.drop_last = true;
  // 1000 samples, global batch 64: 15 steps, 40 dropped; the split changes at step 5.
  const auto per_rank = deal(1000, 64, 3, drop, 2, [](int64_t step) {
    return step < 5 ? Split{22, 21, 21} : Split{40, 16, 8};
  });
  std::set<int64_t> seen;
  size_t total = 0;
  for (const auto& mine : per_rank) {
    total += mine.size();
    seen.insert(mine.begin(), mine.end());
  }
  EXPECT_EQ(total, 15u * 64u);
  EXPECT_EQ(seen.size(), total);  // no index twice
  // Exactly the first 960 of the epoch's order (DistributedSampler's shuffle): the 40 dropped
  // are its last.
  const std::vector<int64_t> order = epoch_order(1000, drop, 2);
  EXPECT_EQ(seen, std::set<int64_t>(order.begin(), order.begin() + 960));
}

TEST(WeightedDistributedSampler, WithoutDropLastTheTailIsPaddedFromTheStart) {
  SamplerOptions options;
  options.shuffle = false;
  const auto per_rank = deal(10, 4, 2, options, 0, [](int64_t) { return Split{3, 1}; });
  // 3 steps over 0..9 then 0, 1: rank 0 takes 3 of each 4, rank 1 the fourth.
  EXPECT_EQ(per_rank[0], (std::vector<int64_t>{0, 1, 2, 4, 5, 6, 8, 9, 0}));
  EXPECT_EQ(per_rank[1], (std::vector<int64_t>{3, 7, 1}));
}

TEST(WeightedDistributedSampler, DeterministicPerEpochAndDifferentAcrossEpochs) {
  WeightedDistributedSampler a(500, 32, 1, 2), b(500, 32, 1, 2);
  a.set_split({24, 8});
  b.set_split({24, 8});
  a.set_epoch(3);
  b.set_epoch(3);
  EXPECT_EQ(a.step_indices(4), b.step_indices(4));
  b.set_epoch(4);
  EXPECT_NE(a.step_indices(4), b.step_indices(4));
  EXPECT_EQ(a.steps_per_epoch(), 16);  // ceil(500 / 32), padded
}

TEST(WeightedDistributedSampler, AResumedEpochDealsOutOnlyWhatWasNotTrained) {
  // 90 of the epoch's 100 indices trained (by any world size and batch); the restart has 2 ranks
  // and a global batch of 16: one step of the last 10, padded with the first 6 of them.
  const SamplerOptions options{true, 1, false};
  const std::vector<int64_t> order = epoch_order(100, options, 2);
  std::vector<int> trained(100, 0);
  for (int r = 0; r < 2; ++r) {
    WeightedDistributedSampler s(100, 16, r, 2, options);
    s.set_epoch(2, 90);
    ASSERT_EQ(s.steps_per_epoch(), 1);
    for (int64_t i : s.step_indices(0)) trained[i]++;
    s.set_epoch(3);
    EXPECT_EQ(s.steps_per_epoch(), 7) << "the next epoch is whole again";
  }
  for (int k = 0; k < 100; ++k) EXPECT_EQ(trained[order[k]], k < 90 ? 0 : k < 96 ? 2 : 1) << "position " << k;
  WeightedDistributedSampler s(100, 16, 0, 2, options);
  EXPECT_THROW(s.set_epoch(0, 101), InvalidArgumentError);
}

TEST(WeightedDistributedSampler, BadSplitsAndSizesAreRefused) {
  WeightedDistributedSampler s(100, 10, 0, 2);
  EXPECT_THROW(s.set_split({5, 4}), InvalidArgumentError);                       // sums to 9
  EXPECT_THROW(s.set_split({11, -1}), InvalidArgumentError);                     // negative
  EXPECT_THROW(s.set_split({10}), InvalidArgumentError);                         // one rank short
  EXPECT_THROW(s.step_indices(10), InvalidArgumentError);                        // past the epoch
  EXPECT_THROW(WeightedDistributedSampler(100, 1, 0, 2), InvalidArgumentError);  // batch < ranks
  EXPECT_THROW(WeightedDistributedSampler(100, 8, 2, 2), InvalidArgumentError);  // rank outside
}

}  // namespace
}  // namespace ringtorch
