// The process group in separate processes (apps/ringbench): every store kind, world sizes 2..4,
// and a peer that is killed (SIGKILL) or stopped (SIGSTOP) in the middle of large all-reduces,
// with the flight recorders' files that say so; and SIGUSR1 dumps of a running job.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <map>
#include <thread>

#include "runtime/launch/subprocess.h"
#include "runtime/trace/flight_analysis.h"
#include "support/capture.h"
#include "support/redis_server.h"
#include "support/test_paths.h"

namespace ringtorch {
namespace {

using std::chrono::milliseconds;
using testing::build_path;
using testing::Captured;
using testing::TempDir;

Subprocess start_rank(int rank, int world, const std::vector<std::string>& args,
                      std::map<std::string, std::string> env = {}) {
  SubprocessOptions spawn;
  spawn.argv = {build_path("apps/ringbench")};
  spawn.argv.insert(spawn.argv.end(), args.begin(), args.end());
  spawn.env = std::move(env);
  spawn.env["RANK"] = std::to_string(rank);
  spawn.env["WORLD_SIZE"] = std::to_string(world);
  for (const char* v :
       {"TORCHELASTIC_USE_AGENT_STORE", "RINGTORCH_RDZV_ENDPOINT", "RINGTORCH_TIMEOUT", "RINGTORCH_RUN_ID"}) {
    spawn.env.emplace(v, "");
  }
  return Subprocess::spawn(spawn);
}

std::vector<Captured> run_world(int world, const std::vector<std::string>& args,
                                const std::map<std::string, std::string>& env = {}) {
  std::vector<Subprocess> procs;
  for (int r = 0; r < world; ++r) procs.push_back(start_rank(r, world, args, env));
  std::vector<Captured> results(world);
  std::vector<std::thread> readers;
  for (int r = 0; r < world; ++r) readers.emplace_back([&, r] { results[r] = testing::finish(procs[r]); });
  for (auto& t : readers) t.join();
  return results;
}

void expect_checked_and_correct(const std::vector<Captured>& results, const std::string& what) {
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_TRUE(results[r].status.success()) << what << " rank " << r << ": " << results[r].err;
  }
  // Rank 0 prints the rows; the last column is the number of wrong elements.
  EXPECT_NE(results[0].out.find("allreduce"), std::string::npos) << results[0].out;
  EXPECT_EQ(results[0].out.find("N/A"), std::string::npos) << "rows were not checked:\n" << results[0].out;
}

const std::vector<std::string> kSweep = {"--check",  "--min-bytes", "4",       "--max-bytes", "1M",
                                         "--factor", "64",          "--iters", "2",           "--warmup",
                                         "1",        "--timeout",   "60"};

TEST(ProcessGroupProcesses, EveryStoreKindAtWorldSizes2To4) {
  TempDir dir;
  std::string why;
  auto redis = testing::RedisServer::start("", &why);
  for (int world : {2, 3, 4}) {
    std::vector<std::pair<std::string, std::string>> methods = {
        {"tcp", "tcp://127.0.0.1:" + std::to_string(testing::free_port())},
        {"file", "file://" + dir.file("store" + std::to_string(world))},
    };
    if (redis) methods.push_back({"redis", redis->url("/" + std::to_string(world))});
    for (const auto& [name, url] : methods) {
      auto args = kSweep;
      args.insert(args.end(), {"--init-method", url});
      expect_checked_and_correct(run_world(world, args), name + " world " + std::to_string(world));
    }
  }
  if (!redis) GTEST_SKIP() << "redis part skipped: " << why;
}

// Starts 3 ranks running large all-reduces for a long time, waits until they are busy, then
// does `to_victim` to rank 1. The survivors must fail within their timeout (3 s), naming
// themselves, the operation and rank 1, with a non-zero exit; nobody may hang.
// Starts `world` ranks of ringbench running large all-reduces for a long time and returns once
// rank 0 reports a connected group (the processes are killed and the test fails otherwise).
std::vector<Subprocess> start_busy_ranks(int world, const std::string& flight_dir) {
  const std::string port = std::to_string(testing::free_port());
  std::map<std::string, std::string> env = {
      {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}, {"RINGTORCH_FLIGHT_RECORDER_DIR", flight_dir}};
  const std::vector<std::string> args = {"--min-bytes", "16M",      "--max-bytes", "16M",       "--iters",
                                         "100000",      "--warmup", "0",           "--timeout", "3"};
  std::vector<Subprocess> procs;
  for (int r = 0; r < world; ++r) procs.push_back(start_rank(r, world, args, env));
  // Rank 0 prints its header once the group is connected; then let a few all-reduces run.
  std::string header;
  const auto connect_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (header.find('\n') == std::string::npos && std::chrono::steady_clock::now() < connect_deadline) {
    pollfd p{procs[0].stdout_fd(), POLLIN, 0};
    char c;
    if (::poll(&p, 1, 100) == 1 && ::read(procs[0].stdout_fd(), &c, 1) == 1) header.push_back(c);
  }
  if (header.find("# ringbench") == std::string::npos) {
    for (auto& p : procs) p.signal(SIGKILL);
    ADD_FAILURE() << "rank 0 never reported a connected group: " << header;
    return {};
  }
  std::this_thread::sleep_for(milliseconds(500));
  return procs;
}

void expect_survivors_fail(int sig) {
  TempDir flight;
  std::vector<Subprocess> procs = start_busy_ranks(3, flight.path());
  if (procs.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  procs[1].signal(sig);
  int naming_the_victim = 0;
  for (int r : {0, 2}) {
    Captured result = testing::finish(procs[r]);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_LT(elapsed, std::chrono::seconds(30)) << "rank " << r << " took too long to notice (hang guard)";
    EXPECT_EQ(result.status.code, 1) << result.status.describe() << "\n" << result.err;
    EXPECT_NE(result.err.find("[rank " + std::to_string(r) + "/3] allreduce #"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("16.0 MiB float32"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("RINGTORCH_TIMEOUT"), std::string::npos) << result.err;
    const bool named_cause =
        result.err.find("timed out") != std::string::npos || result.err.find("lost a peer") != std::string::npos;
    EXPECT_TRUE(named_cause) << result.err;
    // A survivor may first see the other survivor, which failed and exited, close its
    // connection; it names that rank then, and says so.
    EXPECT_NE(result.err.find("peer rank "), std::string::npos) << "no peer named:\n" << result.err;
    if (result.err.find("peer rank 1 ") != std::string::npos) ++naming_the_victim;
  }
  EXPECT_GE(naming_the_victim, 1) << "neither survivor named rank 1";
  procs[1].signal(SIGKILL);  // the stopped one, too
  procs[1].wait();
  // The survivors' flight recorders: both failed in the same all-reduce, rank 1 wrote nothing.
  const FlightAnalysis analysis = analyze_flight_dumps(flight.path());
  ASSERT_FALSE(analysis.groups.empty());
  const auto& group = analysis.groups[0];
  ASSERT_EQ(group.ranks.size(), 3u);
  EXPECT_FALSE(group.ranks[1].dumped);
  EXPECT_EQ(group.ranks[1].state, "missing");
  for (int r : {0, 2}) {
    const auto& rank = group.ranks[static_cast<size_t>(r)];
    EXPECT_TRUE(rank.dumped) << "rank " << r;
    EXPECT_EQ(rank.state, "failed") << "rank " << r;
    EXPECT_EQ(rank.op, "allreduce");
    EXPECT_NE(rank.detail.find("16.0 MiB float32"), std::string::npos) << rank.detail;
    EXPECT_GE(rank.sequence, 0);
    EXPECT_EQ(rank.last_completed, rank.sequence - 1);
  }
  // Gloo ring all-reduces of one sequence: the survivors stopped within one operation of each other.
  EXPECT_LE(std::abs(group.ranks[0].sequence - group.ranks[2].sequence), 1);
  bool said = false;
  for (const auto& line : analysis.summary) said |= line.find("rank 1 wrote no file") != std::string::npos;
  EXPECT_TRUE(said) << analysis.to_text();
}

TEST(ProcessGroupProcesses, PeerKilledMidAllreduce) { expect_survivors_fail(SIGKILL); }

TEST(ProcessGroupProcesses, PeerStoppedMidAllreduce) { expect_survivors_fail(SIGSTOP); }

// SIGUSR1 makes a running rank write its flight recorder without stopping it.
TEST(ProcessGroupProcesses, SigusrOneDumpsARunningJob) {
  TempDir flight;
  std::vector<Subprocess> procs = start_busy_ranks(2, flight.path());
  if (procs.empty()) return;
  for (auto& p : procs) p.signal(SIGUSR1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((testing::read_file(flight.file("rank0.json")).empty() ||
          testing::read_file(flight.file("rank1.json")).empty()) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  for (auto& p : procs) EXPECT_FALSE(p.poll().has_value()) << "SIGUSR1 must not stop a rank";
  const FlightAnalysis analysis = analyze_flight_dumps(flight.path());
  for (auto& p : procs) p.signal(SIGKILL);
  for (auto& p : procs) p.wait();
  ASSERT_FALSE(analysis.groups.empty());
  for (const auto& rank : analysis.groups[0].ranks) {
    EXPECT_TRUE(rank.dumped) << "rank " << rank.rank;
    EXPECT_EQ(rank.reason, "SIGUSR1");
    EXPECT_TRUE(rank.state == "in_operation" || rank.state == "idle") << rank.state;
    EXPECT_GE(rank.last_completed, 0) << "ringbench had completed all-reduces before the signal";
  }
}

}  // namespace
}  // namespace ringtorch
