// DeadlineStore: gives any c10d::Store ringtorch's store contract (Note [Store contract] in
// docs/ARCHITECTURE.md): get() and wait() block until the key exists or the timeout passes, with
// a millisecond deadline, and every failure names the store, the keys and the knob to turn.
//
// Wraps LibTorch's TCPStore, FileStore and HashStore (reused, not rewritten). RedisStore needs
// no wrapper: it implements the contract itself through the same wait_for_keys().
//
// Thread-safety: as thread-safe as the wrapped store (all c10d stores lock internally).
// Ownership: holds a strong reference to the wrapped store (and so keeps a hosted TCP server up).
#pragma once

#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace ringtorch {

class DeadlineStore : public c10d::Store {
 public:
  DeadlineStore(c10::intrusive_ptr<c10d::Store> inner, std::string description, std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  // LibTorch >= 2.5 makes clone() pure virtual; 1.13 has none. Declared without `override` so
  // that it overrides where the base declares it and is a plain method where it does not.
  c10::intrusive_ptr<c10d::Store> clone();

  const std::string& description() const { return description_; }
  c10::intrusive_ptr<c10d::Store> inner() const { return inner_; }

 private:
  // Runs one call on the wrapped store; turns its exceptions into IoError with context.
  template <typename Fn>
  auto forward(const char* op, const std::string& key, Fn&& fn) -> decltype(fn());

  const c10::intrusive_ptr<c10d::Store> inner_;  // constant after construction
  const std::string description_;                // constant after construction
};

}  // namespace ringtorch
