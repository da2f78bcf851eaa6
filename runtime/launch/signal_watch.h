// SignalWatch: while at least one watch lives, SIGINT, SIGTERM and SIGHUP are recorded instead
// of acting (each one that this process did not ignore when the first watch was made: a
// `nohup` keeps its SIGHUP ignored). A watch sees the signals that arrived after it was made.
// take_signal() lets the process feel the signal as it would have: the previous dispositions
// come back (when no other watch lives) and the signal is sent to this process again.
//
// Thread-safety: received() from any thread; the rest from the owner. The handler only touches
// lock-free atomics. Handlers use SA_RESTART, so other threads' blocking calls are not cut short.
#pragma once

#include <cstdint>

namespace ringtorch {

class SignalWatch {
 public:
  SignalWatch();
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  // The last watched signal that arrived since this watch was made; 0 if none.
  int received() const;
  // Ends this watch and sends `sig` to this process under the restored dispositions.
  void take_signal(int sig);

 private:
  void end();
  uint64_t arrivals_at_start_ = 0;
  bool ended_ = false;
};

}  // namespace ringtorch
