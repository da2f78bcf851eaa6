// Files that are either whole or absent: written to a temporary file beside the target, synced,
// renamed over it, and the directory synced. Used for checkpoints, flight-recorder dumps and
// timelines, which a crash or a second writer must never leave half-written.
//
// Thread-safety: concurrent calls are safe, for the same path too (each writes its own
// temporary file; the last rename wins).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ringtorch {

// Throws IoError starting with `what` ("checkpoint", "flight recorder") and naming the file.
void write_file_atomically(const std::string& path, const char* data, size_t size, const std::string& what);
inline void write_file_atomically(const std::string& path, const std::string& content, const std::string& what) {
  write_file_atomically(path, content.data(), content.size(), what);
}

// Checks, before a long job, that `path` can be written at its end as write_file_atomically
// writes it: its directory must exist and take a new file (a probe file is made and removed
// there, which catches a read-only filesystem too). Throws IoError starting with `what`
// ("--timeline") and naming the path and the reason.
void check_writable(const std::string& path, const std::string& what);

// Removes from `directory` the temporary files of writers that died mid-write (".NAME.tmp.<pid>.<n>"
// whose process no longer runs on this host and which nobody wrote to for ten minutes: a writer
// killed between create and rename leaves one, and no later write would). Returns the paths
// removed. Errors are ignored: it only tidies.
std::vector<std::string> remove_stale_temporaries(const std::string& directory);

}  // namespace ringtorch
