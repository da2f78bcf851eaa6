// Rendezvous of real processes (apps/ringhello) over every init method, at 1, 2, 4 and 8 ranks;
// a second job against the same directory and Redis; and bad input, which must give a clear
// error and a non-zero exit, never a hang.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <thread>

#include "runtime/launch/subprocess.h"
#include "support/capture.h"
#include "support/redis_server.h"
#include "support/test_paths.h"

namespace ringtorch {
namespace {

using testing::build_path;
using testing::free_port;
using testing::RedisServer;
using testing::TempDir;

using RankResult = testing::Captured;

// Starts one ringhello per entry of `envs` (each with its own extra variables and arguments)
// and collects their exit status and output. Output is small: reading after exit cannot block.
// `per_rank_args[i]`, when given, is appended for process i.
std::vector<RankResult> run_ranks(const std::vector<std::map<std::string, std::string>>& envs,
                                  const std::vector<std::string>& args,
                                  const std::vector<std::vector<std::string>>& per_rank_args = {}) {
  std::vector<Subprocess> procs;
  for (size_t i = 0; i < envs.size(); ++i) {
    const auto& env = envs[i];
    SubprocessOptions spawn;
    spawn.argv = {build_path("apps/ringhello")};
    spawn.argv.insert(spawn.argv.end(), args.begin(), args.end());
    if (i < per_rank_args.size()) spawn.argv.insert(spawn.argv.end(), per_rank_args[i].begin(), per_rank_args[i].end());
    spawn.env = env;
    // Nothing from the test's own environment may leak into the ranks' identity.
    for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                          "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RUN_ID", "RINGTORCH_RDZV_ENDPOINT",
                          "RINGTORCH_TIMEOUT", "TORCHELASTIC_RESTART_COUNT"}) {
      spawn.env.emplace(v, "");
    }
    procs.push_back(Subprocess::spawn(spawn));
  }
  std::vector<RankResult> results(procs.size());
  std::vector<std::thread> readers;
  for (size_t i = 0; i < procs.size(); ++i) readers.emplace_back([&, i] { results[i] = testing::finish(procs[i]); });
  for (auto& t : readers) t.join();
  return results;
}

std::vector<std::map<std::string, std::string>> ranks_env(int n, std::map<std::string, std::string> common) {
  std::vector<std::map<std::string, std::string>> envs;
  for (int r = 0; r < n; ++r) {
    auto env = common;
    env["RANK"] = std::to_string(r);
    env["WORLD_SIZE"] = std::to_string(n);
    env["LOCAL_RANK"] = std::to_string(r);
    env["LOCAL_WORLD_SIZE"] = std::to_string(n);
    envs.push_back(env);
  }
  return envs;
}

void expect_all_greeted(const std::vector<RankResult>& results, const std::string& what) {
  const int n = static_cast<int>(results.size());
  const std::string sum = "sum of ranks through the store: " + std::to_string(n * (n - 1) / 2);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(results[r].status.success()) << what << " rank " << r << ": " << results[r].status.describe() << "\n"
                                             << results[r].err;
    EXPECT_NE(results[r].out.find(sum), std::string::npos) << what << " rank " << r << ":\n" << results[r].out;
    for (int peer = 0; peer < n; ++peer) {
      EXPECT_NE(results[r].out.find("hello from rank " + std::to_string(peer) + " "), std::string::npos)
          << what << " rank " << r << " missed rank " << peer;
    }
  }
}

class RendezvousOfProcesses : public ::testing::TestWithParam<int> {};

TEST_P(RendezvousOfProcesses, EnvInitMethod) {
  const int n = GetParam();
  auto results = run_ranks(ranks_env(n, {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(free_port())}}),
                           {"--timeout", "60"});
  expect_all_greeted(results, "env://");
}

TEST_P(RendezvousOfProcesses, TcpInitMethod) {
  const int n = GetParam();
  auto results = run_ranks(ranks_env(n, {}),
                           {"--init-method", "tcp://127.0.0.1:" + std::to_string(free_port()), "--timeout", "60"});
  expect_all_greeted(results, "tcp://");
}

TEST_P(RendezvousOfProcesses, FileInitMethod) {
  const int n = GetParam();
  TempDir dir;
  auto results = run_ranks(ranks_env(n, {}), {"--init-method", "file://" + dir.file("store"), "--timeout", "60"});
  expect_all_greeted(results, "file://");
}

TEST_P(RendezvousOfProcesses, RedisInitMethod) {
  const int n = GetParam();
  std::string why;
  auto redis = RedisServer::start("", &why);
  if (!redis) GTEST_SKIP() << why;
  auto results = run_ranks(ranks_env(n, {}), {"--init-method", redis->url(), "--timeout", "60"});
  expect_all_greeted(results, "redis://");
}

TEST_P(RendezvousOfProcesses, RanksFromTheUrlQuery) {
  // No RANK/WORLD_SIZE variables at all: each process gets its identity from ?rank=&world_size=.
  const int n = GetParam();
  TempDir dir;
  std::vector<std::vector<std::string>> args;
  for (int r = 0; r < n; ++r) {
    args.push_back({"--init-method", "file://" + dir.file("q") + "?rank=" + std::to_string(r) +
                                         "&world_size=" + std::to_string(n) + "&timeout=60"});
  }
  expect_all_greeted(run_ranks(std::vector<std::map<std::string, std::string>>(n), {}, args), "?rank=");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, RendezvousOfProcesses, ::testing::Values(1, 2, 4, 8));

// A second job against the same directory or Redis, with the same run id, rendezvouses cleanly
// in the next round (Note [Join rounds]) instead of reading the first job's keys.
TEST(RendezvousReuse, SecondJobAgainstTheSameFileAndRedis) {
  TempDir dir;
  std::string why;
  auto redis = RedisServer::start("", &why);
  std::vector<std::string> urls = {"file://" + dir.file("shared")};
  if (redis) urls.push_back(redis->url("/1"));
  for (const auto& url : urls) {
    for (int job = 0; job < 2; ++job) {
      auto results =
          run_ranks(ranks_env(2, {{"RINGTORCH_RUN_ID", "samejob"}}), {"--init-method", url, "--timeout", "60"});
      expect_all_greeted(results, url);
      const std::string prefix = "key prefix samejob/0/" + std::to_string(job) + "/";
      EXPECT_NE(results[0].out.find(prefix), std::string::npos) << url << " job " << job << ":\n" << results[0].out;
    }
  }
  // A file left behind by a crashed job (its ranks joined round 0, then died without closing
  // the store): the next job with the same run id joins round 1 and never reads those keys.
  SubprocessOptions crash;
  crash.argv = {build_path("tests/store_tool"), "file://" + dir.file("kept"), "add", "kept/0/joins", "1", "2"};
  auto crashed = Subprocess::spawn(crash);
  ASSERT_TRUE(crashed.wait().success());
  auto results = run_ranks(ranks_env(2, {{"RINGTORCH_RUN_ID", "kept"}}),
                           {"--init-method", "file://" + dir.file("kept"), "--timeout", "60"});
  expect_all_greeted(results, "file left by a crashed job");
  EXPECT_NE(results[1].out.find("key prefix kept/0/1/"), std::string::npos) << results[1].out;
}

// ---- Bad input: a clear error naming the value and the fix, a non-zero exit, no hang. ----

struct BadCase {
  const char* name;
  std::map<std::string, std::string> env;
  std::vector<std::string> args;
  const char* expected;
};

RankResult run_one(const BadCase& c) { return run_ranks({c.env}, c.args)[0]; }

TEST(RendezvousBadInput, EachGivesAClearErrorAndNonZeroExit) {
  const std::string port = std::to_string(free_port());
  const std::vector<BadCase> cases = {
      {"malformed URL", {{"RANK", "0"}, {"WORLD_SIZE", "1"}}, {"--init-method", "tcp://nohost"}, "no port"},
      {"unknown scheme", {{"RANK", "0"}, {"WORLD_SIZE", "1"}}, {"--init-method", "mpi://x"}, "unknown scheme"},
      {"rank >= world size",
       {{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}},
       {},
       "rank 2 is outside [0, 2)"},
      {"missing RANK",
       {{"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}},
       {},
       "set RANK and WORLD_SIZE"},
      {"missing MASTER_ADDR",
       {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", port}},
       {},
       "MASTER_ADDR is not set"},
      {"missing MASTER_PORT",
       {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"}},
       {},
       "MASTER_PORT is not set"},
      {"malformed RANK", {{"RANK", "zero"}, {"WORLD_SIZE", "1"}}, {}, "RANK: 'zero' is not an integer"},
      {"unreachable master",
       {{"RANK", "1"}, {"WORLD_SIZE", "2"}},
       {"--init-method", "tcp://127.0.0.1:" + port + "?timeout=1"},
       "cannot reach the TCP store"},
      {"unreachable redis",
       {{"RANK", "0"}, {"WORLD_SIZE", "1"}},
       {"--init-method", "redis://127.0.0.1:" + port + "?timeout=1"},
       "cannot connect to the Redis server"},
      {"missing store directory",
       {{"RANK", "0"}, {"WORLD_SIZE", "1"}},
       {"--init-method", "file:///nonexistent-dir-ringtorch/store"},
       "does not exist"},
  };
  for (const auto& c : cases) {
    auto start = std::chrono::steady_clock::now();
    auto r = run_one(c);
    auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_FALSE(r.status.success()) << c.name;
    EXPECT_FALSE(r.status.signaled) << c.name << " crashed: " << r.status.describe();
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << c.name << ": stderr was\n" << r.err;
    EXPECT_LT(elapsed, std::chrono::seconds(30)) << c.name << " (hang guard)";
  }
}

TEST(RendezvousBadInput, WrongRedisPassword) {
  std::string why;
  auto redis = RedisServer::start("secret", &why);
  if (!redis) GTEST_SKIP() << why;
  auto r = run_ranks({{{"RANK", "0"}, {"WORLD_SIZE", "1"}}},
                     {"--init-method", "redis://:guess@127.0.0.1:" + std::to_string(redis->port())})[0];
  EXPECT_EQ(r.status.code, 1);
  EXPECT_NE(r.err.find("refused the credentials"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("guess"), std::string::npos) << "password printed:\n" << r.err;
}

TEST(RendezvousBadInput, DuplicateRanksAreNamed) {
  TempDir dir;
  auto results = run_ranks({{{"RANK", "0"}, {"WORLD_SIZE", "2"}}, {{"RANK", "0"}, {"WORLD_SIZE", "2"}}},
                           {"--init-method", "file://" + dir.file("dup"), "--timeout", "3"});
  std::string all = results[0].err + results[1].err;
  EXPECT_FALSE(results[0].status.success());
  EXPECT_FALSE(results[1].status.success());
  EXPECT_NE(all.find("rank 0 joined round 0 twice"), std::string::npos) << all;
  EXPECT_NE(all.find("missing rank 1"), std::string::npos) << all;
}

TEST(RendezvousBadInput, MissingRankTimesOutNamingIt) {
  TempDir dir;
  auto results = run_ranks({{{"RANK", "0"}, {"WORLD_SIZE", "3"}}, {{"RANK", "2"}, {"WORLD_SIZE", "3"}}},
                           {"--init-method", "file://" + dir.file("missing"), "--timeout", "2"});
  for (const auto& r : results) {
    EXPECT_EQ(r.status.code, 1);
    EXPECT_NE(r.err.find("missing rank 1 "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("timed out after 2 s"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace ringtorch
