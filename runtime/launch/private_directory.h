// PrivateDirectory: "$TMPDIR/<prefix><pid>-XXXXXX" (mode 0700), holding an flock on its "lock"
// file for its whole life, and removed with its contents by the destructor. Making one first
// removes the directories of the same prefix whose lock nobody holds: their owner was killed
// before it could remove them. The lock (not the PID in the name) decides, so that a live owner
// in another PID namespace sharing /tmp (a container) keeps its directory.
//
// Thread-safety: none; one owner. The lock's descriptor is close-on-exec: children never hold it.
#pragma once

#include <string>

namespace ringtorch {

class PrivateDirectory {
 public:
  // Throws IoError naming the path and TMPDIR when it cannot be made.
  explicit PrivateDirectory(const std::string& prefix);
  ~PrivateDirectory();
  PrivateDirectory(const PrivateDirectory&) = delete;
  PrivateDirectory& operator=(const PrivateDirectory&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int lock_fd_ = -1;
};

}  // namespace ringtorch
