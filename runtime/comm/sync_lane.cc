#include "runtime/comm/sync_lane.h"

#include <dirent.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <utility>

#include "base/error.h"
#include "base/str_cat.h"
#include "rendezvous/gloo_store.h"
#include "runtime/comm/failure_report.h"
#include "runtime/comm/gloo_failure.h"
#include "runtime/comm/tag_space.h"

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

// Gloo's TCP pair keeps its socket to itself (and Debian's Gloo does not ship the header that
// declares the pair). A connected socket is named by its two addresses, so this process' TCP
// sockets by "<near end> <far end>" find each pair's; one pass over /proc/self/fd. Other threads'
// descriptors are read too (tests/tsan_suppressions.txt says why that is safe).
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

// Sizes `fd`'s receive buffer as large as net.core.rmem_max allows, and returns what its send
// and receive buffers will be for a full message: Gloo sets SO_SNDBUF to the message before it
// writes it (the kernel doubles the request and caps it at net.core.wmem_max), so the send side
// is measured the same way. {0, 0} when the socket refuses.
std::pair<size_t, size_t> size_buffers(int fd) {
  int want = static_cast<int>(2 * SyncLane::kCapacity), send = 0, receive = 0;
  socklen_t length = sizeof(int);
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof(want)) != 0) return {0, 0};
  want = static_cast<int>(SyncLane::kCapacity);
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want)) != 0) return {0, 0};
  if (::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &send, &length) != 0) return {0, 0};
  length = sizeof(int);
  if (::getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive, &length) != 0) return {0, 0};
  return {static_cast<size_t>(send), static_cast<size_t>(receive)};
}

}  // namespace

bool SyncLane::holds_a_message(size_t send_buffer_bytes, size_t receive_buffer_bytes) {
  // A write must fit the writer's send buffer and half the reader's receive buffer (the kernel
  // keeps the other half for its overhead), with room for twice the message (the per-packet
  // overhead the send buffer is charged).
  return send_buffer_bytes + receive_buffer_bytes / 2 >= 2 * kCapacity;
}

bool SyncLane::supports(const gloo::transport::Device& device) {
  return dynamic_cast<const gloo::transport::tcp::Device*>(&device) != nullptr;
}

std::unique_ptr<SyncLane> SyncLane::connect(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                            std::shared_ptr<gloo::transport::Device> device,
                                            std::chrono::milliseconds timeout) {
  std::unique_ptr<SyncLane> lane(new SyncLane(rank, size));
  lane->context_ = std::make_shared<gloo::rendezvous::Context>(rank, size);
  lane->context_->setTimeout(timeout);
  GlooStore gloo_store(store);
  lane->context_->connectFullMesh(gloo_store, device);
  publish_peer_addresses(*store, *lane->context_);
  lane->outgoing_.resize(kCapacity);
  lane->incoming_.resize(kCapacity * static_cast<size_t>(size - 1));
  lane->send_.resize(static_cast<size_t>(size));
  lane->receive_.resize(static_cast<size_t>(size));
  lane->sockets_.assign(static_cast<size_t>(size), -1);
  lane->send_buffer_bytes_ = lane->receive_buffer_bytes_ = SIZE_MAX;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    auto& pair = lane->context_->getPair(peer);
    pair->setSync(/*sync=*/true, /*busyPoll=*/false);
    lane->receive_[peer] = pair->createRecvBuffer(kSyncLaneSlot, lane->incoming(peer), kCapacity);
    lane->send_[peer] = pair->createSendBuffer(kSyncLaneSlot, lane->outgoing(), kCapacity);
  }
  const std::map<std::string, int> sockets = tcp_sockets();  // every pair is connected by now
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const auto found =
        sockets.find(lane->context_->getPair(peer)->address().str() + " " + published_peer_address(*store, peer, rank));
    const std::pair<size_t, size_t> buffers =
        found == sockets.end() ? std::pair<size_t, size_t>{0, 0} : size_buffers(found->second);
    lane->sockets_[peer] = found == sockets.end() ? -1 : found->second;
    lane->send_buffer_bytes_ = std::min(lane->send_buffer_bytes_, buffers.first);
    lane->receive_buffer_bytes_ = std::min(lane->receive_buffer_bytes_, buffers.second);
  }
  return lane;
}

SyncLane::~SyncLane() = default;

char* SyncLane::incoming(int peer) {
  return incoming_.data() + kCapacity * static_cast<size_t>(peer < rank_ ? peer : peer - 1);
}

void SyncLane::fail(const std::exception& failure, int peer, const std::string& doing) {
  failed_ = true;
  if (const auto* error = dynamic_cast<const Error*>(&failure)) {
    std::rethrow_exception(make_error(error->kind(), error->what(), FailureSite{rank_, peer, ""}));
  }
  std::rethrow_exception(make_error(read_gloo_failure(failure.what()).kind, str_cat(failure.what(), " (", doing, ")"),
                                    FailureSite{rank_, peer, ""}));
}

void SyncLane::exchange(size_t bytes, std::chrono::steady_clock::time_point deadline, const WhatOf& what_of) {
  if (bytes > kCapacity) {
    throw InvalidArgumentError(str_cat("synchronous lane: a message of ", bytes, " bytes (at most ", kCapacity, ")"));
  }
  if (failed_) throw PeerLostError("the synchronous lane failed in an earlier operation", FailureSite{rank_, -1, ""});
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    try {
      send_[peer]->send(0, bytes);  // a blocking write that fits the socket's buffers (the class comment)
      send_[peer]->waitSend();      // in synchronous mode: only counts the completed write
    } catch (const std::exception& e) {
      fail(e, peer, str_cat("writing this rank's call to peer rank ", peer));
    }
  }
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) receive(peer, deadline, what_of);
  }
}

void SyncLane::receive(int peer, std::chrono::steady_clock::time_point deadline, const WhatOf& what_of) {
  pollfd waiting{sockets_[peer], POLLIN, 0};
  for (;;) {
    const int ready = ::poll(&waiting, 1, static_cast<int>(std::min<int64_t>(time_left(deadline).count(), INT_MAX)));
    if (ready > 0) break;
    if (ready < 0 && errno != EINTR) {
      fail(std::runtime_error(str_cat("poll: ", std::strerror(errno))), peer, "waiting for " + what_of(peer));
    }
    if (ready == 0 && std::chrono::steady_clock::now() >= deadline) {
      fail(TimeoutError(str_cat("Timed out waiting for ", what_of(peer), " on the synchronous lane")), peer, "");
    }
  }
  // The message has started to arrive (or the peer closed the connection, which Gloo reports).
  try {
    receive_[peer]->waitRecv();
  } catch (const std::exception& e) {
    fail(e, peer, "waiting for " + what_of(peer));
  }
}

}  // namespace ringtorch
