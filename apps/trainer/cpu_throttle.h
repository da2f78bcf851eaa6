// CpuThrottleClock: how long this process's cgroup has been held back by its CPU quota
// (`throttled_time` in cgroup v1's cpu.stat, `throttled_usec` in v2's): a container limited to
// a fraction of a core (docker's --cpus, compare_hetero's cgroup) runs for its quota, then
// stands still until the next period, wherever it is, inside a wait for other ranks included.
// BatchBalancer needs that time counted as the rank's own slowness, not as waiting.
//
// Found through /proc/self/cgroup once; where there is no such file (no quota controller, or
// another OS), available() is false and throttled() stays 0.
//
// Thread-safety: throttled() may be called from any thread (pread on a descriptor opened once).
#pragma once

#include <chrono>
#include <string>

namespace ringtorch {

class CpuThrottleClock {
 public:
  static const CpuThrottleClock& process();

  bool available() const { return fd_ >= 0; }
  std::chrono::nanoseconds throttled() const;
  const std::string& path() const { return path_; }  // the cpu.stat read; empty when unavailable

 private:
  CpuThrottleClock();
  int fd_ = -1;
  bool microseconds_ = false;  // cgroup v2's throttled_usec (v1: throttled_time, ns)
  std::string path_;
};

}  // namespace ringtorch
