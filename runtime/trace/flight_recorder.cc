#include "runtime/trace/flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include <ringtorch/error.h>

#include "base/atomic_file.h"
#include "base/log.h"
#include "base/parse.h"

namespace ringtorch {
namespace {

constexpr size_t kDefaultCapacity = 512;

int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Every live recorder of this process, for dumps.
struct Registry {
  std::mutex mutex;
  std::vector<std::weak_ptr<FlightRecorder>> recorders;  // guarded by mutex
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: groups may outlive static destruction
  return *r;
}

// SIGUSR1 -> a byte on a pipe -> a thread that dumps (writing files is not async-signal-safe).
int g_signal_pipe[2] = {-1, -1};

void on_sigusr1(int) {
  const int saved = errno;
  const char byte = 1;
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

void install_sigusr1_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (::sigaction(SIGUSR1, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;  // someone's own
    if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) return;
    // The handler must never block: a full pipe already holds a pending request.
    ::fcntl(g_signal_pipe[1], F_SETFL, ::fcntl(g_signal_pipe[1], F_GETFL) | O_NONBLOCK);
    std::thread([] {
      char byte;
      while (true) {
        const ssize_t n = ::read(g_signal_pipe[0], &byte, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        const std::string where = dump_flight_recorders("SIGUSR1");  // never throws
        if (!where.empty()) log_info("flight recorder (SIGUSR1): " + where);
      }
    }).detach();
    struct sigaction action {};
    action.sa_handler = on_sigusr1;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(SIGUSR1, &action, nullptr);
  });
}

std::string first_line(const char* text, size_t limit = 600) {
  std::string s(text);
  s = s.substr(0, s.find('\n'));
  if (s.size() > limit) s = s.substr(0, limit) + "...";
  return s;
}

std::string host_name() {
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace

const char* flight_state_name(FlightEntry::State state) {
  switch (state) {
    case FlightEntry::State::kQueued:
      return "queued";
    case FlightEntry::State::kStarted:
      return "started";
    case FlightEntry::State::kCompleted:
      return "completed";
    case FlightEntry::State::kFailed:
      return "failed";
  }
  return "?";
}

FlightRecorder::FlightRecorder(std::string group, int rank, int size, int process_rank, size_t capacity)
    : group_(std::move(group)),
      rank_(rank),
      size_(size),
      wall_minus_steady_ns_(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count() -
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count()),
      process_rank_(process_rank),
      ring_(capacity) {}

std::shared_ptr<FlightRecorder> FlightRecorder::create(std::string group, int rank, int size, int process_rank,
                                                       size_t capacity) {
  std::shared_ptr<FlightRecorder> recorder(
      new FlightRecorder(std::move(group), rank, size, process_rank, std::max<size_t>(capacity, 1)));
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.recorders.erase(std::remove_if(r.recorders.begin(), r.recorders.end(),
                                     [](const std::weak_ptr<FlightRecorder>& w) { return w.expired(); }),
                      r.recorders.end());
    r.recorders.push_back(recorder);
  }
  install_sigusr1_once();
  return recorder;
}

FlightRecorder::~FlightRecorder() = default;  // the registry's weak reference expires

size_t FlightRecorder::capacity_from_environment() {
  const char* text = std::getenv("RINGTORCH_FLIGHT_RECORDER_SIZE");
  if (!text || !*text) return kDefaultCapacity;
  return static_cast<size_t>(parse_int_in_range(text, 0, 1 << 20, "RINGTORCH_FLIGHT_RECORDER_SIZE"));
}

namespace {
int64_t ns_of(FlightRecorder::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
}  // namespace

FlightRecorder::Slot* FlightRecorder::slot(Id id) {
  Slot& s = ring_[id % ring_.size()];
  return s.id.load(std::memory_order_acquire) == id ? &s : nullptr;
}

FlightRecorder::Id FlightRecorder::queued(uint32_t sequence, Clock::time_point at, const char* op,
                                          const std::string& detail, const char* path, const std::string& label,
                                          int64_t count, const char* dtype, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Id id = next_id_++;
  Slot& s = ring_[id % ring_.size()];
  FlightEntry& e = s.entry;
  e.sequence = sequence;
  e.op = op;
  e.path = path;
  e.dtype = dtype;
  e.count = count;
  e.bytes = bytes;
  e.detail.assign(detail);  // keeps the capacity of the entry it replaces: no allocation once warm
  e.label.assign(label);
  e.error.clear();
  s.queued_ns.store(ns_of(at), std::memory_order_relaxed);
  s.started_ns.store(0, std::memory_order_relaxed);
  s.ended_ns.store(0, std::memory_order_relaxed);
  s.state.store(static_cast<int>(FlightEntry::State::kQueued), std::memory_order_relaxed);
  s.id.store(id, std::memory_order_release);
  return id;
}

void FlightRecorder::refused() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++refused_;
}

void FlightRecorder::started(Id id, Clock::time_point at) {
  if (Slot* s = slot(id)) {
    if (s->queued_ns.load(std::memory_order_relaxed) == 0) s->queued_ns.store(ns_of(at), std::memory_order_relaxed);
    s->started_ns.store(ns_of(at), std::memory_order_relaxed);
    s->state.store(static_cast<int>(FlightEntry::State::kStarted), std::memory_order_release);
  }
}

void FlightRecorder::ended(Id id, Clock::time_point at, const char* error) {
  Slot* s = slot(id);
  if (!s) return;
  if (error) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (s->id.load(std::memory_order_relaxed) == id) s->entry.error = first_line(error);
  }
  s->ended_ns.store(ns_of(at), std::memory_order_relaxed);
  s->state.store(static_cast<int>(error ? FlightEntry::State::kFailed : FlightEntry::State::kCompleted),
                 std::memory_order_release);
}

std::vector<FlightEntry> FlightRecorder::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<FlightEntry> out;
  const uint64_t kept = std::min<uint64_t>(next_id_, ring_.size());
  auto wall_us = [&](int64_t ns) { return ns == 0 ? 0 : (ns + wall_minus_steady_ns_) / 1000; };
  for (Id id = next_id_ - kept; id < next_id_; ++id) {
    const Slot& s = ring_[id % ring_.size()];
    FlightEntry e = s.entry;
    e.state = static_cast<FlightEntry::State>(s.state.load(std::memory_order_acquire));
    e.queued_us = wall_us(s.queued_ns.load(std::memory_order_relaxed));
    e.started_us = wall_us(s.started_ns.load(std::memory_order_relaxed));
    e.ended_us = wall_us(s.ended_ns.load(std::memory_order_relaxed));
    out.push_back(std::move(e));
  }
  return out;
}

std::string FlightRecorder::to_json() const {
  nlohmann::json entries_json = nlohmann::json::array();
  for (const FlightEntry& e : entries()) {
    nlohmann::json j = {{"sequence", e.sequence},   {"op", e.op},
                        {"path", e.path},           {"dtype", e.dtype},
                        {"count", e.count},         {"bytes", e.bytes},
                        {"detail", e.detail},       {"state", flight_state_name(e.state)},
                        {"queued_us", e.queued_us}, {"started_us", e.started_us},
                        {"ended_us", e.ended_us}};
    if (!e.label.empty()) j["label"] = e.label;
    if (!e.error.empty()) j["error"] = e.error;
    entries_json.push_back(std::move(j));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json group = {{"group", group_},
                          {"rank", rank_},
                          {"size", size_},
                          {"process_rank", process_rank_},
                          {"capacity", ring_.size()},
                          {"operations", next_id_},
                          {"refused_after_break", refused_},
                          {"entries", std::move(entries_json)}};
  // Labels and group names come from users: never let a stray byte make the dump throw.
  return group.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {
thread_local std::string t_operation_label;
}  // namespace

ScopedOperationLabel::ScopedOperationLabel(std::string label) : previous_(std::move(t_operation_label)) {
  t_operation_label = std::move(label);
}
ScopedOperationLabel::~ScopedOperationLabel() { t_operation_label = std::move(previous_); }
const std::string& ScopedOperationLabel::current() { return t_operation_label; }

namespace {

// $TMPDIR/ringtorch-flight-recorder-<uid>: the parent of every default directory of this user.
std::string private_base() {
  const char* tmp = std::getenv("TMPDIR");
  return str_cat(tmp && *tmp ? tmp : "/tmp", "/ringtorch-flight-recorder-", ::geteuid());
}

}  // namespace

std::string flight_recorder_directory(const std::string& run_id, const std::string& log_dir) {
  if (const char* dir = std::getenv("RINGTORCH_FLIGHT_RECORDER_DIR"); dir && *dir) return dir;
  if (!log_dir.empty()) return log_dir + "/flight_recorder";
  return str_cat(private_base(), "/", run_id);
}

std::string make_flight_recorder_directory(const std::string& directory) {
  const std::string base = private_base();
  const std::string cannot = str_cat("cannot write to ", directory, ": ");
  const char* const hint = " (remove it, or set RINGTORCH_FLIGHT_RECORDER_DIR)";
  if (directory.rfind(base + "/", 0) == 0) {
    if (::mkdir(base.c_str(), 0700) != 0 && errno != EEXIST) {
      return str_cat(cannot, "making ", base, ": ", errno_text(errno), " (set RINGTORCH_FLIGHT_RECORDER_DIR)");
    }
    struct stat st {};
    if (::lstat(base.c_str(), &st) != 0) return str_cat(cannot, base, ": ", errno_text(errno));
    if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
      return str_cat(cannot, base, " is not this user's private directory (",
                     S_ISDIR(st.st_mode) ? "" : "not a directory, ", "owner uid ", st.st_uid, ", mode ", mode, ")",
                     hint);
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  if (ec) return str_cat(cannot, ec.message(), " (set RINGTORCH_FLIGHT_RECORDER_DIR)");
  return "";
}

std::string flight_recorder_directory() {
  const char* run = std::getenv("RINGTORCH_RUN_ID");
  return flight_recorder_directory(run && *run ? std::string(run) : str_cat("pid-", ::getpid()), "");
}

std::string flight_recorder_file(const std::string& directory, int rank) {
  return str_cat(directory, "/rank", rank, ".json");
}

int64_t flight_recorder_now_us() { return wall_us(); }

std::string dump_flight_recorders(const std::string& reason) {
  // One dump at a time: a later dump then both sees a later state and renames its files later
  // (ranks as threads of one process, or a failure meeting a SIGUSR1). Never destroyed: the
  // SIGUSR1 thread may dump during exit.
  static std::mutex* one_at_a_time = new std::mutex;
  std::lock_guard<std::mutex> serial(*one_at_a_time);
  try {
    std::vector<std::shared_ptr<FlightRecorder>> live;
    {
      Registry& r = registry();
      std::lock_guard<std::mutex> lock(r.mutex);
      for (auto& w : r.recorders) {
        if (auto recorder = w.lock()) live.push_back(std::move(recorder));
      }
    }
    if (live.empty()) return "";
    std::map<int, std::vector<std::shared_ptr<FlightRecorder>>> by_rank;
    for (auto& recorder : live) by_rank[recorder->process_rank()].push_back(recorder);
    const std::string directory = flight_recorder_directory();
    if (std::string why = make_flight_recorder_directory(directory); !why.empty()) return why;
    std::string written;
    const char* run = std::getenv("RINGTORCH_RUN_ID");
    for (const auto& [rank, recorders] : by_rank) {
      nlohmann::json file = {{"format", "ringtorch-flight-recorder"},
                             {"version", 1},
                             {"rank", rank},
                             {"pid", ::getpid()},
                             {"host", host_name()},
                             {"run_id", run ? run : ""},
                             {"reason", reason},
                             {"dumped_us", wall_us()},
                             {"groups", nlohmann::json::array()}};
      for (const auto& recorder : recorders) file["groups"].push_back(nlohmann::json::parse(recorder->to_json()));
      const std::string path = flight_recorder_file(directory, rank);
      write_file_atomically(path, file.dump(1, ' ', false, nlohmann::json::error_handler_t::replace),
                            "flight recorder");
      written += (written.empty() ? "" : ", ") + path;
    }
    return written;
  } catch (const std::exception& e) {
    return str_cat("cannot write the flight recorder: ", e.what(), " (set RINGTORCH_FLIGHT_RECORDER_DIR)");
  }
}

}  // namespace ringtorch
