// The environment and command line ringrun gives each worker (pure; unit-tested).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/launch/launch_config.h"

namespace ringtorch {

// What the agent has settled before it starts a generation of workers.
struct JobPlacement {
  std::string run_id;  // what workers see as TORCHELASTIC_RUN_ID / RINGTORCH_RUN_ID
  int restart = 0;
  std::string master_addr;
  uint16_t master_port = 0;         // the port the store really listens on (after --standalone)
  std::string store_url;            // file:// or redis:// endpoint; empty for the node-0 TCP store
  std::string flight_recorder_dir;  // RINGTORCH_FLIGHT_RECORDER_DIR for the workers
  std::string timeline;             // the merged timeline's path; empty: no timeline
  // This generation's membership (Note [Elastic generations]): may change between restarts.
  int node_rank = 0;   // GROUP_RANK
  int nnodes = 1;      // GROUP_WORLD_SIZE
  int first_rank = 0;  // RANK of local rank 0
  int world_size = 1;  // WORLD_SIZE
  // For workers that recover inside their process (rendezvous/elastic_worker.h).
  std::string elastic_run;   // RINGTORCH_ELASTIC_RUN: the job's run id, without the generation
  std::string elastic_node;  // RINGTORCH_ELASTIC_NODE: this node's agent id
  int generation = 0;        // RINGTORCH_ELASTIC_GENERATION
};

// `omp_threads_already_set`: the launcher's own environment has OMP_NUM_THREADS (kept, not
// replaced). `openblas_coretype`: the OPENBLAS_CORETYPE workers get, the launcher's
// openblas_kernels().better (base/openblas.h); empty: none is set.
std::map<std::string, std::string> worker_environment(const LaunchConfig& config, const JobPlacement& placement,
                                                      int local_rank, bool omp_threads_already_set,
                                                      const std::string& openblas_coretype);

std::vector<std::string> worker_command(const LaunchConfig& config, int local_rank);

}  // namespace ringtorch
