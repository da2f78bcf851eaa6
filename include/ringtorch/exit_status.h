// How a process ended: ringrun's workers, spawn()'s ranks (ProcessFailedError).
#pragma once

#include <string>

namespace ringtorch {

struct ExitStatus {
  bool signaled = false;
  int code = 0;    // exit code, when !signaled
  int signal = 0;  // terminating signal, when signaled

  bool success() const { return !signaled && code == 0; }
  // The code a shell would report: the exit code, or 128 + signal.
  int shell_code() const { return signaled ? 128 + signal : code; }
  // "exit code 3" or "signal 9 (SIGKILL)".
  std::string describe() const;
};

}  // namespace ringtorch
