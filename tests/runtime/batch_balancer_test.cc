// BatchBalancer and next_weights: the weights follow measured speed, all the way the first
// time, half way later, bounded per call, with hysteresis; every rank agrees (ranks as threads).
#include <gtest/gtest.h>

#include <ringtorch/batch_balancer.h>
#include <ringtorch/error.h>

#include "support/thread_ranks.h"

namespace ringtorch {
namespace {

TEST(NextWeights, FirstAllTheWayThenHalfWayAndBounded) {
  // Rank 1 takes 3x as long per sample: speeds 1 and 1/3, weights 0.75 and 0.25.
  auto w = next_weights({1, 1}, {0.001, 0.003}, /*first=*/true);
  EXPECT_NEAR(w[0], 0.75, 1e-12);
  EXPECT_NEAR(w[1], 0.25, 1e-12);
  // Later calls go half way: from 0.75/0.25 toward 0.5/0.5 gives 0.625/0.375.
  w = next_weights({0.75, 0.25}, {0.002, 0.002}, /*first=*/false);
  EXPECT_NEAR(w[0], 0.625, 1e-12);
  // A 100x measurement moves a weight at most 4x per call (then normalised).
  w = next_weights({1, 1}, {0.001, 0.1}, /*first=*/true);
  EXPECT_NEAR(w[1] / w[0], 0.125 / 0.99, 0.02);
}

double seconds_per_sample(const ProcessGroup& group) { return group.rank() == 0 ? 0.001 : 0.003; }

// Rank 1 takes 3x as long per sample: after 2 warm-up steps and one interval of 4, the model
// splits 64 as 48/16 (checked here).
BatchBalancer balanced_by_the_model(ProcessGroup& group) {
  BalanceSettings settings;
  settings.warmup_steps = 2;
  settings.interval = 4;
  BatchBalancer balancer(group, 64, {1, 1}, /*automatic=*/true, c10::Device(c10::kCPU), settings);
  EXPECT_EQ(balancer.split(), (std::vector<int64_t>{32, 32}));
  int64_t step = 0;
  for (; !balancer.due_after_step(step); ++step) {
    const int64_t mine = balancer.next_step_split()[static_cast<size_t>(group.rank())];
    // The warm-up steps are slow (ignored); the rest take seconds_per_sample each.
    const double seconds = step < 2 ? 1.0 : seconds_per_sample(group) * static_cast<double>(mine);
    balancer.record_step(seconds, seconds, mine);
  }
  EXPECT_EQ(step, 6);
  EXPECT_TRUE(balancer.rebalance(group));
  EXPECT_EQ(balancer.split(), (std::vector<int64_t>{48, 16}));
  EXPECT_EQ(balancer.describe(), "rank 0 cpu 48/64, rank 1 cpu 16/64 (measured 3.0x)");
  return balancer;
}

// One interval (4 steps) at the same speeds per sample, whose wall time is the job's at the
// split each step trained on (0.050 s at `best`, 0.060 s at any other) times `machine`, the
// machine's own speed in that interval. Returns the splits the steps trained on.
std::vector<std::vector<int64_t>> train_interval(BatchBalancer& balancer, const ProcessGroup& group,
                                                 const std::vector<int64_t>& best, double machine) {
  std::vector<std::vector<int64_t>> trained;
  for (int i = 0; i < 4; ++i) {
    const std::vector<int64_t> split = balancer.next_step_split();
    trained.push_back(split);
    const int64_t mine = split[static_cast<size_t>(group.rank())];
    balancer.record_step(seconds_per_sample(group) * static_cast<double>(mine),
                         machine * (split == best ? 0.050 : 0.060), mine);
  }
  return trained;
}

using Splits = std::vector<std::vector<int64_t>>;

TEST(BatchBalancer, RanksAgreeOnTheSplitOfTheirMeasuredSpeeds) {
  testing::on_thread_ranks(2, [](ProcessGroup& group) {
    BatchBalancer balancer = balanced_by_the_model(group);
    const std::vector<int64_t> best{53, 11};
    // The same speeds again: the model is content, so a trial moves 5 samples (8% of 64) from
    // the rank slowest per sample to the fastest, on every other step; the split stands.
    train_interval(balancer, group, best, 1.0);
    EXPECT_FALSE(balancer.rebalance(group));
    EXPECT_EQ(balancer.split(), (std::vector<int64_t>{48, 16}));
    EXPECT_EQ(train_interval(balancer, group, best, 1.0), (Splits{{48, 16}, {53, 11}, {48, 16}, {53, 11}}));
    // Its steps had more throughput than the others (the same samples in less time): kept, and
    // the next trial goes the same way.
    EXPECT_TRUE(balancer.rebalance(group));
    EXPECT_EQ(balancer.split(), best);
    EXPECT_EQ(balancer.describe(), "rank 0 cpu 53/64, rank 1 cpu 11/64 (measured 3.0x)");
    // A trial that does not pay is not kept, even in an interval where the whole machine ran
    // 20% faster than in the one before: it is judged against the steps beside it.
    EXPECT_EQ(train_interval(balancer, group, best, 0.8), (Splits{{53, 11}, {58, 6}, {53, 11}, {58, 6}}));
    EXPECT_FALSE(balancer.rebalance(group));
    EXPECT_EQ(balancer.split(), best);
    // Smaller trials, both ways, none paying, until the balancer settles where the best
    // throughput was, whatever the machine's swings.
    const double swings[] = {1.25, 0.8, 1.1, 0.9};
    for (int decision = 0; decision < 12 && !balancer.settled(); ++decision) {
      train_interval(balancer, group, best, swings[decision % 4]);
      EXPECT_FALSE(balancer.rebalance(group));
    }
    EXPECT_TRUE(balancer.settled());
    EXPECT_EQ(balancer.split(), best);
    EXPECT_EQ(train_interval(balancer, group, best, 1.0), Splits(4, best));
  });
}

// When the way that pays is toward the slower rank (its own costs are not the model's), the
// trials find it the other way, and go on that way at half the size after a step too far.
TEST(BatchBalancer, TrialsGoOnTheWayThatPaid) {
  testing::on_thread_ranks(2, [](ProcessGroup& group) {
    BatchBalancer balancer = balanced_by_the_model(group);
    const std::vector<int64_t> best{43, 21};
    train_interval(balancer, group, best, 1.0);
    EXPECT_FALSE(balancer.rebalance(group));  // trial 53/11: toward the faster rank
    EXPECT_EQ(train_interval(balancer, group, best, 1.0), (Splits{{48, 16}, {53, 11}, {48, 16}, {53, 11}}));
    EXPECT_FALSE(balancer.rebalance(group));  // it did not pay: the other way
    EXPECT_EQ(train_interval(balancer, group, best, 1.0), (Splits{{48, 16}, {43, 21}, {48, 16}, {43, 21}}));
    EXPECT_TRUE(balancer.rebalance(group));  // it paid: kept, and the next goes the same way
    EXPECT_EQ(balancer.split(), best);
    EXPECT_EQ(train_interval(balancer, group, best, 1.0), (Splits{{43, 21}, {38, 26}, {43, 21}, {38, 26}}));
    EXPECT_FALSE(balancer.rebalance(group));  // too far: half the size, still the same way
    EXPECT_EQ(train_interval(balancer, group, best, 1.0), (Splits{{43, 21}, {41, 23}, {43, 21}, {41, 23}}));
    for (int decision = 0; decision < 12 && !balancer.settled(); ++decision) {
      EXPECT_FALSE(balancer.rebalance(group));
      if (!balancer.settled()) train_interval(balancer, group, best, 1.0);
    }
    EXPECT_TRUE(balancer.settled());
    EXPECT_EQ(balancer.split(), best);
  });
}

// Three kinds of rank 1 next to a rank 0 that computes 0.1 ms per sample:
//  - slower per sample (0.4 ms) and nothing else: balanced, it stays;
//  - a weak machine paying 50 ms per step whatever its share (its fixed work: the forward and
//    backward over every weight, the optimizer): no share makes a step shorter than 50 ms,
//    while rank 0 alone needs ~7 ms for all 64; the fit through two decisions says so (a);
//  - slower per sample and stalling everyone inside the collectives (a CPU quota running out
//    there: every step takes 20 ms of wall time): at the balanced split the job trains 3200
//    samples/s, rank 0 alone would train 10000 (b).
TEST(BatchBalancer, ARankThatOnlySlowsTheJobSitsOut) {
  enum class Kind { kSlower, kFixedCost, kStalling };
  testing::on_thread_ranks(2, [](ProcessGroup& group) {
    BalanceSettings settings;
    settings.warmup_steps = 0;
    settings.interval = 4;
    for (const Kind kind : {Kind::kSlower, Kind::kFixedCost, Kind::kStalling}) {
      BatchBalancer balancer(group, 64, {1, 1}, /*automatic=*/true, c10::Device(c10::kCPU), settings);
      auto compute = [&](int64_t samples) {
        const double b = static_cast<double>(samples);
        if (group.rank() == 0) return 0.0001 * b;
        return kind == Kind::kFixedCost ? 0.050 + 0.0001 * b : 0.0004 * b;
      };
      auto window = [&] {
        for (int i = 0; i < 4; ++i) {
          const int64_t mine = balancer.sits_out(group.rank()) ? 0 : balancer.next_step_split()[group.rank()];
          const double wall = kind == Kind::kStalling && !balancer.anyone_sits_out() ? 0.020 : compute(mine);
          balancer.record_step(compute(mine), wall, mine);
        }
      };
      window();
      EXPECT_TRUE(balancer.rebalance(group));  // the model: one point per rank, no fit yet
      EXPECT_FALSE(balancer.anyone_sits_out());
      for (int decision = 0; decision < 4 && !balancer.anyone_sits_out(); ++decision) {
        window();
        balancer.rebalance(group);
      }
      EXPECT_EQ(balancer.anyone_sits_out(), kind != Kind::kSlower) << balancer.describe();
      if (kind == Kind::kSlower) continue;
      EXPECT_TRUE(balancer.sits_out(1));
      EXPECT_EQ(balancer.training_ranks(), std::vector<int>{0});
      EXPECT_EQ(balancer.split(), (std::vector<int64_t>{64, 0}));
      const std::string text = balancer.describe();
      EXPECT_EQ(text.rfind("rank 0 cpu 64/64, rank 1 cpu sits out (measured ", 0), 0u) << text;
      const char* why = kind == Kind::kFixedCost ? "; rank 1 sits out: its step takes 50."
                                                 : "; rank 1 sits out: the others alone would train 10000 samples/s, "
                                                   "the job with it 3200)";
      EXPECT_NE(text.find(why), std::string::npos) << text;
      // From now on decisions come at epoch ends only, and one training rank has nothing to split.
      EXPECT_FALSE(balancer.due_after_step(24));
      window();
      EXPECT_FALSE(balancer.rebalance(group));
      EXPECT_EQ(balancer.split(), (std::vector<int64_t>{64, 0}));
    }
  });
}

TEST(BatchBalancer, FixedWeightsStayAndWrongCountsAreRefused) {
  testing::on_thread_ranks(2, [](ProcessGroup& group) {
    BatchBalancer fixed(group, 64, {3, 1}, /*automatic=*/false, c10::Device(c10::kCPU));
    EXPECT_EQ(fixed.split(), (std::vector<int64_t>{48, 16}));
    fixed.record_step(1.0, 1.0, 48);
    EXPECT_FALSE(fixed.rebalance(group));
    try {
      BatchBalancer wrong(group, 64, {3, 1, 1}, false, c10::Device(c10::kCPU));
      ADD_FAILURE() << "accepted 3 weights for 2 ranks";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("3 weights for 2 ranks"), std::string::npos) << e.what();
    }
    // Ranks given different weights (nodes started with their own command lines) would deal
    // overlapping samples: every rank refuses, naming how a rank differs from rank 0.
    try {
      BatchBalancer differing(group, 64, group.rank() == 0 ? std::vector<double>{3, 1} : std::vector<double>{1, 1},
                              group.rank() == 1, c10::Device(c10::kCPU));
      ADD_FAILURE() << "accepted different weights on rank " << group.rank();
    } catch (const InvalidArgumentError& e) {
      EXPECT_STREQ(e.what(),
                   "balance: rank 1 was told to split the global batch of 64 as 32/32, then automatically, rank 0 "
                   "to split the global batch of 64 as 48/16; give every rank the same weights and global batch "
                   "(ringtrain: the same --balance, and --global-batch or --batch-size)");
    }
    // ...and a different global batch alone.
    EXPECT_THROW(BatchBalancer(group, group.rank() == 0 ? 64 : 128, {1, 1}, false, c10::Device(c10::kCPU)),
                 InvalidArgumentError);
  });
}

}  // namespace
}  // namespace ringtorch
