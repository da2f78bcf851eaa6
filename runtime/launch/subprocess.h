// Subprocess: one child process, started with fork+exec, with its stdout and stderr on pipes.
//
// The child runs in its own process group (so signal() reaches its children too) and gets
// SIGKILL when the parent dies (PR_SET_PDEATHSIG): a launcher that is killed leaves no orphans.
// Linux ties that signal to the *thread* that called spawn(): spawn from a thread that lives as
// long as the child should.
// A program that cannot be executed is reported by spawn() as IoError (through a close-on-exec
// pipe), not as a mysterious exit code 127.
//
// Thread-safety: none; one owner. Ownership: the destructor kills (SIGKILL) and reaps a child
// that is still running, and closes the pipes.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ringtorch/exit_status.h>

namespace ringtorch {

struct SubprocessOptions {
  std::vector<std::string> argv;           // argv[0] is looked up in PATH when it has no '/'
  std::string program;                     // run this file instead of argv[0] (argv[0] is then only a name)
  std::map<std::string, std::string> env;  // added to (or replacing) this process's environment
  bool capture_output = true;              // false: the child inherits stdout and stderr
  std::string working_directory;           // empty: the current one
};

class Subprocess {
 public:
  static Subprocess spawn(const SubprocessOptions& options);

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  int stdout_fd() const { return stdout_fd_; }  // -1 when not captured or closed
  int stderr_fd() const { return stderr_fd_; }
  void close_stdout();
  void close_stderr();

  // Non-blocking: the exit status once the child has ended (and been reaped).
  std::optional<ExitStatus> poll();
  // Blocks until the child ends.
  ExitStatus wait();
  // Sends `sig` to the child's process group; a no-op once it has been reaped.
  void signal(int sig);
  bool running() const { return pid_ > 0 && !status_; }

 private:
  Subprocess() = default;
  void release();

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  std::optional<ExitStatus> status_;
};

// The name of a signal: "SIGTERM".
std::string signal_name(int sig);

// Whether process `pid` has a handler for `sig` (its /proc status' SigCgt mask): for signals
// whose default action would end a process that does not expect them (SIGUSR1).
bool process_catches_signal(pid_t pid, int sig);

}  // namespace ringtorch
