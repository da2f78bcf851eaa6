#include "runtime/launch/worker_env.h"

#include <chrono>

#include "runtime/launch/timeline_parts.h"

namespace ringtorch {

std::map<std::string, std::string> worker_environment(const LaunchConfig& c, const JobPlacement& p, int local_rank,
                                                      bool omp_threads_already_set,
                                                      const std::string& openblas_coretype) {
  const int rank = p.first_rank + local_rank;
  const int world = p.world_size;
  std::map<std::string, std::string> env = {
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"WORLD_SIZE", std::to_string(world)},
      {"LOCAL_WORLD_SIZE", std::to_string(c.nproc_per_node)},
      {"GROUP_RANK", std::to_string(p.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(p.nnodes)},
      {"ROLE_NAME", "default"},
      {"ROLE_RANK", std::to_string(rank)},
      {"ROLE_WORLD_SIZE", std::to_string(world)},
      {"MASTER_ADDR", p.master_addr},
      {"MASTER_PORT", std::to_string(p.master_port)},
      // The launcher hosts (or names) the store: workers connect as clients, rank 0 included.
      {"TORCHELASTIC_USE_AGENT_STORE", "True"},
      {"TORCHELASTIC_RUN_ID", p.run_id},
      {"RINGTORCH_RUN_ID", p.run_id},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(p.restart)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(c.max_restarts)},
      // Workers must not inherit a stale endpoint from the launcher's own environment.
      {"RINGTORCH_RDZV_ENDPOINT", p.store_url},
      // Every output line is prefixed "[rank R]: " here: the logger need not repeat the rank.
      {"RINGTORCH_OUTPUT_PREFIXED", "1"},
  };
  if (!p.elastic_run.empty()) {
    env["RINGTORCH_ELASTIC_RUN"] = p.elastic_run;
    env["RINGTORCH_ELASTIC_NODE"] = p.elastic_node;
    env["RINGTORCH_ELASTIC_GENERATION"] = std::to_string(p.generation);
  }
  if (!p.flight_recorder_dir.empty()) env["RINGTORCH_FLIGHT_RECORDER_DIR"] = p.flight_recorder_dir;
  if (!p.timeline.empty()) env["RINGTORCH_TIMELINE"] = timeline_part(p.timeline, rank);
  if (c.timeout) {
    env["RINGTORCH_TIMEOUT"] = std::to_string(std::chrono::duration<double>(*c.timeout).count());
  }
  // As torchrun: several workers per node each with all cores' worth of threads oversubscribe.
  if (c.nproc_per_node > 1 && !omp_threads_already_set) env["OMP_NUM_THREADS"] = "1";
  if (!openblas_coretype.empty()) env["OPENBLAS_CORETYPE"] = openblas_coretype;
  return env;
}

std::vector<std::string> worker_command(const LaunchConfig& c, int local_rank) {
  std::vector<std::string> argv;
  argv.push_back(c.program.front());
  if (!c.use_env) argv.push_back("--local_rank=" + std::to_string(local_rank));
  argv.insert(argv.end(), c.program.begin() + 1, c.program.end());
  return argv;
}

}  // namespace ringtorch
