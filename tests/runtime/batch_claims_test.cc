// BatchClaims (batch_claims.h) on thread ranks over real Gloo and the tests' shared store:
// every batch of a period is trained once, a rank slower than the others stops before the last
// few batches while the fastest takes them all, and the rule that decides it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <vector>

#include <ringtorch/batch_claims.h>
#include <ringtorch/error.h>

#include "support/thread_ranks.h"

namespace ringtorch {
namespace {

using testing::on_thread_ranks;

// An in-memory store whose add and deleteKey on the batch counters ("claims/" keys) block from
// hold() until release(), as a store whose host stopped answering would; the rest answers.
class StallingStore : public c10d::Store {
 public:
  void hold() {
    std::lock_guard<std::mutex> lock(mutex_);
    held_ = true;
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    held_ = false;
    released_.notify_all();
  }

  void set(const std::string& key, const std::vector<uint8_t>& value) override { inner_->set(key, value); }
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    return inner_->compareSet(key, expected, desired);
  }
  std::vector<uint8_t> get(const std::string& key) override { return inner_->get(key); }
  int64_t add(const std::string& key, int64_t value) override {
    stall(key);
    const int64_t result = inner_->add(key, value);
    if (key.find("claims/") != std::string::npos) ++answered_adds_;
    return result;
  }
  int answered_adds() const { return answered_adds_.load(); }  // on the counters
  bool deleteKey(const std::string& key) override {
    stall(key);
    return inner_->deleteKey(key);
  }
  bool check(const std::vector<std::string>& keys) override { return inner_->check(keys); }
  int64_t getNumKeys() override { return inner_->getNumKeys(); }
  void wait(const std::vector<std::string>& keys) override { inner_->wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    inner_->wait(keys, timeout);
  }

 private:
  void stall(const std::string& key) {
    if (key.find("claims/") == std::string::npos) return;
    std::unique_lock<std::mutex> lock(mutex_);
    released_.wait(lock, [&] { return !held_; });
  }

  const c10::intrusive_ptr<c10d::Store> inner_ = c10::make_intrusive<c10d::HashStore>();
  std::mutex mutex_;
  std::condition_variable released_;
  bool held_ = false;
  std::atomic<int> answered_adds_{0};
};

TEST(BatchClaims, ARankClaimsWhileTheOthersCouldNotFinishFirst) {
  // Two others at its speed: it stops when fewer than 2 are left; the fastest takes the last.
  EXPECT_TRUE(claims_another(2, 2.0, false));
  EXPECT_FALSE(claims_another(1, 2.0, false));
  EXPECT_TRUE(claims_another(1, 2.0, true));
  EXPECT_FALSE(claims_another(0, 0.25, true));
  // Four times slower than the other: it stops with fewer than 4 left.
  EXPECT_TRUE(claims_another(4, 4.0, false));
  EXPECT_FALSE(claims_another(3, 4.0, false));
}

// Three ranks claim as fast as they can, three periods of 50 batches and an empty one: every
// batch of a period goes to exactly one rank.
TEST(BatchClaims, EveryBatchOfAPeriodGoesToOneRank) {
  const std::vector<int64_t> periods = {50, 0, 50, 50};
  std::mutex mutex;
  std::vector<std::vector<int64_t>> claimed(periods.size());  // every rank's, per period
  on_thread_ranks(3, [&](ProcessGroup& group) {
    BatchClaims claims(group);
    for (size_t p = 0; p < periods.size(); ++p) {
      claims.begin_period(periods[p], {1.0, 1.0, 1.0});
      std::vector<int64_t> mine;
      while (std::optional<int64_t> batch = claims.next()) mine.push_back(*batch);
      EXPECT_FALSE(claims.next().has_value()) << "a period that is over stays over";
      EXPECT_EQ(claims.claimed(), static_cast<int64_t>(mine.size()));
      {
        std::lock_guard<std::mutex> lock(mutex);
        claimed[p].insert(claimed[p].end(), mine.begin(), mine.end());
      }
      group.barrier();  // the outer step
    }
    claims.finish();
  });
  for (size_t p = 0; p < periods.size(); ++p) {
    std::sort(claimed[p].begin(), claimed[p].end());
    std::vector<int64_t> all(static_cast<size_t>(periods[p]));
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    EXPECT_EQ(claimed[p], all) << "period " << p;
  }
}

// Rank 1 is 4x slower than rank 0 (weights 4:1). In a period of 10, it takes batch 0, then rank 0
// takes 6 (and claims a seventh while it "trains" the sixth); with at most 3 left, fewer than the
// 4 rank 0 trains in the time rank 1 trains one, rank 1 stops, and rank 0 takes the rest. At
// equal weights rank 1 takes a second batch at that point (one it claimed ahead, while it
// trained the first), and maybe more at the end.
TEST(BatchClaims, ASlowRankLeavesTheLastBatchesToTheFastest) {
  for (const bool unequal : {true, false}) {
    std::vector<std::vector<int64_t>> taken(2);
    on_thread_ranks(2, [&](ProcessGroup& group) {
      BatchClaims claims(group);
      claims.begin_period(10, unequal ? std::vector<double>{4.0, 1.0} : std::vector<double>{1.0, 1.0});
      std::vector<int64_t>& mine = taken[static_cast<size_t>(group.rank())];
      const auto take = [&](int n) {
        for (int i = 0; i < n; ++i) {
          if (std::optional<int64_t> batch = claims.next()) mine.push_back(*batch);
        }
      };
      if (group.rank() == 1) take(1);
      group.barrier();
      if (group.rank() == 0) take(6);
      group.barrier();
      if (group.rank() == 1) take(1);
      group.barrier();
      take(10);  // to the end: a batch claimed ahead is trained too
      group.barrier();
      claims.finish();
    });
    std::vector<int64_t> all = taken[0];
    all.insert(all.end(), taken[1].begin(), taken[1].end());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
    if (unequal) {
      EXPECT_EQ(taken[1], (std::vector<int64_t>{0}));
    } else {
      ASSERT_GE(taken[1].size(), 2u);
      EXPECT_EQ(taken[1][0], 0);
    }
  }
}

// Rank 1 at a twentieth of rank 0's speed, 8 batches a period: it would never claim one. After
// kMaxPeriodsWithout periods without, it takes the first batch of the next, so that its speed
// stays measured; then it stops again.
TEST(BatchClaims, ARankThatClaimedNothingForPeriodsTakesOne) {
  const int periods = BatchClaims::kMaxPeriodsWithout + 2;
  std::vector<std::vector<int64_t>> rank1(periods);
  on_thread_ranks(2, [&](ProcessGroup& group) {
    BatchClaims claims(group);
    for (int p = 0; p < periods; ++p) {
      claims.begin_period(8, {20.0, 1.0});
      if (group.rank() == 1) {
        if (std::optional<int64_t> batch = claims.next()) rank1[static_cast<size_t>(p)].push_back(*batch);
      }
      group.barrier();
      while (std::optional<int64_t> batch = claims.next()) {
        if (group.rank() == 1) rank1[static_cast<size_t>(p)].push_back(*batch);
      }
      group.barrier();
    }
    claims.finish();
  });
  for (int p = 0; p < periods; ++p) {
    const std::vector<int64_t> expected =
        p == BatchClaims::kMaxPeriodsWithout ? std::vector<int64_t>{0} : std::vector<int64_t>{};
    EXPECT_EQ(rank1[static_cast<size_t>(p)], expected) << "period " << p;
  }
}

// The store stops answering mid-period. Rank 0 (the fastest) had its next claim in flight (made
// ahead), rank 1 (four times slower, 8 batches: near the end from the start) reads the counter
// before it claims: both stop with TimeoutError after the group's timeout, naming the rank, the
// period and --timeout, instead of waiting for the store's own timeout (here: never).
TEST(BatchClaims, AStoreThatStopsAnsweringEndsTheWaitAtTheGroupsTimeout) {
  auto store = c10::make_intrusive<StallingStore>();
  // Released however the test ends, so that the held calls on their threads end too.
  struct ReleaseAtEnd {
    StallingStore& store;
    ~ReleaseAtEnd() { store.release(); }
  } release_at_end{*store};
  std::vector<std::string> errors(2);
  testing::on_thread_ranks_with_options(
      2, [](int) { return ProcessGroupOptions{}; },
      [&](ProcessGroup& group) {
        BatchClaims claims(group);
        claims.begin_period(8, {4.0, 1.0});
        if (group.rank() == 0) {
          EXPECT_EQ(claims.next(), std::optional<int64_t>(0));  // its claim of batch 1 made ahead, answered
        }
        group.barrier();
        if (group.rank() == 0) {
          while (store->answered_adds() < 2) std::this_thread::yield();  // batch 0's claim and the one made ahead
          store->hold();
          EXPECT_EQ(claims.next(), std::optional<int64_t>(1));  // its claim of batch 2 made ahead: held
        }
        group.barrier();
        try {
          claims.next();
          ADD_FAILURE() << "rank " << group.rank() << ": a claim from a store that does not answer returned";
        } catch (const TimeoutError& e) {
          errors[static_cast<size_t>(group.rank())] = e.what();
        }
      },
      std::chrono::milliseconds(1500), store);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string& e = errors[static_cast<size_t>(rank)];
    EXPECT_NE(e.find("rank " + std::to_string(rank) +
                     ": claiming a batch of period 0 from the group's store took "
                     "longer than the group's timeout (1.5 s)"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("(raise --timeout)"), std::string::npos) << e;
  }
}

TEST(BatchClaims, BadPeriodsAreRefusedWithTheRank) {
  on_thread_ranks(2, [&](ProcessGroup& group) {
    BatchClaims claims(group);
    EXPECT_THROW(claims.begin_period(-1, {1.0, 1.0}), InvalidArgumentError);
    EXPECT_THROW(claims.begin_period(4, {1.0}), InvalidArgumentError);
    EXPECT_THROW(claims.begin_period(4, {1.0, -1.0}), InvalidArgumentError);
    try {
      claims.begin_period(4, {1.0, std::nan("")});
      ADD_FAILURE() << "a NaN weight was taken";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(group.rank())), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace ringtorch
