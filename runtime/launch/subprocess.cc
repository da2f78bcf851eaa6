#include "runtime/launch/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>

#include <ringtorch/error.h>

extern char** environ;

namespace ringtorch {
namespace {

ExitStatus decode(int raw) {
  ExitStatus s;
  if (WIFSIGNALED(raw)) {
    s.signaled = true;
    s.signal = WTERMSIG(raw);
  } else {
    s.code = WEXITSTATUS(raw);
  }
  return s;
}

void close_fd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

}  // namespace

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string ExitStatus::describe() const {
  if (signaled) return str_cat("signal ", signal, " (", signal_name(signal), ")");
  return str_cat("exit code ", code);
}

Subprocess Subprocess::spawn(const SubprocessOptions& options) {
  if (options.argv.empty()) throw InvalidArgumentError("spawn: no program given");

  // Everything the child needs is built before fork(): after it, only async-signal-safe calls.
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : options.env) env[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const char* program = options.program.empty() ? argv[0] : options.program.c_str();
  const std::string& shown = options.program.empty() ? options.argv[0] : options.program;

  int out[2] = {-1, -1}, err[2] = {-1, -1}, exec_status[2] = {-1, -1};
  if ((options.capture_output && (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)) ||
      ::pipe2(exec_status, O_CLOEXEC) != 0) {
    throw IoError(str_cat("spawn '", options.argv[0], "': pipe: ", errno_text(errno)));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw IoError(str_cat("spawn '", options.argv[0], "': fork: ", errno_text(errno)));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    // Undo the parent's signal dispositions: the worker gets default handlers and no blocked signals.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    if (options.capture_output) {
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
    }
    if (!options.working_directory.empty() && ::chdir(options.working_directory.c_str()) != 0) {
      int e = errno;
      (void)!::write(exec_status[1], &e, sizeof(e));
      ::_exit(127);
    }
    ::execvpe(program, argv.data(), envp.data());
    int e = errno;
    (void)!::write(exec_status[1], &e, sizeof(e));
    ::_exit(127);
  }
  ::close(exec_status[1]);
  Subprocess child;
  child.pid_ = pid;
  if (options.capture_output) {
    ::close(out[1]);
    ::close(err[1]);
    child.stdout_fd_ = out[0];
    child.stderr_fd_ = err[0];
  }
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_status[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  ::close(exec_status[0]);
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    child.wait();
    throw IoError(str_cat("cannot run '", shown, "': ", errno_text(child_errno),
                          child_errno == ENOENT ? " (not found; give a path or put it on PATH)" : ""));
  }
  return child;
}

Subprocess::Subprocess(Subprocess&& other) noexcept { *this = std::move(other); }

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    release();
    pid_ = other.pid_;
    stdout_fd_ = other.stdout_fd_;
    stderr_fd_ = other.stderr_fd_;
    status_ = other.status_;
    other.pid_ = -1;
    other.stdout_fd_ = other.stderr_fd_ = -1;
    other.status_.reset();
  }
  return *this;
}

Subprocess::~Subprocess() { release(); }

void Subprocess::release() {
  if (running()) {
    signal(SIGKILL);
    wait();
  }
  close_fd(&stdout_fd_);
  close_fd(&stderr_fd_);
  pid_ = -1;
}

void Subprocess::close_stdout() { close_fd(&stdout_fd_); }
void Subprocess::close_stderr() { close_fd(&stderr_fd_); }

std::optional<ExitStatus> Subprocess::poll() {
  if (status_ || pid_ <= 0) return status_;
  int raw = 0;
  pid_t r = ::waitpid(pid_, &raw, WNOHANG);
  if (r == pid_) status_ = decode(raw);
  return status_;
}

ExitStatus Subprocess::wait() {
  while (!status_ && pid_ > 0) {
    int raw = 0;
    pid_t r = ::waitpid(pid_, &raw, 0);
    if (r == pid_) {
      status_ = decode(raw);
    } else if (r < 0 && errno != EINTR) {
      throw IoError(str_cat("waitpid(", pid_, "): ", errno_text(errno)));
    }
  }
  return status_.value_or(ExitStatus{});
}

bool process_catches_signal(pid_t pid, int sig) {
  std::ifstream status(str_cat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    const unsigned long long mask = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (mask >> (sig - 1)) & 1;
  }
  return false;
}

void Subprocess::signal(int sig) {
  if (!running()) return;
  // The group first (the worker's own children); the pid too, in case it left the group.
  ::kill(-pid_, sig);
  ::kill(pid_, sig);
}

}  // namespace ringtorch
