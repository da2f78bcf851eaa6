#include "apps/trainer/cpu_throttle.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

namespace ringtorch {
namespace {

// Where this process's cpu.stat may be: per /proc/self/cgroup line, the v1 cpu controller's
// mount (under either of its usual names) or the v2 hierarchy.
std::vector<std::pair<std::string, bool>> candidates() {
  std::vector<std::pair<std::string, bool>> paths;  // (path, microseconds)
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    const std::string suffix = (path == "/" ? "" : path) + "/cpu.stat";
    if (controllers.empty()) {
      paths.push_back({"/sys/fs/cgroup" + suffix, true});
      paths.push_back({"/sys/fs/cgroup/unified" + suffix, true});
      continue;
    }
    for (size_t at = 0; at <= controllers.size();) {
      const size_t comma = controllers.find(',', at);
      const std::string name = controllers.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      if (name == "cpu") {
        paths.push_back({"/sys/fs/cgroup/cpu" + suffix, false});
        paths.push_back({"/sys/fs/cgroup/cpu,cpuacct" + suffix, false});
      }
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  }
  return paths;
}

}  // namespace

const CpuThrottleClock& CpuThrottleClock::process() {
  static const CpuThrottleClock clock;
  return clock;
}

CpuThrottleClock::CpuThrottleClock() {
  for (const auto& [path, microseconds] : candidates()) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char text[1024];
    const ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    if (std::strstr(text, microseconds ? "throttled_usec " : "throttled_time ")) {  // a cpu controller's
      fd_ = fd;
      microseconds_ = microseconds;
      path_ = path;
      return;
    }
    ::close(fd);
  }
}

std::chrono::nanoseconds CpuThrottleClock::throttled() const {
  if (fd_ < 0) return std::chrono::nanoseconds(0);
  char text[1024];
  const ssize_t n = ::pread(fd_, text, sizeof(text) - 1, 0);
  if (n <= 0) return std::chrono::nanoseconds(0);
  text[n] = '\0';
  const char* key = microseconds_ ? "throttled_usec " : "throttled_time ";
  const char* at = std::strstr(text, key);
  if (!at) return std::chrono::nanoseconds(0);
  const long long value = std::strtoll(at + std::strlen(key), nullptr, 10);
  return std::chrono::nanoseconds(microseconds_ ? value * 1000 : value);
}

}  // namespace ringtorch
