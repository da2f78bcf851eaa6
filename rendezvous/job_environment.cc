#include <cstdlib>

#include <ringtorch/error.h>
#include <ringtorch/job_environment.h>

#include "base/parse.h"
#include "rendezvous/init_method.h"

namespace ringtorch {
namespace {

std::optional<int> read_int(const EnvLookup& env, const std::string& name, long long min) {
  auto value = env(name);
  if (!value) return std::nullopt;
  return parse_int_in_range(*value, min, 1 << 24, "environment variable " + name);
}

// Slurm writes per-node task counts as "2" or "2(x3)" (two tasks on each of three nodes).
std::optional<int> read_slurm_tasks_per_node(const EnvLookup& env) {
  auto value = env("SLURM_NTASKS_PER_NODE");
  if (!value) return std::nullopt;
  std::string first = value->substr(0, value->find_first_of("(,"));
  return parse_int_in_range(first, 1, 1 << 24, "environment variable SLURM_NTASKS_PER_NODE");
}

}  // namespace

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
}

EnvLookup map_environment(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
}

JobEnvironment read_job_environment(const EnvLookup& env) {
  JobEnvironment job;
  // Identity, in torch.distributed's order of preference, then the schedulers'.
  struct Source {
    const char* rank;
    const char* size;
    const char* local_rank;
    const char* local_size;
  };
  const Source sources[] = {
      {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
  };
  for (const auto& s : sources) {
    if (!env(s.rank) && !env(s.size)) continue;
    job.rank = read_int(env, s.rank, 0);
    job.world_size = read_int(env, s.size, 1);
    job.rank_source = std::string(s.rank) + "/" + s.size;
    job.local_rank = read_int(env, s.local_rank, 0);
    job.local_world_size = s.local_size ? read_int(env, s.local_size, 1) : read_slurm_tasks_per_node(env);
    break;
  }
  // LOCAL_RANK alone (a launcher that sets only it) still counts.
  if (!job.local_rank) job.local_rank = read_int(env, "LOCAL_RANK", 0);
  if (!job.local_world_size) job.local_world_size = read_int(env, "LOCAL_WORLD_SIZE", 1);

  job.master_addr = env("MASTER_ADDR");
  if (auto port = read_int(env, "MASTER_PORT", 1)) {
    if (*port > 65535)
      throw InvalidArgumentError("environment variable MASTER_PORT: " + std::to_string(*port) +
                                 " is outside [1, 65535]");
    job.master_port = static_cast<uint16_t>(*port);
  }
  if (auto agent = env("TORCHELASTIC_USE_AGENT_STORE")) {
    job.agent_store = (*agent == "True" || *agent == "true" || *agent == "1");
  }
  job.rdzv_endpoint = env("RINGTORCH_RDZV_ENDPOINT");
  job.run_id = env("RINGTORCH_RUN_ID");
  if (!job.run_id) job.run_id = env("TORCHELASTIC_RUN_ID");
  if (auto restarts = read_int(env, "TORCHELASTIC_RESTART_COUNT", 0)) job.restart_count = *restarts;
  if (auto timeout = env("RINGTORCH_TIMEOUT"))
    job.timeout = parse_seconds(*timeout, "environment variable RINGTORCH_TIMEOUT");
  return job;
}

}  // namespace ringtorch
