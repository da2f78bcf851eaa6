// GlooStore: lets Gloo's rendezvous (gloo::rendezvous::Context::connectFullMesh) run over any
// c10d::Store: TCPStore, FileStore, HashStore, RedisStore, each behind a PrefixStore.
//
// Both wait() overloads honour a timeout: the one without an argument uses the c10d store's own
// timeout (Gloo's base class would otherwise wait forever in older Gloo releases).
//
// Thread-safety: as the wrapped store. Ownership: holds a strong reference to it.
#pragma once

#include <gloo/rendezvous/store.h>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace ringtorch {

class GlooStore : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  const c10::intrusive_ptr<c10d::Store> store_;  // constant after construction
};

}  // namespace ringtorch
