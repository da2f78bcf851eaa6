// The text of an exception for a message of ours: LibTorch's c10::Error appends its C++ stack
// trace to what() ("Exception raised from ... frame #0 ..."), which buries the cause; its
// what_without_backtrace() is the message alone.
#pragma once

#include <c10/util/Exception.h>

#include <exception>
#include <string>

namespace ringtorch {

inline std::string exception_text(const std::exception& e) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&e)) return torch_error->what_without_backtrace();
  return e.what();
}

}  // namespace ringtorch
