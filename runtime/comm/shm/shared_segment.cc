#include "runtime/comm/shm/shared_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include <ringtorch/error.h>

namespace ringtorch {
namespace {

void* map(int fd, size_t bytes, const std::string& name) {
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) throw IoError(str_cat("mmap of shared memory ", name, " failed: ", errno_text(errno)));
  return data;
}

}  // namespace

SharedSegment SharedSegment::create(const std::string& name, size_t bytes) {
  ::shm_unlink(name.c_str());  // a crashed run's leftover of the same name
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw IoError(str_cat("shm_open(", name, ") failed: ", errno_text(errno)));
  // posix_fallocate, unlike ftruncate, fails now (ENOSPC) when /dev/shm cannot hold it.
  const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw IoError(str_cat("reserving ", bytes, " bytes of shared memory for ", name, " failed: ", errno_text(rc),
                          " (is /dev/shm large enough? docker: --shm-size)"));
  }
  void* data = nullptr;
  try {
    data = map(fd, bytes, name);
  } catch (...) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw;
  }
  ::close(fd);
  return SharedSegment(name, data, bytes);
}

SharedSegment SharedSegment::open(const std::string& name, size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throw IoError(str_cat("shm_open(", name, ") failed: ", errno_text(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    ::close(fd);
    throw IoError(str_cat("shared memory ", name, " holds ", st.st_size, " bytes, expected ", bytes));
  }
  void* data = nullptr;
  try {
    data = map(fd, bytes, name);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return SharedSegment(name, data, bytes);
}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept
    : name_(std::move(other.name_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, size_);
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

SharedSegment::~SharedSegment() {
  if (data_) ::munmap(data_, size_);
}

void SharedSegment::unlink() { ::shm_unlink(name_.c_str()); }

int remove_leftover_segments(const std::string& run_id) {
  const std::string prefix = shared_segment_name(run_id + "-").substr(1);  // without the '/'
  int removed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    const std::string name = entry.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    // "<restart>-<round>-": digits, so that run "job" does not match run "job-2"'s segments.
    size_t at = prefix.size();
    bool shaped = true;
    for (int field = 0; field < 2 && shaped; ++field) {
      const size_t digits = at;
      while (at < name.size() && name[at] >= '0' && name[at] <= '9') ++at;
      shaped = at > digits && at < name.size() && name[at] == '-';
      ++at;
    }
    if (shaped && ::shm_unlink(("/" + name).c_str()) == 0) ++removed;
  }
  return removed;
}

std::string shared_segment_name(const std::string& text) {
  std::string name = "/ringtorch-";
  for (char c : text) {
    const bool plain =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    name += plain ? c : '_';
  }
  if (name.size() > 250) name.resize(250);
  return name;
}

}  // namespace ringtorch
