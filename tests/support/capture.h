// Collecting a child's output and exit status in tests.
#pragma once

#include <string>

#include "runtime/launch/subprocess.h"

namespace ringtorch {
namespace testing {

struct Captured {
  ExitStatus status;
  std::string out, err;
};

// Reads `fd` to end of file.
std::string read_all(int fd);

// Reads the child's stdout and stderr to end of file (both at once, so neither pipe can fill
// up and stall the child), then reaps it.
Captured finish(Subprocess& child);

}  // namespace testing
}  // namespace ringtorch
