#include "rendezvous/deadline_store.h"

#include <ringtorch/error.h>

#include "rendezvous/exception_text.h"
#include "rendezvous/store_wait.h"

namespace ringtorch {

DeadlineStore::DeadlineStore(c10::intrusive_ptr<c10d::Store> inner, std::string description,
                             std::chrono::milliseconds timeout)
    : c10d::Store(timeout), inner_(std::move(inner)), description_(std::move(description)) {}

template <typename Fn>
auto DeadlineStore::forward(const char* op, const std::string& key, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw IoError(str_cat("store ", description_, ": ", op, "('", key, "') failed: ", exception_text(e),
                          "; the process hosting the store may have exited or the network failed"));
  }
}

void DeadlineStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  forward("set", key, [&] { inner_->set(key, value); });
}

std::vector<uint8_t> DeadlineStore::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                               const std::vector<uint8_t>& desired) {
  return forward("compareSet", key, [&] { return inner_->compareSet(key, expected, desired); });
}

std::vector<uint8_t> DeadlineStore::get(const std::string& key) {
  wait({key}, timeout_);
  return forward("get", key, [&] { return inner_->get(key); });
}

int64_t DeadlineStore::add(const std::string& key, int64_t value) {
  return forward("add", key, [&] { return inner_->add(key, value); });
}

bool DeadlineStore::deleteKey(const std::string& key) {
  // c10d's FileStore answers true even for a key that was not there: ask first, so that every
  // store reports "did it exist" the same way.
  return forward("deleteKey", key, [&] {
    const bool existed = inner_->check({key});
    inner_->deleteKey(key);
    return existed;
  });
}

bool DeadlineStore::check(const std::vector<std::string>& keys) {
  return forward("check", keys.empty() ? std::string() : keys.front(), [&] { return inner_->check(keys); });
}

int64_t DeadlineStore::getNumKeys() {
  return forward("getNumKeys", "", [&] { return inner_->getNumKeys(); });
}

void DeadlineStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void DeadlineStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  wait_for_keys(*this, keys, timeout, description_);
}

c10::intrusive_ptr<c10d::Store> DeadlineStore::clone() {
  return c10::make_intrusive<DeadlineStore>(inner_, description_, timeout_);
}

}  // namespace ringtorch
