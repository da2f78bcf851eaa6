// rendezvous(): from an init method to a connected, namespaced store plus this worker's place in
// the job, as torch.distributed.init_process_group does before it builds a process group.
//
// Example:
//   ringtorch::RendezvousOptions options;
//   options.init_method = "env://";  // the default; tcp://, file://, redis:// as in Python
//   auto rdzv = ringtorch::rendezvous(options);
//   rdzv.store->set("hello/" + std::to_string(rdzv.rank), std::vector<uint8_t>{'h', 'i'});
//
// Which store:   env://  RINGTORCH_RDZV_ENDPOINT if set (ringrun with --rdzv_endpoint), else a
//                        TCPStore at MASTER_ADDR:MASTER_PORT, hosted by rank 0 unless
//                        TORCHELASTIC_USE_AGENT_STORE=True (then the launcher hosts it)
//                tcp://  a TCPStore hosted by rank 0;  file://  a FileStore;  redis://  RedisStore
// Identity:      options, then ?rank=&world_size= in the URL, then RANK/WORLD_SIZE, Slurm, Open MPI.
// Timeout:       options, then ?timeout=, then RINGTORCH_TIMEOUT, then 300 s.
// Key namespace: "<run id>/<restart>/<round>/<group>/" (Note [Join rounds] in join.h).
//
// Blocks until every rank has joined or the timeout passes; throws TimeoutError naming the
// missing ranks, InvalidArgumentError for bad input, IoError when the store is unreachable.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <ringtorch/job_environment.h>

namespace ringtorch {

constexpr std::chrono::milliseconds kDefaultTimeout{300000};

struct RendezvousOptions {
  std::string init_method = "env://";
  std::optional<int> rank;
  std::optional<int> world_size;
  std::optional<std::chrono::milliseconds> timeout;
  std::optional<std::string> run_id;  // else RINGTORCH_RUN_ID, TORCHELASTIC_RUN_ID, "ringtorch"
  std::string group = "default";
  EnvLookup env = process_environment();
};

struct Rendezvous {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;

  std::string init_method;  // as given, password masked
  std::string run_id;
  int restart = 0;          // the launcher's restart count (TORCHELASTIC_RESTART_COUNT)
  int round = 0;            // the join round under <run id>/<restart>/
  std::string master_addr;  // where the store lives, when it is a host (empty for file://)
  std::chrono::milliseconds timeout = kDefaultTimeout;

  // `job_store` holds the keys of this round ("<run id>/<restart>/<round>/"); `store` adds the
  // group ("<group>/"): what collectives of the default group use. Both keep the connection
  // (and, on the hosting rank, the TCP server) alive.
  c10::intrusive_ptr<c10d::Store> job_store;
  c10::intrusive_ptr<c10d::Store> base_store;  // the store itself, unprefixed (elastic_worker.h reads the agents' keys)
  c10::intrusive_ptr<c10d::Store> store;

  std::string key_prefix() const;  // "<run id>/<restart>/<round>/"
  std::string describe() const;    // "[rank 1/4] "
};

Rendezvous rendezvous(const RendezvousOptions& options = {});

}  // namespace ringtorch
