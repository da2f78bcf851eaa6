// LaunchAgent: what ringrun does on one node (see docs/launcher.md).
//
//  1. Opens the store: node 0 hosts a c10d::TCPStore (or all nodes open the file:// / redis://
//     endpoint), agrees on a run id, and joins a generation of the elastic rendezvous, which
//     gives this node its rank and the world size (Note [Elastic generations]).
//  2. Starts --nproc_per_node workers with torchrun's variables and forwards their output.
//  3. Watches them, and the other nodes through the store: their heartbeats, the generation's
//     end, nodes waiting to be admitted. When a worker fails or a node goes silent, it stops its
//     workers (SIGTERM, then SIGKILL after --term_timeout) and either joins the next generation
//     (a restart, while --max_restarts allows) or, with none left, ends with the worker's code.
//     Nodes waiting to join end the generation too (at most once per admit_interval), without
//     using a restart.
//  4. Passes SIGINT/SIGTERM (SIGHUP as SIGTERM) on to every worker and ends with 128 + signal.
//  5. With several nodes, waits until every node's workers are done before leaving (node 0 keeps
//     the store up for the others).
//
// Thread-safety: single-threaded; run() is called once.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "rendezvous/elastic_rendezvous.h"
#include "runtime/launch/launch_config.h"
#include "runtime/launch/output_forwarder.h"
#include "runtime/launch/signal_watch.h"
#include "runtime/launch/subprocess.h"
#include "runtime/launch/worker_env.h"

namespace ringtorch {

class LaunchAgent {
 public:
  // From construction on, SIGINT, SIGTERM and SIGHUP are recorded for the agent (and passed on
  // to workers) instead of killing ringrun outright; SIGUSR1 is passed on to the workers (their
  // flight recorders write their files). One agent per process.
  explicit LaunchAgent(LaunchConfig config);
  ~LaunchAgent();

  // Blocks until the job ends; returns ringrun's exit status. Merges the workers' timeline parts
  // (--timeline) at the end.
  int run();

 private:
  struct Failure {
    int rank = 0;
    int local_rank = 0;
    pid_t pid = 0;
    ExitStatus status;
  };
  // kGenerationEnded: the generation ended elsewhere (or a member went silent); see generation_end_.
  // kRemoteAbort: node 0's TCP store is gone.
  enum class Outcome { kSucceeded, kLocalFailure, kGenerationEnded, kRemoteAbort, kSignal };

  void open_store();
  // "lost the store ..." naming the store (password masked) and what probably happened.
  std::string store_loss(const std::exception& e) const;
  // A store call failed (`during`: " while ..." or ""). True: this node must stop (node 0's TCP
  // store is gone; *remote_reason says so). False: an external store went away; logged once,
  // and this node carries on without cross-node checks (store_lost_).
  bool store_failed(const std::exception& e, const std::string& during, std::string* remote_reason);
  void settle_run_id();
  // Joins the next generation and places this node in it (placement_, control_). Returns an
  // exit status when the job cannot go on (too few nodes, the job ended before admitting it).
  std::optional<int> join_generation();
  int run_generations();
  // Ends this generation for a failure: a restart while the job's budget allows, else an abort.
  GenerationEnd end_for_failure(const std::string& reason);
  // Flight recorder: asks the running workers for their files (SIGUSR1), waits up to a second for
  // them, and logs what `ringtrace` would say of this generation's files. Workers that recover in
  // their processes are not asked: they wrote theirs when they lost the peer, and go on.
  void report_flight_recorder();
  // SIGUSR1 to each running worker that handles it (its default action would end the others);
  // returns the ranks asked, and logs the others.
  std::vector<int> request_flight_dumps();
  // This node's ranks' flight-recorder files and timeline parts from an earlier generation or run.
  void remove_stale_reports() const;
  void merge_timeline() const;
  // Starts this generation's workers: every local rank, or (after in-process recovery) only
  // those no longer running.
  void start_workers(int restart);
  // Before the next generation: stops the workers, unless every one still running recovers in
  // its process (ringtrain --elastic in-process), which then waits for the next generation.
  void end_generation_workers();
  bool workers_recover_in_process();
  Outcome monitor(Failure* failure, std::string* remote_reason);
  Outcome wait_for_other_nodes(std::string* remote_reason);
  // The other nodes, through the store: the generation's end, silent members, nodes waiting
  // (admitted only while `may_admit`).
  std::optional<Outcome> check_store(bool may_admit, std::string* remote_reason);
  // A local worker exited 0, or a node of this generation is done.
  bool any_worker_finished();
  void stop_workers(int sig);
  void drain_output();
  // Shared-memory segments (runtime/comm/shm) of this run that workers killed mid set-up left.
  void remove_segments_left_by_workers() const;
  void log(const std::string& message) const;

  bool several_nodes() const { return config_.nnodes > 1; }
  int rank_of(int local_rank) const { return placement_.first_rank + local_rank; }

  const LaunchConfig config_;
  JobPlacement placement_;
  std::string run_id_;  // as given or agreed; placement_.run_id adds the generation
  std::unique_ptr<ElasticRendezvous> rendezvous_;
  ElasticGeneration generation_;
  GenerationEnd generation_end_;  // with Outcome::kGenerationEnded
  std::chrono::steady_clock::time_point generation_started_;
  int64_t generation_started_us_ = 0;             // wall clock: the flight-recorder report reads files from then on
  std::optional<std::string> openblas_coretype_;  // for the workers; probed, and said, at the first start
  bool ran_workers_ = false;                      // this node started its program at least once (a job that ends
                                                  // before it did is no success of this node's)
  bool store_lost_ = false;                       // an external store stopped answering: no more cross-node checks
  c10::intrusive_ptr<c10d::Store> store_;         // the rendezvous store (hosted here on node 0)
  c10::intrusive_ptr<c10d::Store> control_;       // agents' keys: ringrun/<run id>/elastic/g<generation>/
  std::vector<Subprocess> workers_;
  std::vector<std::FILE*> logs_;        // one per local rank when --log_dir is given
  std::vector<std::string> log_paths_;  // their paths, for messages
  int logs_first_rank_ = -1;            // the rank logs_[0] was opened for
  OutputForwarder output_;
  SignalWatch signals_;  // INT, TERM, HUP and USR1, for the agent's life
};

}  // namespace ringtorch
