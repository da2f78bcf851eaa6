// Gloo's own full-mesh rendezvous and an all-reduce, through GlooStore over a c10d store.
#include "rendezvous/gloo_store.h"

#include <gloo/allreduce_ring.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gtest/gtest.h>

#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <ringtorch/error.h>

#include "rendezvous/deadline_store.h"

namespace ringtorch {
namespace {

using std::chrono::milliseconds;

TEST(GlooStore, ConnectsAFullMeshAndAllReduces) {
  for (int n : {1, 2, 3}) {
    auto base =
        c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(10000));
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("job/0/0/default", base);
    std::vector<std::vector<float>> results(n);
    std::vector<std::string> errors(n);
    // Every context outlives every thread: the old-style AllreduceRing ends with a notification
    // its right neighbour never waits for, so a rank that tore down its pairs early could make a
    // slower peer's last send fail with "Connection closed by peer".
    std::vector<std::shared_ptr<gloo::rendezvous::Context>> contexts(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        try {
          GlooStore store(prefixed);
          gloo::transport::tcp::attr attr;
          attr.hostname = "127.0.0.1";
          auto device = gloo::transport::tcp::CreateDevice(attr);
          contexts[r] = std::make_shared<gloo::rendezvous::Context>(r, n);
          contexts[r]->setTimeout(milliseconds(10000));
          contexts[r]->connectFullMesh(store, device);
          std::vector<float> data(7, static_cast<float>(r));
          gloo::AllreduceRing<float> allreduce(contexts[r], {data.data()}, static_cast<int>(data.size()));
          allreduce.run();
          results[r] = data;
        } catch (const std::exception& e) {
          errors[r] = e.what();  // reported by the main thread: an escaped exception would abort
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r) ASSERT_EQ(errors[r], "") << "n=" << n << " rank " << r;
    const float expected = n * (n - 1) / 2.0f;  // closed form: 0 + 1 + ... + (n-1)
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(results[r].size(), 7u);
      for (float v : results[r]) EXPECT_EQ(v, expected) << "n=" << n << " rank " << r;
    }
  }
}

TEST(GlooStore, BothWaitsHonourTheTimeout) {
  auto base = c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(200));
  GlooStore store(base);
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(store.wait({"never"}), TimeoutError);
  EXPECT_THROW(store.wait({"never"}, milliseconds(100)), TimeoutError);
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::seconds(5));  // a hang guard, not a speed assertion
  store.set("k", {'v'});
  EXPECT_EQ(store.get("k"), std::vector<char>{'v'});
}

}  // namespace
}  // namespace ringtorch
