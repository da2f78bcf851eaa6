// Paths and resources shared by the test binaries.
#pragma once

#include <cstdint>
#include <string>

namespace ringtorch {
namespace testing {

std::string build_path(const std::string& relative);  // e.g. "apps/ringhello"
std::string source_path(const std::string& relative);

// A loopback TCP port that was free a moment ago (bind to port 0, read it, close).
uint16_t free_port();

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Reads a whole file ("" when missing).
std::string read_file(const std::string& path);

// True when a process with this pid exists (and is not a zombie).
bool process_alive(int pid);

// Waits until `path` exists (a process announcing itself), up to 60 s; false if it never does.
bool wait_for_file(const std::string& path);

}  // namespace testing
}  // namespace ringtorch
