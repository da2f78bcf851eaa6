#include "runtime/launch/output_forwarder.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include <ringtorch/error.h>
#include <ringtorch/str_cat.h>

namespace ringtorch {
namespace {

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // our own stdout is gone: nothing sensible left to do with the text
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void OutputForwarder::add(int fd, const std::string& prefix, bool to_stderr, std::FILE* log_file,
                          const std::string& log_path) {
  if (fd < 0) return;
  streams_[fd] = Stream{prefix, to_stderr, log_file, log_path, {}};
}

void OutputForwarder::set_prefix(int fd, const std::string& prefix) {
  auto it = streams_.find(fd);
  if (it != streams_.end()) it->second.prefix = prefix;
}

void OutputForwarder::emit(Stream& s, const std::string& line) {
  // One write() per line: lines from different ranks never interleave.
  write_all(s.to_stderr ? STDERR_FILENO : STDOUT_FILENO, s.prefix + line + "\n");
  if (s.log && failed_logs_.count(s.log) == 0) {
    std::fputs(line.c_str(), s.log);
    std::fputc('\n', s.log);
    if (std::fflush(s.log) != 0 || std::ferror(s.log)) {
      const int error = errno;
      failed_logs_.insert(s.log);
      const std::string what =
          str_cat(s.log_path.empty() ? std::string("a log file") : s.log_path, ": ", errno_text(error));
      if (log_write_error_.empty()) log_write_error_ = what;
      write_all(STDERR_FILENO, str_cat("[ringrun] error: writing ", what,
                                       "; this log gets no more lines (the "
                                       "terminal still does)\n"));
    }
  }
}

void OutputForwarder::flush(Stream& s) {
  if (!s.pending.empty()) emit(s, s.pending);
  s.pending.clear();
}

void OutputForwarder::remove(int fd) {
  auto it = streams_.find(fd);
  if (it == streams_.end()) return;
  flush(it->second);
  streams_.erase(it);
}

bool OutputForwarder::pump(std::chrono::milliseconds timeout) {
  if (streams_.empty()) return false;
  std::vector<pollfd> fds;
  for (const auto& [fd, s] : streams_) fds.push_back(pollfd{fd, POLLIN, 0});
  int ready = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
  if (ready <= 0) return true;  // timeout, or EINTR (a signal the caller will look at)
  char buf[65536];
  for (const auto& p : fds) {
    if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Stream& s = streams_[p.fd];
    ssize_t n = ::read(p.fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {  // end of file: the worker closed it (usually: it exited)
      remove(p.fd);
      continue;
    }
    s.pending.append(buf, static_cast<size_t>(n));
    size_t start = 0, nl;
    while ((nl = s.pending.find('\n', start)) != std::string::npos) {
      emit(s, s.pending.substr(start, nl - start));
      start = nl + 1;
    }
    s.pending.erase(0, start);
    // A worker that never ends a line must not grow us without bound.
    if (s.pending.size() > (1u << 20)) flush(s);
  }
  return !streams_.empty();
}

}  // namespace ringtorch
