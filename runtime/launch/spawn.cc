#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>
#include <tuple>

#include <ringtorch/error.h>
#include <ringtorch/spawn.h>
#include <ringtorch/timeline.h>

#include "base/log.h"
#include "base/openblas.h"
#include "runtime/comm/shm/shared_segment.h"
#include "runtime/launch/output_forwarder.h"
#include "runtime/launch/private_directory.h"
#include "runtime/launch/signal_watch.h"
#include "runtime/launch/spawn_child.h"
#include "runtime/launch/subprocess.h"
#include "runtime/launch/timeline_parts.h"

namespace ringtorch {
namespace {

using spawn_internal::ChildMarker;
using spawn_internal::error_file;
using spawn_internal::reached_file;
using Clock = std::chrono::steady_clock;

std::atomic<int> g_calls{0};  // spawn() calls so far in this process, counted the same way in a child

// How long the monitor keeps watching after a first failure before it names one and stops the
// rest: a rank that dies makes its peers raise PeerLostError a moment later, and the rank that
// died is the one to name.
constexpr std::chrono::milliseconds kBlameWindow{200};

// Variables spawn() sets that SpawnOptions::env may not replace.
constexpr const char* kReservedVariables[] = {
    spawn_internal::kChildMarker, "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "RINGTORCH_RUN_ID",
    "TORCHELASTIC_RUN_ID"};

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool file_exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// This process's own command line, as it was started.
std::vector<std::string> own_arguments() {
  const std::optional<std::string> text = read_text("/proc/self/cmdline");
  if (!text || text->empty()) throw IoError("spawn: cannot read /proc/self/cmdline (is /proc mounted?)");
  std::vector<std::string> argv;
  size_t start = 0;
  while (start < text->size()) {
    size_t end = text->find('\0', start);
    if (end == std::string::npos) end = text->size();
    argv.push_back(text->substr(start, end - start));
    start = end + 1;
  }
  return argv;
}

// The path of this program's file, for exec: the real one, so that the children's process name
// is the program's (exec of /proc/self/exe names them "exe"); /proc/self/exe when it is gone.
std::string own_program() {
  std::error_code ec;
  const std::filesystem::path path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec || ::access(path.c_str(), X_OK) != 0) return "/proc/self/exe";
  return path.string();
}

// The OPENBLAS_CORETYPE the ranks get (base/openblas.h), probed and said once per process: the
// answer cannot change, and a program that spawns twice should not read the line twice.
std::string openblas_core_for_ranks() {
  static const std::string core = [] {
    const OpenBlasKernels kernels = openblas_kernels();
    if (!kernels.better.empty()) {
      log_info(str_cat("spawn(): OpenBLAS picked its ", kernels.loaded, " kernels, older than this CPU's vector ",
                       "units: the ranks get OPENBLAS_CORETYPE=", kernels.better,
                       " (set OPENBLAS_CORETYPE to choose yourself)"));
    }
    return kernels.better;
  }();
  return core;
}

// The kind a ProcessFailedError takes: the child's own when it raised a ringtorch error, else
// PeerLost (a rank of the job died).
ErrorKind kind_of(const std::optional<std::string>& raised) {
  for (ErrorKind kind :
       {ErrorKind::kTimeout, ErrorKind::kPeerLost, ErrorKind::kMismatch, ErrorKind::kInvalidArgument, ErrorKind::kIo}) {
    const std::string prefix = str_cat(error_class_name(kind), ": ");
    if (raised && raised->compare(0, prefix.size(), prefix) == 0) return kind;
  }
  return ErrorKind::kPeerLost;
}

// A failed rank, as the monitor saw it.
struct Failure {
  int rank = 0;
  int pass = 0;              // the monitor's pass that saw it end
  bool consequence = false;  // it raised PeerLostError or TimeoutError: probably another's failure
  std::filesystem::file_time_type raised_at = std::filesystem::file_time_type::max();
};

// The failure to name: a cause before a consequence, then the first seen, then the first raised.
const Failure& blame(const std::vector<Failure>& failures) {
  return *std::min_element(failures.begin(), failures.end(), [](const Failure& a, const Failure& b) {
    return std::tie(a.consequence, a.pass, a.raised_at, a.rank) < std::tie(b.consequence, b.pass, b.raised_at, b.rank);
  });
}

}  // namespace

class SpawnContext::Impl {
 public:
  Impl(const SpawnOptions& options, int call, uint32_t site) : options_(options), call_(call), site_(site) {
    statuses_.resize(static_cast<size_t>(options.nprocs));
  }

  ~Impl() {
    stop_requested_ = true;
    if (thread_.joinable()) thread_.join();
  }

  // Starts the monitor thread, which starts the children (so that PR_SET_PDEATHSIG, which Linux
  // ties to the thread that forked, lasts exactly as long as the monitor does), and waits until
  // they run.
  void start() {
    program_ = own_program();
    argv_ = own_arguments();
    directory_ = std::make_unique<PrivateDirectory>("ringtorch-spawn-");
    run_id_ = str_cat("spawn-", ::getpid(), "-", call_);
    signals_ = std::make_unique<SignalWatch>();
    if (const char* timeline = std::getenv("RINGTORCH_TIMELINE"); timeline && *timeline) {
      // As ringrun: each rank records its part, merged into the file when they have ended; this
      // process records nothing there itself.
      timeline_ = timeline;
      Timeline::release_environment_file();
    }
    openblas_coretype_ = openblas_core_for_ranks();
    thread_ = std::thread([this] { monitor(); });
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return started_ || done_; });
    if (start_error_) {
      lock.unlock();
      thread_.join();
      std::rethrow_exception(start_error_);
    }
  }

  // Already ended, with nothing started: what a child's earlier spawn() calls return.
  void mark_skipped() {
    statuses_.clear();
    done_ = started_ = true;
  }

  bool join(std::optional<std::chrono::milliseconds> timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto done = [this] { return done_; };
    if (timeout) {
      if (!changed_.wait_for(lock, *timeout, done)) return false;
    } else {
      changed_.wait(lock, done);
    }
    if (failure_) std::rethrow_exception(failure_);
    return true;
  }

  int nprocs() const { return static_cast<int>(statuses_.size()); }

  std::vector<pid_t> pids() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return pids_;
  }

  std::vector<std::optional<ExitStatus>> exit_statuses() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return statuses_;
  }

 private:
  SubprocessOptions child_options(int rank) const {
    SubprocessOptions o;
    o.program = program_;
    o.argv = argv_;
    o.capture_output = options_.prefix_output;
    const std::string n = std::to_string(options_.nprocs);
    o.env = {
        {"RANK", std::to_string(rank)},
        {"LOCAL_RANK", std::to_string(rank)},
        {"WORLD_SIZE", n},
        {"LOCAL_WORLD_SIZE", n},
        {"GROUP_RANK", "0"},
        {"RINGTORCH_RUN_ID", run_id_},
        {"TORCHELASTIC_RUN_ID", run_id_},
        {"TORCHELASTIC_RESTART_COUNT", "0"},
        {"RINGTORCH_RDZV_ENDPOINT", str_cat("file://", directory_->path(), "/store")},
        {spawn_internal::kChildMarker,
         spawn_internal::format_marker(ChildMarker{call_, rank, site_, directory_->path()})},
    };
    if (options_.nprocs > 1 && !std::getenv("OMP_NUM_THREADS")) o.env["OMP_NUM_THREADS"] = "1";
    if (!timeline_.empty()) o.env["RINGTORCH_TIMELINE"] = timeline_part(timeline_, rank);  // merged at the end
    if (!openblas_coretype_.empty()) o.env["OPENBLAS_CORETYPE"] = openblas_coretype_;      // base/openblas.h
    o.env["RINGTORCH_OUTPUT_PREFIXED"] = options_.prefix_output ? "1" : "0";  // the logger's rank (base/log.h)
    for (const auto& [key, value] : options_.env) o.env[key] = value;
    return o;
  }

  std::exception_ptr describe_failure(int rank, bool others_stopped) const {
    const ExitStatus status = *statuses_[static_cast<size_t>(rank)];
    const pid_t pid = pids_[static_cast<size_t>(rank)];
    const std::optional<std::string> raised = read_text(error_file(directory_->path(), rank));
    std::string message = str_cat("spawned rank ", rank, " of ", options_.nprocs, " (pid ", pid, ")");
    if (raised) {
      message += str_cat(" raised ", *raised);
    } else if (status.signaled) {
      message += str_cat(" was killed by ", status.describe());
    } else if (!file_exists(reached_file(directory_->path(), rank))) {
      message += str_cat(" ended (", status.describe(), ") without reaching spawn() call #", call_,
                         ": a spawned rank is a fresh run of this program that runs fn when it reaches the same "
                         "spawn() call, so the code before that call must take the same path in every rank as in "
                         "the parent");
    } else {
      message += str_cat(" ended with ", status.describe());
    }
    if (others_stopped) {
      message += str_cat("; the other ranks were stopped (SIGTERM, then SIGKILL after ",
                         format_duration_ms(options_.term_timeout.count()), ")");
    }
    FailureSite site;
    site.peer = rank;
    site.operation = str_cat("spawn() call #", call_);
    return std::make_exception_ptr(
        ProcessFailedError(kind_of(raised), message, site, rank, pid, status, raised.value_or("")));
  }

  void monitor() {
    std::vector<Subprocess> children;
    OutputForwarder output;
    try {
      for (int rank = 0; rank < options_.nprocs; ++rank) {
        children.push_back(Subprocess::spawn(child_options(rank)));
        output.add(children.back().stdout_fd(), str_cat("[rank ", rank, "]: "), false, nullptr);
        output.add(children.back().stderr_fd(), str_cat("[rank ", rank, "]: "), true, nullptr);
      }
    } catch (...) {
      children.clear();  // kills and reaps the ones started
      std::lock_guard<std::mutex> lock(mutex_);
      start_error_ = std::current_exception();
      finish_locked();
      changed_.notify_all();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& c : children) pids_.push_back(c.pid());
      started_ = true;
    }
    changed_.notify_all();

    std::optional<Clock::time_point> kill_at;  // set once the children are being stopped
    auto stop_all = [&](int sig) {
      for (auto& c : children) c.signal(sig);
      if (!kill_at) kill_at = Clock::now() + options_.term_timeout;
    };
    std::vector<Failure> failures;
    std::optional<Clock::time_point> first_failure_at;
    int blamed = -1, signal_seen = 0;
    bool others_stopped = false;
    for (int pass = 0;; ++pass) {
      if (!output.pump(std::chrono::milliseconds(50))) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      bool all_ended = true;
      for (int rank = 0; rank < options_.nprocs; ++rank) {
        Subprocess& c = children[static_cast<size_t>(rank)];
        const bool was_running = c.running();
        const std::optional<ExitStatus> status = c.poll();
        if (!status) all_ended = false;
        if (!status || !was_running) continue;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          statuses_[static_cast<size_t>(rank)] = status;
        }
        const std::string& dir = directory_->path();
        if ((status->success() && file_exists(reached_file(dir, rank))) || kill_at) continue;
        Failure f{rank, pass};
        const std::optional<std::string> raised = read_text(error_file(dir, rank));
        f.consequence = raised && (kind_of(raised) == ErrorKind::kPeerLost || kind_of(raised) == ErrorKind::kTimeout);
        std::error_code ec;
        const auto when = std::filesystem::last_write_time(error_file(dir, rank), ec);
        if (!ec) f.raised_at = when;
        failures.push_back(f);
        if (!first_failure_at) first_failure_at = Clock::now();
      }
      if (blamed < 0 && first_failure_at && (all_ended || Clock::now() - *first_failure_at >= kBlameWindow)) {
        blamed = blame(failures).rank;
        for (const auto& c : children) others_stopped = others_stopped || c.running();
        stop_all(SIGTERM);
      }
      if (const int sig = signals_->received(); sig && !signal_seen) {
        signal_seen = sig;
        stop_all(sig == SIGHUP ? SIGTERM : sig);
      }
      if (stop_requested_ && !kill_at) stop_all(SIGTERM);
      if (all_ended) break;
      if (kill_at && Clock::now() >= *kill_at) {
        for (auto& c : children) c.signal(SIGKILL);
      }
    }
    // What the children wrote before they ended; bounded, since a child's own child may still
    // hold the pipes open.
    const auto drain_until = Clock::now() + std::chrono::milliseconds(500);
    while (output.pump(std::chrono::milliseconds(10)) && Clock::now() < drain_until) {
    }
    for (auto& c : children) {
      output.remove(c.stdout_fd());
      output.remove(c.stderr_fd());
    }
    if (!timeline_.empty()) {
      std::vector<int> ranks;
      for (int rank = 0; rank < options_.nprocs; ++rank) ranks.push_back(rank);
      log_info("spawn: " + merge_timeline_parts(timeline_, ranks, timeline_));
    }

    std::exception_ptr failure;
    if (blamed >= 0) {
      failure = describe_failure(blamed, others_stopped);
    } else if (signal_seen) {
      failure = std::make_exception_ptr(
          IoError(str_cat("spawn: interrupted by ", signal_name(signal_seen), "; the spawned ranks were stopped")));
    }
    bool all_succeeded = true;
    for (auto& c : children) all_succeeded = all_succeeded && c.poll() && c.poll()->success();
    if (!all_succeeded) remove_leftover_segments(run_id_);
    children.clear();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      failure_ = failure;
      finish_locked();
    }
    changed_.notify_all();
    // The parent feels the signal now that its ranks are gone: its own handler, or the default.
    if (signal_seen) {
      signals_->take_signal(signal_seen);
    } else {
      signals_.reset();
    }
  }

  // The end of the monitor (the signal watch ends after it, in the monitor).
  void finish_locked() {
    directory_.reset();
    done_ = true;
  }

  const SpawnOptions options_;
  const int call_;
  const uint32_t site_;
  std::string program_;
  std::vector<std::string> argv_;
  std::string run_id_;
  std::string openblas_coretype_;  // what the ranks get: this process' openblas_kernels().better
  std::string timeline_;           // RINGTORCH_TIMELINE of this process: the ranks' parts are merged into it
  std::unique_ptr<PrivateDirectory> directory_;  // the store, and the children's files
  std::unique_ptr<SignalWatch> signals_;
  std::thread thread_;
  std::atomic<bool> stop_requested_{false};

  mutable std::mutex mutex_;  // guards what follows
  std::condition_variable changed_;
  bool started_ = false;
  bool done_ = false;
  std::exception_ptr start_error_;
  std::exception_ptr failure_;
  std::vector<pid_t> pids_;
  std::vector<std::optional<ExitStatus>> statuses_;
};

SpawnContext::SpawnContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SpawnContext::~SpawnContext() = default;
bool SpawnContext::join(std::optional<std::chrono::milliseconds> timeout) { return impl_->join(timeout); }
int SpawnContext::nprocs() const { return impl_->nprocs(); }
std::vector<pid_t> SpawnContext::pids() const { return impl_->pids(); }
std::vector<std::optional<ExitStatus>> SpawnContext::exit_statuses() const { return impl_->exit_statuses(); }

std::unique_ptr<SpawnContext> spawn(const SpawnFunction& fn, const SpawnOptions& options, const char* call_file,
                                    int call_line) {
  if (options.nprocs < 1) {
    throw InvalidArgumentError(str_cat("spawn: nprocs is ", options.nprocs, "; it must be at least 1"));
  }
  if (options.term_timeout.count() < 0) throw InvalidArgumentError("spawn: term_timeout is negative");
  for (const char* reserved : kReservedVariables) {
    if (options.env.count(reserved)) {
      throw InvalidArgumentError(str_cat("spawn: SpawnOptions::env sets ", reserved, ", which spawn() sets itself"));
    }
  }
  if (spawn_internal::running_spawned_function()) {
    // Its children would re-run main(), where this rank's own call runs the parent's way.
    throw InvalidArgumentError(
        "spawn() inside a spawned rank's fn is not supported: spawn all ranks from the parent (nprocs)");
  }
  const int call = ++g_calls;
  const uint32_t site = spawn_internal::call_site(call_file, call_line);
  if (const std::optional<ChildMarker>& marker = spawn_internal::child_marker()) {
    if (call == marker->call) spawn_internal::run_child(fn, *marker, site, call_file, call_line, options.nprocs);
    // call < marker->call: a call the parent made before ours; it ran in the parent.
    auto skipped = std::make_unique<SpawnContext::Impl>(SpawnOptions{}, call, site);
    skipped->mark_skipped();
    return std::make_unique<SpawnContext>(std::move(skipped));
  }
  auto impl = std::make_unique<SpawnContext::Impl>(options, call, site);
  impl->start();
  auto context = std::make_unique<SpawnContext>(std::move(impl));
  if (options.join) context->join();
  return context;
}

bool in_spawned_child() { return spawn_internal::child_marker().has_value(); }

}  // namespace ringtorch
