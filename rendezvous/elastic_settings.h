// The settings of an elastic rendezvous (rendezvous/elastic_rendezvous.h): ringrun's --nnodes
// MIN:MAX and torchrun's --rdzv_conf keys. Plain data and a pure parser.
#pragma once

#include <chrono>
#include <string>

namespace ringtorch {

// torchrun's --rdzv_conf keys (docs/launcher.md, "Elastic jobs").
struct ElasticSettings {
  int min_nodes = 1;
  int max_nodes = 1;
  std::chrono::milliseconds join_timeout{600000};      // fewer than min_nodes this long: error
  std::chrono::milliseconds last_call_timeout{30000};  // after min_nodes, wait this long for more
  std::chrono::milliseconds keep_alive_interval{5000};
  int keep_alive_max_attempt = 3;                   // missed heartbeats before a node is dead
  std::chrono::milliseconds admit_interval{10000};  // at most one admission restart per interval

  std::chrono::milliseconds heartbeat_timeout() const { return keep_alive_interval * keep_alive_max_attempt; }
};

// Parses "join_timeout=60,last_call_timeout=5" (seconds; torchrun's form) into `settings`.
// Throws InvalidArgumentError naming the key and listing the known ones.
void parse_rdzv_conf(const std::string& text, ElasticSettings* settings);

}  // namespace ringtorch
