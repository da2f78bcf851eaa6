// Opens the store an init method names: c10d::TCPStore (tcp://), c10d::FileStore (file://) or
// RedisStore (redis://). LibTorch's stores come wrapped in a DeadlineStore so that all four
// keep one contract (Note [Store contract], docs/ARCHITECTURE.md).
#pragma once

#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "rendezvous/init_method.h"

namespace ringtorch {

struct StoreRequest {
  InitMethod method;                          // tcp, file or redis (env:// is resolved by rendezvous() first)
  bool host_tcp_server = false;               // tcp: this process hosts the TCPStore (port 0: any free port)
  std::chrono::milliseconds timeout{300000};  // connect and per-operation timeout
  std::string context;                        // "[rank 1/2] " or "[ringrun] ", prefixed to connection errors
};

c10::intrusive_ptr<c10d::Store> open_store(const StoreRequest& request);

// The port a hosted TCP store listens on (after port 0 was asked for); 0 for other stores.
uint16_t hosted_tcp_port(const c10d::Store& store);

}  // namespace ringtorch
