// spawn(): a program starts its own ranks, as torch.multiprocessing.spawn(fn, nprocs=N) does,
// with no launcher (docs/launcher.md, "A program that spawns its own ranks").
//
// Example (given: int world_size):
//   ringtorch::SpawnOptions options;
//   options.nprocs = world_size;
//   ringtorch::spawn(
//       [&](int rank) {
//         auto group = ringtorch::ProcessGroup::create(ringtorch::rendezvous());
//         std::printf("rank %d of %d\n", rank, group->size());
//       },
//       options);
// This is the second seed's main(): its train(rank, world_size) becomes the lambda, which runs
// in each child, where env:// finds the store that spawn() made.
//
// How a child is made (Python's 'spawn' start method, in C++): fork, then exec of this same
// program (the file /proc/self/exe points to, with this process's argv from /proc/self/cmdline),
// with RINGTORCH_SPAWNED in its environment. The child runs main() again from the top. Its own
// spawn() call (the one that started it: the same place in the program, counted the same way)
// runs fn(rank) and exits (0 when fn returns, 1 when it throws: the exception's message goes back
// to the parent), never returning; every other spawn() call in a child returns at once. So:
//  - the code before spawn() runs in every child too, as a Python module's top level does
//    under 'spawn': keep it to what every rank needs (parsing flags, counting devices), and
//    make it take the same path in a child as in the parent;
//  - a program may call spawn() several times: in a child, the calls before its own return
//    an empty, joined context without starting anything. The calls must not depend
//    on in_spawned_child() or on anything else that differs between runs: a child that reaches
//    a call at another place in the program than the parent's (its file and line) fails with a
//    message saying so rather than run the wrong fn. spawn() inside fn is refused;
//  - a plain fork() without exec is not offered: a process that has used LibTorch has
//    intra-op and inter-op thread pools, and fork() copies only the calling thread, so a child
//    that touches a pool waits forever on threads it does not have (and on mutexes they held).
//
// Each child gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, RINGTORCH_RUN_ID (unique per
// spawn() call) and RINGTORCH_RDZV_ENDPOINT (a file store in a private directory,
// $TMPDIR/ringtorch-spawn-<pid>-*, that spawn() removes at the end, or the next spawn() does
// when this process was killed: runtime/launch/private_directory.h), so ringtorch::rendezvous() with the default env://
// works unchanged inside fn; OMP_NUM_THREADS=1 when nprocs > 1 and it is not set (as ringrun and torchrun). Children's
// output is forwarded line by line with a "[rank N]: " prefix unless SpawnOptions::prefix_output
// is false.
//
// When a child fails (throws, exits non-zero, dies of a signal, or exits without reaching its
// spawn() call), the others get SIGTERM, then SIGKILL after `term_timeout`, and join() throws
// ProcessFailedError naming the failure: when several fail within 200 ms, one that did not
// raise PeerLostError or TimeoutError (those are usually the others noticing it), else the
// first. SIGINT, SIGTERM and SIGHUP received while a context lives (runtime/launch/
// signal_watch.h) are passed on to the children (SIGHUP as SIGTERM); once they have ended the
// parent takes the signal itself (its previous handler, or death by that signal). Children get
// SIGKILL when the parent dies (PR_SET_PDEATHSIG): no orphan outlives it, even after SIGKILL.
//
// Thread-safety: call spawn() from one thread, in the same order on every run (a child counts
// the calls to find its own); a SpawnContext is used by one thread.
// Ownership: the context owns its children; destroying it stops the ones still running
// (SIGTERM, then SIGKILL) and removes the temporary directory.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ringtorch/error.h>
#include <ringtorch/exit_status.h>

namespace ringtorch {

struct SpawnOptions {
  int nprocs = 1;
  // true: spawn() returns once every child has ended (and throws if one failed). false: it
  // returns at once; call join() on the context.
  bool join = true;
  // true: children's stdout and stderr are forwarded line by line as "[rank N]: ...". false:
  // they write to this process's stdout and stderr directly.
  bool prefix_output = true;
  // Between SIGTERM and SIGKILL when the others are stopped after a failure.
  std::chrono::milliseconds term_timeout{std::chrono::seconds(5)};
  // Added to the children's environment, after the variables above (those spawn() sets for
  // the rank and the run may not be replaced: InvalidArgumentError).
  std::map<std::string, std::string> env;
};

// A spawned rank failed. what(): "spawned rank 1 of 4 (pid 812) raised InvalidArgumentError:
// <its message>", "... ended with exit code 3", "... was killed by signal 6 (SIGABRT)", "...
// ended (exit code 0) without reaching spawn() call #1: ...", then what happened to the others.
// kind(): the child's own when it raised a ringtorch error, else kPeerLost (a rank of the job
// died); site().peer is the rank.
class ProcessFailedError : public Error {
 public:
  ProcessFailedError(ErrorKind kind, const std::string& message, FailureSite site, int rank, pid_t pid,
                     ExitStatus status, std::string child_message)
      : Error(kind, message, std::move(site)),
        rank(rank),
        pid(pid),
        status(status),
        child_message(std::move(child_message)) {}
  int rank;
  pid_t pid;
  ExitStatus status;
  std::string child_message;  // what the child raised ("InvalidArgumentError: ..."); empty if it did not
};

class SpawnContext {
 public:
  class Impl;
  explicit SpawnContext(std::unique_ptr<Impl> impl);
  ~SpawnContext();
  SpawnContext(const SpawnContext&) = delete;
  SpawnContext& operator=(const SpawnContext&) = delete;

  // Waits until every child has ended or `timeout` passes (none: no limit). Returns true when
  // all ended successfully, false on timeout; throws ProcessFailedError when one failed (after
  // the others were stopped), again on every later call.
  bool join(std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  int nprocs() const;
  std::vector<pid_t> pids() const;  // by rank
  // By rank: how each child ended; nullopt while it runs.
  std::vector<std::optional<ExitStatus>> exit_statuses() const;

 private:
  std::unique_ptr<Impl> impl_;
};

using SpawnFunction = std::function<void(int rank)>;

// Starts options.nprocs children that each run fn(rank). In the parent: returns the context
// (already joined when options.join). In a child: at the call that started it, runs fn and
// exits, never returning; at any call before that one, returns an empty, joined context.
// `call_file` and `call_line` are the call's place in the program, filled in by the compiler:
// a child checks that the call it reached is the parent's.
// Throws InvalidArgumentError for nprocs < 1, for SpawnOptions::env naming a variable spawn()
// sets, and inside fn (spawn all ranks from the parent); IoError when a child cannot be
// started, or (with join) when SIGINT/SIGTERM/SIGHUP stopped the ranks and the parent's own
// disposition for it did not end the process; ProcessFailedError (with join) when a rank failed.
std::unique_ptr<SpawnContext> spawn(const SpawnFunction& fn, const SpawnOptions& options = {},
                                    const char* call_file = __builtin_FILE(), int call_line = __builtin_LINE());

// True in a process that spawn() started, from the start of its main() (Python's
// __name__ == "__mp_main__"): code before spawn() that only the parent should run, such as a
// banner, tests it. Throws InvalidArgumentError when RINGTORCH_SPAWNED was set by hand, badly.
bool in_spawned_child();

}  // namespace ringtorch
