#include "runtime/launch/private_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include <ringtorch/error.h>

namespace ringtorch {
namespace {

void remove_abandoned(const std::string& parent, const std::string& prefix) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const int fd = ::open((entry.path() / "lock").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // not (yet) locked by its owner: left alone
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      std::error_code ignored;
      std::filesystem::remove_all(entry.path(), ignored);
    }
    ::close(fd);
  }
}

}  // namespace

PrivateDirectory::PrivateDirectory(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string parent = tmp && *tmp ? tmp : "/tmp";
  remove_abandoned(parent, prefix);
  std::string pattern = str_cat(parent, "/", prefix, ::getpid(), "-XXXXXX");
  if (!::mkdtemp(pattern.data())) {
    throw IoError(str_cat("cannot create a directory from ", pattern, ": ", errno_text(errno), "; set TMPDIR"));
  }
  path_ = pattern;
  lock_fd_ = ::open((path_ + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0 || ::flock(lock_fd_, LOCK_EX) != 0) {
    const int error = errno;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
    if (lock_fd_ >= 0) ::close(lock_fd_);
    throw IoError(str_cat("cannot lock ", path_, "/lock: ", errno_text(error)));
  }
}

PrivateDirectory::~PrivateDirectory() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
  ::close(lock_fd_);
}

}  // namespace ringtorch
