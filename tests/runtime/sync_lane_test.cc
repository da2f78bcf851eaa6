// The synchronous lane (runtime/comm/sync_lane.h): call fingerprints and small collectives over
// TCP connections the waiting thread reads itself, ranks as threads over one in-memory store,
// over loopback. Every group here turns shared memory off, so the lane is in use unless a test
// declines it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <ringtorch/error.h>
#include <ringtorch/process_group.h>

#include "rendezvous/deadline_store.h"
#include "runtime/comm/call_fingerprint.h"
#include "support/scoped_environment.h"
#include "support/thread_ranks.h"

namespace ringtorch {
namespace {

using std::chrono::milliseconds;

ProcessGroupOptions over_tcp() {
  ProcessGroupOptions options;
  options.shared_memory = false;
  return options;
}

c10::intrusive_ptr<c10d::Store> memory_store() {
  return c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(30000));
}

// Element counts on both sides of what travels inside the fingerprint on the lane.
const int64_t kInlineFloats = static_cast<int64_t>(kFingerprintInlineBytes / sizeof(float));

TEST(SyncLane, CarrySmallAndLargeCollectivesAtWorldSizes2And3) {
  for (int world : {2, 3}) {
    testing::on_thread_ranks(
        world,
        [&](ProcessGroup& group) {
          EXPECT_TRUE(group.description().sync_lane) << group.description().describe();
          const int rank = group.rank();
          for (int64_t count : {int64_t{1}, kInlineFloats, kInlineFloats + 1, int64_t{100000}}) {
            at::Tensor sum = at::full({count}, rank + 1.0f);
            group.allreduce(sum);
            ASSERT_TRUE(sum.eq(world * (world + 1) / 2.0f).all().item<bool>()) << "allreduce of " << count;
            at::Tensor from_last = at::full({count}, rank == world - 1 ? 7.0f : 0.0f);
            group.broadcast(from_last, world - 1);
            ASSERT_TRUE(from_last.eq(7.0f).all().item<bool>()) << "broadcast of " << count;
            at::Tensor mine = at::full({count}, static_cast<float>(rank)), all = at::empty({world * count});
            group.allgather(mine, all);
            for (int r = 0; r < world; ++r) {
              ASSERT_TRUE(all.narrow(0, r * count, count).eq(static_cast<float>(r)).all().item<bool>())
                  << "allgather of " << count << ", block " << r;
            }
          }
          group.barrier();
        },
        milliseconds(30000), over_tcp());
  }
}

// A call of one piece against one of several pieces (both inside their fingerprints), and
// against one too large to travel inside: both go over the lane first, so both ranks see the
// mismatch (instead of waiting for pieces that never come, or on different sockets).
TEST(SyncLane, ASmallCallAgainstALargerOneIsAMismatchOnBothRanks) {
  for (const int64_t larger : {kInlineFloats, kInlineFloats * 2}) {
    testing::on_thread_ranks(
        2,
        [&](ProcessGroup& group) {
          at::Tensor t = at::ones({group.rank() == 0 ? int64_t{4} : larger});
          try {
            group.allreduce(t);
            ADD_FAILURE() << "rank " << group.rank() << ": no MismatchError";
          } catch (const MismatchError& e) {
            const std::string other = group.rank() == 0 ? "rank 1 called allreduce of " + std::to_string(larger)
                                                        : std::string("rank 0 called allreduce of 4");
            EXPECT_NE(std::string(e.what()).find(other + " float32"), std::string::npos) << e.what();
          }
          at::Tensor after = at::ones({3});
          group.allreduce(after);  // the group stays usable
          EXPECT_TRUE(after.eq(2.0f).all().item<bool>());
        },
        milliseconds(30000), over_tcp());
  }
}

TEST(SyncLane, ARankThatDeclinesTurnsThemOffForTheWholeGroup) {
  auto store = memory_store();
  bool lanes[2] = {true, true};
  float sums[2] = {0, 0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      ProcessGroupOptions options = over_tcp();
      if (r == 1) options.sync_lane = false;
      auto group = ProcessGroup::create(store, r, 2, "127.0.0.1", options);
      lanes[r] = group->description().sync_lane;
      at::Tensor t = at::full({5}, 1.0f + r);
      group->allreduce(t);
      sums[r] = t[4].item<float>();
      group->shutdown();
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(lanes[r]) << "rank " << r;
    EXPECT_EQ(sums[r], 3.0f) << "rank " << r;
  }
}

// The lane ends a wait at the call's own timeout, not the group's.
TEST(SyncLane, ACallsOwnTimeoutEndsAWaitOnTheLaneAndNamesThePeer) {
  auto store = memory_store();
  std::atomic<bool> done{false};
  std::thread idle([&] {
    auto group = ProcessGroup::create(store, 1, 2, "127.0.0.1", over_tcp());  // never calls the collective
    while (!done) std::this_thread::sleep_for(milliseconds(10));
  });
  auto group = ProcessGroup::create(store, 0, 2, "127.0.0.1", over_tcp());  // group timeout: 300 s
  EXPECT_TRUE(group->description().sync_lane) << group->description().describe();
  const auto start = std::chrono::steady_clock::now();
  try {
    group->allreduce(at::ones({4}), ReduceOp::kSum, milliseconds(300));
    ADD_FAILURE() << "no TimeoutError";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(e.site().peer, 1) << e.what();
    EXPECT_NE(std::string(e.what()).find("peer rank 1"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << "the 300 s group timeout was used";
  done = true;
  idle.join();
}

TEST(SyncLane, AMalformedSettingIsRefusedAtCreation) {
  testing::ScopedEnvironment yes("RINGTORCH_SYNC_LANE", "yes");
  try {
    ProcessGroup::create(memory_store(), 0, 1, "127.0.0.1", over_tcp());
    ADD_FAILURE() << "RINGTORCH_SYNC_LANE=yes was accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("RINGTORCH_SYNC_LANE"), std::string::npos) << e.what();
  }
}

// A peer whose process goes away mid-exchange (its lane's sockets close) is a PeerLostError that
// names it, well before the group's timeout.
TEST(SyncLane, APeerThatClosesItsLaneIsLostAndNamed) {
  auto store = memory_store();
  std::thread leaver([&] {
    auto group = ProcessGroup::create(store, 1, 2, "127.0.0.1", over_tcp());
    group->shutdown();  // closes every socket, the lane's included
  });
  auto group = ProcessGroup::create(store, 0, 2, "127.0.0.1", over_tcp());
  leaver.join();
  ASSERT_TRUE(group->description().sync_lane);
  const auto start = std::chrono::steady_clock::now();
  try {
    group->allreduce(at::ones({4}));
    ADD_FAILURE() << "no failure";
  } catch (const Error& e) {
    EXPECT_TRUE(e.kind() == ErrorKind::kPeerLost || e.kind() == ErrorKind::kTimeout) << e.what();
    EXPECT_EQ(e.site().peer, 1) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60)) << "the 300 s group timeout was used";
}

// A signal that interrupts the wait (SIGUSR1, as ringrun sends to ask for flight-recorder dumps;
// here with a handler that does not restart system calls) makes the lane wait again, not time
// out.
TEST(SyncLane, ASignalDuringAWaitIsNotATimeout) {
  struct sigaction quiet {
  }, previous{};
  quiet.sa_handler = [](int) {};
  sigemptyset(&quiet.sa_mask);
  quiet.sa_flags = 0;  // no SA_RESTART: poll(2) returns EINTR
  ASSERT_EQ(::sigaction(SIGUSR2, &quiet, &previous), 0);
  std::atomic<bool> waiting{true};
  std::thread interrupter([&] {
    while (waiting) {
      ::kill(::getpid(), SIGUSR2);
      std::this_thread::sleep_for(milliseconds(20));
    }
  });
  testing::on_thread_ranks(
      2,
      [&](ProcessGroup& group) {
        if (group.rank() == 1) std::this_thread::sleep_for(milliseconds(500));  // rank 0 waits meanwhile
        at::Tensor t = at::ones({4});
        group.allreduce(t, ReduceOp::kSum, milliseconds(20000));
        EXPECT_TRUE(t.eq(2.0f).all().item<bool>());
      },
      milliseconds(30000), over_tcp());
  waiting = false;
  interrupter.join();
  ::sigaction(SIGUSR2, &previous, nullptr);
}

// Messages larger than what the kernel's socket buffers hold at once, from both ranks at the
// same time: the lane writes what the sockets take and reads what arrives, so neither blocks.
TEST(SyncLane, FullMessagesBothWaysPassWhateverTheSocketBuffers) {
  testing::on_thread_ranks(
      2,
      [&](ProcessGroup& group) {
        for (int round = 0; round < 20; ++round) {
          at::Tensor t = at::full({kInlineFloats}, group.rank() + round + 1.0f);
          group.allreduce(t);
          ASSERT_TRUE(t.eq(2.0f * round + 3.0f).all().item<bool>()) << "round " << round;
        }
      },
      milliseconds(30000), over_tcp());
}

}  // namespace
}  // namespace ringtorch
