// FailingStore: a c10d::Store over another that throws on the n-th call of one operation, as a
// store whose server died or whose file system failed would, for tests that make each store
// operation fail in turn. It also counts every operation's calls (a clean run's counts say which
// calls a scenario makes).
//
// Thread-safety: as the wrapped store; the counters are atomic.
#pragma once

#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

namespace ringtorch::testing {

class FailingStore : public c10d::Store {
 public:
  enum Op { kSet, kCompareSet, kGet, kAdd, kDeleteKey, kCheck, kGetNumKeys, kWait, kOps };
  static const char* name(int op) {
    static const char* const kNames[] = {"set", "compareSet", "get", "add", "deleteKey", "check", "getNumKeys", "wait"};
    return kNames[op];
  }

  // Fails call number `nth` (0-based) of `op`; op == kOps: never fails.
  FailingStore(c10::intrusive_ptr<c10d::Store> inner, int op = kOps, int nth = 0)
      : inner_(std::move(inner)), failing_op_(op), nth_(nth) {}

  int calls(int op) const { return counts_[op].load(); }
  bool failed() const { return failed_.load(); }

  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    call(kSet, key);
    inner_->set(key, value);
  }
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    call(kCompareSet, key);
    return inner_->compareSet(key, expected, desired);
  }
  std::vector<uint8_t> get(const std::string& key) override {
    call(kGet, key);
    return inner_->get(key);
  }
  int64_t add(const std::string& key, int64_t value) override {
    call(kAdd, key);
    return inner_->add(key, value);
  }
  bool deleteKey(const std::string& key) override {
    call(kDeleteKey, key);
    return inner_->deleteKey(key);
  }
  bool check(const std::vector<std::string>& keys) override {
    call(kCheck, keys.empty() ? "" : keys[0]);
    return inner_->check(keys);
  }
  int64_t getNumKeys() override {
    call(kGetNumKeys, "");
    return inner_->getNumKeys();
  }
  void wait(const std::vector<std::string>& keys) override {
    call(kWait, keys.empty() ? "" : keys[0]);
    inner_->wait(keys);
  }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    call(kWait, keys.empty() ? "" : keys[0]);
    inner_->wait(keys, timeout);
  }

 private:
  void call(int op, const std::string& key) {
    const int n = counts_[op]++;
    if (op == failing_op_ && n == nth_) {
      failed_ = true;
      // What LibTorch's stores throw (TORCH_CHECK): a c10::Error.
      TORCH_CHECK(false, "injected store failure: ", name(op), " #", n, " of key '", key, "'");
    }
  }

  c10::intrusive_ptr<c10d::Store> inner_;
  const int failing_op_, nth_;
  std::array<std::atomic<int>, kOps> counts_{};
  std::atomic<bool> failed_{false};
};

}  // namespace ringtorch::testing
