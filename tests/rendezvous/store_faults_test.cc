// Every store operation the runtime and the launcher's rendezvous make, made to fail in turn
// (tests/support/failing_store.h): the first, a middle and the last call of each operation a
// clean run makes. Three scenarios with two members as threads over one in-memory store, as
// in production behind a DeadlineStore: a process group's life (creation, an all-reduce, a
// barrier, destruction), join rounds and barriers (join.h), and two ringrun agents' elastic
// rendezvous (join, heartbeat, end of the generation). Whatever fails must reach the caller of
// the failing member as a ringtorch::Error, and the cause must be named by some member; no
// member may hang (each scenario is bounded), crash or end the process with an uncaught
// exception; a scenario whose failure was absorbed must still give the right result.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <vector>

#include <ringtorch/error.h>
#include <ringtorch/join.h>
#include <ringtorch/process_group.h>

#include "rendezvous/deadline_store.h"
#include "rendezvous/elastic_rendezvous.h"
#include "support/failing_store.h"

namespace ringtorch {
namespace {

using std::chrono::milliseconds;
using testing::FailingStore;

constexpr milliseconds kTimeout(1500);
constexpr auto kScenarioBound = std::chrono::seconds(60);  // far beyond every timeout inside

// One member's part of a scenario: throws what it met; returns normally when it finished.
using Member = std::function<void(const c10::intrusive_ptr<c10d::Store>& store, int member)>;

struct Run {
  std::vector<std::string> errors;  // per member: "" when it finished
  int calls[FailingStore::kOps] = {};
  bool injected = false;
};

// Runs `member` for members 0 and 1 over one store that fails call `nth` of `op`.
Run run_scenario(const Member& member, int op, int nth) {
  auto failing = c10::make_intrusive<FailingStore>(c10::make_intrusive<c10d::HashStore>(), op, nth);
  auto store = c10::make_intrusive<DeadlineStore>(failing, "memory", kTimeout);
  Run run;
  run.errors.resize(2);
  auto all = std::async(std::launch::async, [&] {
    std::vector<std::thread> threads;
    for (int m = 0; m < 2; ++m) {
      threads.emplace_back([&, m] {
        try {
          member(store, m);
        } catch (const Error& e) {
          run.errors[m] = e.what();
          if (run.errors[m].empty()) run.errors[m] = "(an error without a message)";
        } catch (const std::exception& e) {
          run.errors[m] = std::string("NOT A RINGTORCH ERROR: ") + e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
  });
  if (all.wait_for(kScenarioBound) != std::future_status::ready) {
    std::fprintf(stderr, "store_faults_test: a scenario with %s #%d failing did not end within 60 s\n",
                 FailingStore::name(op), nth);
    std::_Exit(1);  // a hang: the threads cannot be joined
  }
  all.get();
  for (int o = 0; o < FailingStore::kOps; ++o) run.calls[o] = failing->calls(o);
  run.injected = failing->failed();
  return run;
}

// Makes each operation the clean run made fail at its first, middle and last call.
void fail_each_operation(const Member& member) {
  const Run clean = run_scenario(member, FailingStore::kOps, 0);
  ASSERT_EQ(clean.errors, std::vector<std::string>(2)) << "the scenario fails without a fault";
  int faults = 0;
  for (int op = 0; op < FailingStore::kOps; ++op) {
    const int n = clean.calls[op];
    if (n == 0) continue;
    for (int nth : std::set<int>{0, n / 2, n - 1}) {
      SCOPED_TRACE(std::string(FailingStore::name(op)) + " #" + std::to_string(nth) + " of " + std::to_string(n));
      const Run run = run_scenario(member, op, nth);
      for (const std::string& e : run.errors) {
        EXPECT_EQ(e.find("NOT A RINGTORCH ERROR"), std::string::npos) << e;
      }
      const bool someone_failed = !run.errors[0].empty() || !run.errors[1].empty();
      // One line per run, what each member met (for the log: the messages are the point).
      std::printf("store_faults: %s #%d of %d:", FailingStore::name(op), nth, n);
      for (int m = 0; m < 2; ++m) {
        std::printf(" [%d] %s", m, run.errors[m].empty() ? "finished" : run.errors[m].substr(0, 160).c_str());
      }
      std::printf("\n");
      if (run.injected && someone_failed) {
        ++faults;
        EXPECT_TRUE(run.errors[0].find("injected store failure") != std::string::npos ||
                    run.errors[1].find("injected store failure") != std::string::npos)
            << "the cause is lost: " << run.errors[0] << " | " << run.errors[1];
      }
    }
  }
  EXPECT_GT(faults, 0) << "no injected failure reached a member";
}

TEST(StoreFaults, AProcessGroupsLifeSurvivesEachStoreOperationFailing) {
  fail_each_operation([](const c10::intrusive_ptr<c10d::Store>& store, int rank) {
    ProcessGroupOptions options;
    options.timeout = kTimeout;
    auto group = ProcessGroup::create(store, rank, 2, "127.0.0.1", options);
    at::Tensor t = at::ones({1024});
    group->allreduce(t, ReduceOp::kSum);
    if (t[0].item<float>() != 2.0f) throw std::logic_error("the all-reduce gave a wrong sum");
    group->barrier();
  });
}

TEST(StoreFaults, JoinRoundsAndBarriersSurviveEachStoreOperationFailing) {
  fail_each_operation([](const c10::intrusive_ptr<c10d::Store>& store, int member) {
    MemberContext who{member, 2, "rank", "store_faults_test"};
    join_round(*store, who, kTimeout);
    store_barrier(*store, "middle", who, kTimeout);
    leave_barrier(*store, "end", who, kTimeout);
  });
}

TEST(StoreFaults, TheElasticRendezvousSurvivesEachStoreOperationFailing) {
  fail_each_operation([](const c10::intrusive_ptr<c10d::Store>& store, int member) {
    ElasticSettings settings;
    settings.min_nodes = settings.max_nodes = 2;
    settings.join_timeout = kTimeout;
    settings.last_call_timeout = milliseconds(50);
    settings.keep_alive_interval = milliseconds(20);
    const std::string id = member == 0 ? "a" : "b";
    ElasticRendezvous agent(store, ElasticNode{id, member, 1, "host-" + id}, settings, [](const std::string&) {});
    const ElasticGeneration generation = agent.join([] {});
    if (generation.world_size() != 2) throw std::logic_error("the generation has the wrong size");
    agent.heartbeat();
    agent.silent_members();
    agent.nodes_waiting();
    agent.end_generation(GenerationEndKind::kFinished, "done");
    if (!agent.this_generation_end()) throw std::logic_error("the generation's end was not recorded");
  });
}

}  // namespace
}  // namespace ringtorch
