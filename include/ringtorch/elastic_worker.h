// A worker's side of the elastic rendezvous, for recovery inside the process (ringtrain
// --elastic in-process; Note [In-process recovery] in docs/ARCHITECTURE.md): which generation
// it is in, how it tells its ringrun that the generation cannot go on, whether the generation
// ended (a node left or waits to join), and its place in the next one.
//
// Example (given: ringtorch::RendezvousOptions options, const std::function<void(ringtorch::ProcessGroup&)>& train):
//   auto rdzv = ringtorch::rendezvous(options);
//   while (true) {
//     auto elastic = ringtorch::ElasticWorker::from_environment(rdzv, options.env);  // each generation
//     auto group = ringtorch::ProcessGroup::create(rdzv);
//     try {
//       train(*group);
//       break;
//     } catch (const ringtorch::PeerLostError& e) {
//       if (!elastic) throw;  // not under an elastic ringrun
//       elastic->report_lost(e.what());
//       group.reset();
//       options = elastic->next_generation(options, std::chrono::minutes(10));  // its env names the generation
//       rdzv = ringtorch::rendezvous(options);
//     }
//   }
//
// Thread-safety: none; the training thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <ringtorch/rendezvous.h>

namespace ringtorch {

class ElasticWorker {
 public:
  // Under an elastic ringrun (RINGTORCH_ELASTIC_RUN, _NODE and _GENERATION set, as ringrun sets
  // them), declares this worker as recovering in process for its generation; nullopt otherwise.
  static std::optional<ElasticWorker> from_environment(const Rendezvous& rdzv, const EnvLookup& env);

  int generation() const { return generation_; }
  // Asks this node's ringrun to end the generation (the first report of a generation stands).
  void report_lost(const std::string& reason);
  // True once the generation ended: a node left, failed, or is being admitted.
  bool generation_ended();
  // Waits until a later generation closes with this node in it (the agents rendezvous; this
  // reads their result), says this worker recovers in process there, and returns `base` with
  // this worker's rank, world size, run id, restart count and generation in it (make the next
  // ElasticWorker from a rendezvous with those options). Throws TimeoutError after `timeout`, naming the generation it
  // waited for, and PeerLostError when the job ended (aborted or finished) without this node.
  RendezvousOptions next_generation(const RendezvousOptions& base, std::chrono::milliseconds timeout);

 private:
  ElasticWorker(c10::intrusive_ptr<c10d::Store> scope, std::string run, std::string node, int generation,
                int local_rank);

  c10::intrusive_ptr<c10d::Store> scope_;  // ringrun/<run>/elastic/
  std::string run_;                        // the job's run id (without the generation)
  std::string node_;                       // this node's agent id
  int generation_ = 0;
  int local_rank_ = 0;
};

}  // namespace ringtorch
