// One logger for every library: what ringtorch says about itself (a group's path, a skipped
// checkpoint, ringrun's decisions), with levels, on stderr, one whole line per write so that
// the lines of concurrent threads and ranks never interleave. Program output (training
// results, tables, JSON) is not logging and goes to stdout as the programs print it.
//
//   [ringtorch] group 'default': shared memory: all 2 ranks on host ...     (info)
//   [ringtorch] warning: skipping checkpoint ...: ...; trying the previous one
//   [ringrun] all workers succeeded                                         (source "ringrun")
//
// RINGTORCH_LOG_LEVEL (read once): debug, info (the default), warning, error or off; lines below
// it are not written. A process that knows its rank (set_log_rank; ProcessGroup::create sets
// it) adds "[rank R/N] " after the source, unless its output is already prefixed by a launcher
// that says so (ringrun and ringtorch::spawn set RINGTORCH_OUTPUT_PREFIXED=1 for their workers,
// whose lines they prefix "[rank R]: ").
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <string>

namespace ringtorch {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// Whether a line of `level` would be written (RINGTORCH_LOG_LEVEL).
bool log_enabled(LogLevel level);

// "[<source>] " (and the rank, above), then "warning: " or "error: " for those levels, then
// `message`. `source` names the program or library speaking ("ringtorch", "ringrun node 1").
void log_line(LogLevel level, const std::string& message, const std::string& source = "ringtorch");

inline void log_debug(const std::string& message) { log_line(LogLevel::kDebug, message); }
inline void log_info(const std::string& message) { log_line(LogLevel::kInfo, message); }
inline void log_warning(const std::string& message) { log_line(LogLevel::kWarning, message); }
inline void log_error(const std::string& message) { log_line(LogLevel::kError, message); }

// This process' rank in its job, for the prefix (a negative rank clears it). One per process:
// ranks run as threads of one process (tests) share the last one set.
void set_log_rank(int rank, int world_size);

}  // namespace ringtorch
