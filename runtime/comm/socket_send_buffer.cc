#include "runtime/comm/socket_send_buffer.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstdint>

#include "base/error.h"
#include "base/parse.h"
#include "base/str_cat.h"
#include "runtime/comm/tensor_checks.h"

namespace ringtorch {

SocketSendBuffer parse_socket_send_buffer(const std::string& text, const std::string& what) {
  SocketSendBuffer choice;
  if (text == "kernel") return choice;
  if (text == "auto") {
    choice.mode = SocketSendBuffer::Mode::kAuto;
    return choice;
  }
  const int64_t bytes = parse_byte_size(text, str_cat(what, " ('auto', 'kernel' or a byte count such as 256K)"));
  if (bytes < 4096 || bytes > (int64_t{1} << 30)) {
    throw InvalidArgumentError(
        str_cat(what, ": ", text, " is outside 4K..1G (use 'kernel' for the kernel's own tuning)"));
  }
  choice.mode = SocketSendBuffer::Mode::kBytes;
  choice.bytes = static_cast<int>(bytes);
  return choice;
}

std::string apply_send_buffers(const std::vector<int>& sockets, const std::vector<bool>& on_this_kernel,
                               const SocketSendBuffer& choice, const std::string& setting) {
  if (choice.mode == SocketSendBuffer::Mode::kKernel) return "";
  const bool everyone = choice.mode == SocketSendBuffer::Mode::kBytes;
  const int request = everyone ? choice.bytes : kSameMachineSendBuffer;
  int sized = 0, granted = 0;
  for (size_t peer = 0; peer < sockets.size(); ++peer) {
    const int fd = sockets[peer];
    if (fd < 0 || !(everyone || on_this_kernel[peer])) continue;
    int now = 0;
    socklen_t length = sizeof(now);
    if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &request, sizeof(request)) != 0 ||
        ::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &now, &length) != 0) {
      continue;  // the kernel's tuning stays
    }
    ++sized;
    granted = std::max(granted, now);
  }
  if (sized == 0) return "";
  return str_cat("TCP send buffers of ", human_bytes(granted), " for ", sized, sized == 1 ? " peer" : " peers",
                 everyone ? "" : " on this machine", " (", setting, "=kernel: the kernel's own)");
}

}  // namespace ringtorch
