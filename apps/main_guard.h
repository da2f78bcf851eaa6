// The main() of ringtorch's programs built on a run(argc, argv): any exception becomes
// "<program>: <what>" on stderr and exit status 1, never std::terminate's abort.
#pragma once

#include <cstdio>
#include <exception>
#include <functional>

namespace ringtorch {

inline int run_reporting_errors(const char* program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace ringtorch
