// The message of the exception of type E that f() throws; a test failure (and "") when it
// throws nothing. For asserting on what an error says:
//   EXPECT_NE(testing::error_of<IoError>([&] { read(path); }).find("truncated"), std::string::npos);
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace ringtorch::testing {

template <typename E, typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception of the expected type was thrown";
  return "";
}

}  // namespace ringtorch::testing
