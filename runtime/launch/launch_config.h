// ringrun's configuration: torchrun's flags (and torch.distributed.launch's legacy ones), parsed
// without side effects. docs/launcher.md documents every flag; launch_usage() prints them.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/elastic_settings.h"

namespace ringtorch {

struct LaunchConfig {
  int nproc_per_node = 1;
  int nnodes = 1;             // --nnodes N, or the maximum of MIN:MAX
  int min_nnodes = 1;         // the minimum of --nnodes MIN:MAX (== nnodes for a fixed count)
  ElasticSettings rdzv_conf;  // --rdzv_conf (min/max nodes are taken from --nnodes)
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 29500;
  // Where the store lives: empty (tcp://master_addr:master_port, hosted by node 0), or a
  // tcp:// (hosted by node 0), file:// or redis:// URL. "HOST:PORT" means tcp://HOST:PORT.
  std::string rdzv_endpoint;
  // --rdzv_conf password_file=PATH: a file whose first line is the Redis password, read at
  // start and handed to ringrun's store and its workers as RINGTORCH_REDIS_PASSWORD, so the
  // password never needs the command line (/proc/PID/cmdline is readable by every local user).
  std::string redis_password_file;
  bool standalone = false;  // one node, store on 127.0.0.1 at a free port
  int max_restarts = 0;
  std::string log_dir;  // empty: no log files
  // --timeline FILE (or RINGTORCH_TIMELINE in ringrun's environment): each worker records a
  // timeline part, merged into FILE at the end (docs/observability.md). Empty: none.
  std::string timeline;
  std::string run_id;    // empty: generated (or agreed through node 0's store)
  bool use_env = false;  // false: pass --local_rank=N to the program (torch.distributed.launch)
  std::optional<std::chrono::milliseconds> timeout;  // rendezvous/store timeout, also given to workers
  std::chrono::milliseconds term_timeout{5000};      // SIGTERM -> SIGKILL grace period
  std::chrono::milliseconds monitor_interval{100};
  std::vector<std::string> program;  // the program and its arguments
};

// Where the Redis password comes from, before anything starts: --rdzv_conf password_file's
// first line goes into this process's RINGTORCH_REDIS_PASSWORD (so the store and the workers,
// which inherit it, use it); a password in the --rdzv_endpoint URL gets a warning. Call it while
// the process has one thread (it sets an environment variable). Throws for an unreadable,
// empty or oversized file.
void take_redis_password(const LaunchConfig& config);

// Throws InvalidArgumentError naming the flag and the value. `--help` yields help = true.
LaunchConfig parse_launch_args(const std::vector<std::string>& args, bool* help);

std::string launch_usage();

}  // namespace ringtorch
