// SignalWatch: while at least one watch lives, SIGINT, SIGTERM and SIGHUP are recorded instead
// of acting (each one that this process did not ignore when the first watch was made: a
// `nohup` keeps its SIGHUP ignored). A watch sees the signals that arrived after it was made.
// take_signal() lets the process feel the signal as it would have: the previous dispositions
// come back (when no other watch lives) and the signal is sent to this process again. A watch
// made with `dump_requests` also records SIGUSR1, which ringrun passes on to its workers as
// "write your flight recorders" (dump_requested()). Both ringrun's agent and spawn() watch
// signals this way; nothing else in the launcher installs handlers.
//
// Thread-safety: received() and dump_requested() from any thread; the rest from the owner. The
// handler only touches lock-free atomics. Handlers use SA_RESTART, so other threads' blocking
// calls are not cut short: a watcher polls received() (ringrun every --monitor_interval).
#pragma once

#include <cstdint>

namespace ringtorch {

class SignalWatch {
 public:
  explicit SignalWatch(bool dump_requests = false);
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  // The last watched signal that arrived since this watch was made; 0 if none.
  int received() const;
  // With `dump_requests`: whether a SIGUSR1 arrived since the last call (or since the watch was made).
  bool dump_requested();
  // Ends this watch and sends `sig` to this process under the restored dispositions.
  void take_signal(int sig);

 private:
  void end();
  const bool dump_requests_;
  uint64_t arrivals_at_start_ = 0;
  uint64_t dump_requests_seen_ = 0;
  bool ended_ = false;
};

}  // namespace ringtorch
