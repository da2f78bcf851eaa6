// The same-host shared-memory path (runtime/comm/shm/) against Gloo over TCP: 2, 3 and 4 ranks
// on one host, and 2 "hosts" of 2 ranks (host identities given per rank: the hierarchical
// all-reduce, shared memory within a host and TCP between). Ranks are threads; the segment is
// real POSIX shared memory. Process-level failures (a killed rank) are in
// process_group_multiprocess_test.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <ringtorch/error.h>
#include <ringtorch/process_group.h>

#include "rendezvous/deadline_store.h"
#include "runtime/comm/shm/host_plan.h"
#include "support/thread_ranks.h"

namespace ringtorch {
namespace {

using std::chrono::milliseconds;

// Runs body(group) on `n` thread ranks whose hosts are `hosts[rank]` ("" -> the real one).
void on_ranks(int n, bool shared_memory, const std::vector<std::string>& hosts,
              const std::function<void(ProcessGroup&)>& body) {
  ProcessGroupOptions options;
  options.shared_memory = shared_memory;
  testing::on_thread_ranks(n, body, milliseconds(30000), options, hosts);
}

// Every collective the segment carries, on inputs that differ per rank; returns what rank r saw.
std::vector<std::vector<at::Tensor>> run_collectives(int n, bool shared_memory, const std::vector<std::string>& hosts) {
  std::vector<std::vector<at::Tensor>> seen(n);
  // 5M floats: more than one 4 MiB area, and not a multiple of the rank count.
  const int64_t big = 5'000'003;
  on_ranks(n, shared_memory, hosts, [&](ProcessGroup& g) {
    const int r = g.rank();
    auto generator = at::detail::createCPUGenerator(100 + r);
    at::Tensor floats = at::randn({big}, generator);
    g.allreduce(floats);
    at::Tensor ints = at::randint(-1000, 1000, {1001}, generator, at::kLong);
    g.allreduce(ints, ReduceOp::kMax);
    at::Tensor avg = at::full({7}, static_cast<double>(r), at::kDouble);
    g.allreduce(avg, ReduceOp::kAvg);
    at::Tensor one = at::full({1}, static_cast<float>(r + 1));
    g.allreduce(one);
    at::Tensor broadcast = at::arange(3'000'000, at::kInt) * (r + 1);
    g.broadcast(broadcast, n - 1);
    at::Tensor gathered = at::empty({n * 1'200'000}, at::kFloat);
    g.allgather(at::full({1'200'000}, static_cast<float>(r)), gathered);
    at::Tensor scattered = at::empty({333}, at::kFloat);
    g.reduce_scatter(at::randn({n * 333}, generator), scattered);
    g.barrier();
    seen[r] = {floats, ints, avg, one, broadcast, gathered, scattered};
  });
  return seen;
}

void expect_paths_agree(int n, const std::vector<std::string>& hosts) {
  const auto shm = run_collectives(n, true, hosts);
  const auto tcp = run_collectives(n, false, hosts);
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    // Bitwise equal across ranks on the shared-memory path.
    for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(at::equal(shm[r][i], shm[0][i])) << "collective " << i;
    EXPECT_TRUE(at::equal(shm[r][5], shm[0][5]));
    // Integers, broadcast and allgather: bitwise equal to TCP; floats: the same sums.
    EXPECT_TRUE(at::equal(shm[r][1], tcp[r][1]));
    EXPECT_TRUE(at::equal(shm[r][4], tcp[r][4]));
    EXPECT_TRUE(at::equal(shm[r][5], tcp[r][5]));
    EXPECT_TRUE(at::allclose(shm[r][0], tcp[r][0], 1e-5, 1e-5));
    EXPECT_TRUE(at::allclose(shm[r][2], at::full({7}, (n - 1) / 2.0, at::kDouble)));
    EXPECT_EQ(shm[r][3].item<float>(), n * (n + 1) / 2.0f);
    EXPECT_TRUE(at::allclose(shm[r][6], tcp[r][6], 1e-5, 1e-5));
  }
}

TEST(SharedMemory, MatchesTcpOnOneHostWith2And3And4Ranks) {
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    expect_paths_agree(n, {});
  }
}

TEST(SharedMemory, HierarchicalOverTwoHostsMatchesTcp) {
  expect_paths_agree(4, {"host-a", "host-a", "host-b", "host-b"});
  // Ranks not numbered host by host: allgather must still put each block at its rank.
  expect_paths_agree(4, {"host-a", "host-b", "host-a", "host-b"});
}

TEST(SharedMemory, EachGroupSaysWhichRouteItTakesAndWhy) {
  using Route = GroupDescription::Route;
  std::vector<GroupDescription> seen(4);
  auto describe = [&](int n, bool shm, std::vector<std::string> hosts) {
    on_ranks(n, shm, std::move(hosts), [&](ProcessGroup& g) { seen[g.rank()] = g.description(); });
    return seen[0];
  };
  GroupDescription d = describe(2, true, {});
  EXPECT_EQ(d.route("allreduce"), Route::kSharedMemory);
  EXPECT_EQ(d.route("broadcast"), Route::kSharedMemory);
  EXPECT_EQ(d.route("gather"), Route::kGloo);  // the same-host path carries five collectives only
  EXPECT_EQ(d.route("send"), Route::kGloo);
  EXPECT_EQ(d.hosts, 1);
  EXPECT_NE(d.reason.find("all 2 ranks on host "), std::string::npos) << d.reason;
  EXPECT_NE(d.describe().find("shared memory: all 2 ranks on host "), std::string::npos) << d.describe();
  d = describe(2, false, {});
  EXPECT_EQ(d.route("allreduce"), Route::kGloo);
  EXPECT_EQ(d.reason, "shared memory is off (RINGTORCH_SHM=0)");
  EXPECT_NE(d.describe().find("Gloo over TCP: shared memory is off"), std::string::npos) << d.describe();
  d = describe(2, true, {"a", "b"});
  EXPECT_EQ(d.route("allreduce"), Route::kGloo);
  EXPECT_EQ(d.hosts, 2);
  EXPECT_EQ(d.reason, "no two ranks share a host (2 hosts)");
  d = describe(3, true, {"a", "a", "b"});
  EXPECT_EQ(d.route("barrier"), Route::kGloo);
  EXPECT_NE(d.reason.find("different numbers of ranks"), std::string::npos) << d.reason;
  d = describe(4, true, {"a", "a", "b", "b"});
  EXPECT_EQ(d.route("allreduce"), Route::kHierarchical);
  EXPECT_EQ(d.route("reduce"), Route::kGloo);
  EXPECT_EQ(d.reason, "2 hosts x 2 ranks");
  EXPECT_NE(d.describe().find("hierarchical: 2 hosts x 2 ranks"), std::string::npos) << d.describe();
  for (int r = 1; r < 4; ++r) EXPECT_EQ(seen[r].routes, d.routes) << "rank " << r;
  EXPECT_THROW(d.route("allreduce_coalesced"), InvalidArgumentError);
}

// The ranks that arrive first at an all-reduce wait long enough to fall asleep on the futex;
// every rank still gets ((x0 + x1) + x2) bit for bit. Each round another rank comes late to
// every call; the large call spans five 4 MiB pieces.
TEST(SharedMemory, ARankThatArrivesWhileTheOthersSleepGetsTheSameBits) {
  const int n = 3;
  const std::vector<int64_t> sizes = {1, 1000, 5'000'003};
  std::vector<std::vector<at::Tensor>> inputs(n), outputs(n);  // outputs[r]: per round, per size
  for (int r = 0; r < n; ++r) {
    auto generator = at::detail::createCPUGenerator(200 + r);
    for (int64_t size : sizes) inputs[r].push_back(at::randn({size}, generator));
  }
  on_ranks(n, true, {}, [&](ProcessGroup& g) {
    const int r = g.rank();
    for (int round = 0; round < 2 * n; ++round) {
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (round % n == r) std::this_thread::sleep_for(milliseconds(30));  // the others fall asleep
        at::Tensor t = inputs[r][i].clone();
        g.allreduce(t);
        outputs[r].push_back(t);
      }
    }
  });
  for (size_t i = 0; i < sizes.size(); ++i) {
    const at::Tensor expected = (inputs[0][i] + inputs[1][i]) + inputs[2][i];
    for (int r = 0; r < n; ++r) {
      for (int round = 0; round < 2 * n; ++round) {
        EXPECT_TRUE(at::equal(outputs[r][round * sizes.size() + i], expected))
            << "rank " << r << ", round " << round << ", size " << sizes[i];
      }
    }
  }
}

TEST(SharedMemory, MismatchedCountsFailOnEveryRankInsteadOfHanging) {
  std::vector<std::string> errors(2);
  std::vector<FailureSite> sites(2);
  on_ranks(2, true, {}, [&](ProcessGroup& g) {
    try {
      g.allreduce(at::ones({g.rank() == 0 ? 10 : 11}));
    } catch (const MismatchError& e) {
      errors[g.rank()] = e.what();
      sites[g.rank()] = e.site();
    }
  });
  EXPECT_NE(
      errors[0].find("[rank 0/2] allreduce #0 (group default, 40 B float32 sum, shared memory): shared memory: "
                     "this rank called allreduce of 10 float32 sum (call #1 on this host's segment); rank 1 called "
                     "allreduce of 11 float32 sum (call #1)"),
      std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("rank 0 called allreduce of 10 float32 sum"), std::string::npos) << errors[1];
  // The same facts as fields, for programs that react without reading the text.
  EXPECT_EQ(sites[0].rank, 0);
  EXPECT_EQ(sites[0].peer, 1);
  EXPECT_EQ(sites[1].peer, 0);
  EXPECT_EQ(sites[0].operation, "[rank 0/2] allreduce #0 (group default, 40 B float32 sum, shared memory)");
}

TEST(SharedMemory, ARankThatNeverArrivesTimesOutNamingIt) {
  std::string error;
  FailureSite site;
  on_ranks(3, true, {}, [&](ProcessGroup& g) {
    if (g.rank() == 2) return;  // never calls; its group stays alive until the others finish
    try {
      g.allreduce(at::ones({100}), ReduceOp::kSum, milliseconds(300));
    } catch (const TimeoutError& e) {
      if (g.rank() == 0) {
        error = e.what();
        site = e.site();
      }
    }
  });
  EXPECT_NE(error.find("shared memory (same host): timed out after 300 ms waiting for peer rank 2"), std::string::npos)
      << error;
  EXPECT_EQ(site.rank, 0);
  EXPECT_EQ(site.peer, 2);
  EXPECT_NE(site.operation.find("allreduce #0"), std::string::npos) << site.operation;
}

// Between hosts the failure comes from a cross-host subgroup, whose ranks are not the group's:
// the error names the peer in both numberings, and the site holds the group's rank.
TEST(SharedMemory, ACrossHostFailureNamesThePeersRankInTheGroup) {
  std::vector<std::string> errors(4);
  std::vector<FailureSite> sites(4);
  on_ranks(4, true, {"host-a", "host-a", "host-b", "host-b"}, [&](ProcessGroup& g) {
    if (g.rank() == 3) return;  // never calls (a timeout, or a lost peer once its thread has left)
    try {
      g.allreduce(at::ones({100}), ReduceOp::kSum, milliseconds(500));
    } catch (const Error& e) {
      errors[g.rank()] = e.what();
      sites[g.rank()] = e.site();
    }
  });
  // Rank 1 meets rank 3 in the cross-host subgroup of local index 1, where rank 3 is rank 1.
  EXPECT_NE(errors[1].find("(its peer rank 1 of group default.hosts1 is rank 3 of group default)"), std::string::npos)
      << errors[1];
  EXPECT_EQ(sites[1].rank, 1);
  EXPECT_EQ(sites[1].peer, 3);
}

bool any_segment_named(const std::string& part) {
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    if (entry.path().filename().string().find(part) != std::string::npos) return true;
  }
  return false;
}

TEST(SharedMemory, NoSegmentIsLeftInDevShmAndLeftoversDoNotDisturb) {
  // What a run killed at the worst moment could leave: a segment of this group's name prefix,
  // full of garbage. The next group picks a fresh name and works.
  const std::string leftover = "/dev/shm/ringtorch-group-default-0-123";
  std::FILE* f = std::fopen(leftover.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("garbage from a killed run", f);
  std::fclose(f);
  std::vector<float> sums(2);
  on_ranks(2, true, {}, [&](ProcessGroup& g) {
    at::Tensor t = at::full({3}, g.rank() + 1.0f);
    g.allreduce(t);
    sums[g.rank()] = t[0].item<float>();
    EXPECT_EQ(g.description().route("allreduce"), GroupDescription::Route::kSharedMemory) << g.description().describe();
  });
  EXPECT_EQ(sums, (std::vector<float>{3, 3}));
  std::filesystem::remove(leftover);
  EXPECT_FALSE(any_segment_named("ringtorch-group-default"));
}

// A rank that dies during set-up (here: never joins the shared-memory step) must not leave
// the segment behind: the leader unlinks it when waiting fails.
TEST(SharedMemory, AFailedSetUpLeavesNoSegment) {
  auto store = c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(500));
  // Rank 1 says it is on the same host and then vanishes before attaching.
  store->set("shm/host/1", std::vector<uint8_t>{'h'});
  EXPECT_THROW(plan_hosts(*store, 0, 2, "setup-test", true, "h"), TimeoutError);
  EXPECT_FALSE(any_segment_named("ringtorch-setup-test"));
}

}  // namespace
}  // namespace ringtorch
