#include <algorithm>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <ringtorch/elastic_worker.h>
#include <ringtorch/error.h>

#include "base/parse.h"
#include "rendezvous/elastic_rendezvous.h"

namespace ringtorch {

std::optional<ElasticWorker> ElasticWorker::from_environment(const Rendezvous& rdzv, const EnvLookup& env) {
  const auto run = env("RINGTORCH_ELASTIC_RUN");
  const auto node = env("RINGTORCH_ELASTIC_NODE");
  const auto generation = env("RINGTORCH_ELASTIC_GENERATION");
  if (!run || !node || !generation || run->empty() || node->empty()) return std::nullopt;
  const int g = parse_int_in_range(*generation, 0, 1 << 30, "environment variable RINGTORCH_ELASTIC_GENERATION");
  auto scope = c10::make_intrusive<c10d::PrefixStore>(elastic_scope(*run), rdzv.base_store);
  declare_in_process_recovery(*scope, g, *node, rdzv.local_rank);
  return ElasticWorker(scope, *run, *node, g, rdzv.local_rank);
}

ElasticWorker::ElasticWorker(c10::intrusive_ptr<c10d::Store> scope, std::string run, std::string node, int generation,
                             int local_rank)
    : scope_(std::move(scope)),
      run_(std::move(run)),
      node_(std::move(node)),
      generation_(generation),
      local_rank_(local_rank) {}

void ElasticWorker::report_lost(const std::string& reason) {
  report_generation_lost(*scope_, generation_, node_, reason);
}

bool ElasticWorker::generation_ended() { return generation_end(*scope_, generation_).has_value(); }

RendezvousOptions ElasticWorker::next_generation(const RendezvousOptions& base, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int g = generation_ + 1;
  while (true) {
    if (auto end = generation_end(*scope_, g - 1);
        end && (end->kind == GenerationEndKind::kAborted || end->kind == GenerationEndKind::kFinished ||
                end->kind == GenerationEndKind::kDied)) {
      throw PeerLostError(str_cat("elastic job '", run_, "' ", generation_end_name(end->kind), " in generation ", g - 1,
                                  end->reason.empty() ? "" : ": " + end->reason));
    }
    const auto nodes = generation_members(*scope_, g);
    if (!nodes.empty()) {
      const auto mine = std::find_if(nodes.begin(), nodes.end(), [&](const ElasticNode& n) { return n.id == node_; });
      if (mine == nodes.end()) {
        ++g;  // closed without this node (the job was full); its agent waits for the next
        continue;
      }
      // Said before the group is made: if this generation ends meanwhile, the agent keeps this
      // process (and its commits) rather than stopping it.
      declare_in_process_recovery(*scope_, g, node_, local_rank_);
      ElasticGeneration joined;
      joined.generation = g;
      joined.nodes = nodes;
      joined.node_rank = static_cast<int>(mine - nodes.begin());
      RendezvousOptions next = base;
      next.rank = joined.first_rank() + local_rank_;
      next.world_size = joined.world_size();
      next.run_id = generation_run_id(run_, g);
      const std::string restarts = std::to_string(generation_restart_count(*scope_, g));
      const std::string generation = std::to_string(g);
      const std::string group_rank = std::to_string(joined.node_rank);
      const EnvLookup outer = base.env;
      next.env = [=](const std::string& name) -> std::optional<std::string> {
        if (name == "TORCHELASTIC_RESTART_COUNT") return restarts;
        if (name == "RINGTORCH_ELASTIC_GENERATION") return generation;
        if (name == "GROUP_RANK") return group_rank;
        return outer(name);
      };
      return next;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw TimeoutError(str_cat("elastic job '", run_, "': no generation after ", generation_, " included node '",
                                 node_, "' within ", format_duration_ms(timeout.count()),
                                 " (its ringrun is gone, or fewer than --nnodes MIN nodes are left)"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace ringtorch
