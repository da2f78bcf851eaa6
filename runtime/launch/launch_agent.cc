#include "runtime/launch/launch_agent.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <ringtorch/error.h>
#include <ringtorch/join.h>
#include <ringtorch/rendezvous.h>

#include "base/atomic_file.h"
#include "base/log.h"
#include "base/openblas.h"
#include "rendezvous/init_method.h"
#include "rendezvous/store_factory.h"
#include "rendezvous/store_value.h"
#include "runtime/comm/failure_report.h"
#include "runtime/comm/shm/shared_segment.h"
#include "runtime/trace/flight_recorder.h"

namespace ringtorch {
namespace {

std::string random_run_id() {
  std::random_device rd;
  std::uniform_int_distribution<int> hex(0, 15);
  std::string id;
  for (int i = 0; i < 12; ++i) id.push_back("0123456789abcdef"[hex(rd)]);
  return id;
}

// How long workers that recover in their processes have to report a failure the agent saw
// first. Their collective fails at once when the peer's process died, but naming the peer may
// take a roll call of the other ranks (kRollCallWindow plus kReportSlack), and one survivor may
// see the closed connection a second or two after another on a loaded machine; a grace no
// longer than the roll call restarted survivors that were about to report.
constexpr std::chrono::milliseconds kLostReportGrace = kRollCallWindow + kReportSlack + std::chrono::seconds(2);

// Thrown out of the rendezvous wait when ringrun receives SIGINT/SIGTERM/SIGHUP.
class InterruptedError : public std::runtime_error {
 public:
  explicit InterruptedError(int sig) : std::runtime_error("interrupted"), signal_(sig) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

}  // namespace

LaunchAgent::LaunchAgent(LaunchConfig config) : config_(std::move(config)), signals_(/*dump_requests=*/true) {}

LaunchAgent::~LaunchAgent() {
  workers_.clear();  // kills and reaps any worker still running
  for (auto* f : logs_) {
    if (f) std::fclose(f);
  }
}

void LaunchAgent::log(const std::string& message) const {
  log_line(LogLevel::kInfo, message, several_nodes() ? str_cat("ringrun node ", placement_.node_rank) : "ringrun");
}

void LaunchAgent::open_store() {
  const auto timeout = config_.timeout.value_or(kDefaultTimeout);
  StoreRequest request;
  request.timeout = timeout;
  request.context = "";  // main() says "ringrun: " before a failure
  if (config_.rdzv_endpoint.empty()) {
    request.method.scheme = InitScheme::kTcp;
    request.method.host = config_.master_addr;
    request.method.port = config_.master_port;
    request.method.text = str_cat("tcp://", config_.master_addr, ":", config_.master_port);
  } else {
    request.method = parse_init_method(config_.rdzv_endpoint);
  }
  const bool tcp = request.method.scheme == InitScheme::kTcp;
  request.host_tcp_server = tcp && config_.node_rank == 0;
  store_ = ringtorch::open_store(request);
  placement_.master_addr = tcp ? request.method.host : config_.master_addr;
  placement_.master_port =
      tcp ? (request.host_tcp_server ? hosted_tcp_port(*store_) : request.method.port) : config_.master_port;
  placement_.store_url = tcp ? "" : config_.rdzv_endpoint;
}

void LaunchAgent::settle_run_id() {
  const bool fresh_tcp_store = placement_.store_url.empty();
  std::string run_id = config_.run_id;
  if (run_id.empty()) {
    if (config_.nnodes == 1) {
      run_id = random_run_id();
    } else if (fresh_tcp_store) {
      // Node 0's store is new for this job: node 0 picks the id, the others read it.
      if (config_.node_rank == 0) store_->set("ringrun/run_id", store_value(random_run_id()));
      run_id = store_text(store_->get("ringrun/run_id"));
    } else {
      throw InvalidArgumentError("--run_id is required with --rdzv_endpoint " +
                                 parse_init_method(config_.rdzv_endpoint).text +
                                 " and --nnodes > 1: every node must pass the same value (and a new one per job)");
    }
  }
  run_id_ = run_id;
  placement_.node_rank = config_.node_rank;  // until the rendezvous places this node
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  // host:pid, and 4 random hex digits: containers may share a hostname and all run as PID 1.
  ElasticNode me{str_cat(host, ":", ::getpid(), ":", random_run_id().substr(0, 4)), config_.node_rank,
                 config_.nproc_per_node, host};
  ElasticSettings settings = config_.rdzv_conf;
  settings.min_nodes = config_.min_nnodes;
  settings.max_nodes = config_.nnodes;
  auto scope = c10::make_intrusive<c10d::PrefixStore>(elastic_scope(run_id), store_);
  rendezvous_ = std::make_unique<ElasticRendezvous>(scope, me, settings, [this](const std::string& m) { log(m); });
  const char* timeline = std::getenv("RINGTORCH_TIMELINE");
  placement_.timeline = !config_.timeline.empty() ? config_.timeline : timeline && *timeline ? timeline : "";
  // The merged timeline and the workers' parts go beside it: checked before anything runs.
  if (!placement_.timeline.empty()) check_writable(placement_.timeline, "--timeline");
}

std::optional<int> LaunchAgent::join_generation() {
  try {
    generation_ = rendezvous_->join([this] {
      if (const int sig = signals_.received()) throw InterruptedError(sig);
    });
  } catch (const RendezvousClosed& e) {
    log(e.what());
    if (e.end().kind != GenerationEndKind::kFinished) return 1;
    // A job that finished without this node ever running its program is no success of its.
    if (!ran_workers_) {
      log("this node never ran its program; exiting with 1");
      return 1;
    }
    return 0;
  } catch (const TimeoutError& e) {
    log(str_cat("stopping: ", e.what()));
    return 1;
  } catch (const InterruptedError& e) {
    log(str_cat("received ", signal_name(e.signal()), " while waiting for the rendezvous"));
    return 128 + e.signal();
  } catch (const std::exception& e) {
    log(str_cat("stopping: ", store_loss(e), " during the rendezvous"));
    return 1;
  }
  generation_started_ = std::chrono::steady_clock::now();
  const int g = generation_.generation;
  control_ = c10::make_intrusive<c10d::PrefixStore>(str_cat(elastic_scope(run_id_), "/g", g), store_);
  // Each generation's workers get fresh keys (and shared-memory names): a reused run id or a
  // restart never reads an earlier generation's keys.
  placement_.run_id = generation_run_id(run_id_, g);
  // One directory for the whole job: workers that recover in their processes keep the one they
  // started with. The report reads only the files written since the generation began.
  placement_.flight_recorder_dir = flight_recorder_directory(run_id_, config_.log_dir);
  // Made here, so that a directory another user holds is said once, before the workers start.
  if (std::string why = make_flight_recorder_directory(placement_.flight_recorder_dir); !why.empty()) {
    log_line(LogLevel::kWarning, "flight recorder: " + why, "ringrun");
  }
  placement_.node_rank = generation_.node_rank;
  placement_.nnodes = static_cast<int>(generation_.nodes.size());
  placement_.first_rank = generation_.first_rank();
  placement_.world_size = generation_.world_size();
  placement_.elastic_run = run_id_;
  placement_.elastic_node = generation_.nodes[static_cast<size_t>(generation_.node_rank)].id;
  placement_.generation = g;
  if (several_nodes()) {
    log(str_cat("generation ", g, ": node ", generation_.node_rank, " of ", generation_.nodes.size(), ", ranks ",
                placement_.first_rank, "..", placement_.first_rank + config_.nproc_per_node - 1, " of world size ",
                placement_.world_size,
                generation_.restart_count ? str_cat(", restart ", generation_.restart_count) : ""));
  }
  return std::nullopt;
}

void LaunchAgent::start_workers(int restart) {
  ran_workers_ = true;
  placement_.restart = restart;
  const bool omp_set = std::getenv("OMP_NUM_THREADS") != nullptr;
  if (!openblas_coretype_) {
    const OpenBlasKernels kernels = openblas_kernels();
    openblas_coretype_ = kernels.better;
    if (!kernels.better.empty()) {
      log(str_cat("OpenBLAS picked its ", kernels.loaded,
                  " kernels, older than this CPU's vector units: the workers get ",
                  "OPENBLAS_CORETYPE=", kernels.better, " (set OPENBLAS_CORETYPE to choose yourself)"));
    }
  }
  bool any_running = false;
  for (auto& w : workers_) any_running = w.running() || any_running;
  // A new generation may move the ranks; log files stay with the workers that keep running.
  if (!config_.log_dir.empty() && logs_first_rank_ != rank_of(0) && !any_running) {
    for (auto* f : logs_) std::fclose(f);
    logs_.clear();
    log_paths_.clear();
    logs_first_rank_ = rank_of(0);
    if (::mkdir(config_.log_dir.c_str(), 0755) != 0 && errno != EEXIST) {
      throw IoError(str_cat("--log_dir ", config_.log_dir, ": ", errno_text(errno)));
    }
    for (int l = 0; l < config_.nproc_per_node; ++l) {
      const int rank = rank_of(l);
      std::string path = str_cat(config_.log_dir, "/rank_", rank, ".log");
      std::FILE* f = std::fopen(path.c_str(), "a");
      if (!f) throw IoError(str_cat("--log_dir: cannot open log file ", path, ": ", errno_text(errno)));
      logs_.push_back(f);
      log_paths_.push_back(path);
    }
  }
  for (auto* f : logs_) std::fprintf(f, "== ringrun: run %s, restart %d ==\n", placement_.run_id.c_str(), restart);
  if (!any_running) {
    remove_stale_reports();
    workers_.clear();
  }
  generation_started_us_ = flight_recorder_now_us();
  for (int l = 0; l < config_.nproc_per_node; ++l) {
    const int rank = rank_of(l);
    if (l < static_cast<int>(workers_.size()) && workers_[l].running()) {
      // It recovers in its process, perhaps under another rank (a node before it left): its
      // lines say the rank it has now.
      output_.set_prefix(workers_[l].stdout_fd(), str_cat("[rank ", rank, "]: "));
      output_.set_prefix(workers_[l].stderr_fd(), str_cat("[rank ", rank, "]: "));
      continue;
    }
    SubprocessOptions spawn;
    spawn.argv = worker_command(config_, l);
    spawn.env = worker_environment(config_, placement_, l, omp_set, *openblas_coretype_);
    Subprocess worker = Subprocess::spawn(spawn);
    if (l < static_cast<int>(workers_.size())) {
      output_.remove(workers_[l].stdout_fd());
      output_.remove(workers_[l].stderr_fd());
      workers_[l] = std::move(worker);
    } else {
      workers_.push_back(std::move(worker));
    }
    std::FILE* logf = logs_.empty() ? nullptr : logs_[l];
    const std::string log_path = logs_.empty() ? "" : log_paths_[l];
    output_.add(workers_[l].stdout_fd(), str_cat("[rank ", rank, "]: "), false, logf, log_path);
    output_.add(workers_[l].stderr_fd(), str_cat("[rank ", rank, "]: "), true, logf, log_path);
  }
}

bool LaunchAgent::workers_recover_in_process() {
  bool any_running = false;
  try {
    for (int l = 0; l < static_cast<int>(workers_.size()); ++l) {
      if (!workers_[l].running()) continue;
      any_running = true;
      if (!recovers_in_process(rendezvous_->scope(), generation_.generation, placement_.elastic_node, l)) return false;
    }
  } catch (const std::exception&) {
    return false;  // the store is gone: no next generation to wait for
  }
  return any_running;
}

void LaunchAgent::end_generation_workers() {
  if (!workers_recover_in_process()) {
    stop_workers(SIGTERM);
    return;
  }
  if (generation_end_.kind == GenerationEndKind::kFailure) {
    // A peer whose process died reaches the workers at once (its connections reset) and one
    // of them reports it; a node that went silent (stopped, cut off) leaves them blocked in a
    // collective until its timeout: those are restarted instead.
    const auto deadline = std::chrono::steady_clock::now() + kLostReportGrace;
    bool reported = false;
    while (!reported && std::chrono::steady_clock::now() < deadline) {
      try {
        rendezvous_->heartbeat();
        reported = node_reported_lost(rendezvous_->scope(), generation_.generation, placement_.elastic_node);
      } catch (const std::exception&) {
        break;
      }
      if (!reported) output_.pump(std::chrono::milliseconds(50));
    }
    if (!reported) {
      log(str_cat("no worker reported the loss within ", format_duration_ms(kLostReportGrace.count()),
                  " (blocked in a collective with the silent node): restarting them"));
      stop_workers(SIGTERM);
      return;
    }
  }
  log("the workers recover in their processes (--elastic in-process); those that ended are started again");
  // Their output keeps flowing; start_workers() replaces the ones that ended.
}

std::string LaunchAgent::store_loss(const std::exception& e) const {
  if (placement_.store_url.empty()) {
    return str_cat("lost the store on node 0 (tcp://", placement_.master_addr, ":", placement_.master_port,
                   "; has node 0's ringrun exited?): ", e.what(),
                   "; a tcp:// store lives in node 0's ringrun and the job cannot outlive it: for a job that "
                   "survives any node, use --rdzv_endpoint redis://HOST:PORT (or file:// on a shared filesystem)");
  }
  return str_cat("lost the store ", parse_init_method(placement_.store_url).text,
                 " (is its server still running and reachable?): ", e.what());
}

bool LaunchAgent::store_failed(const std::exception& e, const std::string& during, std::string* remote_reason) {
  if (placement_.store_url.empty()) {
    // Node 0 hosts this store: losing it means node 0's ringrun is gone, and its workers with it.
    *remote_reason = store_loss(e) + during;
    return true;
  }
  // An external store (Redis, a file) that went away after the rendezvous: the workers talk over
  // their own connections and may well finish; a failure elsewhere still reaches them through
  // their timeouts. This node goes on supervising its own workers, without the other nodes.
  if (!store_lost_) log(store_loss(e) + during + "; this node goes on alone (its running workers stay supervised)");
  store_lost_ = true;
  return false;
}

GenerationEnd LaunchAgent::end_for_failure(const std::string& reason) {
  if (generation_.restart_count >= config_.max_restarts) {
    return rendezvous_->end_generation(
        GenerationEndKind::kAborted, str_cat(reason, "; no restarts left (--max_restarts ", config_.max_restarts, ")"));
  }
  return rendezvous_->end_generation(GenerationEndKind::kFailure, reason);
}

std::optional<LaunchAgent::Outcome> LaunchAgent::check_store(bool may_admit, std::string* remote_reason) {
  if (store_lost_) return std::nullopt;
  try {
    // A worker recovering in its process lost a peer: it waits for the next generation.
    if (auto lost = generation_lost_report(rendezvous_->scope(), generation_.generation)) {
      generation_end_ = end_for_failure(*lost);  // "[rank 1/3] lost a peer: ..."; a standing end wins
      return Outcome::kGenerationEnded;
    }
    // Every node beats, a job's only one too: a second ringrun under the same run id tells a
    // live job from a dead one by it (ElasticRendezvous::join).
    rendezvous_->heartbeat();
    if (!several_nodes()) return std::nullopt;
    if (auto end = rendezvous_->this_generation_end()) {
      generation_end_ = *end;
      return Outcome::kGenerationEnded;
    }
    const auto silent = rendezvous_->silent_members();
    if (!silent.empty()) {
      generation_end_ =
          end_for_failure(str_cat(describe_nodes(silent), " sent no heartbeat for ",
                                  format_duration_ms(config_.rdzv_conf.heartbeat_timeout().count()),
                                  " (--rdzv_conf keep_alive_interval x keep_alive_max_attempt): declared dead"));
      return Outcome::kGenerationEnded;
    }
    // Admitting restarts every worker: not once some have finished (they would train again).
    const bool room = static_cast<int>(generation_.nodes.size()) < config_.nnodes;
    if (may_admit && room &&
        std::chrono::steady_clock::now() - generation_started_ >= config_.rdzv_conf.admit_interval &&
        !any_worker_finished()) {
      if (const int waiting = rendezvous_->nodes_waiting()) {
        generation_end_ = rendezvous_->end_generation(
            GenerationEndKind::kAdmission, str_cat(waiting, " node", waiting > 1 ? "s" : "", " waiting to join"));
        return Outcome::kGenerationEnded;
      }
    }
  } catch (const std::exception& e) {
    if (store_failed(e, "", remote_reason)) return Outcome::kRemoteAbort;
  }
  return std::nullopt;
}

bool LaunchAgent::any_worker_finished() {
  for (auto& w : workers_) {
    if (auto status = w.poll(); status && status->success()) return true;
  }
  for (int n = 0; n < placement_.nnodes; ++n) {
    if (control_->check({str_cat("done/", n)})) return true;
  }
  return false;
}

LaunchAgent::Outcome LaunchAgent::monitor(Failure* failure, std::string* remote_reason) {
  auto next_store_check = std::chrono::steady_clock::now();
  while (true) {
    output_.pump(config_.monitor_interval);
    if (signals_.received() != 0) return Outcome::kSignal;
    if (signals_.dump_requested()) {
      log(str_cat("SIGUSR1: the workers write their flight recorders to ", placement_.flight_recorder_dir));
      request_flight_dumps();
    }
    bool all_done = true;
    for (int l = 0; l < static_cast<int>(workers_.size()); ++l) {
      auto status = workers_[l].poll();
      if (!status) {
        all_done = false;
        continue;
      }
      if (!status->success()) {
        *failure = Failure{rank_of(l), l, workers_[l].pid(), *status};
        return Outcome::kLocalFailure;
      }
    }
    if (all_done) {
      drain_output();
      return Outcome::kSucceeded;
    }
    if (std::chrono::steady_clock::now() >= next_store_check) {
      if (auto remote = check_store(/*may_admit=*/true, remote_reason)) return *remote;
      next_store_check = std::chrono::steady_clock::now() + config_.monitor_interval;
    }
  }
}

void LaunchAgent::stop_workers(int sig) {
  for (auto& w : workers_) w.signal(sig);
  const auto deadline = std::chrono::steady_clock::now() + config_.term_timeout;
  auto all_ended = [&] {
    bool ended = true;
    for (auto& w : workers_) ended = w.poll().has_value() && ended;
    return ended;
  };
  while (!all_ended() && std::chrono::steady_clock::now() < deadline) output_.pump(std::chrono::milliseconds(20));
  for (auto& w : workers_) {
    if (w.running()) {
      log(str_cat("worker pid ", w.pid(), " ignored ", signal_name(sig), " for ",
                  format_duration_ms(config_.term_timeout.count()), "; sending SIGKILL"));
      w.signal(SIGKILL);
      w.wait();
    }
  }
  drain_output();
  remove_segments_left_by_workers();
}

void LaunchAgent::remove_segments_left_by_workers() const {
  if (const int removed = remove_leftover_segments(placement_.run_id)) {
    log(str_cat("removed ", removed, " shared-memory segment", removed > 1 ? "s" : "", " that killed workers of run ",
                placement_.run_id, " left in /dev/shm"));
  }
}

void LaunchAgent::drain_output() {
  // Forward what the workers wrote before they ended. Bounded: a worker's own child may still
  // hold the pipes open.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (output_.pump(std::chrono::milliseconds(10)) && std::chrono::steady_clock::now() < deadline) {
  }
  for (auto& w : workers_) {
    if (w.running()) continue;  // recovering in its process: its output goes on
    output_.remove(w.stdout_fd());
    output_.remove(w.stderr_fd());
  }
}

LaunchAgent::Outcome LaunchAgent::wait_for_other_nodes(std::string* remote_reason) {
  try {
    if (!store_lost_) control_->set(str_cat("done/", placement_.node_rank), {'1'});
  } catch (const std::exception& e) {
    if (store_failed(e, " while reporting this node's success", remote_reason)) return Outcome::kRemoteAbort;
  }
  std::vector<std::string> done;
  for (int n = 0; n < placement_.nnodes; ++n) done.push_back(str_cat("done/", n));
  // Other nodes may train for hours: no deadline here, but a failure, a silent node or a lost
  // store ends the wait.
  while (true) {
    if (signals_.received() != 0) return Outcome::kSignal;
    try {
      if (!store_lost_ && control_->check(done)) {
        // Waiting nodes learn that the job is over; then node 0 (which may host the store)
        // leaves last, or the others would lose the store mid-check.
        const GenerationEnd end = rendezvous_->end_generation(GenerationEndKind::kFinished, "");
        if (end.kind != GenerationEndKind::kFinished) {  // a failure or an abort came first: this node goes with it
          generation_end_ = end;
          return Outcome::kGenerationEnded;
        }
        MemberContext who{placement_.node_rank, placement_.nnodes, "node", "ringrun exit"};
        leave_barrier(*control_, "exit", who, config_.timeout.value_or(kDefaultTimeout));
        return Outcome::kSucceeded;
      }
    } catch (const std::exception& e) {
      if (store_failed(e, " while waiting for the other nodes", remote_reason)) return Outcome::kRemoteAbort;
    }
    if (store_lost_) {
      // This node's part of the job is done and succeeded; without the store, whether the
      // others finish is theirs to report.
      log("this node's workers succeeded; the store is gone, so the other nodes' results are not known here");
      return Outcome::kSucceeded;
    }
    if (auto remote = check_store(/*may_admit=*/false, remote_reason)) {
      if (*remote != Outcome::kGenerationEnded || generation_end_.kind != GenerationEndKind::kFinished) return *remote;
    }
    std::this_thread::sleep_for(config_.monitor_interval);
  }
}

int LaunchAgent::run() {
  const int status = run_generations();
  merge_timeline();
  return status;
}

int LaunchAgent::run_generations() {
  open_store();
  settle_run_id();
  const std::string workers = str_cat(config_.nproc_per_node, " worker", config_.nproc_per_node > 1 ? "s" : "");
  const std::string store = placement_.store_url.empty()
                                ? str_cat("tcp://", placement_.master_addr, ":", placement_.master_port)
                                : parse_init_method(placement_.store_url).text;  // password masked
  if (several_nodes()) {
    const std::string nodes = config_.min_nnodes == config_.nnodes
                                  ? std::to_string(config_.nnodes)
                                  : str_cat(config_.min_nnodes, " to ", config_.nnodes);
    log(str_cat("run ", run_id_, ": ", workers, " on this node, ", nodes, " nodes, store ", store));
  } else {
    log(str_cat("run ", run_id_, ": ", workers, " on node 0 of 1, world size ", config_.nproc_per_node, ", store ",
                store));
  }
  while (true) {
    if (auto status = join_generation()) return *status;
    const int restart = generation_.restart_count;
    start_workers(restart);
    Failure failure;
    std::string reason;
    Outcome outcome = monitor(&failure, &reason);
    if (outcome == Outcome::kSucceeded && several_nodes()) outcome = wait_for_other_nodes(&reason);
    switch (outcome) {
      case Outcome::kSucceeded:
        if (!several_nodes() && !store_lost_) {
          // Recording the end only tells a later ringrun under this run id; a store lost by
          // now costs that, not the job its success.
          try {
            rendezvous_->end_generation(GenerationEndKind::kFinished, "");
          } catch (const std::exception& e) {
            log_line(
                LogLevel::kWarning,
                str_cat("could not record the job's end in the store (", store_loss(e), "); the workers succeeded"),
                "ringrun");
          }
        }
        remove_segments_left_by_workers();
        if (!output_.log_write_error().empty()) {
          // The job's record is incomplete: a scheduler must not take it for a clean run.
          log(str_cat("all workers succeeded, but --log_dir is incomplete (", output_.log_write_error(),
                      "); exiting with 1"));
          return 1;
        }
        log("all workers succeeded");
        return 0;
      case Outcome::kSignal: {
        const int sig = signals_.received();
        log(str_cat("received ", signal_name(sig), "; stopping the workers"));
        try {
          rendezvous_->end_generation(GenerationEndKind::kAborted,
                                      str_cat("node ", placement_.node_rank, "'s ringrun received ", signal_name(sig)));
        } catch (const std::exception&) {
        }
        stop_workers(sig == SIGHUP ? SIGTERM : sig);
        return 128 + sig;
      }
      case Outcome::kRemoteAbort:
        log("stopping: " + reason);
        report_flight_recorder();
        stop_workers(SIGTERM);
        return 1;
      case Outcome::kGenerationEnded:
        if (generation_end_.kind == GenerationEndKind::kAborted) {
          log("stopping: " + generation_end_.reason);
          report_flight_recorder();
          stop_workers(SIGTERM);
          return 1;
        }
        log(str_cat(
            "generation ", generation_.generation, " ended: ", generation_end_.reason,
            generation_end_.kind == GenerationEndKind::kFailure
                ? str_cat("; restarting this node's workers (restart ", restart + 1, " of ", config_.max_restarts, ")")
                : "; restarting this node's workers to admit them (not counted as a restart)"));
        if (generation_end_.kind == GenerationEndKind::kFailure) report_flight_recorder();
        end_generation_workers();
        continue;
      case Outcome::kLocalFailure: {
        const std::string what = str_cat("rank ", failure.rank, " (local rank ", failure.local_rank, ", pid ",
                                         failure.pid, ") failed with ", failure.status.describe());
        GenerationEnd end;
        try {
          end = end_for_failure(str_cat("node ", placement_.node_rank, ": ", what));
        } catch (const std::exception& e) {
          log(str_cat("could not tell the other nodes through the store: ", e.what()));
          end.kind = generation_.restart_count >= config_.max_restarts ? GenerationEndKind::kAborted
                                                                       : GenerationEndKind::kFailure;
        }
        generation_end_ = end;
        if (end.kind == GenerationEndKind::kAdmission) {  // an admission ended the generation first
          log(str_cat(what, "; the generation had just ended to admit nodes (not counted as a restart)"));
          end_generation_workers();
          continue;
        }
        if (end.kind != GenerationEndKind::kAborted) {
          log(str_cat(what, "; stopping the others and restarting the group (restart ", restart + 1, " of ",
                      config_.max_restarts, ")"));
          report_flight_recorder();
          end_generation_workers();
          continue;
        }
        // The cause is the last line a user sees: the flight recorder's summary and the others'
        // last words come first.
        report_flight_recorder();
        stop_workers(SIGTERM);
        log(str_cat(what, "; stopped the others; no restarts left (--max_restarts ", config_.max_restarts,
                    "), exiting with ", failure.status.shell_code()));
        return failure.status.shell_code();
      }
    }
  }
}

}  // namespace ringtorch
