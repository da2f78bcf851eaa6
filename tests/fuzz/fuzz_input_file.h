// The readers under fuzz take a path; this gives them the fuzzer's bytes as a file without
// touching the disk: an in-memory file (memfd) rewritten for each input, opened by its
// /proc/self/fd/N path.
//
// Thread-safety: none; libFuzzer calls a target from one thread.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace ringtorch::fuzz {

inline std::string as_file(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("ringtorch-fuzz-input", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, 0) != 0) std::abort();
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace ringtorch::fuzz
