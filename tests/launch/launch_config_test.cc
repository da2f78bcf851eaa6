#include "runtime/launch/launch_config.h"

#include <gtest/gtest.h>

#include <map>

#include <ringtorch/error.h>

#include "runtime/launch/worker_env.h"

namespace ringtorch {
namespace {

LaunchConfig parse(std::vector<std::string> args) {
  bool help = false;
  return parse_launch_args(args, &help);
}

TEST(LaunchConfig, TorchrunFlagsInEverySpelling) {
  auto c = parse({"--nproc_per_node=2", "--nnodes", "3", "--node-rank", "1", "--master_addr=10.0.0.1", "--master-port",
                  "23456", "--max_restarts", "2", "--run_id", "job", "prog", "--lr", "0.1"});
  EXPECT_EQ(c.nproc_per_node, 2);
  EXPECT_EQ(c.nnodes, 3);
  EXPECT_EQ(c.node_rank, 1);
  EXPECT_EQ(c.master_addr, "10.0.0.1");
  EXPECT_EQ(c.master_port, 23456);
  EXPECT_EQ(c.max_restarts, 2);
  EXPECT_EQ(c.run_id, "job");
  EXPECT_EQ(c.program, (std::vector<std::string>{"prog", "--lr", "0.1"}));
  EXPECT_EQ(parse({"--timeline", "run.json", "prog"}).timeline, "run.json");
}

TEST(LaunchConfig, StandaloneUsesLoopbackAndAFreePort) {
  auto c = parse({"--standalone", "--nproc_per_node", "2", "prog"});
  EXPECT_TRUE(c.standalone);
  EXPECT_EQ(c.master_addr, "127.0.0.1");
  EXPECT_EQ(c.master_port, 0);
}

TEST(LaunchConfig, EndpointForms) {
  EXPECT_EQ(parse({"--rdzv_endpoint", "node0:29400", "p"}).rdzv_endpoint, "tcp://node0:29400");
  EXPECT_EQ(parse({"--rdzv_endpoint=redis://r:6379/1", "p"}).rdzv_endpoint, "redis://r:6379/1");
  EXPECT_EQ(parse({"--nnodes=2:2", "p"}).nnodes, 2);
  auto elastic = parse({"--nnodes=2:3", "--rdzv_conf",
                        "join_timeout=20,last_call_timeout=0.5,keep_alive_interval=1,"
                        "keep_alive_max_attempt=2,admit_interval=4",
                        "p"});
  EXPECT_EQ(elastic.min_nnodes, 2);
  EXPECT_EQ(elastic.nnodes, 3);
  EXPECT_EQ(elastic.rdzv_conf.join_timeout.count(), 20000);
  EXPECT_EQ(elastic.rdzv_conf.last_call_timeout.count(), 500);
  EXPECT_EQ(elastic.rdzv_conf.heartbeat_timeout().count(), 2000);
  EXPECT_EQ(elastic.rdzv_conf.admit_interval.count(), 4000);
  EXPECT_EQ(parse({"--", "--program-with-dashes"}).program.front(), "--program-with-dashes");
}

TEST(LaunchConfig, HelpDocumentsEveryFlag) {
  bool help = false;
  parse_launch_args({"--help"}, &help);
  EXPECT_TRUE(help);
  for (const char* flag : {"--nproc_per_node", "--nnodes", "--node_rank", "--master_addr", "--master_port",
                           "--rdzv_endpoint", "--standalone", "--max_restarts", "--log_dir", "--run_id", "--use_env",
                           "--timeout", "--term_timeout", "--timeline", "SIGUSR1"}) {
    EXPECT_NE(launch_usage().find(flag), std::string::npos) << flag;
  }
}

TEST(LaunchConfig, BadFlagsNameTheProblem) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--nproc_per_node", "0", "p"}, "--nproc_per_node: 0 is outside"},
      {{"--nproc_per_node", "two", "p"}, "not an integer"},
      {{"--nnodes", "4:1", "p"}, "the minimum is above the maximum"},
      {{"--rdzv_conf", "join_timeout=x", "p"}, "--rdzv_conf join_timeout"},
      {{"--rdzv_conf", "close_timeout=5", "p"}, "unknown key 'close_timeout'"},
      {{"--node_rank", "2", "--nnodes", "2", "p"}, "--node_rank 2 is outside [0, 2)"},
      {{"--frobnicate", "p"}, "unknown flag --frobnicate"},
      {{"--nproc_per_node"}, "needs a value"},
      {{"--nproc_per_node", "2"}, "no program to launch"},
      {{"--standalone", "--nnodes", "2", "p"}, "--standalone runs one node"},
      {{"--rdzv_endpoint", "ftp://x", "p"}, "unknown scheme"},
      {{"--master_port", "70000", "p"}, "outside [1, 65535]"},
      {{"--standalone=maybe", "p"}, "a flag takes true or false"},
      {{"--nproc_per_nod", "2", "p"}, "unknown flag --nproc_per_nod; did you mean --nproc"},
      {{"-x", "p"}, "unknown flag -x"},
      {{"--rdzv_backend", "etcd", "p"}, "supports c10d and static"},
  };
  for (const auto& [args, expected] : cases) {
    try {
      parse(args);
      ADD_FAILURE() << "accepted: " << args.front();
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

// argparse's dialect, as torchrun users type it: both spellings, --flag=value, and booleans
// that take =true/=false.
TEST(LaunchConfig, BooleanFlagsTakeAValueAndRepeatsKeepTheLast) {
  EXPECT_FALSE(parse({"--standalone=false", "p"}).standalone);
  EXPECT_TRUE(parse({"--standalone=true", "--use-env", "p"}).use_env);
  EXPECT_EQ(parse({"--nproc-per-node=2", "--nproc_per_node", "3", "p"}).nproc_per_node, 3);
  bool help = false;
  parse_launch_args({"-h"}, &help);
  EXPECT_TRUE(help);
}

TEST(WorkerEnvironment, TorchrunVariablesForEachWorker) {
  auto c = parse(
      {"--nnodes", "2", "--node_rank", "1", "--nproc_per_node", "2", "--max_restarts", "3", "--timeout", "30", "p"});
  JobPlacement p;
  p.run_id = "run7.3";
  p.restart = 2;
  p.master_addr = "10.0.0.1";
  p.master_port = 29400;
  p.flight_recorder_dir = "/logs/flight_recorder";
  p.timeline = "/out/run.json";
  p.node_rank = 2;  // as the elastic rendezvous placed it, not as the flags said
  p.nnodes = 3;
  p.first_rank = 4;
  p.world_size = 6;
  p.elastic_run = "run7";
  p.elastic_node = "host:42";
  p.generation = 3;
  auto env = worker_environment(c, p, 1, false, "");
  const std::map<std::string, std::string> expected = {{"RANK", "5"},
                                                       {"LOCAL_RANK", "1"},
                                                       {"WORLD_SIZE", "6"},
                                                       {"LOCAL_WORLD_SIZE", "2"},
                                                       {"GROUP_RANK", "2"},
                                                       {"GROUP_WORLD_SIZE", "3"},
                                                       {"MASTER_ADDR", "10.0.0.1"},
                                                       {"MASTER_PORT", "29400"},
                                                       {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                                       {"TORCHELASTIC_RUN_ID", "run7.3"},
                                                       {"RINGTORCH_ELASTIC_RUN", "run7"},
                                                       {"RINGTORCH_ELASTIC_NODE", "host:42"},
                                                       {"RINGTORCH_ELASTIC_GENERATION", "3"},
                                                       {"TORCHELASTIC_RESTART_COUNT", "2"},
                                                       {"TORCHELASTIC_MAX_RESTARTS", "3"},
                                                       {"OMP_NUM_THREADS", "1"}};
  for (const auto& [name, value] : expected) EXPECT_EQ(env[name], value) << name;
  EXPECT_EQ(env["RINGTORCH_TIMEOUT"].substr(0, 2), "30");
  EXPECT_EQ(worker_environment(c, p, 1, true, "").count("OMP_NUM_THREADS"), 0u) << "a user's setting wins";
  EXPECT_EQ(env["RINGTORCH_FLIGHT_RECORDER_DIR"], "/logs/flight_recorder");
  EXPECT_EQ(env["RINGTORCH_TIMELINE"], "/out/run.json.rank5.json") << "each rank its own part";
  EXPECT_EQ(env.count("OPENBLAS_CORETYPE"), 0u) << "none unless the launcher found one better";
  EXPECT_EQ(worker_environment(c, p, 1, false, "SkylakeX")["OPENBLAS_CORETYPE"], "SkylakeX");
}

TEST(WorkerCommand, LegacyLocalRankUnlessUseEnv) {
  auto legacy = parse({"prog", "a"});
  EXPECT_EQ(worker_command(legacy, 1), (std::vector<std::string>{"prog", "--local_rank=1", "a"}));
  auto env_only = parse({"--use_env", "prog", "a"});
  EXPECT_EQ(worker_command(env_only, 1), (std::vector<std::string>{"prog", "a"}));
}

}  // namespace
}  // namespace ringtorch
