// Fuzz target: the IDX reader (datasets/idx_file.h), plain and gzip. Any bytes must end in
// images/labels or a ringtorch::Error; anything else (a crash, another exception, a sanitizer
// report) is a finding.
#include <cstddef>
#include <cstdint>

#include <ringtorch/error.h>

#include "datasets/idx_file.h"
#include "tests/fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ringtorch::fuzz::as_file(data, size);
  try {
    ringtorch::read_idx_images(path);
  } catch (const ringtorch::Error&) {
  }
  try {
    ringtorch::read_idx_labels(path);
  } catch (const ringtorch::Error&) {
  }
  return 0;
}
