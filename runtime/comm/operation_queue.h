// The order in which a process group's operations run, and whether the group still works.
//
// Operations run one at a time, in submission order (every rank submits the same collectives
// in the same order, so the order is the same everywhere), each under a Work. Two ways in:
//   submit(op)  queues it for the worker thread and returns its Work at once (the *_async calls);
//   run(op)     the synchronous calls: when nothing is queued or running, the operation runs on
//               the calling thread (no hand-off to the worker and back, which is most of the cost
//               of a small collective on a busy machine); otherwise it waits its turn.
// The sequence number each operation gets is its tag (tag_space.h).
//
// Every operation is recorded in the group's flight recorder (when it has one) as it is queued,
// started and ended, and in the timeline when that is on (runtime/trace). A timeout, a lost
// peer or a mismatch dumps the flight recorders of the process, and the error's message says
// where.
//
// A failure the executor reports as breaking (a peer lost, a timeout) is kept: every later
// operation completes at once with it, and broken() returns it, so a rank never talks again
// over a mesh in an unknown state.
//
// Thread-safety: every method may be called from any thread. Ownership: the queue owns its
// worker thread and the operations until they complete; stop() (or the destructor) runs what
// is queued, then joins the worker.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <ringtorch/timeline.h>
#include <ringtorch/work.h>

#include "runtime/comm/call_signature.h"
#include "runtime/comm/device_staging.h"
#include "runtime/trace/flight_recorder.h"

namespace ringtorch {

// One operation as the process group's front end prepares it.
struct Operation {
  CallSignature call;
  std::string detail;               // "4.0 MiB float32 sum, direct", for the Work's description
  const char* path = "gloo";        // "shared memory", "direct", "ring", ...: the flight recorder's
  std::string label;                // ScopedOperationLabel::current() at submission
  std::vector<at::Tensor> tensors;  // the caller's tensors, kept alive by the Work
  std::chrono::milliseconds timeout{0};
  std::function<void(uint32_t tag)> run;  // does the work; throws on failure
  // `run` compares the ranks' calls itself (the shared-memory path; all-reduce, inside its first
  // exchange); otherwise the executor exchanges call fingerprints before it (call_fingerprint.h).
  bool run_checks_call = false;
  DeviceStaging staging;  // host copies of CUDA tensors; copied back after `run`
};

class OperationQueue {
 public:
  // What the executor says about one failed operation.
  struct Outcome {
    std::exception_ptr error;   // null: success
    bool breaks_group = false;  // the mesh is in an unknown state: refuse everything after
  };
  // Runs `op.run` (and whatever checks go with it) for the operation described by `work`.
  using Executor = std::function<Outcome(Operation& op, uint32_t tag, const Work& work)>;

  // `prefix` ("[rank 0/2] ") and `group` name the operations in their Work descriptions.
  // `recorder` may be null (RINGTORCH_FLIGHT_RECORDER_SIZE=0); `dump_on_failure` false: failures
  // are recorded, not dumped (a hierarchical group's cross-host part: its group dumps).
  OperationQueue(std::string prefix, std::string group, Executor executor,
                 std::shared_ptr<FlightRecorder> recorder = nullptr, bool dump_on_failure = true);
  ~OperationQueue();
  OperationQueue(const OperationQueue&) = delete;
  OperationQueue& operator=(const OperationQueue&) = delete;

  std::shared_ptr<Work> submit(Operation op);
  // Returns when the operation has completed; rethrows its failure.
  void run(Operation op);

  // The failure that broke the group, or null.
  std::exception_ptr broken() const;
  // Throws InvalidArgumentError naming `op` when stop() has been called.
  void check_open(const char* op) const;
  // Runs what is queued, then joins the worker; later submissions throw. Idempotent.
  void stop();

  // How long a Work waits beyond its operation's timeout before giving up on it: time for
  // the operation's own, more precise error (naming the failed peer takes a few seconds).
  static constexpr std::chrono::milliseconds kWaitGrace{4000};

 private:
  struct Task {
    std::shared_ptr<Work> work;
    Operation op;
    uint32_t tag = 0;
    uint32_t sequence = 0;
    FlightRecorder::Id record = 0;  // the recorder's entry (with a recorder)
  };
  // Numbers the operation and makes its Work; completes it at once when the group is broken.
  // Called with mutex_ held.
  // `starts_now`: it runs at once on this thread (its queue time is its start time: one clock
  // read less on the path of small synchronous collectives).
  Task make_task(Operation op, bool starts_now);
  void execute(Task& task);
  // Records a failure in the flight recorder; a timeout, a lost peer or a mismatch also dumps
  // the process' recorders and returns the error with the dump's place in its message.
  std::exception_ptr record_failure(const Task& task, FlightRecorder::Clock::time_point end,
                                    std::exception_ptr error) noexcept;
  void record_in_timeline(const Task& task, Timeline::Clock::time_point begin, Timeline::Clock::time_point end,
                          bool failed) const noexcept;
  void worker_loop();

  const std::string prefix_, group_;
  const Executor executor_;
  const std::shared_ptr<FlightRecorder> recorder_;
  const bool dump_on_failure_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Task> queue_;      // guarded by mutex_
  bool running_ = false;        // guarded by mutex_: an operation is executing (worker or run())
  bool stopping_ = false;       // guarded by mutex_
  uint32_t next_sequence_ = 0;  // guarded by mutex_
  std::exception_ptr broken_;   // guarded by mutex_
  std::thread worker_;          // started in the constructor, joined by stop()
};

}  // namespace ringtorch
