// ringrun end to end: real ringrun processes, real workers (ringhello and small shell scripts).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "runtime/launch/subprocess.h"
#include "support/capture.h"
#include "support/redis_server.h"
#include "support/test_paths.h"

namespace ringtorch {
namespace {

using std::chrono::milliseconds;
using testing::build_path;
using testing::free_port;
using testing::process_alive;
using testing::read_file;
using testing::TempDir;
using testing::wait_for_file;

using LaunchResult = testing::Captured;
using testing::finish;

Subprocess start_ringrun(const std::vector<std::string>& args) {
  SubprocessOptions spawn;
  spawn.argv = {build_path("apps/ringrun")};
  spawn.argv.insert(spawn.argv.end(), args.begin(), args.end());
  for (const char* v : {"RANK", "WORLD_SIZE", "RINGTORCH_RUN_ID", "RINGTORCH_RDZV_ENDPOINT", "RINGTORCH_TIMEOUT"}) {
    spawn.env[v] = "";
  }
  return Subprocess::spawn(spawn);
}

LaunchResult ringrun(const std::vector<std::string>& args) {
  auto p = start_ringrun(args);
  return finish(p);
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST(Ringrun, StandaloneTwoWorkersRendezvousWithLegacyLocalRank) {
  auto r = ringrun({"--standalone", "--nproc_per_node", "2", build_path("apps/ringhello")});
  EXPECT_EQ(r.status.code, 0) << r.err;
  EXPECT_EQ(count(r.out, "sum of ranks through the store: 1 (expected 1) OK"), 2) << r.out;
  EXPECT_NE(r.out.find("[rank 0]: [rank 0/2]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[rank 1]: [rank 1/2]"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("all workers succeeded"), std::string::npos) << r.err;
}

TEST(Ringrun, TwoNodesOfTwoProcessesOnOneMachine) {
  const std::string port = std::to_string(free_port());
  std::vector<Subprocess> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back(
        start_ringrun({"--nnodes", "2", "--node_rank", std::to_string(node), "--nproc_per_node", "2", "--master_addr",
                       "127.0.0.1", "--master_port", port, "--timeout", "60", build_path("apps/ringhello")}));
  }
  LaunchResult node1 = finish(nodes[1]);
  LaunchResult node0 = finish(nodes[0]);
  EXPECT_EQ(node0.status.code, 0) << node0.err;
  EXPECT_EQ(node1.status.code, 0) << node1.err;
  const std::string all = node0.out + node1.out;
  EXPECT_EQ(count(all, "sum of ranks through the store: 6 (expected 6) OK"), 4) << all;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(all.find("[rank " + std::to_string(rank) + "]: [rank " + std::to_string(rank) + "/4]"),
              std::string::npos);
  }
  EXPECT_NE(node1.out.find("(local 1/2"), std::string::npos) << node1.out;
}

TEST(Ringrun, FailingWorkerTearsTheGroupDownWithItsExitCode) {
  TempDir dir;
  const std::string script = "echo $$ > " + dir.path() +
                             "/pid.$RANK; "
                             "if [ \"$RANK\" = 1 ]; then sleep 0.3; echo dying >&2; exit 3; fi; sleep 120";
  auto start = std::chrono::steady_clock::now();
  auto r = ringrun({"--standalone", "--nproc_per_node", "2", "--use_env", "sh", "-c", script});
  EXPECT_EQ(r.status.code, 3) << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60)) << "hang guard";
  EXPECT_NE(r.err.find("rank 1 (local rank 1, pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("failed with exit code 3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[rank 1]: dying"), std::string::npos) << r.err;
  const int survivor = std::stoi(read_file(dir.path() + "/pid.0"));
  EXPECT_FALSE(process_alive(survivor)) << "rank 0 (pid " << survivor << ") outlived the group";
}

TEST(Ringrun, WorkerKilledBySignalIsReported) {
  auto r = ringrun({"--standalone", "--nproc_per_node", "1", "--use_env", "sh", "-c", "kill -9 $$"});
  EXPECT_EQ(r.status.code, 128 + SIGKILL) << r.err;
  EXPECT_NE(r.err.find("signal 9 (SIGKILL)"), std::string::npos) << r.err;
}

TEST(Ringrun, MaxRestartsRestartsTheGroupOnceWithANewGeneration) {
  TempDir dir;
  // Rank 1 fails in the first generation only; then every rank runs ringhello, whose key
  // prefix shows the restart count.
  const std::string script = "echo $TORCHELASTIC_RESTART_COUNT >> " + dir.path() +
                             "/attempts.$RANK; "
                             "if [ \"$RANK\" = 1 ] && [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exit 5; fi; "
                             "exec " +
                             build_path("apps/ringhello");
  auto r = ringrun({"--standalone", "--nproc_per_node", "2", "--max_restarts", "1", "--use_env", "--timeout", "60",
                    "sh", "-c", script});
  EXPECT_EQ(r.status.code, 0) << r.err;
  EXPECT_NE(r.err.find("restarting the group (restart 1 of 1)"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(dir.path() + "/attempts.1"), "0\n1\n");
  EXPECT_EQ(count(r.out, "/1/0/\n"), 2) << "both ranks rendezvoused in generation 1:\n" << r.out;

  // With no restarts left, the second failure ends the job with the worker's code.
  auto always = ringrun({"--standalone", "--nproc_per_node", "2", "--max_restarts", "1", "--use_env", "sh", "-c",
                         "[ \"$RANK\" = 0 ] && exit 7; sleep 60"});
  EXPECT_EQ(always.status.code, 7) << always.err;
  EXPECT_NE(always.err.find("no restarts left (--max_restarts 1)"), std::string::npos) << always.err;
}

TEST(Ringrun, SigtermReachesEveryWorkerAndLeavesNoOrphan) {
  TempDir dir;
  // Rank 1 ignores SIGTERM: ringrun must follow up with SIGKILL after --term_timeout.
  const std::string script = "if [ \"$RANK\" = 1 ]; then trap '' TERM; fi; echo $$ > " + dir.path() +
                             "/pid.$RANK.tmp; mv " + dir.path() + "/pid.$RANK.tmp " + dir.path() +
                             "/pid.$RANK; while true; do sleep 0.1; done";
  auto p = start_ringrun(
      {"--standalone", "--nproc_per_node", "2", "--use_env", "--term_timeout", "0.5", "sh", "-c", script});
  ASSERT_TRUE(wait_for_file(dir.path() + "/pid.0"));
  ASSERT_TRUE(wait_for_file(dir.path() + "/pid.1"));
  const int pid0 = std::stoi(read_file(dir.path() + "/pid.0"));
  const int pid1 = std::stoi(read_file(dir.path() + "/pid.1"));
  p.signal(SIGTERM);
  LaunchResult r = finish(p);
  EXPECT_EQ(r.status.code, 128 + SIGTERM) << r.err;
  EXPECT_NE(r.err.find("received SIGTERM"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sending SIGKILL"), std::string::npos) << r.err;
  EXPECT_FALSE(process_alive(pid0));
  EXPECT_FALSE(process_alive(pid1));
}

TEST(Ringrun, LogDirHoldsOneFilePerRank) {
  TempDir dir;
  auto r = ringrun({"--standalone", "--nproc_per_node", "2", "--log_dir", dir.file("logs"), "--use_env", "sh", "-c",
                    "echo out of $RANK; echo err of $RANK >&2"});
  EXPECT_EQ(r.status.code, 0) << r.err;
  for (int rank = 0; rank < 2; ++rank) {
    std::string log = read_file(dir.file("logs/rank_" + std::to_string(rank) + ".log"));
    EXPECT_NE(log.find("out of " + std::to_string(rank)), std::string::npos) << log;
    EXPECT_NE(log.find("err of " + std::to_string(rank)), std::string::npos) << log;
  }
  EXPECT_NE(r.out.find("[rank 1]: out of 1"), std::string::npos) << r.out;
}

// A worker's stdout is a pipe under ringrun; a program linked with ringtorch writes it a line at
// a time, so a line printed without a flush arrives while the worker still runs.
TEST(Ringrun, AWorkersLinesArriveWhileItRuns) {
  auto p = start_ringrun(
      {"--standalone", "--nproc_per_node", "1", "--use_env", build_path("tests/spawn_program"), "print_then_wait"});
  std::string seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (seen.find("a line before waiting") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd ready{p.stdout_fd(), POLLIN, 0};
    if (::poll(&ready, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(p.stdout_fd(), buffer, sizeof(buffer));
    if (n <= 0) break;
    seen.append(buffer, static_cast<size_t>(n));
  }
  EXPECT_NE(seen.find("[rank 0]: a line before waiting"), std::string::npos)
      << "the line did not arrive within 30 s of a worker that sleeps 60 s after printing it: " << seen;
  EXPECT_FALSE(p.poll().has_value()) << "the worker was meant to be still running";
  p.signal(SIGTERM);
  finish(p);
}

// The Redis password needs no command line: a file named in --rdzv_conf, or the environment;
// a password in the URL still works, with a warning; a password file that is not one is refused.
TEST(Ringrun, TheRedisPasswordComesFromAFileOrTheEnvironment) {
  std::string why;
  auto redis = testing::RedisServer::start("filepw", &why);
  if (!redis) GTEST_SKIP() << why;
  TempDir dir;
  const std::string endpoint = "redis://127.0.0.1:" + std::to_string(redis->port()) + "/0";
  { std::ofstream(dir.file("pw")) << "filepw\n"; }
  auto with_file = ringrun({"--nproc_per_node", "1", "--rdzv_endpoint", endpoint, "--run_id", "pw-file", "--rdzv_conf",
                            "password_file=" + dir.file("pw") + ",join_timeout=30", "--timeout", "20",
                            build_path("apps/ringhello")});
  EXPECT_EQ(with_file.status.code, 0) << with_file.err;
  EXPECT_EQ(with_file.err.find("filepw"), std::string::npos) << "the password was printed: " << with_file.err;

  SubprocessOptions spawn;
  spawn.argv = {build_path("apps/ringrun"),
                "--nproc_per_node",
                "1",
                "--rdzv_endpoint",
                endpoint,
                "--run_id",
                "pw-env",
                "--timeout",
                "20",
                build_path("apps/ringhello")};
  spawn.env["RINGTORCH_REDIS_PASSWORD"] = "filepw";
  auto env_process = Subprocess::spawn(spawn);
  auto with_env = finish(env_process);
  EXPECT_EQ(with_env.status.code, 0) << with_env.err;

  auto in_url = ringrun({"--nproc_per_node", "1", "--rdzv_endpoint", redis->url("/0"), "--run_id", "pw-url",
                         "--timeout", "20", build_path("apps/ringhello")});
  EXPECT_EQ(in_url.status.code, 0) << in_url.err;
  EXPECT_NE(in_url.err.find("[ringrun] warning: the Redis password is in --rdzv_endpoint"), std::string::npos)
      << in_url.err;

  auto not_a_file = ringrun({"--nproc_per_node", "1", "--rdzv_endpoint", endpoint, "--rdzv_conf",
                             "password_file=" + dir.path(), build_path("apps/ringhello")});
  EXPECT_NE(not_a_file.status.code, 0);
  EXPECT_NE(not_a_file.err.find("password_file " + dir.path() + ": not a regular file"), std::string::npos)
      << not_a_file.err;
  auto not_redis = ringrun({"--standalone", "--rdzv_conf", "password_file=" + dir.file("pw"), "sh", "-c", "true"});
  EXPECT_EQ(not_redis.status.code, 2) << not_redis.err;
}

// A log that cannot be written (rank 0's is /dev/full: every write fails with ENOSPC) is said
// once, the other logs and the terminal keep every line, and the job does not pass as clean.
TEST(Ringrun, ALogDirWriteErrorIsSaidOnceAndFailsTheJob) {
  TempDir dir;
  ASSERT_EQ(::mkdir(dir.file("logs").c_str(), 0755), 0);
  ASSERT_EQ(::symlink("/dev/full", dir.file("logs/rank_0.log").c_str()), 0);
  auto r = ringrun({"--standalone", "--nproc_per_node", "2", "--log_dir", dir.file("logs"), "--use_env", "sh", "-c",
                    "echo one of $RANK; echo two of $RANK"});
  EXPECT_EQ(r.status.code, 1) << r.err;
  EXPECT_EQ(count(r.err, "writing " + dir.file("logs/rank_0.log") + ": No space left on device"), 1) << r.err;
  EXPECT_NE(r.err.find("but --log_dir is incomplete"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("[rank 0]: two of 0"), std::string::npos) << r.out;
  const std::string other = read_file(dir.file("logs/rank_1.log"));
  EXPECT_NE(other.find("two of 1"), std::string::npos) << other;
}

TEST(Ringrun, FailureOnOneNodeStopsTheOtherNode) {
  const std::string port = std::to_string(free_port());
  auto node0 = start_ringrun({"--nnodes", "2", "--node_rank", "0", "--nproc_per_node", "1", "--master_port", port,
                              "--use_env", "sh", "-c", "sleep 120"});
  auto node1 = start_ringrun({"--nnodes", "2", "--node_rank", "1", "--nproc_per_node", "1", "--master_port", port,
                              "--use_env", "sh", "-c", "sleep 0.5; exit 4"});
  LaunchResult r1 = finish(node1);
  LaunchResult r0 = finish(node0);
  EXPECT_EQ(r1.status.code, 4) << r1.err;
  EXPECT_EQ(r0.status.code, 1) << r0.err;
  EXPECT_NE(r0.err.find("node 1: rank 1 (local rank 0"), std::string::npos) << r0.err;
}

// Before: the banner printed the Redis password; a Redis that died after the rendezvous was
// blamed on "node 0's ringrun", and both nodes exited 1 although their workers succeeded.
TEST(Ringrun, AnExternalStoreLostAfterRendezvousIsNamedAndDoesNotFailTheJob) {
  std::string why;
  auto redis = testing::RedisServer::start("plainpw", &why);
  if (!redis) GTEST_SKIP() << why;
  TempDir dir;
  const std::string endpoint = redis->url();
  auto node = [&](int rank) {
    return start_ringrun({"--nnodes", "2", "--node_rank", std::to_string(rank), "--nproc_per_node", "1",
                          "--rdzv_endpoint", endpoint, "--run_id", "lost-store", "--monitor_interval", "0.1",
                          "--timeout", "5",  // how long a store call may take: bounds the detection
                          "--use_env", "sh", "-c", "touch " + dir.path() + "/started.$RANK; sleep 2; echo finished"});
  };
  auto node0 = node(0);
  auto node1 = node(1);
  ASSERT_TRUE(wait_for_file(dir.path() + "/started.0"));
  ASSERT_TRUE(wait_for_file(dir.path() + "/started.1"));
  redis->stop();
  LaunchResult r0 = finish(node0);
  LaunchResult r1 = finish(node1);
  for (const LaunchResult* r : {&r0, &r1}) {
    EXPECT_EQ(r->status.code, 0) << r->err;
    EXPECT_NE(r->out.find("finished"), std::string::npos) << r->out;
    EXPECT_EQ(r->err.find("plainpw"), std::string::npos) << "the password in the log: " << r->err;
    EXPECT_NE(r->err.find("store redis://***@127.0.0.1:"), std::string::npos) << r->err;
    EXPECT_NE(r->err.find("lost the store redis://***@127.0.0.1:"), std::string::npos) << r->err;
    EXPECT_EQ(r->err.find("node 0's ringrun"), std::string::npos) << r->err;
  }
}

// A worker killed during a group's shared-memory set-up can leave a segment name behind;
// ringrun removes this run's (and only this run's) once its workers have exited.
TEST(Ringrun, RemovesSharedMemorySegmentsKilledWorkersLeft) {
  const std::string run_id = "leftover-test-" + std::to_string(::getpid());
  const std::string mine = "/dev/shm/ringtorch-" + run_id + "-0-0-default-0-77";
  const std::string other_run = "/dev/shm/ringtorch-" + run_id + "-x-0-default-0-77";  // not "<restart>-<round>-"
  std::ofstream(other_run) << "not this run's";
  auto r = ringrun({"--standalone", "--nproc_per_node", "1", "--run_id", run_id, "--use_env", "/bin/sh", "-c",
                    "echo garbage > " + mine + "; kill -9 $$"});
  EXPECT_NE(r.status.code, 0);
  EXPECT_NE(r.err.find("removed 1 shared-memory segment that killed workers of run " + run_id), std::string::npos)
      << r.err;
  EXPECT_NE(::access(mine.c_str(), F_OK), 0) << mine << " is still there";
  EXPECT_EQ(::access(other_run.c_str(), F_OK), 0) << "another run's file was removed";
  ::unlink(other_run.c_str());
}

TEST(Ringrun, BadFlagsAndMissingProgram) {
  auto bad = ringrun({"--nproc_per_node", "x", "prog"});
  EXPECT_EQ(bad.status.code, 2);
  EXPECT_NE(bad.err.find("--nproc_per_node"), std::string::npos) << bad.err;
  auto missing = ringrun({"--standalone", "/nonexistent/program"});
  EXPECT_EQ(missing.status.code, 1);
  EXPECT_NE(missing.err.find("cannot run '/nonexistent/program'"), std::string::npos) << missing.err;
  auto help = ringrun({"--help"});
  EXPECT_EQ(help.status.code, 0);
  EXPECT_NE(help.out.find("--nproc_per_node"), std::string::npos);
}

}  // namespace
}  // namespace ringtorch
