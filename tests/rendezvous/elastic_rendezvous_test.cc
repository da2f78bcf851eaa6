// The elastic rendezvous (Note [Elastic generations]): agents as threads over one in-memory
// HashStore, with heartbeat and last-call times of tens of milliseconds. The launcher's use of
// it, with real processes and kills, is tests/apps/elastic_test.sh.
#include "rendezvous/elastic_rendezvous.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <ringtorch/error.h>

#include "rendezvous/deadline_store.h"

namespace ringtorch {
namespace {

using std::chrono::milliseconds;

c10::intrusive_ptr<c10d::Store> memory_store() {
  return c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(5000));
}

ElasticSettings fast(int min_nodes, int max_nodes) {
  ElasticSettings s;
  s.min_nodes = min_nodes;
  s.max_nodes = max_nodes;
  s.join_timeout = milliseconds(5000);
  s.last_call_timeout = milliseconds(100);
  s.keep_alive_interval = milliseconds(20);
  s.keep_alive_max_attempt = 3;
  return s;
}

struct Agent {
  Agent(const c10::intrusive_ptr<c10d::Store>& store, const std::string& id, int hint, ElasticSettings settings)
      : rendezvous(store, ElasticNode{id, hint, 2, "host-" + id}, settings, [this](const std::string& m) {
          std::lock_guard<std::mutex> lock(mu);
          log += m + "\n";
        }) {}
  ElasticGeneration join() {
    return rendezvous.join([] {});
  }
  ElasticRendezvous rendezvous;
  std::mutex mu;
  std::string log;
};

TEST(ElasticRendezvous, ClosesAtTheMaximumAndRanksFollowTheNodeRankGiven) {
  auto store = memory_store();
  Agent a(store, "a", 1, fast(1, 2)), b(store, "b", 0, fast(1, 2));
  auto ra = std::async(std::launch::async, [&] { return a.join(); });
  auto rb = std::async(std::launch::async, [&] { return b.join(); });
  const ElasticGeneration round_a = ra.get(), round_b = rb.get();
  EXPECT_EQ(round_a.generation, 0);
  EXPECT_EQ(round_a.node_rank, 1) << "--node_rank 1 sorts after --node_rank 0";
  EXPECT_EQ(round_b.node_rank, 0);
  EXPECT_EQ(round_a.world_size(), 4);
  EXPECT_EQ(round_a.first_rank(), 2);
  EXPECT_EQ(round_a.restart_count, 0);
}

TEST(ElasticRendezvous, ALateNodeWaitsForAdmissionAndLearnsWhenTheJobFinished) {
  auto store = memory_store();
  Agent a(store, "a", 0, fast(2, 2)), b(store, "b", 1, fast(2, 2)), late(store, "late", 2, fast(2, 2));
  auto ra = std::async(std::launch::async, [&] { return a.join(); });
  auto rb = std::async(std::launch::async, [&] { return b.join(); });
  ra.get();
  rb.get();
  auto waiting = std::async(std::launch::async, [&] { return late.join(); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (a.rendezvous.nodes_waiting() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(a.rendezvous.nodes_waiting(), 1) << "counted once its heartbeat moved";
  a.rendezvous.end_generation(GenerationEndKind::kFinished, "");
  try {
    waiting.get();
    FAIL() << "admitted to a finished job";
  } catch (const RendezvousClosed& e) {
    EXPECT_EQ(e.end().kind, GenerationEndKind::kFinished);
    EXPECT_NE(std::string(e.what()).find("the job finished in generation 0 while this node waited"), std::string::npos)
        << e.what();
  }
  EXPECT_NE(late.log.find("generation 0 is running"), std::string::npos) << late.log;
}

TEST(ElasticRendezvous, ASilentMemberIsDeadAndTheSurvivorGoesOnAloneAfterTheLastCall) {
  auto store = memory_store();
  Agent a(store, "a", 0, fast(1, 2)), b(store, "b", 1, fast(1, 2));
  auto ra = std::async(std::launch::async, [&] { return a.join(); });
  auto rb = std::async(std::launch::async, [&] { return b.join(); });
  ra.get();
  rb.get();
  // b stops beating (its agent "died"); a keeps its own heartbeat and watches.
  std::vector<ElasticNode> silent;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (silent.empty() && std::chrono::steady_clock::now() < deadline) {
    a.rendezvous.heartbeat();
    silent = a.rendezvous.silent_members();
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_EQ(silent.size(), 1u);
  EXPECT_EQ(silent[0].id, "b");
  EXPECT_EQ(a.rendezvous.end_generation(GenerationEndKind::kFailure, "b is silent").kind, GenerationEndKind::kFailure);
  // A second end does not replace the first.
  EXPECT_EQ(b.rendezvous.end_generation(GenerationEndKind::kAdmission, "late").reason, "b is silent");
  const ElasticGeneration next = a.join();
  EXPECT_EQ(next.generation, 1);
  EXPECT_EQ(next.nodes.size(), 1u);
  EXPECT_EQ(next.restart_count, 1) << "a failure end counts as a restart";
}

TEST(ElasticRendezvous, TooFewNodesPastTheJoinTimeoutNamesTheMissingOne) {
  auto store = memory_store();
  ElasticSettings settings = fast(2, 2);
  Agent a(store, "a", 0, settings), b(store, "b", 1, settings);
  auto ra = std::async(std::launch::async, [&] { return a.join(); });
  auto rb = std::async(std::launch::async, [&] { return b.join(); });
  ra.get();
  rb.get();
  a.rendezvous.end_generation(GenerationEndKind::kFailure, "b died");
  settings.join_timeout = milliseconds(200);
  Agent survivor(store, "a2", 0, settings);
  try {
    survivor.join();
    FAIL() << "a generation closed with one node of two";
  } catch (const TimeoutError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rendezvous generation 1: 1 node (node 'a2' (--node_rank 0)) of the 2 needed"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("missing since generation 0: node 'a' (--node_rank 0), node 'b' (--node_rank 1)"),
              std::string::npos)
        << what;
  }
}

TEST(ElasticRendezvous, ARunIdReusedAfterAFinishedJobStartsAFreshJob) {
  auto store = memory_store();
  {
    Agent a(store, "a", 0, fast(1, 1));
    a.join();
    a.rendezvous.end_generation(GenerationEndKind::kFailure, "crash");
    EXPECT_EQ(a.join().restart_count, 1);
    a.rendezvous.end_generation(GenerationEndKind::kFinished, "");
  }
  Agent again(store, "again", 0, fast(1, 1));
  const ElasticGeneration round = again.join();
  EXPECT_EQ(round.generation, 3) << "generation 2 is passed over";
  EXPECT_EQ(round.restart_count, 0) << "the earlier job's restarts are not this job's";
}

// A node that waited to join a job and was killed leaves its registration in the next
// generation; a new job under the same run id must not take it for a member.
TEST(ElasticRendezvous, ANodeThatWaitedForAnEndedJobIsNotTakenIntoTheNextOne) {
  auto store = memory_store();
  Agent a(store, "a", 0, fast(2, 2)), b(store, "b", 1, fast(2, 2));
  auto ra = std::async(std::launch::async, [&] { return a.join(); });
  auto rb = std::async(std::launch::async, [&] { return b.join(); });
  ra.get();
  rb.get();
  // The ghost: registered for generation 1 by hand, as a killed waiter leaves it.
  const int64_t ticket = store->add("g1/joined", 1) - 1;
  ElasticNode ghost{"ghost", 0, 2, "gone"};
  const std::string encoded = ghost.encode();
  store->set("g1/node/" + std::to_string(ticket), std::vector<uint8_t>(encoded.begin(), encoded.end()));
  EXPECT_EQ(a.rendezvous.nodes_waiting(), 0) << "a registration whose heartbeat never moves is not a waiting node";
  a.rendezvous.end_generation(GenerationEndKind::kFinished, "");
  Agent c(store, "c", 0, fast(2, 2)), d(store, "d", 1, fast(2, 2));
  auto rc = std::async(std::launch::async, [&] { return c.join(); });
  auto rd = std::async(std::launch::async, [&] { return d.join(); });
  const ElasticGeneration round = rc.get();
  rd.get();
  EXPECT_EQ(round.generation, 2);
  ASSERT_EQ(round.nodes.size(), 2u);
  EXPECT_EQ(round.nodes[0].id, "c");
  EXPECT_EQ(round.nodes[1].id, "d");
}

TEST(ElasticSettings, ParsesTorchrunsKeysAndRefusesOthers) {
  ElasticSettings s;
  parse_rdzv_conf("join_timeout=20,last_call_timeout=0.5,keep_alive_max_attempt=5", &s);
  EXPECT_EQ(s.join_timeout, milliseconds(20000));
  EXPECT_EQ(s.last_call_timeout, milliseconds(500));
  EXPECT_EQ(s.heartbeat_timeout(), milliseconds(25000));
  EXPECT_THROW(parse_rdzv_conf("read_timeout=5", &s), InvalidArgumentError);
  EXPECT_THROW(parse_rdzv_conf("join_timeout=-1", &s), InvalidArgumentError);
}

}  // namespace
}  // namespace ringtorch
