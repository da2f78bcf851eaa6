// gloo_pair_modes_bench: what Gloo's synchronous pairs would save on small messages, measured
// between two processes with Gloo alone (no ringtorch code): an exchange (both ranks send S
// bytes and receive S bytes, one step of a 2-rank all-reduce) three ways, alternating rounds:
//  - "async": unbound buffers on an ordinary pair, the next receive posted before this one is
//    waited for, as ringtorch's call fingerprint does (Note [Pre-posted fingerprint receives]).
//    Gloo's event-loop thread reads the message and wakes the caller.
//  - "sync": a pair switched to synchronous mode (setSync(true, false)) with bound buffers:
//    the caller reads the socket itself, blocking in recv(2).
//  - "sync busy-poll": the same, spinning on a non-blocking recv(2) (setSync(true, true)).
// Each mode has its own Gloo context (a pair in synchronous mode leaves the event loop and
// cannot carry unbound buffers). docs/benchmarks.md, "Gloo's synchronous pairs".
//
//   RANK=0|1 gloo_pair_modes_bench --store-dir DIR [--host ADDRESS] [--sizes 4,32768 (at most
//       1 MiB each)] [--iters N] [--rounds N]
// The ranks meet through a Gloo file store in DIR (empty, on a filesystem both see); --host is
// the local address the pairs bind to (default 127.0.0.1). Rank 0 prints one line per round
// and size with the three medians. Exit 1 with a message on bad arguments or any Gloo failure.
#include <gloo/context.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "base/command_line.h"
#include "base/parse.h"
#include "bench/byte_sizes.h"
#include "bench/median.h"

using ringtorch::median;

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxBytes = size_t{1} << 20;

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "gloo_pair_modes_bench: %s\n", message.c_str());
  std::exit(1);
}

template <typename Exchange>
std::vector<double> time_each(int iters, Exchange&& exchange) {
  std::vector<double> us(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    const auto start = Clock::now();
    exchange(i);
    us[static_cast<size_t>(i)] = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }
  return us;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string store_dir, host = "127.0.0.1";
  std::vector<size_t> sizes{4, 32 << 10};
  int iters = 2000, rounds = 3;
  ringtorch::CommandLine cli("gloo_pair_modes_bench",
                             "usage: RANK=0|1 gloo_pair_modes_bench --store-dir DIR [--host ADDR] [--sizes 4,32K]\n"
                             "                                     [--iters N] [--rounds N]\n");
  cli.option("--store-dir", [&](const std::string& v) { store_dir = v; })
      .option("--host", [&](const std::string& v) { host = v; })
      .option(
          "--sizes",
          [&](const std::string& v) {
            // Both ranks write at once with blocking writes on the synchronous pairs: a message must
            // fit the socket buffers, or both block until the timeout.
            sizes = ringtorch::parse_byte_sizes(v, kMaxBytes);
            if (sizes.empty())
              fail("--sizes " + v + ": give byte counts from 1 to " + std::to_string(kMaxBytes) + ", comma-separated");
          })
      .option("--iters", [&](const std::string& v) { iters = ringtorch::parse_int_in_range(v, 2, 1 << 30, "--iters"); })
      .option("--rounds",
              [&](const std::string& v) { rounds = ringtorch::parse_int_in_range(v, 1, 1 << 20, "--rounds"); });
  if (const int status = cli.parse_main(argc, argv); status >= 0) return status;
  if (store_dir.empty()) fail("--store-dir DIR is required (an empty directory both ranks see)");
  if (iters < 2 || rounds < 1) fail("--iters must be at least 2 and --rounds at least 1");
  const char* rank_text = std::getenv("RANK");
  const int rank = rank_text ? std::atoi(rank_text) : -1;
  if (rank != 0 && rank != 1) fail("RANK must be 0 or 1 (a pair)");
  const int peer = 1 - rank;
  const size_t largest = *std::max_element(sizes.begin(), sizes.end());

  gloo::rendezvous::FileStore store(store_dir);
  auto device = gloo::transport::tcp::CreateDevice(gloo::transport::tcp::attr(host.c_str()));
  auto connect = [&](const std::string& prefix) {
    gloo::rendezvous::PrefixStore prefixed(prefix, store);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, 2);
    context->setTimeout(std::chrono::seconds(60));
    context->connectFullMesh(prefixed, device);
    return context;
  };
  auto async_context = connect("async");
  auto sync_context = connect("sync");
  auto poll_context = connect("poll");

  // async: one send buffer, two receive buffers that alternate so the next one can be posted.
  std::vector<char> async_out(largest, 1), async_in[2] = {std::vector<char>(largest), std::vector<char>(largest)};
  auto async_send = async_context->createUnboundBuffer(async_out.data(), largest);
  std::unique_ptr<gloo::transport::UnboundBuffer> async_receive[2] = {
      async_context->createUnboundBuffer(async_in[0].data(), largest),
      async_context->createUnboundBuffer(async_in[1].data(), largest)};
  const uint64_t kSlot = 1, kBarrierSlot = 2;
  char token = 0, token_in = 0;
  auto barrier_send = async_context->createUnboundBuffer(&token, 1);
  auto barrier_receive = async_context->createUnboundBuffer(&token_in, 1);
  auto barrier = [&] {
    barrier_receive->recv(peer, kBarrierSlot);
    barrier_send->send(peer, kBarrierSlot);
    barrier_send->waitSend();
    barrier_receive->waitRecv();
  };

  // sync and busy-poll: bound buffers on a pair in synchronous mode. A bound send lands in the
  // peer's receive buffer of the same slot, which must exist before the first send: the
  // barrier after making them sees to that.
  struct SyncPair {
    std::vector<char> out, in;
    std::unique_ptr<gloo::transport::Buffer> send, receive;
  };
  auto make_sync_pair = [&](gloo::Context& context, bool busy_poll) {
    SyncPair pair{std::vector<char>(largest, 1), std::vector<char>(largest), nullptr, nullptr};
    auto& transport_pair = context.getPair(peer);
    transport_pair->setSync(true, busy_poll);
    pair.receive = transport_pair->createRecvBuffer(static_cast<int>(kSlot), pair.in.data(), largest);
    pair.send = transport_pair->createSendBuffer(static_cast<int>(kSlot), pair.out.data(), largest);
    return pair;
  };
  // Returned by value: moving the vectors keeps their data() where the buffers point.
  SyncPair sync = make_sync_pair(*sync_context, false);
  SyncPair poll = make_sync_pair(*poll_context, true);
  barrier();

  auto sync_exchange = [](SyncPair& pair, size_t bytes) {
    return [&pair, bytes](int) {
      pair.send->send(0, bytes);
      pair.receive->waitRecv();
      pair.send->waitSend();
    };
  };
  for (int round = 0; round < rounds; ++round) {
    for (const size_t bytes : sizes) {
      barrier();
      async_receive[0]->recv(peer, kSlot, 0, bytes);
      const auto async_us = time_each(iters, [&](int i) {
        if (i + 1 < iters) async_receive[(i + 1) % 2]->recv(peer, kSlot, 0, bytes);
        async_send->send(peer, kSlot, 0, bytes);
        async_send->waitSend();
        async_receive[i % 2]->waitRecv();
      });
      barrier();
      const auto sync_us = time_each(iters, sync_exchange(sync, bytes));
      barrier();
      const auto poll_us = time_each(iters, sync_exchange(poll, bytes));
      barrier();
      if (rank == 0) {
        std::printf("round %d, %zu B exchange, median of %d: async %.1f us, sync %.1f us, sync busy-poll %.1f us\n",
                    round + 1, bytes, iters, median(async_us), median(sync_us), median(poll_us));
        std::fflush(stdout);
      }
    }
  }
  return 0;
} catch (const std::exception& e) {
  fail(e.what());
}
