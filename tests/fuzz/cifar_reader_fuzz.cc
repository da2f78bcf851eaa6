// Fuzz target: the CIFAR-10 batch reader (datasets/cifar_file.h), plain and gzip. Any bytes must
// end in images and labels or a ringtorch::Error.
#include <cstddef>
#include <cstdint>

#include <ringtorch/error.h>

#include "datasets/cifar_file.h"
#include "tests/fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ringtorch::read_cifar10_batch(ringtorch::fuzz::as_file(data, size));
  } catch (const ringtorch::Error&) {
  }
  return 0;
}
