// ringtorch::spawn() end to end: tests/launch/spawn_program.cc runs one scenario per process
// (its children re-run its main()); these tests check its output, exit status and children.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <sstream>
#include <thread>

#include "base/openblas.h"
#include "runtime/launch/subprocess.h"
#include "support/capture.h"
#include "support/test_paths.h"

namespace ringtorch {
namespace {

using std::chrono::milliseconds;
using testing::build_path;
using testing::Captured;
using testing::process_alive;
using testing::read_file;
using testing::TempDir;

Subprocess start(const std::vector<std::string>& args) {
  SubprocessOptions options;
  options.argv = {build_path("tests/spawn_program")};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  // Under ringrun or torchrun the test's own variables must not leak into the scenario.
  for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "RINGTORCH_RUN_ID", "RINGTORCH_RDZV_ENDPOINT"}) {
    options.env[v] = "";
  }
  options.env["RINGTORCH_LOG_LEVEL"] = "info";  // the lines some scenarios check, whatever the test's level
  return Subprocess::spawn(options);
}

Captured run(const std::vector<std::string>& args) {
  Subprocess p = start(args);
  return testing::finish(p);
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

// The PIDs a scenario wrote to `path`, once it has (up to 60 s).
std::vector<int> wait_for_pids(const std::string& path, size_t expected) {
  for (int i = 0; i < 6000; ++i) {
    std::istringstream in(read_file(path));
    std::vector<int> pids;
    for (int pid; in >> pid;) pids.push_back(pid);
    if (pids.size() == expected) return pids;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return {};
}

// True once none of `pids` is alive (zombies count as gone), waiting up to 10 s.
bool all_gone(const std::vector<int>& pids) {
  for (int i = 0; i < 1000; ++i) {
    bool any = false;
    for (int pid : pids) any = any || process_alive(pid);
    if (!any) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

TEST(Spawn, OneTwoAndFourRanksAllReduceAndReturn) {
  for (int n : {1, 2, 4}) {
    const Captured r = run({"allreduce", std::to_string(n)});
    ASSERT_EQ(r.status.code, 0) << r.out << r.err;
    const std::string sum = std::to_string(n * (n + 1) / 2);
    for (int rank = 0; rank < n; ++rank) {
      EXPECT_NE(r.out.find("[rank " + std::to_string(rank) + "]: rank " + std::to_string(rank) + " of " +
                           std::to_string(n) + ": allreduce sum " + sum + "\n"),
                std::string::npos)
          << r.out;
    }
    std::string codes;
    for (int rank = 0; rank < n; ++rank) codes += " exit code 0";
    EXPECT_NE(r.out.find("parent: " + std::to_string(n) + " ranks joined:" + codes), std::string::npos) << r.out;
  }
}

TEST(Spawn, AChildThatThrowsNamesItsRankAndMessageAndTheOthersAreStopped) {
  const Captured r = run({"throw"});
  EXPECT_EQ(r.status.code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("caught: rank 1, exit code 1, kind invalid argument: spawned rank 1 of 2 (pid "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(") raised InvalidArgumentError: rank 1 gives up on purpose; the other ranks were stopped"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("child message: InvalidArgumentError: rank 1 gives up on purpose"), std::string::npos) << r.out;
}

TEST(Spawn, AChildThatAbortsIsNamedWithItsSignal) {
  const Captured r = run({"abort"});
  EXPECT_EQ(r.status.code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("caught: rank 0, signal 6 (SIGABRT), kind peer lost: spawned rank 0 of 2 (pid "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(") was killed by signal 6 (SIGABRT); the other ranks were stopped"), std::string::npos) << r.out;
}

TEST(Spawn, AHungChildIsKilledWhenAnotherFailsAndNoneRemains) {
  TempDir dir;
  Subprocess parent = start({"hang", dir.file("pids")});
  const std::vector<int> pids = wait_for_pids(dir.file("pids"), 3);
  const Captured r = testing::finish(parent);
  ASSERT_EQ(pids.size(), 3u) << r.out << r.err;
  EXPECT_EQ(r.status.code, 3) << r.out << r.err;
  EXPECT_NE(
      r.out.find("caught: rank 1, exit code 7, kind peer lost: spawned rank 1 of 3 (pid " + std::to_string(pids[1]) +
                 ") ended with exit code 7; the other ranks were stopped (SIGTERM, then SIGKILL after 500 ms)"),
      std::string::npos)
      << r.out;
  // Rank 0 stopped by SIGTERM; rank 2, which ignores it, by SIGKILL after term_timeout.
  EXPECT_NE(r.out.find("parent: ranks ended with [signal 15 (SIGTERM)] [exit code 7] [signal 9 (SIGKILL)]"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(all_gone(pids));
}

// Rank 1 then raises PeerLostError in its all-reduce; the rank that died is the one named.
TEST(Spawn, TheRankThatDiedIsNamedNotThePeerThatLostIt) {
  const Captured r = run({"abort_in_allreduce"});
  EXPECT_EQ(r.status.code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("caught: rank 0, signal 6 (SIGABRT), kind peer lost: spawned rank 0 of 2 (pid "),
            std::string::npos)
      << r.out << r.err;
}

TEST(Spawn, KillingTheParentLeavesNoChildBehind) {
  TempDir dir;
  Subprocess parent = start({"orphans", dir.file("pids")});
  const std::vector<int> pids = wait_for_pids(dir.file("pids"), 2);
  ASSERT_EQ(pids.size(), 2u);
  for (int pid : pids) EXPECT_TRUE(process_alive(pid));
  parent.signal(SIGKILL);
  testing::finish(parent);
  EXPECT_TRUE(all_gone(pids));
}

TEST(Spawn, SigintReachesEveryChildAndThenEndsTheParent) {
  TempDir dir;
  Subprocess parent = start({"interrupt", dir.file("pids")});
  const std::vector<int> pids = wait_for_pids(dir.file("pids"), 2);
  ASSERT_EQ(pids.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {  // their handlers are in place
    ASSERT_TRUE(testing::wait_for_file(dir.file("pids.signal" + std::to_string(rank) + ".ready")));
  }
  ::kill(parent.pid(), SIGINT);  // the parent alone, as a terminal's Ctrl-C reaches its foreground process
  const Captured r = testing::finish(parent);
  EXPECT_TRUE(r.status.signaled && r.status.signal == SIGINT) << r.status.describe() << r.out << r.err;
  EXPECT_TRUE(all_gone(pids));
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(read_file(dir.file("pids.signal" + std::to_string(rank))), "SIGINT\n") << "rank " << rank;
  }
}

TEST(Spawn, JoinWithATimeoutReturnsFalseThenTrue) {
  const Captured r = run({"join_timeout"});
  EXPECT_EQ(r.status.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("parent: join(50 ms) false, join() true, exit codes 0 0"), std::string::npos) << r.out;
}

TEST(Spawn, AChildThatNeverReachesItsCallIsAnError) {
  const Captured r = run({"not_reached"});
  EXPECT_EQ(r.status.code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find(") ended (exit code 0) without reaching spawn() call #1"), std::string::npos) << r.out;
}

TEST(Spawn, AChildThatReachesAnotherCallSaysSo) {
  const Captured r = run({"site_mismatch"});
  EXPECT_EQ(r.status.code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("spawn() call #1 is at "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not where the parent's call #1 was"), std::string::npos) << r.out;
}

TEST(Spawn, SpawnInsideFnIsRefused) {
  const Captured r = run({"nested"});
  EXPECT_EQ(r.status.code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("raised InvalidArgumentError: spawn() inside a spawned rank's fn is not supported"),
            std::string::npos)
      << r.out;
}

// The children of the second call re-run main(): they skip the first call and print "between
// the calls" themselves (as a Python module's top level runs again under 'spawn').
TEST(Spawn, ChildrenOfASecondCallSkipTheFirst) {
  const Captured r = run({"two_calls"});
  EXPECT_EQ(r.status.code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, "first call, rank "), 2) << r.out;
  EXPECT_EQ(count(r.out, "second call, rank "), 2) << r.out;
  EXPECT_EQ(count(r.out, "\nbetween the calls\n") + (r.out.rfind("between the calls\n", 0) == 0 ? 1 : 0), 1) << r.out;
  EXPECT_EQ(count(r.out, "]: between the calls\n"), 2) << r.out;
}

// As ringrun (openblas_test.cc): a rank runs the OpenBLAS kernels its parent's OpenBLAS should
// have picked on this CPU, which are those it did pick on a CPU it knows.
TEST(Spawn, ARankRunsTheOpenBlasKernelsTheCpuHas) {
  const OpenBlasKernels own = openblas_kernels();
  if (own.loaded.empty()) GTEST_SKIP() << "the loaded BLAS is not OpenBLAS";
  if (std::getenv("OPENBLAS_CORETYPE")) GTEST_SKIP() << "OPENBLAS_CORETYPE is set for this test";
  const Captured r = run({"openblas_kernels"});
  EXPECT_EQ(r.status.code, 0) << r.out << r.err;
  const std::string expected = own.better.empty() ? "OPENBLAS_CORETYPE=[(unset)], runs [" + own.loaded + "]"
                                                  : "OPENBLAS_CORETYPE=[" + own.better + "], runs [" + own.better + "]";
  EXPECT_NE(r.out.find("rank 0: " + expected), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("spawn(): OpenBLAS picked its ") != std::string::npos, !own.better.empty()) << r.err;
}

TEST(Spawn, WorksAfterTheParentUsedLibTorchsThreadPool) {
  const Captured r = run({"after_thread_pool"});
  EXPECT_EQ(r.status.code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, ": matmul on 2 intra-op threads: ok"), 2) << r.out;
  EXPECT_EQ(count(r.out, ": allreduce sum 3"), 2) << r.out;
  EXPECT_NE(r.out.find("parent: matmul before spawn ok, children joined"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ringtorch
