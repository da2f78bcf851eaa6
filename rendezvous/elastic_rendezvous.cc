#include "rendezvous/elastic_rendezvous.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <thread>

#include <ringtorch/error.h>

#include "rendezvous/store_value.h"

namespace ringtorch {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kPoll{50};

// Ends after which the next node to arrive starts a new job.
bool ends_job(GenerationEndKind kind) {
  return kind == GenerationEndKind::kFinished || kind == GenerationEndKind::kAborted ||
         kind == GenerationEndKind::kDied;
}

}  // namespace

std::string describe_nodes(const std::vector<ElasticNode>& nodes) {
  std::string out;
  for (const auto& n : nodes) out += (out.empty() ? "" : ", ") + n.describe();
  return out.empty() ? "none" : out;
}

std::string elastic_scope(const std::string& run_id) { return "ringrun/" + run_id + "/elastic"; }

std::string ElasticNode::describe() const { return str_cat("node '", id, "' (--node_rank ", rank_hint, ")"); }

std::string ElasticNode::encode() const { return str_cat(id, "\t", rank_hint, "\t", nproc, "\t", host); }

std::optional<ElasticNode> ElasticNode::decode(const std::string& line) {
  std::stringstream in(line);
  ElasticNode n;
  std::string hint, nproc;
  if (!std::getline(in, n.id, '\t') || !std::getline(in, hint, '\t') || !std::getline(in, nproc, '\t')) {
    return std::nullopt;
  }
  std::getline(in, n.host);
  try {
    n.rank_hint = std::stoi(hint);
    n.nproc = std::stoi(nproc);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return n;
}

int ElasticGeneration::world_size() const {
  int w = 0;
  for (const auto& n : nodes) w += n.nproc;
  return w;
}

int ElasticGeneration::first_rank() const {
  int r = 0;
  for (int i = 0; i < node_rank; ++i) r += nodes[static_cast<size_t>(i)].nproc;
  return r;
}

const char* generation_end_name(GenerationEndKind kind) {
  switch (kind) {
    case GenerationEndKind::kFailure:
      return "failure";
    case GenerationEndKind::kAdmission:
      return "admission";
    case GenerationEndKind::kFinished:
      return "finished";
    case GenerationEndKind::kAborted:
      return "aborted";
    case GenerationEndKind::kDied:
      return "died";
  }
  return "?";
}

ElasticRendezvous::ElasticRendezvous(c10::intrusive_ptr<c10d::Store> scope, ElasticNode me, ElasticSettings settings,
                                     std::function<void(const std::string&)> log)
    : scope_(std::move(scope)), me_(std::move(me)), settings_(settings), log_(std::move(log)) {}

std::string elastic_key(int generation, const std::string& name) { return str_cat("g", generation, "/", name); }

std::string generation_run_id(const std::string& run, int generation) {
  return generation == 0 ? run : str_cat(run, ".", generation);
}

std::vector<ElasticNode> generation_members(c10d::Store& scope, int generation) {
  std::vector<ElasticNode> nodes;
  const std::string k = elastic_key(generation, "members");
  if (!scope.check({k})) return nodes;
  std::stringstream in(store_text(scope.get(k)));
  std::string line;
  while (std::getline(in, line)) {
    if (auto n = ElasticNode::decode(line)) nodes.push_back(*n);
  }
  return nodes;
}

std::optional<GenerationEnd> generation_end(c10d::Store& scope, int generation) {
  const std::string k = elastic_key(generation, "end");
  if (!scope.check({k})) return std::nullopt;
  const std::string text = store_text(scope.get(k));
  const auto tab = text.find('\t');
  const std::string kind = text.substr(0, tab);
  GenerationEnd end;
  end.reason = tab == std::string::npos ? "" : text.substr(tab + 1);
  for (auto k2 : {GenerationEndKind::kFailure, GenerationEndKind::kAdmission, GenerationEndKind::kFinished,
                  GenerationEndKind::kAborted, GenerationEndKind::kDied}) {
    if (kind == generation_end_name(k2)) end.kind = k2;
  }
  return end;
}

int generation_restart_count(c10d::Store& scope, int generation) {
  int count = 0;
  for (int h = generation - 1; h >= 0; --h) {
    const auto end = generation_end(scope, h);
    if (!end || ends_job(end->kind)) break;  // a job before
    if (end->kind == GenerationEndKind::kFailure) ++count;
  }
  return count;
}

void report_generation_lost(c10d::Store& scope, int generation, const std::string& node_id, const std::string& reason) {
  scope.set(elastic_key(generation, "lost/" + node_id), store_value(reason));
  scope.compareSet(elastic_key(generation, "lost"), {}, store_value(reason));
}

bool node_reported_lost(c10d::Store& scope, int generation, const std::string& node_id) {
  return scope.check({elastic_key(generation, "lost/" + node_id)});
}

void declare_in_process_recovery(c10d::Store& scope, int generation, const std::string& node_id, int local_rank) {
  scope.set(elastic_key(generation, str_cat("in_process/", node_id, "/", local_rank)), {'1'});
}

bool recovers_in_process(c10d::Store& scope, int generation, const std::string& node_id, int local_rank) {
  return scope.check({elastic_key(generation, str_cat("in_process/", node_id, "/", local_rank))});
}

std::optional<std::string> generation_lost_report(c10d::Store& scope, int generation) {
  const std::string k = elastic_key(generation, "lost");
  if (!scope.check({k})) return std::nullopt;
  return store_text(scope.get(k));
}

void ElasticRendezvous::heartbeat() {
  const auto now = Clock::now();
  if (last_beat_ != Clock::time_point{} && now - last_beat_ < settings_.keep_alive_interval) return;
  scope_->add("hb/" + me_.id, 1);
  last_beat_ = now;
}

bool ElasticRendezvous::silent(const ElasticNode& node) {
  if (node.id == me_.id) return false;
  const int64_t value = scope_->add("hb/" + node.id, 0);
  const auto now = Clock::now();
  Seen& seen = seen_[node.id];
  if (seen.value != value) seen = Seen{value, now, seen.value >= 0};
  return now - seen.changed >= settings_.heartbeat_timeout();
}

bool ElasticRendezvous::beating(const ElasticNode& node) { return !silent(node) && seen_[node.id].moved; }

int ElasticRendezvous::first_open_generation() {
  int g = 0;
  while (scope_->check({elastic_key(g, "members")})) ++g;
  return g;
}

std::vector<ElasticNode> ElasticRendezvous::registrants(int generation) {
  const int64_t count = scope_->add(elastic_key(generation, "joined"), 0);
  std::vector<ElasticNode> nodes;
  for (int64_t t = 0; t < count; ++t) {
    const std::string k = elastic_key(generation, str_cat("node/", t));
    if (!scope_->check({k})) continue;  // took a ticket, not yet written (or died in between)
    if (auto n = ElasticNode::decode(store_text(scope_->get(k)))) nodes.push_back(*n);
  }
  return nodes;
}

std::vector<ElasticNode> ElasticRendezvous::live_registrants(int generation) {
  std::vector<ElasticNode> live;
  for (auto& n : registrants(generation)) {
    if (!silent(n)) live.push_back(std::move(n));
  }
  return live;
}

bool ElasticRendezvous::generation_over(int generation) {
  if (end_of(generation)) return true;
  // Every member silent: the whole job died without writing an end (all its nodes killed).
  // Recorded, so that a member that was only stopped and comes back reads the same history.
  const auto nodes = members(generation);
  if (!std::all_of(nodes.begin(), nodes.end(), [&](const ElasticNode& n) { return silent(n); })) return false;
  scope_->compareSet(elastic_key(generation, "end"), {},
                     store_value(str_cat(generation_end_name(GenerationEndKind::kDied), "\tevery node of generation ",
                                         generation, " went silent")));
  return true;
}

bool ElasticRendezvous::try_close(int generation, std::optional<Clock::time_point>* enough_since) {
  if (scope_->check({elastic_key(generation, "members")})) return true;
  // Nodes that registered while the previous generation runs wait for it to end.
  if (generation > 0 && !generation_over(generation - 1)) {
    enough_since->reset();
    return false;
  }
  std::vector<ElasticNode> live = live_registrants(generation);
  // Node order; beyond max_nodes the last in that order wait for the next generation, so the
  // node given --node_rank 0 (with tcp://, the one hosting the store) is always in.
  std::sort(live.begin(), live.end(), [](const ElasticNode& a, const ElasticNode& b) {
    return a.rank_hint != b.rank_hint ? a.rank_hint < b.rank_hint : a.id < b.id;
  });
  const int n = static_cast<int>(live.size());
  bool close = false;
  if (n >= settings_.max_nodes) {
    live.resize(static_cast<size_t>(settings_.max_nodes));
    close = true;
  } else if (n >= settings_.min_nodes) {
    if (!*enough_since) *enough_since = Clock::now();
    close = Clock::now() - **enough_since >= settings_.last_call_timeout;
  } else {
    enough_since->reset();
  }
  if (!close) return false;
  std::string text;
  for (const auto& node : live) text += node.encode() + "\n";
  scope_->compareSet(elastic_key(generation, "members"), {}, store_value(text));  // the first writer's list stands
  return true;
}

void ElasticRendezvous::throw_join_timeout(int generation) {
  const std::vector<ElasticNode> live = live_registrants(generation);
  std::string message =
      str_cat("rendezvous generation ", generation, ": ", live.size(), " node", live.size() == 1 ? "" : "s", " (",
              describe_nodes(live), ") of the ", settings_.min_nodes, " needed (--nnodes ", settings_.min_nodes, ":",
              settings_.max_nodes, ") after ", format_duration_ms(settings_.join_timeout.count()),
              " (--rdzv_conf join_timeout=SECONDS)");
  if (generation > 0 && !generation_over(generation - 1)) {
    message += str_cat("; generation ", generation - 1, " still runs (", describe_nodes(members(generation - 1)),
                       ") and did not admit this node: it is full (--nnodes maximum) or admits at most once per "
                       "--rdzv_conf admit_interval");
  } else if (generation > 0) {
    std::vector<ElasticNode> missing;
    for (const auto& m : members(generation - 1)) {
      const bool back = std::any_of(live.begin(), live.end(), [&](const ElasticNode& n) { return n.id == m.id; });
      if (!back) missing.push_back(m);
    }
    message += str_cat("; missing since generation ", generation - 1, ": ", describe_nodes(missing),
                       " (dead, or pointed at another store; start a replacement node with the same --run_id)");
  } else {
    message += "; start the other nodes with the same --run_id and --rdzv_endpoint";
  }
  throw TimeoutError(message);
}

ElasticGeneration ElasticRendezvous::join(const std::function<void()>& tick) {
  const auto start = Clock::now();
  // A node that arrives while a generation runs waits for it in the next one. One that arrives
  // after the job under this run id ended (finished, aborted, or died whole) starts a new job two
  // generations on: the next one may hold registrations of nodes that waited for the old job.
  bool waiting_for_running_job = false;
  auto place = [&](int g) {
    waiting_for_running_job = false;
    if (g == 0) return g;
    // Passed over by the first node of a new job (below): this node is one of that job. Its
    // end may not be written yet (two writes), so the empty member list decides.
    if (members(g - 1).empty()) return g;
    const auto end = end_of(g - 1);
    if (end && ends_job(end->kind)) {
      // Closed with no members and ended: every walk passes over it, and the restart count of
      // the new job starts there.
      scope_->compareSet(elastic_key(g, "members"), {}, {});
      scope_->compareSet(elastic_key(g, "end"), {},
                         store_value(str_cat(generation_end_name(GenerationEndKind::kAborted),
                                             "\tpassed over: the job before ended")));
      return first_open_generation();
    }
    waiting_for_running_job = !end.has_value();
    return g;
  };
  int g = place(first_open_generation());
  std::string registration;  // this node's key in the generation it waits in
  auto register_in = [&](int generation) {
    const int64_t ticket = scope_->add(elastic_key(generation, "joined"), 1) - 1;
    registration = elastic_key(generation, str_cat("node/", ticket));
    scope_->set(registration, store_value(me_.encode()));
  };
  try {
    heartbeat();
    register_in(g);
    if (waiting_for_running_job) {
      log_(str_cat("generation ", g - 1, " is running (", describe_nodes(members(g - 1)),
                   "); waiting to be admitted in generation ", g));
    }
    std::optional<Clock::time_point> enough_since;
    while (true) {
      tick();
      heartbeat();
      if (waiting_for_running_job) {
        const auto end = end_of(g - 1);
        if (end && (end->kind == GenerationEndKind::kFinished || end->kind == GenerationEndKind::kAborted)) {
          throw RendezvousClosed(*end,
                                 str_cat("the job ", end->kind == GenerationEndKind::kFinished ? "finished" : "aborted",
                                         " in generation ", g - 1, " while this node waited to be admitted",
                                         end->reason.empty() ? "" : " (" + end->reason + ")"));
        }
        if (!end && settings_.min_nodes == settings_.max_nodes) {
          // A fixed-size job that runs full, every member's heartbeat seen moving, will never
          // admit this node: it is a second job under the same run id (a replacement for a dead
          // member finds that member silent, and waits).
          const auto running = members(g - 1);
          if (static_cast<int>(running.size()) >= settings_.max_nodes &&
              std::all_of(running.begin(), running.end(), [&](const ElasticNode& n) { return beating(n); })) {
            scope_->deleteKey(registration);
            throw RendezvousClosed(
                GenerationEnd{GenerationEndKind::kAborted, "run id taken"},
                str_cat("a job of ", running.size(), " node", running.size() == 1 ? "" : "s",
                        " (fixed --nnodes) already runs under this run id with every node alive (",
                        describe_nodes(running),
                        "); this node can never join it: give this job its own --run_id (or --rdzv_id)"));
          }
        }
        if (!end && generation_over(g - 1)) continue;  // its end was just recorded: read it
        if (end && end->kind == GenerationEndKind::kDied) {
          // The job this node waited for died whole: this node starts a new one.
          scope_->deleteKey(registration);
          registration.clear();
          g = place(first_open_generation());
          register_in(g);
          enough_since.reset();
          continue;
        }
      }
      if (try_close(g, &enough_since)) {
        auto list = members(g);
        const auto mine = std::find_if(list.begin(), list.end(), [&](const ElasticNode& n) { return n.id == me_.id; });
        if (mine != list.end()) {
          generation_ = g;
          members_ = list;
          ElasticGeneration joined;
          joined.generation = g;
          joined.restart_count = generation_restart_count(*scope_, g);
          joined.node_rank = static_cast<int>(mine - list.begin());
          joined.nodes = std::move(list);
          return joined;
        }
        log_(str_cat("generation ", g, " closed without this node (", list.size(),
                     " nodes, --nnodes maximum reached or it arrived late); waiting for generation ", g + 1));
        ++g;
        register_in(g);
        enough_since.reset();
        waiting_for_running_job = true;
        continue;
      }
      if (Clock::now() - start > settings_.join_timeout) throw_join_timeout(g);
      std::this_thread::sleep_for(kPoll);
    }
  } catch (...) {
    // Leaving without joining (timeout, the job ended, a signal): take the registration back,
    // or it would count as a node waiting to be admitted. Best effort: the store may be gone.
    try {
      if (!registration.empty()) scope_->deleteKey(registration);
    } catch (const std::exception&) {
    }
    throw;
  }
}

std::vector<ElasticNode> ElasticRendezvous::silent_members() {
  std::vector<ElasticNode> out;
  for (const auto& m : members_) {
    if (silent(m)) out.push_back(m);
  }
  return out;
}

int ElasticRendezvous::nodes_waiting() {
  int n = 0;
  for (const auto& r : registrants(generation_ + 1)) n += beating(r) ? 1 : 0;
  return n;
}

GenerationEnd ElasticRendezvous::end_generation(GenerationEndKind kind, const std::string& reason) {
  scope_->compareSet(elastic_key(generation_, "end"), {},
                     store_value(str_cat(generation_end_name(kind), "\t", reason)));
  return *end_of(generation_);
}

std::optional<GenerationEnd> ElasticRendezvous::this_generation_end() { return generation_end(*scope_, generation_); }

}  // namespace ringtorch
