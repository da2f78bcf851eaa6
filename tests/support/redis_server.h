// A real redis-server for one test: started on a free loopback port (optionally with a
// password), with persistence off, and stopped (SIGTERM, then SIGKILL) at destruction.
// Tests that need it skip with the reason when redis-server is not installed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "runtime/launch/subprocess.h"

namespace ringtorch {
namespace testing {

class RedisServer {
 public:
  // Returns nullopt (and fills `why`) when redis-server cannot be found or started.
  static std::optional<RedisServer> start(const std::string& password, std::string* why);

  RedisServer(RedisServer&&) = default;
  RedisServer& operator=(RedisServer&&) = default;
  ~RedisServer();

  uint16_t port() const { return port_; }
  // "redis://127.0.0.1:PORT" or "redis://:PASSWORD@127.0.0.1:PORT", plus `suffix` ("/3?timeout=5").
  std::string url(const std::string& suffix = "") const;
  // Stops the server now (to test an unreachable Redis).
  void stop();

 private:
  RedisServer() = default;
  std::optional<Subprocess> process_;
  uint16_t port_ = 0;
  std::string password_;
};

}  // namespace testing
}  // namespace ringtorch
