#include "runtime/comm/sync_lane.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/str_cat.h"
#include "rendezvous/gloo_store.h"
#include "runtime/comm/failure_report.h"
#include "runtime/comm/gloo_failure.h"
#include "runtime/comm/pair_sockets.h"
#include "runtime/comm/socket_device.h"
#include "runtime/comm/tag_space.h"

namespace ringtorch {
namespace {

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

bool SyncLane::supports(const gloo::transport::Device& device) { return is_tcp_device(device); }

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
  const std::vector<int> sockets = find_pair_sockets(*lane->context_, *store);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const int fd = sockets[static_cast<size_t>(peer)];
    const std::pair<size_t, size_t> buffers = fd < 0 ? std::pair<size_t, size_t>{0, 0} : size_buffers(fd);
    lane->sockets_[peer] = fd;
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
