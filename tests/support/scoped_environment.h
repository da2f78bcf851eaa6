// An environment variable set (or unset) for a scope, and restored to what it was after it.
//
// Thread-safety: none; the environment is the whole process'. Create it before a test starts
// its ranks' threads and let it die after they have joined.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace ringtorch::testing {

class ScopedEnvironment {
 public:
  // `value` nullopt: unset for the scope.
  ScopedEnvironment(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
    if (const char* before = std::getenv(name_.c_str())) before_ = before;
    set(value);
  }
  ~ScopedEnvironment() { set(before_); }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

  // Changes the value inside the scope; the destructor still restores the one from before.
  void set(const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> before_;
};

}  // namespace ringtorch::testing
