#include "runtime/comm/pair_sockets.h"

#include <dirent.h>
#include <gloo/transport/tcp/address.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <map>
#include <string>

#include "runtime/comm/failure_report.h"

namespace ringtorch {
namespace {

// "[host]:port" of a TCP socket's end, as Gloo prints addresses; empty for anything else.
std::string socket_address(int fd, bool far_end) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  auto* raw = reinterpret_cast<sockaddr*>(&address);
  if ((far_end ? ::getpeername(fd, raw, &length) : ::getsockname(fd, raw, &length)) != 0) return "";
  if (address.ss_family != AF_INET && address.ss_family != AF_INET6) return "";
  return gloo::transport::tcp::Address(address).str();
}

// This process' TCP sockets by "<near end> <far end>"; one pass over /proc/self/fd.
std::map<std::string, int> tcp_sockets() {
  std::map<std::string, int> sockets;
  DIR* directory = ::opendir("/proc/self/fd");
  if (directory == nullptr) return sockets;
  while (const dirent* entry = ::readdir(directory)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    struct stat status {};
    if (end == entry->d_name || *end != '\0' || fd == ::dirfd(directory)) continue;
    if (::fstat(static_cast<int>(fd), &status) != 0 || !S_ISSOCK(status.st_mode)) continue;
    const std::string near = socket_address(static_cast<int>(fd), false);
    if (!near.empty()) sockets[near + " " + socket_address(static_cast<int>(fd), true)] = static_cast<int>(fd);
  }
  ::closedir(directory);
  return sockets;
}

}  // namespace

std::vector<int> find_pair_sockets(gloo::Context& context, c10d::Store& store) {
  std::vector<int> found(static_cast<size_t>(context.size), -1);
  const std::map<std::string, int> sockets = tcp_sockets();  // every pair is connected by now
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer == context.rank) continue;
    const auto socket =
        sockets.find(context.getPair(peer)->address().str() + " " + published_peer_address(store, peer, context.rank));
    if (socket != sockets.end()) found[static_cast<size_t>(peer)] = socket->second;
  }
  return found;
}

}  // namespace ringtorch
