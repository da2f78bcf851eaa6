#include <gtest/gtest.h>

#include <ringtorch/error.h>
#include <ringtorch/job_environment.h>

namespace ringtorch {
namespace {

TEST(JobEnvironment, TorchrunVariables) {
  auto job = read_job_environment(map_environment({{"RANK", "3"},
                                                   {"WORLD_SIZE", "4"},
                                                   {"LOCAL_RANK", "1"},
                                                   {"LOCAL_WORLD_SIZE", "2"},
                                                   {"MASTER_ADDR", "10.0.0.1"},
                                                   {"MASTER_PORT", "29500"},
                                                   {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                                   {"TORCHELASTIC_RUN_ID", "job7"},
                                                   {"TORCHELASTIC_RESTART_COUNT", "2"},
                                                   {"RINGTORCH_TIMEOUT", "12.5"}}));
  EXPECT_EQ(job.rank, 3);
  EXPECT_EQ(job.world_size, 4);
  EXPECT_EQ(job.local_rank, 1);
  EXPECT_EQ(job.local_world_size, 2);
  EXPECT_EQ(job.master_addr, "10.0.0.1");
  EXPECT_EQ(job.master_port, 29500);
  EXPECT_TRUE(job.agent_store);
  EXPECT_EQ(job.run_id, "job7");
  EXPECT_EQ(job.restart_count, 2);
  EXPECT_EQ(job.timeout->count(), 12500);
}

TEST(JobEnvironment, RingtorchRunIdWinsOverTorchelastic) {
  auto job = read_job_environment(map_environment({{"RINGTORCH_RUN_ID", "a"}, {"TORCHELASTIC_RUN_ID", "b"}}));
  EXPECT_EQ(job.run_id, "a");
}

TEST(JobEnvironment, SlurmWhenRankAbsent) {
  auto job = read_job_environment(map_environment(
      {{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS_PER_NODE", "4(x2)"}}));
  EXPECT_EQ(job.rank, 5);
  EXPECT_EQ(job.world_size, 8);
  EXPECT_EQ(job.local_rank, 1);
  EXPECT_EQ(job.local_world_size, 4);
  EXPECT_EQ(job.rank_source, "SLURM_PROCID/SLURM_NTASKS");
}

TEST(JobEnvironment, OpenMpiWhenRankAbsent) {
  auto job = read_job_environment(map_environment({{"OMPI_COMM_WORLD_RANK", "1"},
                                                   {"OMPI_COMM_WORLD_SIZE", "2"},
                                                   {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}}));
  EXPECT_EQ(job.rank, 1);
  EXPECT_EQ(job.world_size, 2);
  EXPECT_EQ(job.local_world_size, 1);
}

TEST(JobEnvironment, RankBeatsSchedulers) {
  auto job = read_job_environment(
      map_environment({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}}));
  EXPECT_EQ(job.rank, 0);
  EXPECT_EQ(job.world_size, 1);
}

TEST(JobEnvironment, MalformedVariableNamesIt) {
  for (auto [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"RANK", "one"}, {"WORLD_SIZE", "0"}, {"MASTER_PORT", "70000"}, {"RINGTORCH_TIMEOUT", "soon"}}) {
    std::map<std::string, std::string> vars{{"RANK", "0"}, {"WORLD_SIZE", "2"}};
    vars[name] = value;
    try {
      read_job_environment(map_environment(vars));
      FAIL() << name << "=" << value << " was accepted";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ringtorch
