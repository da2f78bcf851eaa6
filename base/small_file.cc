#include "base/small_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <ringtorch/error.h>
#include <ringtorch/str_cat.h>

namespace ringtorch {

std::string read_small_file(const std::string& path, size_t max_bytes, const std::string& what) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer before fstat can refuse it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw IoError(str_cat(what, " ", path, ": cannot open it: ", errno_text(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InvalidArgumentError(str_cat(what, " ", path, ": not a regular file"));
  }
  if (static_cast<size_t>(st.st_size) > max_bytes) {
    ::close(fd);
    throw InvalidArgumentError(
        str_cat(what, " ", path, ": ", st.st_size, " bytes; at most ", max_bytes, " are read (is it the right file?)"));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, &bytes[done], bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : 0;
      ::close(fd);
      throw IoError(str_cat(what, " ", path, ": reading it: ", error ? errno_text(error) : "it shrank while read"));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return bytes;
}

}  // namespace ringtorch
