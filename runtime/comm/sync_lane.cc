#include "runtime/comm/sync_lane.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <utility>

#include <ringtorch/error.h>
#include <ringtorch/str_cat.h>

#include "rendezvous/store_value.h"
#include "runtime/comm/gloo_failure.h"

namespace ringtorch {
namespace {

using Clock = std::chrono::steady_clock;

std::string last_error() { return errno_text(errno); }

// poll(2) until something is ready (> 0) or the deadline has passed (0). A signal (the flight
// recorder's SIGUSR1, which SA_RESTART does not restart poll for) only makes it wait again.
int poll_until(pollfd* fds, size_t count, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::max<int64_t>(0, time_left(deadline).count());
    const int ready = ::poll(fds, count, static_cast<int>(std::min<int64_t>(left, INT_MAX)));
    if (ready > 0) return ready;
    if (ready < 0 && errno != EINTR) throw IoError("synchronous lane: poll: " + last_error());
    if (Clock::now() >= deadline) return 0;
  }
}

// Closes `fd` when a set-up step fails on its way out.
class CloseOnFailure {
 public:
  explicit CloseOnFailure(int fd) : fd_(fd) {}
  ~CloseOnFailure() {
    if (fd_ >= 0) ::close(fd_);
  }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

void set_options(int fd) {
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// Buffers for two full messages each way, asked for before the connection exists (so the
// window is scaled for them): with the kernel's autotuned start, a message just above the
// first receive window (64 KiB and its header) waited a round trip for the window to open. The
// kernel caps the request at net.core.rmem_max / wmem_max; the exchange is correct at any size.
void size_buffers(int fd) {
  const int bytes = static_cast<int>(2 * kSyncLaneMessageBytes);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
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
  if (fd >= 0) size_buffers(fd);  // accepted sockets inherit them
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  const bool ok = fd >= 0 && ::bind(fd, found->ai_addr, found->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0;
  const std::string why = ok ? "" : last_error();
  ::freeaddrinfo(found);
  if (!ok) {
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
  if (fd >= 0) size_buffers(fd);
  int result = fd < 0 ? -1 : ::connect(fd, found->ai_addr, found->ai_addrlen);
  int error = result == 0 ? 0 : errno;
  ::freeaddrinfo(found);
  if (fd < 0) throw IoError("synchronous lane: socket: " + errno_text(error));
  CloseOnFailure guard(fd);
  if (error == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (poll_until(&p, 1, deadline) == 0) {
      throw TimeoutError(str_cat("synchronous lane: connecting to ", published, " timed out"));
    }
    socklen_t length = sizeof(error);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
  }
  const int32_t me = rank;  // the acceptor learns who connected; 4 bytes fit any fresh socket
  if (error == 0 && ::send(fd, &me, sizeof(me), MSG_NOSIGNAL) != sizeof(me)) error = errno;
  if (error != 0) throw IoError(str_cat("synchronous lane: cannot connect to ", published, ": ", errno_text(error)));
  set_options(fd);
  return guard.release();
}

// Accepts one connection by `deadline` and reads the rank it introduces.
std::pair<int, int> accept_one(int listener, Clock::time_point deadline) {
  int fd = -1;
  while (fd < 0) {
    pollfd p{listener, POLLIN, 0};
    if (poll_until(&p, 1, deadline) == 0) throw TimeoutError("synchronous lane: a peer did not connect in time");
    fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    // A connection that went away before it was taken (ECONNABORTED), or a wake-up for nothing.
    if (fd < 0 && errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
      throw IoError("synchronous lane: accept: " + last_error());
    }
  }
  CloseOnFailure guard(fd);
  int32_t rank = -1;
  size_t got = 0;
  while (got < sizeof(rank)) {
    pollfd q{fd, POLLIN, 0};
    if (poll_until(&q, 1, deadline) == 0) {
      throw TimeoutError("synchronous lane: a peer connected but did not say its rank in time");
    }
    const ssize_t n = ::recv(fd, reinterpret_cast<char*>(&rank) + got, sizeof(rank) - got, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      throw PeerLostError("synchronous lane: a peer connected and closed before it said its rank");
    }
    if (n > 0) got += static_cast<size_t>(n);
  }
  set_options(fd);
  return {guard.release(), rank};
}

}  // namespace

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

// Each message is its length (4 bytes) and then its bytes, written with one sendmsg where the
// socket takes it all, so a small message is one packet and its reader wakes once.
void SyncLane::exchange(size_t bytes, Clock::time_point deadline, const WhatOf& what_of) {
  if (bytes > kSyncLaneMessageBytes) {
    throw InvalidArgumentError(
        str_cat("synchronous lane: a message of ", bytes, " bytes (at most ", kSyncLaneMessageBytes, ")"));
  }
  if (failed_) throw PeerLostError("the synchronous lane failed in an earlier operation", FailureSite{rank_, -1, ""});
  const uint32_t length = static_cast<uint32_t>(bytes);
  std::vector<Progress> progress(static_cast<size_t>(size_));
  // Write first without waiting: a socket almost always has room, and a poll less is a wake-up less.
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) send_some(peer, length, progress[static_cast<size_t>(peer)]);
  }
  std::vector<pollfd> waiting;
  std::vector<int> peer_of;
  for (;;) {
    waiting.clear();
    peer_of.clear();
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      const Progress& p = progress[static_cast<size_t>(peer)];
      const bool sending = !p.sent_all(length);
      const bool receiving = !p.received_all();
      if (!sending && !receiving) continue;
      waiting.push_back({sockets_[static_cast<size_t>(peer)],
                         static_cast<short>((sending ? POLLOUT : 0) | (receiving ? POLLIN : 0)), 0});
      peer_of.push_back(peer);
    }
    if (waiting.empty()) return;
    int ready = 0;
    try {
      ready = poll_until(waiting.data(), waiting.size(), deadline);
    } catch (const Error&) {
      failed_ = true;  // the streams may be out of step now
      throw;
    }
    if (ready == 0) {
      // The late peer is one whose message has not arrived (not one still taking this rank's).
      int late = peer_of.front();
      for (int peer : peer_of) {
        if (!progress[static_cast<size_t>(peer)].received_all()) {
          late = peer;
          break;
        }
      }
      fail(true, late, str_cat("Timed out waiting for ", what_of(late), " on the synchronous lane"));
    }
    for (size_t i = 0; i < waiting.size(); ++i) {
      const int peer = peer_of[i];
      const short events = waiting[i].revents;
      Progress& p = progress[static_cast<size_t>(peer)];
      if (events & (POLLERR | POLLHUP | POLLNVAL) && !(events & POLLIN)) {
        fail(false, peer,
             str_cat("peer rank ", peer, " closed the synchronous lane while this rank waited for ", what_of(peer)));
      }
      if (events & POLLOUT) send_some(peer, length, p);
      if (events & (POLLIN | POLLHUP | POLLERR)) receive_some(peer, p, what_of);
    }
  }
}

void SyncLane::send_some(int peer, uint32_t length, Progress& p) {
  const int fd = sockets_[static_cast<size_t>(peer)];
  while (!p.sent_all(length)) {
    iovec parts[2];
    int count = 0;
    if (p.sent < sizeof(length)) {
      parts[count++] = {const_cast<char*>(reinterpret_cast<const char*>(&length)) + p.sent, sizeof(length) - p.sent};
    }
    const size_t body_sent = p.sent < sizeof(length) ? 0 : p.sent - sizeof(length);
    if (body_sent < length) parts[count++] = {outgoing_.data() + body_sent, length - body_sent};
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = static_cast<size_t>(count);
    const ssize_t n = ::sendmsg(fd, &message, MSG_NOSIGNAL);
    if (n > 0) {
      p.sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    fail(false, peer,
         str_cat("writing this rank's call to peer rank ", peer,
                 " on the synchronous lane: ", n < 0 ? last_error() : "closed"));
  }
}

void SyncLane::receive_some(int peer, Progress& p, const WhatOf& what_of) {
  const int fd = sockets_[static_cast<size_t>(peer)];
  while (!p.received_all()) {
    const bool header = p.received < sizeof(uint32_t);
    char* into =
        header ? reinterpret_cast<char*>(&p.length) + p.received : incoming(peer) + (p.received - sizeof(uint32_t));
    const size_t want = header ? sizeof(uint32_t) - p.received : sizeof(uint32_t) + p.length - p.received;
    const ssize_t n = ::recv(fd, into, want, 0);
    if (n > 0) {
      p.received += static_cast<size_t>(n);
      if (p.received == sizeof(uint32_t) && p.length > kSyncLaneMessageBytes) {
        fail(false, peer, str_cat("peer rank ", peer, " sent ", p.length, " bytes on the synchronous lane"));
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    fail(false, peer,
         str_cat("peer rank ", peer, n == 0 ? " closed the synchronous lane" : " lane error: ",
                 n == 0 ? "" : last_error(), " while this rank waited for ", what_of(peer)));
  }
}

}  // namespace ringtorch
