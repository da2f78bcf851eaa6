// Join rounds and barriers, N members as threads over one in-memory HashStore.
#include <gtest/gtest.h>

#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <ringtorch/error.h>
#include <ringtorch/join.h>

#include "rendezvous/deadline_store.h"

namespace ringtorch {
namespace {

using std::chrono::milliseconds;

c10::intrusive_ptr<c10d::Store> memory_store() {
  return c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(5000));
}

std::vector<int> join_all(c10d::Store& store, int n) {
  std::vector<int> rounds(n, -1);
  std::vector<std::thread> threads;
  for (int m = 0; m < n; ++m) {
    threads.emplace_back([&, m] {
      rounds[m] = join_round(store, MemberContext{m, n, "rank", "test"}, milliseconds(5000));
    });
  }
  for (auto& t : threads) t.join();
  return rounds;
}

TEST(JoinRound, SuccessiveJobsGetSuccessiveRounds) {
  for (int n : {1, 2, 3, 8}) {
    auto store = memory_store();
    for (int job = 0; job < 3; ++job) EXPECT_EQ(join_all(*store, n), std::vector<int>(n, job)) << "n=" << n;
  }
}

TEST(JoinRound, RoundsCountCompleteJoins) {
  auto store = memory_store();
  EXPECT_EQ(join_all(*store, 4), std::vector<int>(4, 0));
  EXPECT_EQ(join_all(*store, 4), std::vector<int>(4, 1));
}

TEST(JoinRound, MissingMemberTimesOutNamingIt) {
  auto store = memory_store();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(3);
  for (int m : {0, 2}) {
    threads.emplace_back([&, m] {
      try {
        join_round(*store, MemberContext{m, 3, "rank", "rendezvous via test"}, milliseconds(300));
      } catch (const TimeoutError& e) {
        errors[m] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int m : {0, 2}) {
    EXPECT_NE(errors[m].find("[rank " + std::to_string(m) + "/3]"), std::string::npos) << errors[m];
    EXPECT_NE(errors[m].find("missing rank 1 "), std::string::npos) << errors[m];
    EXPECT_NE(errors[m].find("2 of 3 ranks"), std::string::npos) << errors[m];
    EXPECT_NE(errors[m].find("RINGTORCH_TIMEOUT"), std::string::npos) << errors[m];
  }
}

TEST(JoinRound, DuplicateRankIsNamed) {
  auto store = memory_store();
  std::string error;
  std::thread a([&] {
    try {
      join_round(*store, MemberContext{0, 2, "rank", "t"}, milliseconds(300));
    } catch (const Error&) {
    }
  });
  std::this_thread::sleep_for(milliseconds(20));
  try {
    join_round(*store, MemberContext{0, 2, "rank", "t"}, milliseconds(300));
  } catch (const InvalidArgumentError& e) {
    error = e.what();
  }
  a.join();
  EXPECT_NE(error.find("rank 0 joined round 0 twice"), std::string::npos) << error;
}

TEST(StoreBarrier, ReleasesEveryoneTogether) {
  auto store = memory_store();
  std::atomic<int> passed{0};
  std::vector<std::thread> threads;
  for (int m = 0; m < 4; ++m) {
    threads.emplace_back([&, m] {
      std::this_thread::sleep_for(milliseconds(10 * m));
      store_barrier(*store, "b", MemberContext{m, 4, "rank", "t"}, milliseconds(5000));
      passed++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(passed.load(), 4);
}

}  // namespace
}  // namespace ringtorch
