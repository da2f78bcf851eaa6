// Fuzz target: ringrun's flag parser (runtime/launch/launch_config.h). The input is the argument
// list, one argument per line; any list must parse or throw a ringtorch::Error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <ringtorch/error.h>

#include "runtime/launch/launch_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      args.emplace_back();
    } else {
      args.back().push_back(static_cast<char>(data[i]));
    }
  }
  bool help = false;
  try {
    ringtorch::parse_launch_args(args, &help);
  } catch (const ringtorch::Error&) {
  }
  return 0;
}
