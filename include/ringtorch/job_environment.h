// What the environment says about this worker and its job: the variables torchrun, ringrun,
// Slurm and Open MPI set (docs/rendezvous.md lists them all). Pure: reads through an EnvLookup,
// so tests pass a map instead of touching the process environment.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace ringtorch {

using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

EnvLookup process_environment();
EnvLookup map_environment(std::map<std::string, std::string> vars);

struct JobEnvironment {
  // Identity. `rank_source` names where rank and world size came from, for messages
  // ("RANK/WORLD_SIZE", "SLURM_PROCID/SLURM_NTASKS", "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE").
  std::optional<int> rank;
  std::optional<int> world_size;
  std::string rank_source;
  std::optional<int> local_rank;
  std::optional<int> local_world_size;

  // Where the store is.
  std::optional<std::string> master_addr;    // MASTER_ADDR
  std::optional<uint16_t> master_port;       // MASTER_PORT
  bool agent_store = false;                  // TORCHELASTIC_USE_AGENT_STORE=True: the launcher hosts the TCP store
  std::optional<std::string> rdzv_endpoint;  // RINGTORCH_RDZV_ENDPOINT: a tcp/file/redis store URL

  // Namespacing and limits.
  std::optional<std::string> run_id;                 // RINGTORCH_RUN_ID, else TORCHELASTIC_RUN_ID
  int restart_count = 0;                             // TORCHELASTIC_RESTART_COUNT
  std::optional<std::chrono::milliseconds> timeout;  // RINGTORCH_TIMEOUT (seconds)
};

// Throws InvalidArgumentError naming the variable when one is set but malformed.
JobEnvironment read_job_environment(const EnvLookup& env);

}  // namespace ringtorch
