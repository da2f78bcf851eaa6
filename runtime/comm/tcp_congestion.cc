#include "runtime/comm/tcp_congestion.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/str_cat.h"

namespace ringtorch {
namespace {

bool set_congestion_control(int fd, const std::string& name) {
  return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0;
}

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 15) return false;  // TCP_CA_NAME_MAX is 16 with the NUL
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  }
  return true;
}

}  // namespace

TcpCongestion parse_tcp_congestion(const std::string& text, const std::string& what) {
  TcpCongestion choice;
  if (text == "auto") return choice;
  if (text == "kernel") {
    choice.mode = TcpCongestion::Mode::kKernel;
    return choice;
  }
  if (!valid_name(text)) {
    throw InvalidArgumentError(str_cat(what, ": '", text,
                                       "' is neither 'auto', 'kernel' nor an algorithm's name such as 'cubic' "
                                       "(net.ipv4.tcp_available_congestion_control lists this kernel's)"));
  }
  choice.mode = TcpCongestion::Mode::kNamed;
  choice.name = text;
  return choice;
}

std::string congestion_control_of(int fd) {
  char name[32] = {};
  socklen_t length = sizeof(name) - 1;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &length) != 0) return "";
  return std::string(name, ::strnlen(name, length));
}

std::string apply_congestion_control(const std::vector<int>& sockets, const std::vector<bool>& on_this_kernel,
                                     const TcpCongestion& choice, const std::string& setting) {
  if (choice.mode == TcpCongestion::Mode::kKernel) return "";
  int changed = 0;
  std::string chosen, replaced;
  for (size_t peer = 0; peer < sockets.size(); ++peer) {
    const int fd = sockets[peer];
    if (fd < 0) continue;
    if (choice.mode == TcpCongestion::Mode::kNamed) {
      if (!set_congestion_control(fd, choice.name)) {
        const int error = errno;
        throw InvalidArgumentError(
            str_cat(setting, "=", choice.name, ": the kernel refused it on the socket to rank ", peer, " (",
                    errno_text(error),
                    "); net.ipv4.tcp_available_congestion_control lists the algorithms this kernel has, and a process "
                    "without CAP_NET_ADMIN may only choose those in net.ipv4.tcp_allowed_congestion_control; ",
                    setting, "=kernel keeps the kernel's"),
            {-1, static_cast<int>(peer), "setting the sockets' congestion control"});
      }
      ++changed;
      chosen = choice.name;
      continue;
    }
    if (!on_this_kernel[peer]) continue;
    const std::string current = congestion_control_of(fd);
    if (current.compare(0, 3, "bbr") != 0) continue;
    for (const char* name : {"cubic", "reno"}) {
      if (set_congestion_control(fd, name)) {
        ++changed;
        chosen = name;
        replaced = current;
        break;
      }
    }
  }
  if (changed == 0) return "";
  const bool automatic = choice.mode == TcpCongestion::Mode::kAuto;
  return str_cat("TCP congestion control ", chosen, automatic ? str_cat(" instead of ", replaced) : "", " for ",
                 changed, changed == 1 ? " peer" : " peers", automatic ? " on this machine" : "", " (", setting,
                 "=kernel: the kernel's own)");
}

}  // namespace ringtorch
