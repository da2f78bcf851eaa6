// Elastic rendezvous: which nodes form the job, generation after generation, over any store.
//
// Note [Elastic generations]
// A job is a sequence of generations. Every node's agent joins the first generation
// that has not closed yet: it takes a ticket from the generation's counter and writes its
// descriptor. A generation closes, once the previous one is over, as soon as max_nodes live
// nodes have joined, or min_nodes have been there for last_call_timeout; the first agent to
// write the member list (compareSet) wins, so all agents agree on it. Beyond max_nodes, the last
// in node order (and nodes that came too late) register in the next generation and wait there:
// the running agents see them waiting and may end their generation to admit them. A node that
// arrives after the job under its run id finished or aborted starts a new job two generations
// on, passing over the one that may hold registrations of nodes that waited for the old job. A generation ends with a
// record written once (compareSet): a failure (a worker failed, or a member stopped sending
// heartbeats), an admission, the finish of the job, or an abort; the survivors then join the
// next generation. Node ranks follow the order (--node_rank given, node id), so nodes that give
// distinct --node_rank keep them, and the rest are ordered the same way by every agent.
//
// Liveness without synchronised clocks: each agent bumps its counter "hb/<node id>" every
// keep_alive_interval; an agent declares a member silent when, by its own steady clock, the
// counter has not moved for keep_alive_interval x keep_alive_max_attempt.
//
// Restarts are counted by the job, not by each agent: the restart count of generation g is the
// number of failure ends since the job's first generation (after the previous job under the same
// run id finished or aborted), so a node that joins late agrees on the remaining budget.
//
// Keys, under the store given (prefixed for the run: "ringrun/<run id>/elastic/"):
//   g<G>/joined          ticket counter        g<G>/node/<ticket>   "id\thint\tnproc\thost"
//   g<G>/members         one descriptor a line, in node-rank order (written once)
//   g<G>/end             "<kind>\t<reason>" (written once)           hb/<node id>   counter
//   g<G>/lost            a worker's report that the generation cannot go on (written once);
//                        g<G>/lost/<node id> the report of each node's workers
//   g<G>/in_process/<node id>/<local rank>   a worker that recovers in its process
//
// Thread-safety: none; one agent thread uses an instance. Store calls may throw (store lost).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include <ringtorch/error.h>

#include "rendezvous/elastic_settings.h"

namespace ringtorch {

struct ElasticNode {
  std::string id;     // unique per agent: "<hostname>:<pid>"
  int rank_hint = 0;  // --node_rank as given
  int nproc = 1;      // workers on this node
  std::string host;   // for messages

  // "node 'host:123:a1b2' (--node_rank 1)"
  std::string describe() const;
  std::string encode() const;
  static std::optional<ElasticNode> decode(const std::string& line);
};

struct ElasticGeneration {
  int generation = 0;
  int restart_count = 0;           // failure ends since the job's first generation
  std::vector<ElasticNode> nodes;  // index = node rank
  int node_rank = 0;               // this node's index in `nodes`

  int world_size() const;
  int first_rank() const;  // global rank of this node's local rank 0
};

// kDied: every member went silent without writing an end (the whole job was killed).
enum class GenerationEndKind { kFailure, kAdmission, kFinished, kAborted, kDied };
const char* generation_end_name(GenerationEndKind kind);

struct GenerationEnd {
  GenerationEndKind kind = GenerationEndKind::kFailure;
  std::string reason;
};

// "node 'a' (--node_rank 0), node 'b' (--node_rank 1)", or "none".
std::string describe_nodes(const std::vector<ElasticNode>& nodes);

// The prefix of a run's elastic keys: "ringrun/<run id>/elastic" (agents and workers).
std::string elastic_scope(const std::string& run_id);
// Reading and writing one generation's keys, for agents and their workers (elastic_worker.h).
std::string elastic_key(int generation, const std::string& name);
// The run id the workers of `generation` use for their own keys: "<run>" for 0, else "<run>.<G>".
std::string generation_run_id(const std::string& run, int generation);
std::vector<ElasticNode> generation_members(c10d::Store& scope, int generation);  // empty until it closed
std::optional<GenerationEnd> generation_end(c10d::Store& scope, int generation);  // nullopt while it runs
// How many failure ends lie between the job's first generation and `generation` (the restart
// count every member of `generation` agrees on).
int generation_restart_count(c10d::Store& scope, int generation);
// A worker of node `node_id` that lost a peer asks the agents to end the generation; the first
// report of the generation stands (generation_lost_report), and each node's is kept apart.
void report_generation_lost(c10d::Store& scope, int generation, const std::string& node_id, const std::string& reason);
std::optional<std::string> generation_lost_report(c10d::Store& scope, int generation);
bool node_reported_lost(c10d::Store& scope, int generation, const std::string& node_id);
// A worker that recovers inside its process (ringtrain --elastic in-process) says so for each
// generation it joins; its agent then keeps it running when the generation ends.
void declare_in_process_recovery(c10d::Store& scope, int generation, const std::string& node_id, int local_rank);
bool recovers_in_process(c10d::Store& scope, int generation, const std::string& node_id, int local_rank);

class ElasticRendezvous {
 public:
  // `scope`: the store prefixed for the run. Logs (waits, late arrivals) go to `log`.
  ElasticRendezvous(c10::intrusive_ptr<c10d::Store> scope, ElasticNode me, ElasticSettings settings,
                    std::function<void(const std::string&)> log);

  // Joins the next open generation and returns once it closed with this node in it. `tick` runs
  // at every poll (it may throw to give up, e.g. on a signal). Throws TimeoutError when fewer
  // than min_nodes were there for join_timeout (naming the nodes missing since the previous
  // generation), and RendezvousClosed when the job this node waited to join finished or aborted.
  ElasticGeneration join(const std::function<void()>& tick);

  // Bumps this node's heartbeat counter once keep_alive_interval has passed since the last.
  void heartbeat();
  // Members of the current generation (this node excluded) silent for the heartbeat timeout.
  std::vector<ElasticNode> silent_members();
  // Nodes registered in the next generation whose heartbeat moves: waiting to be admitted.
  int nodes_waiting();
  // Ends the current generation unless it already ended; returns the end that stands.
  GenerationEnd end_generation(GenerationEndKind kind, const std::string& reason);
  // The current generation's end; nullopt while it runs.
  std::optional<GenerationEnd> this_generation_end();

  const ElasticSettings& settings() const { return settings_; }
  int generation() const { return generation_; }
  c10d::Store& scope() { return *scope_; }

 private:
  struct Seen {
    int64_t value = -1;
    std::chrono::steady_clock::time_point changed;
    bool moved = false;  // changed since this agent first looked: the node is alive for sure
  };
  int first_open_generation();
  bool silent(const ElasticNode& node);
  // Not silent, and its heartbeat seen to move (a registration left by a node that exited
  // looks alive until the heartbeat timeout; this does not).
  bool beating(const ElasticNode& node);
  std::vector<ElasticNode> registrants(int generation);
  std::vector<ElasticNode> live_registrants(int generation);  // registrants not silent
  std::vector<ElasticNode> members(int generation) { return generation_members(*scope_, generation); }
  std::optional<GenerationEnd> end_of(int generation) { return generation_end(*scope_, generation); }
  bool generation_over(int generation);
  // Closes `generation` when its rule is met; true when its member list exists.
  bool try_close(int generation, std::optional<std::chrono::steady_clock::time_point>* enough_since);
  [[noreturn]] void throw_join_timeout(int generation);

  c10::intrusive_ptr<c10d::Store> scope_;
  const ElasticNode me_;
  const ElasticSettings settings_;
  std::function<void(const std::string&)> log_;
  int generation_ = -1;  // the current (last joined) generation
  std::vector<ElasticNode> members_;
  std::map<std::string, Seen> seen_;  // heartbeat counters by node id
  std::chrono::steady_clock::time_point last_beat_{};
};

// The job this node waited to join ended before admitting it (a change of membership: the
// agent stops).
class RendezvousClosed : public MembershipChangedError {
 public:
  RendezvousClosed(GenerationEnd end, const std::string& message)
      : MembershipChangedError(message), end_(std::move(end)) {}
  const GenerationEnd& end() const { return end_; }

 private:
  GenerationEnd end_;
};

}  // namespace ringtorch
