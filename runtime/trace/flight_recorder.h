// The flight recorder: every process group keeps its last N collectives (sequence number,
// operation, sizes, path, label, times, state), and writes them to a file when something goes
// wrong, so that a hang or a failure can be read after the fact: which rank stopped where.
// PyTorch's NCCL flight recorder, for ringtorch's groups. send/recv are not recorded (they
// bypass the ordered queue; their Work names the peer). Calls refused at once because the
// group broke earlier are counted, not recorded, so they never push the breaking failure out.
//
// When a file is written (one per rank, all of the rank's groups in it):
//   - an operation fails with TimeoutError, PeerLostError or MismatchError (the error's message
//     then ends with "flight recorder: <file>");
//   - the process receives SIGUSR1 (once it has a group with a recorder, and when nothing else
//     handles SIGUSR1): a live dump of a rank that looks stuck, e.g. `kill -USR1 <pid>`, or
//     `kill -USR1 <ringrun's pid>` for every rank (ringrun signals only workers that catch it);
//   - dump_flight_recorders() is called.
// `ringtrace DIR` reads every rank's file and says which ranks stopped at which operation.
//
// Settings (environment):
//   RINGTORCH_FLIGHT_RECORDER_SIZE=N  operations kept per group (default 512; 0: no recorder)
//   RINGTORCH_FLIGHT_RECORDER_DIR=DIR where files go (default: ringrun's --log_dir/flight_recorder,
//                                     else $TMPDIR/ringtorch-flight-recorder-<uid>/<run id>)
// Memory is constant: N entries per group, whose strings keep their capacity when reused.
//
// File format (docs/observability.md): {"format":"ringtorch-flight-recorder","version":1,
// "rank":R,"pid":P,"host":H,"reason":"...","dumped_us":T,"groups":[{"group":"default","rank":r,
// "size":S,"capacity":N,"operations":K,"entries":[{"sequence":..,"op":"allreduce",...}]}]}
//
// Cost per operation: one uncontended lock and two string copies when queued, atomic stores when
// started and ended; the two clock reads are the ones Work makes anyway (docs/benchmarks.md,
// "Observing a job: flight recorder and timeline").
// The price of the lock-free start and end: an entry reused while its operation is still in
// flight (more than N operations queued at once) may show that operation's later times.
//
// Thread-safety: every method may be called from any thread; queued() and readers take the
// recorder's mutex, started() and ended() of a success only store atomics. Ownership: the
// process group owns its recorder; a process-wide registry holds weak references for dumps.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ringtorch/operation_label.h>

namespace ringtorch {

// What one operation was, as the recorder keeps it.
struct FlightEntry {
  enum class State { kQueued, kStarted, kCompleted, kFailed };
  uint64_t sequence = 0;
  const char* op = "";    // "allreduce" (a string literal: op_type_name)
  const char* path = "";  // "shared memory", "direct", "ring", "bcube", "hierarchical", "gloo"
  const char* dtype = "";
  int64_t count = 0;
  int64_t bytes = 0;
  std::string detail;  // "4.0 MiB float32 sum, direct"
  std::string label;   // what the caller said it was ("ddp bucket 3, step 17"); may be empty
  int64_t queued_us = 0, started_us = 0, ended_us = 0;  // wall clock; 0: not yet
  State state = State::kQueued;
  std::string error;  // the failure's message (its first line), when failed
};

const char* flight_state_name(FlightEntry::State state);

class FlightRecorder {
 public:
  // Registers the recorder for dumps (and SIGUSR1). `process_rank` names the file
  // ("rank<R>.json"): the rank of the process' whole group (a subgroup passes its parent's).
  static std::shared_ptr<FlightRecorder> create(std::string group, int rank, int size, int process_rank,
                                                size_t capacity);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // RINGTORCH_FLIGHT_RECORDER_SIZE, or the default; throws InvalidArgumentError when malformed.
  static size_t capacity_from_environment();

  using Clock = std::chrono::steady_clock;
  using Id = uint64_t;  // the recorder's own number of an entry (never wraps, unlike a sequence)
  // `at`: when it happened (the caller has read the clock anyway; queued() may take {}: it
  // starts at once, and its start time is its queue time). `sequence`: the group's number of
  // the operation, as its Work and error messages show it.
  Id queued(uint32_t sequence, Clock::time_point at, const char* op, const std::string& detail, const char* path,
            const std::string& label, int64_t count, const char* dtype, int64_t bytes);
  void started(Id id, Clock::time_point at);
  void ended(Id id, Clock::time_point at, const char* error);  // null: success
  // An operation refused at once because the group had broken (counted only).
  void refused();

  int process_rank() const { return process_rank_; }
  const std::string& group() const { return group_; }
  // The kept entries, oldest first.
  std::vector<FlightEntry> entries() const;
  // This group's part of a dump file (a JSON object).
  std::string to_json() const;

 private:
  // One entry of the ring: what queued() writes (under mutex_), and the times and state that
  // started() and ended() store without it.
  struct Slot {
    FlightEntry entry;  // sequence .. error: guarded by mutex_ (its times and state unused)
    std::atomic<Id> id{UINT64_MAX};
    std::atomic<int64_t> queued_ns{0}, started_ns{0}, ended_ns{0};  // steady clock; 0: not yet
    std::atomic<int> state{0};                                      // FlightEntry::State
  };
  FlightRecorder(std::string group, int rank, int size, int process_rank, size_t capacity);
  Slot* slot(Id id);  // null when the entry was overwritten since

  const std::string group_;
  const int rank_, size_;
  const int64_t wall_minus_steady_ns_;  // for dumps: steady clock -> wall clock
  const int process_rank_;
  mutable std::mutex mutex_;
  std::vector<Slot> ring_;  // fixed size; slot k holds entry id k mod capacity
  Id next_id_ = 0;          // guarded by mutex_: how many were ever queued
  uint64_t refused_ = 0;    // guarded by mutex_
};

// Where dumps go: RINGTORCH_FLIGHT_RECORDER_DIR, else $TMPDIR (or /tmp)/ringtorch-flight-recorder-
// <uid>/<RINGTORCH_RUN_ID, or pid-<pid>>: a directory of this user's own, made 0700, so another
// user can neither read the dumps nor have made the directory first.
std::string flight_recorder_directory();
// The same rule for a launcher, which knows its workers' run id (and may have a log directory,
// empty: none, which wins over the default).
std::string flight_recorder_directory(const std::string& run_id, const std::string& log_dir);
// Makes `directory` (and its parents) where missing. Under the per-user default it first makes
// that user's directory 0700 and checks that it is a real directory owned by this user and
// closed to others. Returns "" or why not, as "cannot write to DIR: <why> (set ...)".
std::string make_flight_recorder_directory(const std::string& directory);
// The file of process rank `rank` in `directory`: "<directory>/rank<R>.json".
std::string flight_recorder_file(const std::string& directory, int rank);
// Wall clock, microseconds since the epoch: the time base of dumps (dumped_us and entry times).
int64_t flight_recorder_now_us();
// Writes one file per process rank with every live recorder of this process; returns the
// paths written, comma-separated ("" when there is no recorder). Never throws: a failure to
// write is returned as "cannot write ...: <why>".
std::string dump_flight_recorders(const std::string& reason);

}  // namespace ringtorch
