// OutputForwarder: copies workers' stdout and stderr to the launcher's own, one whole line at a
// time with a "[rank N]: " prefix, so lines of different ranks never interleave mid-line; and,
// when a log directory is given, appends each rank's lines (unprefixed) to its own file.
//
// Thread-safety: none; the launcher's monitor loop owns it. It does not own the descriptors
// (the Subprocess does); remove() a stream before its Subprocess closes it.
#pragma once

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>

namespace ringtorch {

class OutputForwarder {
 public:
  // `to_stderr`: the stream goes to the launcher's stderr (else stdout). `log_file` (not owned;
  // may be null) also gets each line; `log_path` names it in a write error.
  void add(int fd, const std::string& prefix, bool to_stderr, std::FILE* log_file, const std::string& log_path = "");
  // Waits up to `timeout` for output and forwards what arrived. Returns false once no streams
  // are left. A stream at end of file is flushed (an unterminated last line gets a newline).
  bool pump(std::chrono::milliseconds timeout);
  // Lines of `fd` from now on carry `prefix` (a worker recovering in its process under a new
  // rank); no-op for an unknown fd.
  void set_prefix(int fd, const std::string& prefix);
  // Forwards whatever is buffered for `fd` and forgets it.
  void remove(int fd);
  bool empty() const { return streams_.empty(); }
  // The first failed write to a log file ("PATH: No space left on device"), said once on stderr
  // when it happened (that log gets no more lines); empty while every write worked.
  const std::string& log_write_error() const { return log_write_error_; }

 private:
  struct Stream {
    std::string prefix;
    bool to_stderr = false;
    std::FILE* log = nullptr;  // not owned
    std::string log_path;
    std::string pending;  // bytes after the last newline
  };
  void emit(Stream& s, const std::string& line);
  void flush(Stream& s);

  std::map<int, Stream> streams_;
  std::string log_write_error_;
  std::set<std::FILE*> failed_logs_;  // written no more: the disk is full or the file is gone
};

}  // namespace ringtorch
