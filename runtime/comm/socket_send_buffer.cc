#include "runtime/comm/socket_send_buffer.h"

#include <gloo/context.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "base/error.h"
#include "base/parse.h"
#include "base/str_cat.h"
#include "rendezvous/store_value.h"
#include "runtime/comm/pair_sockets.h"
#include "runtime/comm/tensor_checks.h"

namespace ringtorch {
namespace {

std::string kernel_key(int rank) { return str_cat("kernel/", rank); }

}  // namespace

SocketSendBuffer parse_socket_send_buffer(const std::string& text, const std::string& what) {
  SocketSendBuffer choice;
  if (text == "auto") return choice;
  if (text == "kernel") {
    choice.mode = SocketSendBuffer::Mode::kKernel;
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

std::string kernel_identity() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  return boot_id;
}

std::string apply_send_buffers(gloo::Context& context, c10d::Store& store, const SocketSendBuffer& choice,
                               const std::string& identity) {
  if (context.size < 2) return "";
  store.set(kernel_key(context.rank), store_value(identity));
  if (choice.mode == SocketSendBuffer::Mode::kKernel) return "";
  std::vector<bool> capped(static_cast<size_t>(context.size), choice.mode == SocketSendBuffer::Mode::kBytes);
  capped[static_cast<size_t>(context.rank)] = false;
  if (choice.mode == SocketSendBuffer::Mode::kAuto) {
    for (int peer = 0; peer < context.size; ++peer) {
      if (peer != context.rank) capped[peer] = !identity.empty() && store_text(store.get(kernel_key(peer))) == identity;
    }
  }
  if (std::find(capped.begin(), capped.end(), true) == capped.end()) return "";
  const int request = choice.mode == SocketSendBuffer::Mode::kBytes ? choice.bytes : kSameMachineSendBuffer;
  const std::vector<int> sockets = find_pair_sockets(context, store);
  int sized = 0, granted = 0;
  for (int peer = 0; peer < context.size; ++peer) {
    const int fd = sockets[static_cast<size_t>(peer)];
    if (!capped[peer] || fd < 0) continue;
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
                 choice.mode == SocketSendBuffer::Mode::kAuto ? " on this machine" : "",
                 " (RINGTORCH_SOCKET_SNDBUF=kernel: the kernel's own)");
}

}  // namespace ringtorch
