#include "runtime/comm/sync_lane.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>

#include <ringtorch/error.h>
#include <ringtorch/str_cat.h>

#include "rendezvous/store_value.h"
#include "runtime/comm/gloo_failure.h"

namespace ringtorch {
namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text() { return std::strerror(errno); }

int poll_until(pollfd* fds, size_t count, Clock::time_point deadline) {
  const auto left = std::max<int64_t>(0, time_left(deadline).count());
  const int ready = ::poll(fds, count, static_cast<int>(std::min<int64_t>(left, INT_MAX)));
  if (ready < 0 && errno != EINTR) throw IoError("synchronous lane: poll: " + errno_text());
  return std::max(ready, 0);
}

void set_options(int fd) {
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// A listening socket on `address`, any port; its "host port" for the store.
int listen_on(const std::string& address, std::string* published) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  if (::getaddrinfo(address.c_str(), "0", &hints, &found) != 0 || !found) {
    throw IoError(str_cat("synchronous lane: '", address, "' is not an address"));
  }
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  const bool ok = fd >= 0 && ::bind(fd, found->ai_addr, found->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0;
  ::freeaddrinfo(found);
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  if (!ok || ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
    const std::string why = errno_text();
    if (fd >= 0) ::close(fd);
    throw IoError(str_cat("synchronous lane: cannot listen on ", address, ": ", why));
  }
  const int port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                     : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  *published = str_cat(address, " ", port);
  return fd;
}

// Connects to "host port" by `deadline` and introduces this rank.
int connect_to(const std::string& published, int rank, Clock::time_point deadline) {
  const size_t space = published.rfind(' ');
  const std::string host = published.substr(0, space), port = published.substr(space + 1);
  addrinfo hints{}, *found = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || !found) {
    throw IoError(str_cat("synchronous lane: a peer published '", published, "'"));
  }
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int result = fd < 0 ? -1 : ::connect(fd, found->ai_addr, found->ai_addrlen);
  ::freeaddrinfo(found);
  if (fd < 0) throw IoError("synchronous lane: socket: " + errno_text());
  if (result != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (poll_until(&p, 1, deadline) == 0) {
      ::close(fd);
      throw TimeoutError(str_cat("synchronous lane: connecting to ", published, " timed out"));
    }
    socklen_t length = sizeof(result);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &result, &length);
    errno = result;
  }
  const int32_t me = rank;  // the acceptor learns who connected; 4 bytes fit any fresh socket
  if (result != 0 || ::send(fd, &me, sizeof(me), MSG_NOSIGNAL) != sizeof(me)) {
    const std::string why = errno_text();
    ::close(fd);
    throw IoError(str_cat("synchronous lane: cannot connect to ", published, ": ", why));
  }
  set_options(fd);
  return fd;
}

// Accepts one connection by `deadline` and reads the rank it introduces.
std::pair<int, int> accept_one(int listener, Clock::time_point deadline) {
  pollfd p{listener, POLLIN, 0};
  if (poll_until(&p, 1, deadline) == 0) throw TimeoutError("synchronous lane: a peer did not connect in time");
  const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) throw IoError("synchronous lane: accept: " + errno_text());
  int32_t rank = -1;
  size_t got = 0;
  while (got < sizeof(rank)) {
    pollfd q{fd, POLLIN, 0};
    if (poll_until(&q, 1, deadline) == 0) break;
    const ssize_t n = ::recv(fd, reinterpret_cast<char*>(&rank) + got, sizeof(rank) - got, 0);
    if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) break;
    if (n > 0) got += static_cast<size_t>(n);
  }
  if (got < sizeof(rank)) {
    ::close(fd);
    throw TimeoutError("synchronous lane: a peer connected but did not say its rank in time");
  }
  set_options(fd);
  return {fd, rank};
}

}  // namespace

std::string host_of_address(const std::string& address) {
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    return close == std::string::npos ? "" : address.substr(1, close - 1);
  }
  return address.substr(0, address.rfind(':'));
}

SyncLane::SyncLane(int rank, int size)
    : rank_(rank),
      size_(size),
      sockets_(static_cast<size_t>(size), -1),
      outgoing_(kSyncLaneMessageBytes),
      incoming_(kSyncLaneMessageBytes * static_cast<size_t>(size - 1)) {}

SyncLane::~SyncLane() {
  for (int fd : sockets_) {
    if (fd >= 0) ::close(fd);
  }
}

std::unique_ptr<SyncLane> SyncLane::connect(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                            const std::string& address, std::chrono::milliseconds timeout) {
  std::unique_ptr<SyncLane> lane(new SyncLane(rank, size));
  const auto deadline = Clock::now() + timeout;
  std::string published;
  const int listener = listen_on(address, &published);
  try {
    store->set(str_cat("lane/", rank), store_value(published));
    for (int peer = 0; peer < rank; ++peer) {
      lane->sockets_[static_cast<size_t>(peer)] =
          connect_to(store_text(store->get(str_cat("lane/", peer))), rank, deadline);
    }
    for (int accepted = rank + 1; accepted < size; ++accepted) {
      const auto [fd, peer] = accept_one(listener, deadline);
      if (peer <= rank || peer >= size || lane->sockets_[static_cast<size_t>(peer)] >= 0) {
        ::close(fd);
        throw IoError(str_cat("synchronous lane: a connection introduced itself as rank ", peer));
      }
      lane->sockets_[static_cast<size_t>(peer)] = fd;
    }
  } catch (...) {
    ::close(listener);
    throw;
  }
  ::close(listener);
  return lane;
}

char* SyncLane::incoming(int peer) {
  return incoming_.data() + kSyncLaneMessageBytes * static_cast<size_t>(peer < rank_ ? peer : peer - 1);
}

void SyncLane::fail(bool timed_out, int peer, const std::string& what) {
  failed_ = true;
  const FailureSite site{rank_, peer, ""};
  if (timed_out) throw TimeoutError(what, site);
  throw PeerLostError(what, site);
}

// Each message is its length (4 bytes) and then its bytes.
void SyncLane::exchange(size_t bytes, Clock::time_point deadline, const WhatOf& what_of) {
  if (bytes > kSyncLaneMessageBytes) {
    throw InvalidArgumentError(
        str_cat("synchronous lane: a message of ", bytes, " bytes (at most ", kSyncLaneMessageBytes, ")"));
  }
  if (failed_) throw PeerLostError("the synchronous lane failed in an earlier operation", FailureSite{rank_, -1, ""});
  const uint32_t length = static_cast<uint32_t>(bytes);
  struct Progress {
    size_t sent = 0, received = 0;
    uint32_t length = 0;  // the peer's, once its first 4 bytes are in
  };
  std::vector<Progress> progress(static_cast<size_t>(size_));
  const size_t total_out = sizeof(length) + bytes;
  std::vector<pollfd> waiting;
  std::vector<int> peer_of;
  for (;;) {
    waiting.clear();
    peer_of.clear();
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      Progress& p = progress[static_cast<size_t>(peer)];
      const bool sending = p.sent < total_out;
      const bool receiving = p.received < sizeof(uint32_t) || p.received < sizeof(uint32_t) + p.length;
      if (!sending && !receiving) continue;
      waiting.push_back({sockets_[static_cast<size_t>(peer)],
                         static_cast<short>((sending ? POLLOUT : 0) | (receiving ? POLLIN : 0)), 0});
      peer_of.push_back(peer);
    }
    if (waiting.empty()) return;
    if (poll_until(waiting.data(), waiting.size(), deadline) == 0) {
      // The late peer is one whose message has not arrived (not one still taking this rank's).
      int late = peer_of.front();
      for (int peer : peer_of) {
        const Progress& p = progress[static_cast<size_t>(peer)];
        if (p.received < sizeof(uint32_t) || p.received < sizeof(uint32_t) + p.length) {
          late = peer;
          break;
        }
      }
      fail(true, late, str_cat("Timed out waiting for ", what_of(late), " on the synchronous lane"));
    }
    for (size_t i = 0; i < waiting.size(); ++i) {
      const int peer = peer_of[i], fd = waiting[i].fd;
      Progress& p = progress[static_cast<size_t>(peer)];
      if (waiting[i].revents & (POLLERR | POLLHUP | POLLNVAL) && !(waiting[i].revents & POLLIN)) {
        fail(false, peer,
             str_cat("peer rank ", peer, " closed the synchronous lane while this rank waited for ", what_of(peer)));
      }
      if (waiting[i].revents & POLLOUT) {
        while (p.sent < total_out) {
          const char* from = p.sent < sizeof(length) ? reinterpret_cast<const char*>(&length) + p.sent
                                                     : outgoing_.data() + (p.sent - sizeof(length));
          const size_t left = p.sent < sizeof(length) ? sizeof(length) - p.sent : total_out - p.sent;
          const ssize_t n = ::send(fd, from, left, MSG_NOSIGNAL);
          if (n > 0) {
            p.sent += static_cast<size_t>(n);
            continue;
          }
          if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
          fail(false, peer,
               str_cat("writing this rank's call to peer rank ", peer,
                       " on the synchronous lane: ", n < 0 ? errno_text() : "closed"));
        }
      }
      if (waiting[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        for (;;) {
          const bool header = p.received < sizeof(uint32_t);
          if (!header && p.received >= sizeof(uint32_t) + p.length) break;
          char* into = header ? reinterpret_cast<char*>(&p.length) + p.received
                              : incoming(peer) + (p.received - sizeof(uint32_t));
          const size_t want = header ? sizeof(uint32_t) - p.received : sizeof(uint32_t) + p.length - p.received;
          const ssize_t n = ::recv(fd, into, want, 0);
          if (n > 0) {
            p.received += static_cast<size_t>(n);
            if (p.received == sizeof(uint32_t) && p.length > kSyncLaneMessageBytes) {
              fail(false, peer, str_cat("peer rank ", peer, " sent ", p.length, " bytes on the synchronous lane"));
            }
            continue;
          }
          if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
          fail(false, peer,
               str_cat("peer rank ", peer, n == 0 ? " closed the synchronous lane" : " lane error: ",
                       n == 0 ? "" : errno_text(), " while this rank waited for ", what_of(peer)));
        }
      }
    }
  }
}

}  // namespace ringtorch
