// tcp_exchange_bench: the wire's own limit for a 2-rank collective, measured between two
// processes: both send S bytes and receive S bytes at the same time over a TCP connection
// (TCP_NODELAY, as Gloo's pairs), which is what one step of a 2-rank all-reduce does. A 4-byte
// exchange is the floor for a small all-reduce; two exchanges of S/2 are the floor for a
// 2-rank ring all-reduce of S (reduce-scatter then all-gather). bench/compare_wire puts
// ringbench and PyTorch beside it (docs/benchmarks.md).
//
// Each side runs one thread with a non-blocking socket and poll(): it writes what the socket
// takes and reads what has arrived until both directions are done, so neither side blocks in a
// write while the other's data waits unread (no deadlock at sizes above the socket buffers).
//
// Two connections, used in turn call by call, and the faster one's median is the floor: one with
// the kernel's own send buffer sizing (autotuned up to net.ipv4.tcp_wmem's maximum), and one whose
// send buffer is set to kSmallSendBuffer. On a 2-core VM the small buffer exchanged 8 MiB in
// 5.0-5.8 ms against 7.2-9.1 ms (3 alternating rounds; docs/benchmarks.md, "The wire's floor,
// measured two ways"), while ringtorch's all-reduce moved 16 MiB each way faster than two of the
// autotuned exchanges: a floor from one sizing alone was no floor.
//
//   RANK=0|1 MASTER_ADDR=HOST MASTER_PORT=PORT tcp_exchange_bench [--sizes 4,32768,...]
//       [--iters N] [--warmup N] [--timeout SECONDS]
// Rank 0 listens on MASTER_ADDR:MASTER_PORT, rank 1 connects (retrying until the timeout).
// Rank 0 prints one JSON line per size: {"impl":"tcp exchange","op":"exchange","bytes":S,
// "median_us":...,"min_us":...,"autotuned_median_us":...,"small_buffer_median_us":...,"iters":N,
// "world_size":2}, median_us and min_us being the faster connection's. Exit 1 with a message naming the
// peer and the step on any failure (a refused or timed-out connection, a peer that closed).
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
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/command_line.h"
#include "base/parse.h"
#include "bench/byte_sizes.h"
#include "bench/median.h"

using ringtorch::median;

namespace {

// What a program requests with SO_SNDBUF (the kernel doubles it): Linux's default
// net.core.wmem_default, and the smallest of the sizes tried that was fastest at 8 MiB.
constexpr int kSmallSendBuffer = 212992;

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "tcp_exchange_bench: %s\n", what.c_str());
  std::exit(1);
}

std::string env_or_fail(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0')
    fail(std::string(name) + " is not set (RANK, MASTER_ADDR and MASTER_PORT are needed)");
  return v;
}

sockaddr_in resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    fail("cannot resolve MASTER_ADDR " + host);
  }
  sockaddr_in address = *reinterpret_cast<sockaddr_in*>(found->ai_addr);
  ::freeaddrinfo(found);
  address.sin_port = htons(static_cast<uint16_t>(port));
  return address;
}

// The pair's `count` connections, in the same order on both sides: rank 0 keeps listening until
// it has accepted all of them (a connection queued on a listener that closes would be reset),
// rank 1 connects them one after another.
std::vector<int> connect_pair(int rank, const std::string& host, int port, int count, Clock::time_point deadline) {
  const sockaddr_in address = resolve(host, port);
  const std::string where = host + ":" + std::to_string(port);
  std::vector<int> fds;
  int listener = -1;
  if (rank == 0) {
    listener = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(listener, count) != 0) {
      fail("rank 0 cannot listen on " + where + ": " + std::strerror(errno));
    }
  }
  while (static_cast<int>(fds.size()) < count) {
    int fd = -1;
    if (rank == 0) {
      pollfd p{listener, POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 0))) != 1) {
        fail("rank 0: rank 1 did not connect to " + where + " within the timeout (--timeout)");
      }
      fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0) fail("accept on " + where + ": " + std::strerror(errno));
    } else {
      while (true) {
        fd = ::socket(AF_INET, SOCK_STREAM, 0);
        if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0) break;
        ::close(fd);
        if (Clock::now() >= deadline) fail("rank 1 cannot connect to rank 0 at " + where + " (--timeout)");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    fds.push_back(fd);
  }
  if (listener >= 0) ::close(listener);
  return fds;
}

// One simultaneous exchange of `bytes` each way.
void exchange(int fd, const char* out, char* in, size_t bytes, int peer, Clock::time_point deadline) {
  size_t sent = 0, received = 0;
  while (sent < bytes || received < bytes) {
    if (sent < bytes) {
      const ssize_t n = ::send(fd, out + sent, bytes - sent, MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        fail("sending to rank " + std::to_string(peer) + ": " + std::strerror(errno));
      }
    }
    if (received < bytes) {
      const ssize_t n = ::recv(fd, in + received, bytes - received, 0);
      if (n > 0) received += static_cast<size_t>(n);
      if (n == 0) fail("rank " + std::to_string(peer) + " closed the connection mid-exchange");
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        fail("receiving from rank " + std::to_string(peer) + ": " + std::strerror(errno));
      }
    }
    if (sent < bytes || received < bytes) {
      pollfd p{fd, static_cast<short>((sent < bytes ? POLLOUT : 0) | (received < bytes ? POLLIN : 0)), 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) fail("exchange with rank " + std::to_string(peer) + " timed out (--timeout)");
      ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes{4, 32 << 10, 512 << 10, 8 << 20, 32 << 20};
  int iters = 50, warmup = 5, timeout_s = 60;
  ringtorch::CommandLine cli("tcp_exchange_bench",
                             "usage: RANK=0|1 MASTER_ADDR=H MASTER_PORT=P tcp_exchange_bench [--sizes 4,32K,...]\n"
                             "                                     [--iters N] [--warmup N] [--timeout SECONDS]\n");
  cli.option("--sizes",
             [&](const std::string& v) {
               sizes = ringtorch::parse_byte_sizes(v, SIZE_MAX);
               if (sizes.empty()) fail("--sizes " + v + ": give positive byte counts, comma-separated");
             })
      .option("--iters", [&](const std::string& v) { iters = ringtorch::parse_int_in_range(v, 1, 1 << 30, "--iters"); })
      .option("--warmup",
              [&](const std::string& v) { warmup = ringtorch::parse_int_in_range(v, 0, 1 << 30, "--warmup"); })
      .option("--timeout",
              [&](const std::string& v) { timeout_s = ringtorch::parse_int_in_range(v, 1, 1 << 20, "--timeout"); });
  if (const int status = cli.parse_main(argc, argv); status >= 0) return status;
  if (iters < 1 || warmup < 0 || timeout_s < 1) fail("--iters and --timeout must be at least 1, --warmup at least 0");
  const int rank = std::atoi(env_or_fail("RANK").c_str());
  if (rank != 0 && rank != 1) fail("RANK must be 0 or 1 (a pair)");
  const std::string host = env_or_fail("MASTER_ADDR");
  const int port = std::atoi(env_or_fail("MASTER_PORT").c_str());
  const auto timeout = std::chrono::seconds(timeout_s);
  const std::vector<int> fds = connect_pair(rank, host, port, 2, Clock::now() + timeout);
  if (::setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &kSmallSendBuffer, sizeof(kSmallSendBuffer)) != 0) {
    fail(std::string("setting SO_SNDBUF: ") + std::strerror(errno));
  }
  const int peer = 1 - rank;
  const size_t largest = *std::max_element(sizes.begin(), sizes.end());
  std::vector<char> out(largest, static_cast<char>(rank + 1)), in(largest);
  for (const size_t bytes : sizes) {
    std::vector<double> us[2];  // per connection; both sides take them in the same turn
    for (int i = 0; i < warmup + iters; ++i) {
      for (int way = 0; way < 2; ++way) {
        const auto start = Clock::now();
        exchange(fds[way], out.data(), in.data(), bytes, peer, start + timeout);
        if (i >= warmup) us[way].push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      }
      if (in[0] != static_cast<char>(peer + 1) || in[bytes - 1] != static_cast<char>(peer + 1)) {
        fail("received bytes that rank " + std::to_string(peer) + " did not send");
      }
    }
    const double autotuned = median(us[0]), small_buffer = median(us[1]);
    const std::vector<double>& faster = autotuned <= small_buffer ? us[0] : us[1];
    if (rank == 0) {
      std::printf(
          "{\"impl\":\"tcp exchange\",\"op\":\"exchange\",\"bytes\":%zu,\"median_us\":%.3f,\"min_us\":%.3f,"
          "\"autotuned_median_us\":%.3f,\"small_buffer_median_us\":%.3f,\"iters\":%d,\"world_size\":2}\n",
          bytes, std::min(autotuned, small_buffer), *std::min_element(faster.begin(), faster.end()), autotuned,
          small_buffer, iters);
      std::fflush(stdout);
    }
  }
  for (const int fd : fds) ::close(fd);
  return 0;
}
