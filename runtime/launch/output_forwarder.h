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
#include <string>

namespace ringtorch {

class OutputForwarder {
 public:
  // `to_stderr`: the stream goes to the launcher's stderr (else stdout).
  void add(int fd, const std::string& prefix, bool to_stderr, std::FILE* log_file);
  // Waits up to `timeout` for output and forwards what arrived. Returns false once no streams
  // are left. A stream at end of file is flushed (an unterminated last line gets a newline).
  bool pump(std::chrono::milliseconds timeout);
  // Forwards whatever is buffered for `fd` and forgets it.
  void remove(int fd);
  bool empty() const { return streams_.empty(); }

 private:
  struct Stream {
    std::string prefix;
    bool to_stderr = false;
    std::FILE* log = nullptr;  // not owned
    std::string pending;       // bytes after the last newline
  };
  void emit(Stream& s, const std::string& line);
  void flush(Stream& s);

  std::map<int, Stream> streams_;
};

}  // namespace ringtorch
