#include "support/capture.h"

#include <unistd.h>

#include <cerrno>
#include <thread>

namespace ringtorch {
namespace testing {

std::string read_all(int fd) {
  std::string all;
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    all.append(buf, static_cast<size_t>(n));
  }
  return all;
}

Captured finish(Subprocess& child) {
  Captured c;
  std::thread err_reader([&] { c.err = read_all(child.stderr_fd()); });
  c.out = read_all(child.stdout_fd());
  err_reader.join();
  c.status = child.wait();
  return c;
}

}  // namespace testing
}  // namespace ringtorch
