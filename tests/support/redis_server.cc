#include "support/redis_server.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "support/test_paths.h"

namespace ringtorch {
namespace testing {
namespace {

bool port_accepts(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

std::optional<RedisServer> RedisServer::start(const std::string& password, std::string* why) {
  const char* candidates[] = {"/usr/bin/redis-server", "/usr/local/bin/redis-server"};
  std::string binary;
  for (const char* c : candidates) {
    if (::access(c, X_OK) == 0) binary = c;
  }
  if (binary.empty()) {
    *why = "redis-server is not installed (apt-get install redis-server)";
    return std::nullopt;
  }
  for (int attempt = 0; attempt < 5; ++attempt) {
    RedisServer server;
    server.port_ = free_port();
    server.password_ = password;
    SubprocessOptions spawn;
    spawn.argv = {binary,
                  "--port",
                  std::to_string(server.port_),
                  "--bind",
                  "127.0.0.1",
                  "--save",
                  "",
                  "--appendonly",
                  "no",
                  "--daemonize",
                  "no",
                  "--loglevel",
                  "warning",
                  "--logfile",
                  "/dev/null"};
    if (!password.empty()) {
      spawn.argv.push_back("--requirepass");
      spawn.argv.push_back(password);
    }
    spawn.capture_output = false;
    server.process_.emplace(Subprocess::spawn(spawn));
    for (int i = 0; i < 200; ++i) {
      if (port_accepts(server.port_)) return server;
      if (server.process_->poll()) break;  // exited: port taken by someone else, try another
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  *why = "redis-server did not start listening";
  return std::nullopt;
}

RedisServer::~RedisServer() { stop(); }

void RedisServer::stop() {
  if (!process_ || !process_->running()) {
    process_.reset();
    return;
  }
  process_->signal(SIGTERM);
  for (int i = 0; i < 100 && !process_->poll(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  process_.reset();  // SIGKILL if still running
}

std::string RedisServer::url(const std::string& suffix) const {
  std::string auth = password_.empty() ? "" : ":" + password_ + "@";
  return "redis://" + auth + "127.0.0.1:" + std::to_string(port_) + suffix;
}

}  // namespace testing
}  // namespace ringtorch
