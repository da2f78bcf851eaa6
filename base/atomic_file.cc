#include "base/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <ringtorch/error.h>

namespace ringtorch {
namespace {

// A temporary file is ".NAME.tmp.<pid>.<n>" beside NAME: written here, recognised when stale.
constexpr char kTemporaryMarker[] = ".tmp.";

void write_fully(int fd, const char* data, size_t size, const std::string& path, const std::string& what) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(str_cat(what, ": writing ", path, ": ", errno_text(errno)));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

void write_file_atomically(const std::string& path, const char* data, size_t size, const std::string& what) {
  namespace fs = std::filesystem;
  static std::atomic<unsigned> counter{0};  // threads of one process writing the same path
  std::string directory = fs::path(path).parent_path().string();
  if (directory.empty()) directory = ".";
  const std::string temporary =
      str_cat(directory, "/.", fs::path(path).filename().string(), kTemporaryMarker, ::getpid(), ".", counter++);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(str_cat(what, ": cannot create ", temporary, ": ", errno_text(errno)));
  try {
    write_fully(fd, data, size, temporary, what);
    if (::fsync(fd) != 0) throw IoError(str_cat(what, ": fsync ", temporary, ": ", errno_text(errno)));
  } catch (...) {
    ::close(fd);
    ::unlink(temporary.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    throw IoError(str_cat(what, ": rename to ", path, ": ", errno_text(error)));
  }
  const int dir = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

void check_writable(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::string directory = fs::path(path).parent_path().string();
  if (directory.empty()) directory = ".";
  const std::string probe = str_cat(directory, "/.", fs::path(path).filename().string(), ".probe.", ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw IoError(str_cat(what, " ", path, ": cannot write into ", directory, ": ", errno_text(errno),
                          " (checked before training, so that the run does not fail at its end)"));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

std::vector<std::string> remove_stale_temporaries(const std::string& directory) {
  namespace fs = std::filesystem;
  std::vector<std::string> removed;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& entry : fs::directory_iterator(directory, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t marker = name.rfind(kTemporaryMarker);
    if (name.empty() || name[0] != '.' || marker == std::string::npos) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + marker + std::strlen(kTemporaryMarker), &end, 10);
    if (pid <= 0 || end == nullptr || *end != '.') continue;
    const bool writer_runs = ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
    std::error_code time_error;
    const auto written = fs::last_write_time(entry.path(), time_error);
    if (writer_runs || time_error || now - written < std::chrono::minutes(10)) continue;
    if (fs::remove(entry.path(), time_error)) removed.push_back(entry.path().string());
  }
  return removed;
}

}  // namespace ringtorch
